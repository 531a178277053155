package tokens

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

func TestRegistrationsZeroValue(t *testing.T) {
	var r Registrations
	require.Zero(t, r.Len())
	require.True(t, r.Due("t", "o", epoch, Resend))
	require.False(t, r.Share("t", "o", epoch, epoch.Add(time.Second)))
	require.False(t, r.Refusing("o", epoch))
	require.False(t, r.Outstanding("t", "o"))
	r.Spent("t", "o")
	r.Forget("t")
	require.Zero(t, r.Len())
}

func TestRegistrationsDue(t *testing.T) {
	ttl := 10 * time.Second
	tests := []struct {
		name  string
		setup func(r *Registrations)
		at    time.Duration // after the send
		want  bool
	}{
		{"never sent", func(*Registrations) {}, 0, true},
		{"just sent", nil, 0, false},
		// checklist 113: sent again at most Resend after the last send, whatever the state.
		{"before the resend", nil, Resend - time.Nanosecond, false},
		{"at the resend", nil, Resend, true},
		// checklist 111, 112: a notification spent it; the keeper registers again.
		{"spent", func(r *Registrations) {
			r.Sent("t", "o", epoch, ttl)
			r.Spent("t", "o")
		}, 0, true},
		{"lapsed at its TTL", func(r *Registrations) { r.Sent("t", "o", epoch, time.Second) }, time.Second, true},
		{"live to its TTL", func(r *Registrations) { r.Sent("t", "o", epoch, time.Second) }, time.Second - time.Nanosecond, false},
		{"forgotten", func(r *Registrations) {
			r.Sent("t", "o", epoch, ttl)
			r.Forget("t")
		}, 0, true},
		{"another owner spent", func(r *Registrations) {
			r.Sent("t", "o", epoch, ttl)
			r.Sent("t", "p", epoch, ttl)
			r.Spent("t", "p")
		}, 0, false},
		{"another topic forgotten", func(r *Registrations) {
			r.Sent("t", "o", epoch, ttl)
			r.Sent("u", "o", epoch, ttl)
			r.Forget("u")
		}, 0, false},
		{"sent with no TTL", func(r *Registrations) {
			r.Sent("t", "o", epoch, ttl)
			r.Sent("t", "o", epoch, 0)
		}, 0, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var r Registrations
			if tc.setup == nil {
				r.Sent("t", "o", epoch, ttl)
			} else {
				tc.setup(&r)
			}
			require.Equal(t, tc.want, r.Due("t", "o", epoch.Add(tc.at), Resend))
		})
	}
}

// checklist 114: consumers parking within the share window of a registration share it,
// unless its TTL ends before their deadline.
func TestRegistrationsShare(t *testing.T) {
	ttl := 10*time.Second + ShareWindow // a 10 s wait
	tests := []struct {
		name     string
		setup    func(r *Registrations)
		at       time.Duration // when the consumer parks, after the send
		deadline time.Duration // its deadline, after the send
		want     bool
	}{
		{"never sent", func(*Registrations) {}, 0, time.Second, false},
		{"at once", nil, 0, 5 * time.Second, true},
		{"inside the window", nil, ShareWindow - time.Nanosecond, 5 * time.Second, true},
		{"at the end of the window", nil, ShareWindow, 5 * time.Second, false},
		{"deadline at the TTL", nil, 100 * time.Millisecond, ttl, true},
		{"deadline past the TTL", nil, 100 * time.Millisecond, ttl + time.Nanosecond, false},
		{"spent", func(r *Registrations) {
			r.Sent("t", "o", epoch, ttl)
			r.Spent("t", "o")
		}, 0, time.Second, false},
		{"another owner's", func(r *Registrations) { r.Sent("t", "p", epoch, ttl) }, 0, time.Second, false},
		{"another topic's", func(r *Registrations) { r.Sent("u", "o", epoch, ttl) }, 0, time.Second, false},
		{"lapsed within the window", func(r *Registrations) { r.Sent("t", "o", epoch, time.Millisecond) }, time.Millisecond, time.Millisecond, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var r Registrations
			if tc.setup == nil {
				r.Sent("t", "o", epoch, ttl)
			} else {
				tc.setup(&r)
			}
			require.Equal(t, tc.want, r.Share("t", "o", epoch.Add(tc.at), epoch.Add(tc.deadline)))
		})
	}
}

