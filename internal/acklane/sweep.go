package acklane

import (
	"fmt"

	"narad.dev/consume/internal/wire"
)

// trackLocked keeps q, just queued, for sweep: it drops answered settles from the front and
// arms the lane's timer if none is armed. Called with l.mu held.
func (l *Lane[P]) trackLocked(q *Ack) {
	for len(l.tracked) > 0 && l.tracked[0].answered.Load() {
		l.tracked[0] = nil
		l.tracked = l.tracked[1:]
	}
	l.tracked = append(l.tracked, q)
	if !l.sweepArmed {
		l.sweepArmed = true
		clock := l.cfg.Clock
		clock.AfterFunc(l.tracked[0].Deadline.Sub(clock.Now()), l.sweep)
	}
}

// sweepDue answers the tracked settles whose budget ran out: one still queued is taken out of
// the queue's hands and answered 503 (it never left, so it is never applied); one in flight
// is answered the no-reply status (no reply came back by its deadline; the owner may have
// applied it), and its batch's late reply is then dropped. It re-arms the timer for the
// next deadline.
func (l *Lane[P]) sweepDue() {
	// The answers are given once the lane's lock is released: an Enqueue's runs its
	// caller's function, which may settle again through this lane.
	for _, e := range l.expire() {
		l.give(e.q, e.answer)
	}
}

// expire takes the tracked settles whose budget ran out out of the lane's hands, with the
// answer each is owed, and re-arms the lane's timer for the next deadline.
func (l *Lane[P]) expire() []expiredAck {
	now := l.cfg.Clock.Now()
	var expired []expiredAck
	l.mu.Lock()
	defer l.mu.Unlock()
	for len(l.tracked) > 0 {
		q := l.tracked[0]
		if !q.answered.Load() && now.Before(q.Deadline) {
			break
		}
		l.tracked[0] = nil
		l.tracked = l.tracked[1:]
		switch {
		case q.answered.Load():
		case !q.taken:
			q.taken = true
			expired = append(expired, expiredAck{q, wire.Answer{Status: wire.StatusUnavailable, Message: fmt.Sprintf("no slot to %s within the budget: not applied", l.owner)}})
		default:
			expired = append(expired, expiredAck{q, wire.Answer{Status: l.cfg.NoReply, Message: fmt.Sprintf("no reply from %s within the budget", l.owner)}})
		}
	}
	l.sweepArmed = len(l.tracked) > 0
	if l.sweepArmed {
		l.cfg.Clock.AfterFunc(l.tracked[0].Deadline.Sub(now), l.sweep)
	}
	return expired
}

// expiredAck is an answer sweep gives once it released the lane.
type expiredAck struct {
	q      *Ack
	answer wire.Answer
}
