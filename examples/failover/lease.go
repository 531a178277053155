package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"narad.dev/consume/examples/internal/launch"
)

// A node's lease: its session in etcd. Its liveness key (nodes/<id>), its key in the
// controller's election and the owner key of every partition granted to it
// (owner/<topic>/<p>) live under it, so they all go at once when it expires: a node killed,
// paused (SIGSTOP) or cut off from etcd for longer than its TTL loses every grant together.
//
// The node keeps it alive itself, one KeepAliveOnce at a time every ttl/keepAlivesPerTTL,
// rather than through a concurrency.Session's keep-alive stream, because it needs to know
// when each keep-alive was sent: etcd's leader starts the TTL an answer carries when it
// receives the keep-alive, after it was sent, so an answer with TTL t to a keep-alive sent
// at s says the lease lives at least until s+t, on this node's monotonic clock (clocks'
// rates apart: the controller's margin). That instant is the end of every grant the node
// holds (etcdOwnership, router.Grant.Left); an answer that comes late, after the node was
// paused, extends nothing past it. A keep-alive that gets no answer (etcd is electing a
// leader, or the node is cut off) extends nothing; the node goes on trying, and its grants
// lapse at the end of the last answer's TTL.
//
// When etcd answers that the lease is gone (it expired while the node was paused or cut
// off), the node takes a new one and puts its liveness key under it again (rejoin): it is
// live again, with no partition (the controller failed them over meanwhile), and campaigns
// again. It does not exit: its consumers keep calling it, and it serves them through its
// peers.
type nodeLease struct {
	cli    *clientv3.Client
	say    *lines
	rejoin func(ctx context.Context, id clientv3.LeaseID) error // puts the node's liveness key under a new lease
	// lapsed is told when the node's grants lapsed at at: the lease's end passed with no
	// keep-alive answered (told at the tick that finds it), or etcd said the lease is gone
	// before its end on this node's clock (told at once).
	lapsed func(st *leaseState, at time.Time, revoked bool)

	cur atomic.Pointer[leaseState]

	mu      sync.Mutex
	paused  bool          // the partition's test hook: no keep-alive is sent
	resumed chan struct{} // closed when paused ends
	sending sync.WaitGroup

	lapsedAt time.Time // the end of the lease whose lapse was told, until a keep-alive answers again; run's
}

// A leaseState is one lease and how long it lives, as far as this node can tell.
type leaseState struct {
	id    clientv3.LeaseID
	ttl   time.Duration
	until time.Time     // monotonic: the end of the last answered keep-alive's TTL
	lost  chan struct{} // closed when etcd said the lease is gone and the node took another
}

// keepAlivesPerTTL is how many keep-alives the node sends per TTL: a grant's Left is the TTL
// less up to a sixth of it, and a keep-alive unanswered for a while costs nothing yet.
const keepAlivesPerTTL = 6

// newNodeLease grants the node's first lease.
func newNodeLease(ctx context.Context, cli *clientv3.Client, say *lines) (*nodeLease, error) {
	l := &nodeLease{cli: cli, say: say}
	st, err := l.grant(ctx)
	if err != nil {
		return nil, err
	}
	l.cur.Store(st)
	return l, nil
}

// grant grants a new lease of leaseTTL, valid from the moment the request was sent.
func (l *nodeLease) grant(ctx context.Context) (*leaseState, error) {
	sent := time.Now()
	gctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := l.cli.Grant(gctx, leaseTTL)
	if err != nil {
		return nil, fmt.Errorf("etcd lease grant: %w", err)
	}
	ttl := time.Duration(resp.TTL) * time.Second // etcd may raise a TTL below its minimum
	return &leaseState{id: resp.ID, ttl: ttl, until: sent.Add(ttl), lost: make(chan struct{})}, nil
}

// state returns the current lease.
func (l *nodeLease) state() *leaseState { return l.cur.Load() }

// left returns how long the lease st lives from now, as far as this node can tell.
func (st *leaseState) left() time.Duration { return time.Until(st.until) }