// A registration sent again replaces the one before: its send time and TTL.
func TestRegistrationsSentReplaces(t *testing.T) {
	var r Registrations
	r.Sent("t", "o", epoch, time.Second)
	later := epoch.Add(4 * time.Second)
	r.Sent("t", "o", later, 10*time.Second)
	require.Equal(t, 1, r.Len())
	require.False(t, r.Due("t", "o", later.Add(Resend-time.Nanosecond), Resend))
	require.True(t, r.Share("t", "o", later, later.Add(10*time.Second)))
	r.Sent("t", "o", later, time.Second) // shorter again
	require.True(t, r.Due("t", "o", later.Add(time.Second), Resend))
}

// checklist 116: tokens lapse; forgetting a topic forgets its registrations only, and sends
// nothing (Registrations have nothing to send with).
func TestRegistrationsForgetAndLen(t *testing.T) {
	var r Registrations
	for _, topic := range []string{"t", "u"} {
		for _, owner := range []string{"o", "p", "q"} {
			r.Sent(topic, owner, epoch, time.Second)
		}
	}
	require.Equal(t, 6, r.Len())
	r.Spent("t", "o")
	r.Spent("t", "o")
	require.Equal(t, 5, r.Len())
	r.Forget("t")
	require.Equal(t, 3, r.Len())
	r.Forget("t")
	require.Equal(t, 3, r.Len())
	// Lapsed registrations are held until spent or forgotten.
	require.True(t, r.Due("u", "o", epoch.Add(time.Hour), Resend))
	require.Equal(t, 3, r.Len())
	r.Forget("u")
	require.Zero(t, r.Len())
	require.Empty(t, r.topics)
}

// A registration is outstanding from its send until it is spent or forgotten, lapsed or not:
// a notification from that owner may answer it.
func TestRegistrationsOutstanding(t *testing.T) {
	tests := []struct {
		name  string
		setup func(r *Registrations)
		want  bool
	}{
		{"never sent", func(*Registrations) {}, false},
		{"sent", func(r *Registrations) { r.Sent("t", "o", epoch, time.Second) }, true},
		{"lapsed at its TTL", func(r *Registrations) { r.Sent("t", "o", epoch.Add(-time.Hour), time.Second) }, true},
		{"spent", func(r *Registrations) {
			r.Sent("t", "o", epoch, time.Second)
			r.Spent("t", "o")
		}, false},
		{"spent and sent again", func(r *Registrations) {
			r.Sent("t", "o", epoch, time.Second)
			r.Spent("t", "o")
			r.Sent("t", "o", epoch, time.Second)
		}, true},
		{"forgotten", func(r *Registrations) {
			r.Sent("t", "o", epoch, time.Second)
			r.Forget("t")
		}, false},
		{"sent with no TTL", func(r *Registrations) {
			r.Sent("t", "o", epoch, time.Second)
			r.Sent("t", "o", epoch, 0)
		}, false},
		{"another owner's", func(r *Registrations) { r.Sent("t", "p", epoch, time.Second) }, false},
		{"another topic's", func(r *Registrations) { r.Sent("u", "o", epoch, time.Second) }, false},
		{"another topic forgotten", func(r *Registrations) {
			r.Sent("t", "o", epoch, time.Second)
			r.Sent("u", "o", epoch, time.Second)
			r.Forget("u")
		}, true},
		{"refused", func(r *Registrations) { r.Refused("o", epoch) }, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var r Registrations
			tc.setup(&r)
			require.Equal(t, tc.want, r.Outstanding("t", "o"))
		})
	}
}

// A registration frame that did not arrive forgets its registration, and not one sent after
// it: that one's frame may have arrived, so a notification from the owner is believed.
func TestRegistrationsLost(t *testing.T) {
	var r Registrations
	r.Sent("t", "o", epoch, time.Second)
	later := epoch.Add(2 * time.Second)
	r.Sent("t", "o", later, 5*time.Second)
	r.Lost("t", "o", epoch) // the first frame's reply never came
	require.True(t, r.Outstanding("t", "o"), "the later registration stays")
	require.False(t, r.Due("t", "o", later, Resend))
	r.Lost("t", "o", later)
	require.False(t, r.Outstanding("t", "o"), "its own frame lost: forgotten")
	require.True(t, r.Due("t", "o", later, Resend))
	require.Zero(t, r.Len())
	r.Lost("t", "o", later) // nothing left to forget
	require.Zero(t, r.Len())
}

