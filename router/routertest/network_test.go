package routertest_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"narad.dev/consume/router/routertest"
)

// echo serves a frame by answering it, and records when each frame arrived (on the bubble's
// clock) and in which order.
type echo struct {
	mu       sync.Mutex
	arrivals []time.Time
	order    []byte // each frame's first byte, in arrival order
}

func (e *echo) serve(_ context.Context, _ string, frame []byte) ([]byte, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.arrivals = append(e.arrivals, time.Now())
	e.order = append(e.order, frame[0])
	return append([]byte("re:"), frame...), nil
}

func (e *echo) served() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.order)
}

// The zero value delivers at once; RTT takes half each way.
func TestNetworkRTT(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var zero routertest.Network
		var e echo
		zero.Join("b", e.serve)
		start := time.Now()
		reply, err := zero.Transport("a").Call(t.Context(), "b", []byte{1})
		if err != nil || string(reply) != "re:\x01" || time.Since(start) != 0 {
			t.Fatalf("zero network: %q, %v after %v", reply, err, time.Since(start))
		}

		nw := &routertest.Network{RTT: 10 * time.Millisecond}
		e = echo{}
		nw.Join("b", e.serve)
		start = time.Now()
		reply, err = nw.Transport("a").Call(t.Context(), "b", []byte{2})
		if err != nil || string(reply) != "re:\x02" {
			t.Fatalf("Call: %q, %v", reply, err)
		}
		if got := e.arrivals[0].Sub(start); got != 5*time.Millisecond {
			t.Fatalf("the frame arrived after %v, want 5ms", got)
		}
		if got := time.Since(start); got != 10*time.Millisecond {
			t.Fatalf("the round trip took %v, want 10ms", got)
		}
	})
}

// With jitter, each one-way trip takes RTT/2 plus [0, Jitter), and the extra varies.
func TestNetworkJitterBounds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const rtt, jitter = 10 * time.Millisecond, 4 * time.Millisecond
		nw := &routertest.Network{RTT: rtt, Jitter: jitter, Seed: 7}
		var e echo
		nw.Join("b", e.serve)
		seen := map[time.Duration]bool{}
		for i := range 200 {
			start := time.Now()
			if _, err := nw.Transport("a").Call(t.Context(), "b", []byte{byte(i)}); err != nil {
				t.Fatal(err)
			}
			out, total := e.arrivals[i].Sub(start), time.Since(start)
			back := total - out
			for _, d := range []time.Duration{out, back} {
				if d < rtt/2 || d >= rtt/2+jitter {
					t.Fatalf("call %d: a one-way trip took %v, want [%v, %v)", i, d, rtt/2, rtt/2+jitter)
				}
				seen[d] = true
			}
		}
		if len(seen) < 100 {
			t.Fatalf("only %d distinct trip times in 400 trips", len(seen))
		}
	})
}

// arrivalOrder sends frame 1 and, 100 µs later, frame 2, from two goroutines, and returns the
// order in which they reached the node.
func arrivalOrder(t *testing.T, seed uint64) []byte {
	var order []byte
	synctest.Test(t, func(t *testing.T) {
		nw := &routertest.Network{RTT: 2 * time.Millisecond, Jitter: 10 * time.Millisecond, Seed: seed}
		var e echo
		nw.Join("b", e.serve)
		var wg sync.WaitGroup
		for _, op := range []byte{1, 2} {
			wg.Go(func() {
				if _, err := nw.Transport("a").Call(context.Background(), "b", []byte{op}); err != nil {
					t.Error(err)
				}
			})
			synctest.Wait() // frame op has left: it waits out its trip
			time.Sleep(100 * time.Microsecond)
		}
		wg.Wait()
		order = e.order
	})
	return order
}

// With jitter, two frames sent in order can arrive reversed, and a seed replays the same run.
func TestNetworkJitterReorders(t *testing.T) {
	reversed, inOrder := -1, -1
	for seed := range uint64(64) {
		order := arrivalOrder(t, seed)
		if again := arrivalOrder(t, seed); string(again) != string(order) {
			t.Fatalf("seed %d: arrivals %v, then %v: not reproducible", seed, order, again)
		}
		switch string(order) {
		case "\x02\x01":
			reversed = int(seed)
		case "\x01\x02":
			inOrder = int(seed)
		default:
			t.Fatalf("seed %d: arrivals %v", seed, order)
		}
	}
	if reversed < 0 || inOrder < 0 {
		t.Fatalf("over 64 seeds: a reversed run at seed %d, an ordered one at %d; want both", reversed, inOrder)
	}
	t.Logf("seed %d reverses the two frames, seed %d keeps their order", reversed, inOrder)
}

