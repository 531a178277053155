package tokens

import "time"

const (
	// KeepInterval is how often the keeper checks that every owner of a topic with consumers
	// parked on this node holds a live token from it, and registers again where it does not:
	// after a notification spends a token, a fresh one is back within this long.
	KeepInterval = 500 * time.Millisecond
	// Resend is how long a registration goes unsent at most while consumers are parked: the
	// keeper sends it again after this, whatever it believes of the owner's token, so a
	// token the owner lost (a restart, a dropped frame) comes back.
	Resend = 5 * time.Second
	// ShareWindow is how soon after a registration a consumer parking on the same topic shares
	// it rather than sending its own. It is short because the owner's reply only says the
	// frame arrived, not that the token is still unspent. A registration's TTL is the
	// consumer's remaining wait plus this window.
	ShareWindow = 250 * time.Millisecond
	// RefusalMemory is how long an owner that refused a registration (a release that does not
	// know the frame) is remembered as refusing: consumers poll it meanwhile instead of
	// parking on a token, and it is asked again once this has passed.
	RefusalMemory = 2 * time.Minute
)

// Registrations are the tokens this node left with owners, on every topic: per (topic,
// owner), when the registration was last sent and how long it lives. A registration lapses
// at its TTL and nothing retires it: no frame is sent to take a token back, since a stale
// token costs at most one notification, which is answered with a pass. They also remember the
// owners that refused a registration.
//
// TTLs are durations, as they go on the wire: the owner adds a TTL to its own clock, and a
// registration here lives until the send time plus its TTL on this node's clock, which is
// never later than the owner's deadline for the token.
//
// The zero value holds nothing and is ready to use. Registrations read no clock and are not
// safe for concurrent use.
type Registrations struct {
	topics  map[string]map[string]registration // topic → owner → registration
	n       int                                // registrations held, over all topics
	refused map[string]int64                   // owner → end of its refusal, Unix nanoseconds
}

// registration is one token left with an owner.
type registration struct {
	sent  int64 // when it was last sent, Unix nanoseconds
	until int64 // sent + TTL: the token is live at the owner until then, at least
}

func (r *Registrations) lookup(topic, owner string) (registration, bool) {
	g, ok := r.topics[topic][owner]
	return g, ok
}

// Share reports whether a consumer parking now, waiting until deadline, can share the
// registration with owner for topic instead of sending its own: one was sent less than
// ShareWindow ago, no notification has spent it, and its TTL covers the deadline.
func (r *Registrations) Share(topic, owner string, now, deadline time.Time) bool {
	g, ok := r.lookup(topic, owner)
	if !ok {
		return false
	}
	at := now.UnixNano()
	return at < g.until && at-g.sent < int64(ShareWindow) && deadline.UnixNano() <= g.until
}

// Due reports whether the registration with owner for topic must be sent (again): there is
// no live one (never sent, spent by a notification, or lapsed at its TTL), or the last was
// sent resend or more ago. The keeper calls it every KeepInterval with Resend.
func (r *Registrations) Due(topic, owner string, now time.Time, resend time.Duration) bool {
	g, ok := r.lookup(topic, owner)
	if !ok {
		return true
	}
	at := now.UnixNano()
	return at >= g.until || at-g.sent >= int64(resend)
}

// Outstanding reports whether a registration with owner for topic was sent and has not been
// spent or forgotten since, whether or not it lapsed at its TTL: whether owner may hold a
// token from this node for topic, as far as this node knows. A notification from an owner
// with no outstanding registration answers no token this node left there, so it may be
// refused.
//
// A lapsed registration still counts: the owner adds the TTL to its own clock, so its token
// may outlive the registration here, and its notification must not be refused for that.
func (r *Registrations) Outstanding(topic, owner string) bool {
	_, ok := r.lookup(topic, owner)
	return ok
}

// Sent records that a registration with owner for topic was sent now, with the given TTL.
// It replaces the previous one, as it does at the owner. A ttl of zero or less forgets the
// registration, since the owner drops the token on such a frame.
func (r *Registrations) Sent(topic, owner string, now time.Time, ttl time.Duration) {
	if ttl <= 0 {
		r.Spent(topic, owner)
		return
	}
	owners := r.topics[topic]
	if owners == nil {
		if r.topics == nil {
			r.topics = make(map[string]map[string]registration)
		}
		owners = make(map[string]registration)
		r.topics[topic] = owners
	}
	if _, ok := owners[owner]; !ok {
		r.n++
	}
	at := now.UnixNano()
	owners[owner] = registration{sent: at, until: after(at, ttl)}
}

// Spent forgets the registration with owner for topic at once: a notification from owner
// spent the token, so the keeper registers again if anyone is still parked.
func (r *Registrations) Spent(topic, owner string) {
	owners := r.topics[topic]
	if _, ok := owners[owner]; !ok {
		return
	}
	delete(owners, owner)
	r.n--
	if len(owners) == 0 {
		delete(r.topics, topic)
	}
}

// Lost forgets the registration with owner for topic sent at sent, whose frame did not
// arrive (no reply came back) or was refused: unless a registration sent since replaced it.
// That one's frame may have arrived, and the owner then holds its token: forgetting it would
// refuse the owner's notification for it (Outstanding), and the record it offers would wait
// for the owner's next token. A registration sent at the same instant is forgotten with it
// (it costs a registration again, within KeepInterval).
func (r *Registrations) Lost(topic, owner string, sent time.Time) {
	if g, ok := r.lookup(topic, owner); ok && g.sent == sent.UnixNano() {
		r.Spent(topic, owner)
	}
}

// Forget forgets every registration for topic: nobody is parked on it any more. Nothing is
// sent: the tokens lapse at the owners.
func (r *Registrations) Forget(topic string) {
	r.n -= len(r.topics[topic])
	delete(r.topics, topic)
}

// Refused remembers that owner refused a registration, for RefusalMemory from now. It also
// forgets the refusals that ended before now.
func (r *Registrations) Refused(owner string, now time.Time) {
	at := now.UnixNano()
	if r.refused == nil {
		r.refused = make(map[string]int64)
	}
	for o, until := range r.refused {
		if until <= at {
			delete(r.refused, o)
		}
	}
	r.refused[owner] = after(at, RefusalMemory)
}

// Refusing reports whether owner refused a registration less than RefusalMemory ago.
func (r *Registrations) Refusing(owner string, now time.Time) bool {
	until, ok := r.refused[owner]
	return ok && now.UnixNano() < until
}

// Len returns the number of registrations held, lapsed ones included until they are spent
// or forgotten.
func (r *Registrations) Len() int { return r.n }
