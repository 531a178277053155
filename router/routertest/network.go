package routertest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"narad.dev/consume/router"
)

// ErrUnreachable is what a Network answers for a node that is down or not joined, and for a
// frame Fault dropped on its way: no reply came back.
var ErrUnreachable = errors.New("routertest: node unreachable")

// ErrReplyLost is what a Network answers for a frame whose reply Fault dropped: the node it
// was sent to served it (and may have applied it), and no reply came back.
var ErrReplyLost = errors.New("routertest: reply lost")

// A Fault is what a Network does with one call's frame (see Network.Fault).
type Fault uint8

const (
	// Deliver delivers the frame and its reply, as the network does without faults.
	Deliver Fault = iota
	// DropRequest loses the frame on its way: the node it was sent to never sees it. The
	// call returns only when its context ends, with an error wrapping ErrUnreachable and
	// the context's error. A caller whose context never ends blocks for good, as it would on
	// a network that drops packets: give it a deadline.
	DropRequest
	// DropReply delivers the frame, and the node it was sent to serves it, but the reply is
	// lost on its way back. The call returns only when its context ends, with an error
	// wrapping ErrReplyLost and the context's error (a context that never ends blocks for
	// good, as with DropRequest).
	DropReply
	// Duplicate delivers the frame twice: the node serves it as Deliver does and the call
	// gets that reply, and a copy of the frame, sent at the same instant, takes a trip of its
	// own (with its own jitter, so it may arrive first) and is served too, its reply
	// discarded. The copy is served with the call's context values but not its cancellation
	// (the node cannot tell it from a frame of its own), in a goroutine of its own that ends
	// when the node has served it. Like the frame itself, it is lost if a partition cuts it
	// off before it arrives.
	Duplicate
)

// String returns the fault's name.
func (f Fault) String() string {
	switch f {
	case Deliver:
		return "Deliver"
	case DropRequest:
		return "DropRequest"
	case DropReply:
		return "DropReply"
	case Duplicate:
		return "Duplicate"
	}
	return fmt.Sprintf("Fault(%d)", uint8(f))
}