// Without jitter, frames sent in order arrive in order, whatever the seed.
func TestNetworkNoJitterKeepsOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		nw := &routertest.Network{RTT: 2 * time.Millisecond, Seed: 3}
		var e echo
		nw.Join("b", e.serve)
		var wg sync.WaitGroup
		for op := range byte(10) {
			wg.Go(func() { nw.Transport("a").Call(t.Context(), "b", []byte{op}) })
			synctest.Wait()
			time.Sleep(time.Microsecond)
		}
		wg.Wait()
		for i, op := range e.order {
			if op != byte(i) {
				t.Fatalf("arrivals %v", e.order)
			}
		}
	})
}

// DropRequest: the node never sees the frame, and the call ends with its context, wrapping
// ErrUnreachable and the context's error; even to a node that is down.
func TestNetworkDropRequest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		nw := &routertest.Network{RTT: 10 * time.Millisecond}
		nw.Fault = func(_, _ string, frame []byte) routertest.Fault {
			if frame[0] == 9 {
				return routertest.DropRequest
			}
			return routertest.Deliver
		}
		var e echo
		nw.Join("b", e.serve)
		nw.Join("c", e.serve)
		nw.SetDown("c", true)
		for _, to := range []string{"b", "c", "nobody"} {
			ctx, cancel := context.WithTimeout(t.Context(), time.Second)
			start := time.Now()
			_, err := nw.Transport("a").Call(ctx, to, []byte{9})
			cancel()
			if !errors.Is(err, routertest.ErrUnreachable) || !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("to %s: %v, want ErrUnreachable and DeadlineExceeded", to, err)
			}
			if got := time.Since(start); got != time.Second {
				t.Fatalf("to %s: the call returned after %v, want its deadline, 1s", to, got)
			}
		}
		if e.served() != 0 {
			t.Fatalf("the node served %d dropped frames", e.served())
		}
		// Another frame goes through.
		if _, err := nw.Transport("a").Call(t.Context(), "b", []byte{1}); err != nil || e.served() != 1 {
			t.Fatalf("a frame not dropped: %v, served %d", err, e.served())
		}

		// A context without a deadline waits until it is cancelled.
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(time.Hour, cancel)
		start := time.Now()
		_, err := nw.Transport("a").Call(ctx, "b", []byte{9})
		if !errors.Is(err, routertest.ErrUnreachable) || !errors.Is(err, context.Canceled) || time.Since(start) != time.Hour {
			t.Fatalf("%v after %v, want ErrUnreachable and Canceled after 1h", err, time.Since(start))
		}
	})
}

// DropReply: the node serves the frame, the reply is lost, and the call ends with its context.
func TestNetworkDropReply(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		nw := &routertest.Network{RTT: 10 * time.Millisecond}
		nw.Fault = func(from, to string, frame []byte) routertest.Fault {
			if from == "a" && to == "b" {
				return routertest.DropReply
			}
			return routertest.Deliver
		}
		var e echo
		nw.Join("b", e.serve)
		nw.Join("a", e.serve)
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		defer cancel()
		start := time.Now()
		reply, err := nw.Transport("a").Call(ctx, "b", []byte{4})
		if reply != nil || !errors.Is(err, routertest.ErrReplyLost) || !errors.Is(err, context.DeadlineExceeded) ||
			errors.Is(err, routertest.ErrUnreachable) {
			t.Fatalf("%q, %v; want ErrReplyLost and DeadlineExceeded", reply, err)
		}
		if time.Since(start) != 2*time.Second {
			t.Fatalf("the call returned after %v, want its deadline, 2s", time.Since(start))
		}
		if e.served() != 1 || e.arrivals[0].Sub(start) != 5*time.Millisecond {
			t.Fatalf("served %d frames (%v), want one after 5ms", e.served(), e.arrivals)
		}
		// The other way round is delivered.
		if reply, err := nw.Transport("b").Call(t.Context(), "a", []byte{5}); err != nil || string(reply) != "re:\x05" {
			t.Fatalf("b to a: %q, %v", reply, err)
		}
	})
}

