package frontend

import (
	"context"
	"net"
	"net/http"
	"sync"

	"narad.dev/consume/router"
)

// Node is what the helpers below use of a *router.Node.
type Node interface {
	Consume(ctx context.Context, topic string, opts router.ConsumeOptions) ([]router.Message, error)
	Release(ctx context.Context, topic string, handle router.Handle) error
}

// Consume consumes for a client request whose context is ctx, and returns only records that
// have a client to go to. When the consume fails, it gives back whatever came with the error;
// when ctx ended as the records came (the client left), it gives them all back and answers
// ctx's error: nobody would read them, and they should not stay invisible for their
// visibility timeout.
func Consume(ctx context.Context, n Node, topic string, opts router.ConsumeOptions) ([]router.Message, error) {
	msgs, err := n.Consume(ctx, topic, opts)
	switch {
	case err != nil:
		GiveBack(ctx, n, topic, msgs) // none, as the node answers; never stranded if some
		return nil, err
	case len(msgs) > 0 && ctx.Err() != nil:
		GiveBack(ctx, n, topic, msgs)
		return nil, ctx.Err()
	}
	return msgs, nil
}

// GiveBack returns records that never reached their client (it left, or its response could
// not be written): released, at their owner for a partition another node owns, so they are
// visible again at once without counting as an attempt. It runs even when ctx has ended.
func GiveBack(ctx context.Context, n Node, topic string, msgs []router.Message) {
	ctx = context.WithoutCancel(ctx)
	for i := range msgs {
		if Leased(&msgs[i]) {
			n.Release(ctx, topic, msgs[i].Receipt)
		}
	}
}

// Leased reports whether m carries a lease: a consumed record does, a replayed one does not.
func Leased(m *router.Message) bool { return m.Receipt != (router.Handle{}) }

// DefaultMaxInFlight is the front ends' default bound on one client identity's consume
// requests in flight.
const DefaultMaxInFlight = 64

// Slots bounds the consume requests each client identity has in flight. It is safe for
// concurrent use.
type Slots struct {
	max int

	mu       sync.Mutex
	inFlight map[string]int // identity → requests in flight; no zero entries
}

// NewSlots returns a bound of max requests in flight per identity; max <= 0 means none.
func NewSlots(max int) *Slots { return &Slots{max: max, inFlight: map[string]int{}} }

// Max is the bound NewSlots was given.
func (s *Slots) Max() int { return s.max }

// Acquire counts a request of id in flight, unless id is at its bound (false: refuse it).
// Each true is to be matched by one Release.
func (s *Slots) Acquire(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.max > 0 && s.inFlight[id] >= s.max {
		return false
	}
	s.inFlight[id]++
	return true
}

// Release ends a request Acquire admitted.
func (s *Slots) Release(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inFlight[id]--; s.inFlight[id] <= 0 {
		delete(s.inFlight, id)
	}
}

// RemoteHost is the default client identity: the host part of the request's remote
// address (behind a proxy that does not preserve it, every client shares the proxy's).
func RemoteHost(r *http.Request) string {
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return host
	}
	return r.RemoteAddr
}