// An owner that refused a registration is remembered as refusing for RefusalMemory.
func TestRegistrationsRefusal(t *testing.T) {
	var r Registrations
	r.Refused("o", epoch)
	require.True(t, r.Refusing("o", epoch))
	require.False(t, r.Refusing("p", epoch))
	require.True(t, r.Refusing("o", epoch.Add(RefusalMemory-time.Nanosecond)))
	require.False(t, r.Refusing("o", epoch.Add(RefusalMemory)))
	// A refusal again extends the memory; ended ones are forgotten as new ones come.
	r.Refused("o", epoch.Add(time.Minute))
	require.True(t, r.Refusing("o", epoch.Add(RefusalMemory)))
	r.Refused("p", epoch.Add(time.Hour))
	require.Len(t, r.refused, 1)
	require.Zero(t, r.Len(), "refusals are not registrations")
}

func TestRegistrationsHugeTTLSaturates(t *testing.T) {
	var r Registrations
	r.Sent("t", "o", epoch, math.MaxInt64)
	require.False(t, r.Due("t", "o", time.Unix(0, math.MaxInt64-1), math.MaxInt64))
	r.Refused("o", time.Unix(0, math.MaxInt64-1))
	require.True(t, r.Refusing("o", time.Unix(0, math.MaxInt64-1)))
}

// The model of Registrations: a slice of (topic, owner, sent, until) and a slice of
// refusals, searched linearly.

type modelRegistration struct {
	topic, owner string
	sent, until  time.Time
}

type modelRefusal struct {
	owner string
	until time.Time
}

type registrationsModel struct {
	regs    []modelRegistration
	refused []modelRefusal
}

func (m *registrationsModel) find(topic, owner string) int {
	return slices.IndexFunc(m.regs, func(g modelRegistration) bool { return g.topic == topic && g.owner == owner })
}

func (m *registrationsModel) share(topic, owner string, now, deadline time.Time) bool {
	i := m.find(topic, owner)
	if i < 0 {
		return false
	}
	g := m.regs[i]
	return now.Before(g.until) && now.Sub(g.sent) < ShareWindow && !deadline.After(g.until)
}

func (m *registrationsModel) due(topic, owner string, now time.Time, resend time.Duration) bool {
	i := m.find(topic, owner)
	return i < 0 || !now.Before(m.regs[i].until) || now.Sub(m.regs[i].sent) >= resend
}

func (m *registrationsModel) outstanding(topic, owner string) bool {
	return m.find(topic, owner) >= 0
}

func (m *registrationsModel) sent(topic, owner string, now time.Time, ttl time.Duration) {
	m.spent(topic, owner)
	if ttl > 0 {
		m.regs = append(m.regs, modelRegistration{topic, owner, now, now.Add(ttl)})
	}
}

func (m *registrationsModel) spent(topic, owner string) {
	if i := m.find(topic, owner); i >= 0 {
		m.regs = slices.Delete(m.regs, i, i+1)
	}
}

func (m *registrationsModel) lost(topic, owner string, sent time.Time) {
	if i := m.find(topic, owner); i >= 0 && m.regs[i].sent.Equal(sent) {
		m.regs = slices.Delete(m.regs, i, i+1)
	}
}

func (m *registrationsModel) forget(topic string) {
	m.regs = slices.DeleteFunc(m.regs, func(g modelRegistration) bool { return g.topic == topic })
}

func (m *registrationsModel) refusedAt(owner string, now time.Time) {
	m.refused = slices.DeleteFunc(m.refused, func(f modelRefusal) bool { return f.owner == owner || !now.Before(f.until) })
	m.refused = append(m.refused, modelRefusal{owner, now.Add(RefusalMemory)})
}

func (m *registrationsModel) refusing(owner string, now time.Time) bool {
	for _, f := range m.refused {
		if f.owner == owner && now.Before(f.until) {
			return true
		}
	}
	return false
}

type registrationsMachine struct {
	r   Registrations
	m   registrationsModel
	now time.Time
}

var (
	regTopics = []string{"t", "u", "v"}
	regOwners = []string{"o", "p", "q"}
)

func (rm *registrationsMachine) key(t *rapid.T) (string, string) {
	return rapid.SampledFrom(regTopics).Draw(t, "topic"), rapid.SampledFrom(regOwners).Draw(t, "owner")
}