// A node's error travels back as the call's error; a node down or not joined fails at once.
func TestNetworkSetDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		nw := &routertest.Network{RTT: 10 * time.Millisecond}
		var e echo
		nw.Join("b", e.serve)
		boom := errors.New("boom")
		nw.Join("c", func(context.Context, string, []byte) ([]byte, error) { return nil, boom })
		tr := nw.Transport("a")
		start := time.Now()
		for _, to := range []string{"nobody", "b"} {
			if to == "b" {
				nw.SetDown("b", true)
			}
			if _, err := tr.Call(t.Context(), to, []byte{1}); !errors.Is(err, routertest.ErrUnreachable) {
				t.Fatalf("to %s: %v, want ErrUnreachable", to, err)
			}
		}
		if time.Since(start) != 0 || e.served() != 0 {
			t.Fatalf("unreachable calls took %v and served %d", time.Since(start), e.served())
		}
		nw.SetDown("b", false)
		if _, err := tr.Call(t.Context(), "b", []byte{1}); err != nil || e.served() != 1 {
			t.Fatalf("b back up: %v, served %d", err, e.served())
		}
		if _, err := tr.Call(t.Context(), "c", []byte{1}); !errors.Is(err, boom) {
			t.Fatalf("c: %v, want its error", err)
		}
		// A context that ends during the trip ends the call.
		ctx, cancel := context.WithTimeout(t.Context(), time.Millisecond)
		defer cancel()
		if _, err := tr.Call(ctx, "b", []byte{1}); !errors.Is(err, context.DeadlineExceeded) || e.served() != 1 {
			t.Fatalf("a call whose context ends on the way: %v, served %d", err, e.served())
		}
	})
}

// Observe sees every call, before anything else, whatever becomes of it; Calls and CallsTo
// count them all.
func TestNetworkObserveAndCounts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var events []string
		var mu sync.Mutex
		log := func(s string) {
			mu.Lock()
			defer mu.Unlock()
			events = append(events, s)
		}
		nw := &routertest.Network{RTT: time.Millisecond}
		byOp := map[byte]int{}
		nw.Observe = func(from, to string, frame []byte) {
			log(fmt.Sprintf("observe %s>%s %d", from, to, frame[0]))
			mu.Lock()
			byOp[frame[0]]++
			mu.Unlock()
		}
		nw.Fault = func(from, to string, frame []byte) routertest.Fault {
			log(fmt.Sprintf("fault %s>%s %d", from, to, frame[0]))
			if frame[0] == 3 {
				return routertest.DropRequest
			}
			return routertest.Deliver
		}
		nw.Join("b", func(_ context.Context, from string, frame []byte) ([]byte, error) {
			log(fmt.Sprintf("serve %s>b %d", from, frame[0]))
			return nil, nil
		})
		nw.Join("c", func(context.Context, string, []byte) ([]byte, error) { return nil, nil })
		nw.SetDown("c", true)
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		nw.Transport("a").Call(ctx, "b", []byte{1})
		nw.Transport("a").Call(ctx, "b", []byte{1})
		nw.Transport("a").Call(ctx, "c", []byte{2})
		nw.Transport("b").Call(ctx, "nobody", []byte{2})
		nw.Transport("a").Call(ctx, "b", []byte{3})
		want := []string{
			"observe a>b 1", "fault a>b 1", "serve a>b 1",
			"observe a>b 1", "fault a>b 1", "serve a>b 1",
			"observe a>c 2", "fault a>c 2",
			"observe b>nobody 2", "fault b>nobody 2",
			"observe a>b 3", "fault a>b 3",
		}
		if fmt.Sprint(events) != fmt.Sprint(want) {
			t.Fatalf("events\n%v\nwant\n%v", events, want)
		}
		if byOp[1] != 2 || byOp[2] != 2 || byOp[3] != 1 {
			t.Fatalf("frames by op: %v", byOp)
		}
		if nw.Calls() != 5 || nw.CallsTo("b") != 3 || nw.CallsTo("c") != 1 || nw.CallsTo("nobody") != 1 || nw.CallsTo("a") != 0 {
			t.Fatalf("Calls %d, to b %d, c %d, nobody %d, a %d", nw.Calls(), nw.CallsTo("b"), nw.CallsTo("c"),
				nw.CallsTo("nobody"), nw.CallsTo("a"))
		}
	})
}