// Network is an in-memory network of nodes: each joins with the function that serves its
// frames (a Node's Serve), and Transport gives a node its side of it. The zero value is ready
// to use: it delivers every frame at once and never fails but to a node down or not joined.
//
// Timing. A round trip takes RTT, half each way, on the time package's clock (fake inside a
// testing/synctest bubble). With Jitter, each one-way trip takes a random extra in [0, Jitter),
// drawn from a math/rand/v2 PCG source seeded by Seed, so that frames sent close together can
// overtake each other (and their replies too). The draws depend only on Seed and the order in
// which trips start, so a run whose calls start in the same order (one goroutine, or a
// synctest bubble that orders them) is reproducible.
//
// Faults. Observe sees every call first, then Fault decides what becomes of its frame:
// delivered, dropped on its way to the node or on the way back, or delivered twice (see the
// Fault constants). A frame Fault drops on its way is lost even when the node is down (the
// caller learns nothing until its context ends); otherwise a call to a node down or not
// joined fails at once with ErrUnreachable.
//
// Partitions. Partition splits the nodes into groups that cannot reach each other until
// Heal: a frame between two groups is lost, whether the partition began before it was sent
// or while it was on its way, and so is a reply on its way back across one (the node served
// the frame). The caller learns nothing until its context ends, as with DropRequest and
// DropReply; a node that is down behind a partition cannot be told from one that is up.
//
// Set the exported fields before the first call: they are read without a lock. Everything
// else is safe for concurrent use.
type Network struct {
	// RTT is the round trip: half of it on the way to the node, half on the way back.
	RTT time.Duration
	// Jitter, when positive, adds to each one-way trip a random extra in [0, Jitter).
	Jitter time.Duration
	// Seed seeds the source of the jitter.
	Seed uint64
	// Fault, when set, is called for every call, after Observe and before anything else,
	// and says what becomes of the frame; nil delivers every frame. It is called from the
	// calling goroutines, concurrently, and must not modify or retain frame.
	Fault func(from, to string, frame []byte) Fault
	// Observe, when set, is called for every call before anything else (tests count frames
	// by their first byte, the op). It is called from the calling goroutines, concurrently,
	// and must not modify or retain frame.
	Observe func(from, to string, frame []byte)

	mu      sync.RWMutex
	serve   map[string]func(ctx context.Context, from string, frame []byte) ([]byte, error)
	down    map[string]bool
	group   map[string]int // node → its group while partitioned; nil: no partition
	callsTo map[string]*atomic.Int64
	calls   atomic.Int64

	rngMu sync.Mutex
	rng   *rand.Rand
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

// SetDown takes node id down (every call to it fails at once with ErrUnreachable, unless
// Fault drops its frame first) or brings it back.
func (nw *Network) SetDown(id string, down bool) {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	if nw.down == nil {
		nw.down = map[string]bool{}
	}
	nw.down[id] = down
}

// Partition splits the network into groups: two nodes reach each other only if they are in
// the same group, and the nodes named in no group make up one more group together. A node
// named in two groups belongs to the last. It replaces the partition in force, if any.
// Frames already on their way are lost if they arrive across the new partition (see the
// type's documentation).
func (nw *Network) Partition(groups ...[]string) {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	nw.group = map[string]int{}
	for i, g := range groups {
		for _, id := range g {
			nw.group[id] = i + 1 // 0: named in no group
		}
	}
}

// Heal ends the partition in force, if any: every node reaches every other again.
func (nw *Network) Heal() {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	nw.group = nil
}

// cut reports whether a partition separates from and to now.
func (nw *Network) cut(from, to string) bool {
	nw.mu.RLock()
	defer nw.mu.RUnlock()
	return nw.group != nil && nw.group[from] != nw.group[to]
}

// Calls returns how many calls were made, whatever became of them.
func (nw *Network) Calls() int64 { return nw.calls.Load() }

// CallsTo returns how many calls were addressed to node id, whatever became of them.
func (nw *Network) CallsTo(id string) int64 {
	nw.mu.RLock()
	defer nw.mu.RUnlock()
	if n := nw.callsTo[id]; n != nil {
		return n.Load()
	}
	return 0
}

// Transport returns node from's side of the network.
func (nw *Network) Transport(from string) router.Transport { return networkTransport{nw, from} }

// count counts a call to id.
func (nw *Network) count(id string) {
	nw.calls.Add(1)
	nw.mu.RLock()
	n := nw.callsTo[id]
	nw.mu.RUnlock()
	if n == nil {
		nw.mu.Lock()
		if n = nw.callsTo[id]; n == nil {
			if nw.callsTo == nil {
				nw.callsTo = map[string]*atomic.Int64{}
			}
			n = new(atomic.Int64)
			nw.callsTo[id] = n
		}
		nw.mu.Unlock()
	}
	n.Add(1)
}

// trip returns how long one one-way trip takes: RTT/2, plus the jitter drawn for it.
func (nw *Network) trip() time.Duration {
	d := nw.RTT / 2
	if nw.Jitter > 0 {
		nw.rngMu.Lock()
		if nw.rng == nil {
			nw.rng = rand.New(rand.NewPCG(nw.Seed, 0x6e617261642e6e65)) // "narad.ne"
		}
		d += time.Duration(nw.rng.Int64N(int64(nw.Jitter)))
		nw.rngMu.Unlock()
	}
	return d
}

type networkTransport struct {
	nw   *Network
	from string
}

var _ router.ContextTransport = networkTransport{}

// HonorsContext says that Call returns once its context is done: every wait on the network
// watches it, and the served node's Serve does too.
func (networkTransport) HonorsContext() {}

// Call implements router.Transport.
func (t networkTransport) Call(ctx context.Context, to string, frame []byte) ([]byte, error) {
	nw := t.nw
	if nw.Observe != nil {
		nw.Observe(t.from, to, frame)
	}
	nw.count(to)
	fault := Deliver
	if nw.Fault != nil {
		fault = nw.Fault(t.from, to, frame)
	}
	if fault == DropRequest {
		<-ctx.Done()
		return nil, fmt.Errorf("%w: the frame to %s was lost on its way: %w", ErrUnreachable, to, ctx.Err())
	}
	if nw.cut(t.from, to) {
		return nil, t.lost(ctx, to)
	}
	nw.mu.RLock()
	serve, ok := nw.serve[to]
	down := nw.down[to]
	nw.mu.RUnlock()
	if !ok || down {
		return nil, ErrUnreachable
	}
	if fault == Duplicate {
		t.duplicate(ctx, to, serve, frame)
	}
	if err := wait(ctx, nw.trip()); err != nil {
		return nil, err
	}
	if nw.cut(t.from, to) {
		return nil, t.lost(ctx, to)
	}
	reply, err := serve(ctx, t.from, append([]byte(nil), frame...))
	if fault == DropReply {
		<-ctx.Done()
		return nil, fmt.Errorf("%w: %s served the frame: %w", ErrReplyLost, to, ctx.Err())
	}
	if err != nil {
		return nil, err
	}
	if err := wait(ctx, nw.trip()); err != nil {
		return nil, err
	}
	if nw.cut(to, t.from) {
		<-ctx.Done()
		return nil, fmt.Errorf("%w: %s served the frame, and a partition cut the way back: %w", ErrReplyLost, to, ctx.Err())
	}
	return reply, nil
}

// lost waits for the end of ctx for a frame a partition cut off on its way to node to.
func (t networkTransport) lost(ctx context.Context, to string) error {
	<-ctx.Done()
	return fmt.Errorf("%w: a partition cut off the frame to %s: %w", ErrUnreachable, to, ctx.Err())
}

// duplicate sends a copy of frame to node to, served by serve after a trip of its own unless
// a partition cut it off meanwhile, its reply discarded.
func (t networkTransport) duplicate(ctx context.Context, to string, serve func(context.Context, string, []byte) ([]byte, error), frame []byte) {
	nw := t.nw
	trip := nw.trip()
	frame = append([]byte(nil), frame...)
	ctx = context.WithoutCancel(ctx)
	go func() {
		if err := wait(ctx, trip); err != nil {
			return
		}
		if nw.cut(t.from, to) {
			return
		}
		serve(ctx, t.from, frame)
	}()
}

// wait spends d, or returns ctx's error if it ends first.
func wait(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