func (rm *registrationsMachine) advance(t *rapid.T) {
	step := rapid.SampledFrom([]time.Duration{
		time.Nanosecond, 100 * time.Millisecond, ShareWindow, KeepInterval, Resend, time.Minute,
	}).Draw(t, "step")
	rm.now = rm.now.Add(step)
}

func (rm *registrationsMachine) clockBack(t *rapid.T) {
	rm.now = rm.now.Add(-rapid.SampledFrom([]time.Duration{time.Nanosecond, 200 * time.Millisecond, time.Minute}).Draw(t, "back"))
}

func (rm *registrationsMachine) sent(t *rapid.T) {
	topic, owner := rm.key(t)
	ttl := rapid.SampledFrom([]time.Duration{-time.Second, 0, time.Nanosecond, ShareWindow, time.Second, 10 * time.Second}).Draw(t, "ttl")
	rm.r.Sent(topic, owner, rm.now, ttl)
	rm.m.sent(topic, owner, rm.now, ttl)
}

func (rm *registrationsMachine) spent(t *rapid.T) {
	topic, owner := rm.key(t)
	rm.r.Spent(topic, owner)
	rm.m.spent(topic, owner)
}

// lost loses a registration frame sent at now or up to a minute before: whichever
// registration is outstanding then, if any, was sent at that instant or not.
func (rm *registrationsMachine) lost(t *rapid.T) {
	topic, owner := rm.key(t)
	sent := rm.now.Add(-rapid.SampledFrom([]time.Duration{0, time.Nanosecond, 100 * time.Millisecond, ShareWindow, KeepInterval, Resend, time.Minute}).Draw(t, "ago"))
	rm.r.Lost(topic, owner, sent)
	rm.m.lost(topic, owner, sent)
}

func (rm *registrationsMachine) forget(t *rapid.T) {
	topic := rapid.SampledFrom(regTopics).Draw(t, "topic")
	rm.r.Forget(topic)
	rm.m.forget(topic)
}

func (rm *registrationsMachine) refused(t *rapid.T) {
	owner := rapid.SampledFrom(regOwners).Draw(t, "owner")
	rm.r.Refused(owner, rm.now)
	rm.m.refusedAt(owner, rm.now)
}

// check runs after every step and asks every query for every topic and owner.
func (rm *registrationsMachine) check(t *rapid.T) {
	if got, want := rm.r.Len(), len(rm.m.regs); got != want {
		t.Fatalf("Len = %d, model %d", got, want)
	}
	for _, topic := range regTopics {
		for _, owner := range regOwners {
			if got, want := rm.r.Outstanding(topic, owner), rm.m.outstanding(topic, owner); got != want {
				t.Fatalf("Outstanding(%s, %s) = %v, model %v", topic, owner, got, want)
			}
			for _, resend := range []time.Duration{0, KeepInterval, Resend} {
				if got, want := rm.r.Due(topic, owner, rm.now, resend), rm.m.due(topic, owner, rm.now, resend); got != want {
					t.Fatalf("Due(%s, %s, %v) = %v, model %v", topic, owner, resend, got, want)
				}
			}
			for _, wait := range []time.Duration{0, time.Nanosecond, 200 * time.Millisecond, time.Second, 10 * time.Second} {
				deadline := rm.now.Add(wait)
				if got, want := rm.r.Share(topic, owner, rm.now, deadline), rm.m.share(topic, owner, rm.now, deadline); got != want {
					t.Fatalf("Share(%s, %s, wait %v) = %v, model %v", topic, owner, wait, got, want)
				}
			}
		}
	}
	for _, owner := range regOwners {
		if got, want := rm.r.Refusing(owner, rm.now), rm.m.refusing(owner, rm.now); got != want {
			t.Fatalf("Refusing(%s) = %v, model %v", owner, got, want)
		}
	}
	if len(rm.r.refused) > len(regOwners) {
		t.Fatalf("%d refusals remembered for %d owners", len(rm.r.refused), len(regOwners))
	}
	for topic, owners := range rm.r.topics {
		if len(owners) == 0 {
			t.Fatalf("topic %s kept with no registration", topic)
		}
	}
}

func TestRegistrationsAgainstModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		rm := &registrationsMachine{now: epoch}
		t.Repeat(map[string]func(*rapid.T){
			"advance":   rm.advance,
			"clockBack": rm.clockBack,
			"sent":      rm.sent,
			"spent":     rm.spent,
			"lost":      rm.lost,
			"forget":    rm.forget,
			"refused":   rm.refused,
			"":          rm.check,
		})
	})
}