// Many nodes calling each other at once, with jitter and every fault, while nodes go down and
// come back (run it with -race): every call is observed, counted and answered.
func TestNetworkConcurrent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		nodes := []string{"a", "b", "c", "d"}
		nw := &routertest.Network{RTT: 2 * time.Millisecond, Jitter: time.Millisecond, Seed: 11}
		var observed, served atomic.Int64
		nw.Observe = func(string, string, []byte) { observed.Add(1) }
		nw.Fault = func(_, _ string, frame []byte) routertest.Fault { return routertest.Fault(frame[0] % 3) }
		for _, id := range nodes {
			nw.Join(id, func(_ context.Context, _ string, frame []byte) ([]byte, error) {
				served.Add(1)
				return frame, nil
			})
		}
		const perNode = 200
		var wg sync.WaitGroup
		var answered, ok atomic.Int64
		for g, from := range nodes {
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(uint64(g), 0))
				for i := range perNode {
					ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
					to := nodes[rng.IntN(len(nodes))]
					_, err := nw.Transport(from).Call(ctx, to, []byte{byte(rng.IntN(256)), byte(i)})
					cancel()
					answered.Add(1)
					if err == nil {
						ok.Add(1)
					}
				}
			})
		}
		wg.Go(func() {
			for i := range 100 {
				nw.SetDown(nodes[i%len(nodes)], i%2 == 0)
				time.Sleep(time.Millisecond)
			}
			for _, id := range nodes {
				nw.SetDown(id, false)
			}
		})
		wg.Wait()
		total := int64(len(nodes) * perNode)
		var to int64
		for _, id := range nodes {
			to += nw.CallsTo(id)
		}
		if answered.Load() != total || observed.Load() != total || nw.Calls() != total || to != total {
			t.Fatalf("%d calls answered, %d observed, Calls %d, CallsTo summed %d; want %d", answered.Load(),
				observed.Load(), nw.Calls(), to, total)
		}
		if ok.Load() == 0 || ok.Load() == total || served.Load() < ok.Load() {
			t.Fatalf("%d calls answered with a reply, %d frames served, of %d", ok.Load(), served.Load(), total)
		}
	})
}

// Duplicate: the node serves the frame twice, each copy after its own trip; the call gets
// one reply, and nothing else changes.
func TestNetworkDuplicate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		nw := &routertest.Network{RTT: 10 * time.Millisecond, Jitter: 4 * time.Millisecond, Seed: 5}
		nw.Fault = func(_, _ string, frame []byte) routertest.Fault {
			if frame[0] == 7 {
				return routertest.Duplicate
			}
			return routertest.Deliver
		}
		var e echo
		nw.Join("b", e.serve)
		var ctxErrs []error // what the frames served by c saw of their context
		nw.Join("c", func(ctx context.Context, from string, frame []byte) ([]byte, error) {
			e.mu.Lock()
			ctxErrs = append(ctxErrs, ctx.Err())
			e.mu.Unlock()
			return e.serve(ctx, from, frame)
		})
		start := time.Now()
		reply, err := nw.Transport("a").Call(t.Context(), "b", []byte{7})
		if err != nil || string(reply) != "re:\x07" {
			t.Fatalf("Call: %q, %v", reply, err)
		}
		if d := time.Since(start); d < 10*time.Millisecond || d >= 18*time.Millisecond {
			t.Fatalf("the round trip took %v", d)
		}
		time.Sleep(time.Second)
		if e.served() != 2 {
			t.Fatalf("served %d copies, want 2", e.served())
		}
		for _, at := range e.arrivals {
			if d := at.Sub(start); d < 5*time.Millisecond || d >= 9*time.Millisecond {
				t.Fatalf("a copy arrived after %v, want [5ms, 9ms)", d)
			}
		}
		// Another op goes once.
		if _, err := nw.Transport("a").Call(t.Context(), "b", []byte{1}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		if e.served() != 3 {
			t.Fatalf("served %d frames, want 3", e.served())
		}
		// The copy outlives the call's context: a call whose context ends on the way fails,
		// and its copy is served all the same, its context live.
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(time.Millisecond, cancel)
		if _, err := nw.Transport("a").Call(ctx, "c", []byte{7}); !errors.Is(err, context.Canceled) {
			t.Fatalf("a call cancelled on its way: %v", err)
		}
		time.Sleep(time.Second)
		if e.served() != 4 || len(ctxErrs) != 1 || ctxErrs[0] != nil {
			t.Fatalf("served %d frames (want 4); c saw context errors %v, want one nil", e.served(), ctxErrs)
		}
		// A copy a partition cuts off on its way is lost, as the frame is.
		go nw.Transport("a").Call(t.Context(), "b", []byte{7})
		time.Sleep(time.Millisecond)
		nw.Partition([]string{"a"}, []string{"b"})
		time.Sleep(time.Second)
		if e.served() != 4 {
			t.Fatalf("served %d frames, want 4: both copies were cut off", e.served())
		}
		if routertest.Duplicate.String() != "Duplicate" {
			t.Fatal(routertest.Duplicate.String())
		}
	})
}

