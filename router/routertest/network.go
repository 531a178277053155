package routertest

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"narad.dev/consume/router"
)

// ErrUnreachable is what a Network answers for a node that is down or not joined: no reply
// came back.
var ErrUnreachable = errors.New("routertest: node unreachable")

// Network is an in-memory network of nodes: each joins with the function that serves its
// frames (a Node's Serve), and Transport gives a node its side of it. A round trip takes
// RTT (half each way, on the time package's clock: fake inside a testing/synctest bubble),
// and a node can be taken down. The zero value is ready to use.
type Network struct {
	RTT time.Duration

	mu    sync.RWMutex
	serve map[string]func(ctx context.Context, from string, frame []byte) ([]byte, error)
	down  map[string]bool
	calls atomic.Int64
}

// Join makes node id reachable, its frames served by serve.
func (nw *Network) Join(id string, serve func(ctx context.Context, from string, frame []byte) ([]byte, error)) {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	if nw.serve == nil {
		nw.serve = map[string]func(context.Context, string, []byte) ([]byte, error){}
	}
	nw.serve[id] = serve
}

// SetDown takes node id down (every call to it fails) or brings it back.
func (nw *Network) SetDown(id string, down bool) {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	if nw.down == nil {
		nw.down = map[string]bool{}
	}
	nw.down[id] = down
}

// Calls returns how many calls were made.
func (nw *Network) Calls() int64 { return nw.calls.Load() }

// Transport returns node from's side of the network.
func (nw *Network) Transport(from string) router.Transport { return networkTransport{nw, from} }

type networkTransport struct {
	nw   *Network
	from string
}

var _ router.Transport = networkTransport{}

// Call implements router.Transport.
func (t networkTransport) Call(ctx context.Context, to string, frame []byte) ([]byte, error) {
	t.nw.calls.Add(1)
	t.nw.mu.RLock()
	serve, ok := t.nw.serve[to]
	down := t.nw.down[to]
	t.nw.mu.RUnlock()
	if !ok || down {
		return nil, ErrUnreachable
	}
	if err := t.wait(ctx); err != nil {
		return nil, err
	}
	reply, err := serve(ctx, t.from, append([]byte(nil), frame...))
	if err != nil {
		return nil, err
	}
	if err := t.wait(ctx); err != nil {
		return nil, err
	}
	return reply, nil
}

// wait spends half a round trip, or returns ctx's error if it ends first.
func (t networkTransport) wait(ctx context.Context) error {
	if t.nw.RTT <= 0 {
		return ctx.Err()
	}
	timer := time.NewTimer(t.nw.RTT / 2)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