// run keeps the lease alive until ctx ends.
func (l *nodeLease) run(ctx context.Context) {
	st := l.state()
	tick := time.NewTicker(st.ttl / keepAlivesPerTTL)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		l.mu.Lock()
		if l.paused {
			resumed := l.resumed
			l.mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-resumed:
			}
			continue
		}
		l.sending.Add(1)
		l.mu.Unlock()
		if st := l.state(); l.lapsedAt.IsZero() && !st.until.After(time.Now()) {
			l.lapsedAt = st.until
			if l.lapsed != nil {
				l.lapsed(st, st.until, false)
			}
		}
		if l.keepAlive(ctx) && !l.lapsedAt.IsZero() {
			l.say.say("event a keep-alive was answered again, %v after its grants lapsed", time.Since(l.lapsedAt).Round(time.Millisecond))
			l.lapsedAt = time.Time{}
		}
		l.sending.Done()
	}
}

// keepAlive sends one keep-alive and extends the lease's end by its answer, or takes a new
// lease if etcd says it is gone. It reports whether the node's grants hold now.
func (l *nodeLease) keepAlive(ctx context.Context) bool {
	st := l.state()
	sent := time.Now()
	// Bounded by the interval: a keep-alive that etcd holds (it has no leader) is given up
	// for the next, so that the first one a new leader can answer goes at once.
	kctx, cancel := context.WithTimeout(ctx, st.ttl/keepAlivesPerTTL)
	resp, err := l.cli.KeepAliveOnce(kctx, st.id)
	cancel()
	switch {
	case err == nil && resp.TTL > 0:
		until := sent.Add(min(time.Duration(resp.TTL)*time.Second, st.ttl))
		if until.After(st.until) {
			next := *st
			next.until = until
			l.cur.CompareAndSwap(st, &next)
		}
		return l.state().left() > 0
	case err == nil || errors.Is(err, rpctypes.ErrLeaseNotFound):
		return l.replace(ctx, st)
	default:
		// No answer: the lease may live or not. Nothing is extended; the next tick tries again.
		return false
	}
}

// replace takes a new lease in place of st, which etcd says expired, and puts the node's
// liveness key under it. The grants under st end at once, whatever this node's clock said
// of st: its keys are gone, and the controller counts its wait from then.
func (l *nodeLease) replace(ctx context.Context, st *leaseState) bool {
	if now := time.Now(); st.until.After(now) {
		ended := *st
		ended.until = now
		l.cur.CompareAndSwap(st, &ended)
		if l.lapsedAt.IsZero() {
			l.lapsedAt = now
			if l.lapsed != nil {
				l.lapsed(st, now, true)
			}
		}
		st = &ended
	}
	l.say.say("event its etcd lease %x expired (it was paused, or cut off from etcd, for longer than its TTL): every grant it held went with it; taking a new lease", int64(st.id))
	for ctx.Err() == nil {
		next, err := l.grant(ctx)
		if err == nil {
			if err = l.rejoin(ctx, next.id); err == nil {
				l.cur.Store(next)
				close(st.lost)
				l.say.say("event rejoined under a new lease %x: live again, with no partition", int64(next.id))
				return true
			}
		}
		launch.Pause(ctx, 200*time.Millisecond)
	}
	return false
}

// pause stops (on) or restarts the keep-alives: the partition's test hook, which plays a
// node cut off from etcd. Stopping waits for a keep-alive in flight, so that no answer
// extends the lease after pause returns, and returns how long the lease lives from then on:
// when this node's grants lapse.
func (l *nodeLease) pause(on bool) time.Duration {
	l.mu.Lock()
	switch {
	case on && !l.paused:
		l.paused, l.resumed = true, make(chan struct{})
	case !on && l.paused:
		l.paused = false
		close(l.resumed)
	}
	l.mu.Unlock()
	if on {
		l.sending.Wait() // no keep-alive starts while paused: the count only falls
	}
	return l.state().left()
}