// Partition: frames between groups are lost (the call ends with its context), within a
// group they go through; frames on their way when the partition begins are lost, and so are
// replies on their way back; Heal ends it.
func TestNetworkPartition(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		nw := &routertest.Network{RTT: 10 * time.Millisecond}
		served := map[string]int{}
		var mu sync.Mutex
		for _, id := range []string{"a", "b", "c", "d"} {
			nw.Join(id, func(_ context.Context, _ string, frame []byte) ([]byte, error) {
				mu.Lock()
				defer mu.Unlock()
				served[id]++
				return frame, nil
			})
		}
		call := func(from, to string) (time.Duration, error) {
			ctx, cancel := context.WithTimeout(t.Context(), time.Second)
			defer cancel()
			start := time.Now()
			_, err := nw.Transport(from).Call(ctx, to, []byte{1})
			return time.Since(start), err
		}
		nw.Partition([]string{"a", "b"}, []string{"c"}) // d: a group of its own
		for _, c := range []struct {
			from, to string
			ok       bool
		}{{"a", "b", true}, {"b", "a", true}, {"a", "c", false}, {"c", "b", false}, {"d", "a", false}, {"c", "d", false}} {
			d, err := call(c.from, c.to)
			switch {
			case c.ok && (err != nil || d != 10*time.Millisecond):
				t.Fatalf("%s to %s: %v after %v, want a reply after 10ms", c.from, c.to, err, d)
			case !c.ok && (!errors.Is(err, routertest.ErrUnreachable) || !errors.Is(err, context.DeadlineExceeded) || d != time.Second):
				t.Fatalf("%s to %s: %v after %v, want ErrUnreachable at the deadline", c.from, c.to, err, d)
			}
		}
		if served["c"] != 0 || served["d"] != 0 || served["a"] != 1 || served["b"] != 1 {
			t.Fatalf("served %v", served)
		}
		// Nodes named in no group reach each other.
		nw.Partition([]string{"a"})
		if _, err := call("c", "d"); err != nil {
			t.Fatalf("c to d, both in no group: %v", err)
		}
		if _, err := call("d", "a"); !errors.Is(err, routertest.ErrUnreachable) {
			t.Fatalf("d to a: %v", err)
		}
		// A partition that begins while the frame is on its way loses it.
		nw.Heal()
		errc := make(chan error, 1)
		go func() { _, err := call("a", "b"); errc <- err }()
		time.Sleep(time.Millisecond)
		nw.Partition([]string{"a"}, []string{"b"})
		if err := <-errc; !errors.Is(err, routertest.ErrUnreachable) || served["b"] != 1 {
			t.Fatalf("a frame cut off on its way: %v, b served %d", err, served["b"])
		}
		// One that begins while the reply is on its way loses the reply: the node served it.
		nw.Heal()
		go func() { _, err := call("a", "b"); errc <- err }()
		time.Sleep(7 * time.Millisecond)
		nw.Partition([]string{"a"}, []string{"b"})
		if err := <-errc; !errors.Is(err, routertest.ErrReplyLost) || served["b"] != 2 {
			t.Fatalf("a reply cut off on its way: %v, b served %d", err, served["b"])
		}
		// A node down behind a partition looks like one cut off.
		nw.SetDown("b", true)
		if d, err := call("a", "b"); !errors.Is(err, routertest.ErrUnreachable) || d != time.Second {
			t.Fatalf("a to b, down behind a partition: %v after %v", err, d)
		}
		nw.SetDown("b", false)
		nw.Heal()
		if _, err := call("a", "b"); err != nil || served["b"] != 3 {
			t.Fatalf("after Heal: %v, b served %d", err, served["b"])
		}
	})
}
