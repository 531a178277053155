package cancelmemory

import (
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"narad.dev/consume/inflight"
)

var cancelEpoch = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// ttl is the TTL the tests hold replies for: router's (ProbeBudget + the Cancel's budget +
// half a second), so the benchmarks measure the memory at the size a node holds.
const ttl = 3 * time.Second

func cancelHandles(offsets ...int64) []inflight.Handle {
	out := make([]inflight.Handle, len(offsets))
	for i, off := range offsets {
		out[i] = inflight.Handle{Partition: 1, Offset: off, Nonce: uint64(off)*7 + 1}
	}
	return out
}

// checkCancelMemory checks the memory's own bookkeeping: every reply held is in the queue,
// has its entry and is found through the index; the head never passed half of the queue
// without a compaction; the index tables are at most half full.
func checkCancelMemory(t interface{ Fatalf(string, ...any) }, m *Memory) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.ready {
		return
	}
	mask := uint64(len(m.entries) - 1)
	if len(m.entries)&int(mask) != 0 || len(m.queue)-m.head > len(m.entries) {
		t.Fatalf("a ring of %d entries for %d queued", len(m.entries), len(m.queue)-m.head)
	}
	live := 0
	for i := m.head; i < len(m.queue); i++ {
		d := m.queue[i]
		if d == spent {
			continue
		}
		live++
		seq := m.base + uint64(i)
		e := m.entries[seq&mask]
		if e.handles == nil {
			t.Fatalf("reply %d held without its entry", seq)
		}
		if d <= m.clock {
			t.Fatalf("reply %d held past its deadline", seq)
		}
		found := m.lookup(m.prev, e.from, e.id, m.lookup(m.cur, e.from, e.id, nil))
		if !slices.Contains(found, seq) {
			t.Fatalf("reply %d (%s, %d) is not found through the index (%v)", seq, e.from, e.id, found)
		}
	}
	if live != m.count {
		t.Fatalf("%d replies queued, count %d", live, m.count)
	}
	if m.head != 0 && 2*m.head >= len(m.queue) {
		t.Fatalf("head %d passed half of a queue of %d without a compaction", m.head, len(m.queue))
	}
	for name, table := range map[string][]uint32{"cur": m.cur, "prev": m.prev} {
		n := 0
		for _, e := range table {
			if e != 0 {
				n++
			}
		}
		if len(table)&(len(table)-1) != 0 || 2*n > len(table) || (name == "cur" && n != m.curN) {
			t.Fatalf("index %s: %d entries in %d places (curN %d)", name, n, len(table), m.curN)
		}
	}
}

func TestCancelMemoryTable(t *testing.T) {
	type op struct {
		at      time.Duration // since cancelEpoch
		take    bool          // take, else remember
		from    string
		id      uint64
		topic   string  // remember: the request's topic; take: the one wanted
		handles []int64 // remember: the offsets; take: the offsets wanted (nil: not held)
	}
	rem := func(at time.Duration, from string, id uint64, topic string, offs ...int64) op {
		return op{at: at, from: from, id: id, topic: topic, handles: offs}
	}
	take := func(at time.Duration, from string, id uint64, topic string, offs ...int64) op {
		return op{at: at, take: true, from: from, id: id, topic: topic, handles: offs}
	}
	for _, tc := range []struct {
		name    string
		ops     []op
		wantLen int
	}{
		{"remember then take", []op{rem(0, "a", 1, "orders", 10, 11), take(time.Second, "a", 1, "orders", 10, 11)}, 0},
		{"take just before the TTL", []op{rem(0, "a", 1, "orders", 10), take(ttl-1, "a", 1, "orders", 10)}, 0},
		{"take at exactly the TTL", []op{rem(0, "a", 1, "orders", 10), take(ttl, "a", 1, "")}, 0},
		{"take after the TTL", []op{rem(0, "a", 1, "orders", 10), take(time.Hour, "a", 1, "")}, 0},
		{"take twice", []op{rem(0, "a", 1, "orders", 10), take(0, "a", 1, "orders", 10), take(0, "a", 1, "")}, 0},
		{"take what was never remembered", []op{rem(0, "a", 1, "orders", 10), take(0, "a", 2, ""), take(0, "b", 1, "")}, 1},
		{"same id from two nodes", []op{
			rem(0, "a", 7, "orders", 1), rem(0, "b", 7, "orders", 2),
			take(time.Millisecond, "b", 7, "orders", 2), take(time.Millisecond, "a", 7, "orders", 1),
		}, 0},
		{"same id from two nodes, one taken", []op{
			rem(0, "a", 7, "orders", 1), rem(0, "b", 7, "audit", 2), take(0, "a", 7, "orders", 1),
		}, 1},
		{"a reply with no records is not remembered", []op{rem(0, "a", 1, "orders"), take(0, "a", 1, "")}, 0},
		{"expired on the way by a remember at exactly the TTL", []op{
			rem(0, "a", 1, "orders", 1), rem(time.Second, "a", 2, "orders", 2), rem(ttl, "a", 3, "orders", 3),
		}, 2},
		{"expired on the way by a take", []op{
			rem(0, "a", 1, "orders", 1), rem(time.Second, "a", 2, "orders", 2), take(ttl+time.Second, "a", 9, ""),
		}, 0},
		{"two replies to a request are taken together", []op{
			rem(0, "a", 1, "orders", 1, 2), rem(time.Second, "a", 1, "orders", 3),
			take(time.Second, "a", 1, "orders", 1, 2, 3), take(time.Second, "a", 1, ""),
		}, 0},
		{"each reply to a request lives its own TTL", []op{
			rem(0, "a", 1, "orders", 1, 2), rem(time.Second, "a", 1, "orders", 3),
			take(ttl, "a", 1, "orders", 3),
		}, 0},
		{"replies naming two topics: the newest's", []op{
			rem(0, "a", 1, "orders", 1), rem(0, "a", 1, "audit", 2), rem(0, "a", 1, "orders", 3),
			take(time.Second, "a", 1, "orders", 1, 3),
		}, 0},
		{"a clock stepped back keeps an entry longer, never shorter", []op{
			rem(time.Hour, "a", 1, "orders", 1), rem(0, "a", 2, "orders", 2),
			take(ttl, "a", 2, "orders", 2), take(time.Hour+ttl-1, "a", 1, "orders", 1),
		}, 0},
		{"a clock stepped back: the clamped deadline still ends", []op{
			rem(time.Hour, "a", 1, "orders", 1), rem(0, "a", 2, "orders", 2), take(time.Hour+ttl, "a", 2, ""),
		}, 0},
		{"a take moves the clock too", []op{
			rem(0, "a", 1, "orders", 1), take(ttl, "b", 1, ""), take(0, "a", 1, ""),
		}, 0},
		{"the index outlives an epoch", []op{
			rem(0, "a", 1, "orders", 1), rem(ttl-1, "a", 2, "orders", 2), rem(ttl+time.Second, "a", 3, "orders", 3),
			take(2*ttl-2, "a", 2, "orders", 2), take(2*ttl-2, "a", 3, "orders", 3),
		}, 0},
		{"a long silence", []op{
			rem(0, "a", 1, "orders", 1), rem(10*ttl, "a", 2, "orders", 2), take(10*ttl, "a", 1, ""),
			take(11*ttl-1, "a", 2, "orders", 2),
		}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := New(ttl)
			for i, o := range tc.ops {
				now := cancelEpoch.Add(o.at)
				if !o.take {
					m.Remember(o.from, o.id, o.topic, cancelHandles(o.handles...), now)
				} else {
					topic, got, ok := m.Take(o.from, o.id, now)
					if ok != (o.handles != nil) || topic != o.topic || !slices.Equal(got, cancelHandles(o.handles...)) {
						t.Fatalf("op %d: take(%s, %d) = %q, %v, %v; want %q, %v", i, o.from, o.id, topic, got, ok, o.topic, cancelHandles(o.handles...))
					}
				}
				checkCancelMemory(t, m)
			}
			if got := m.len(); got != tc.wantLen {
				t.Fatalf("len %d, want %d", got, tc.wantLen)
			}
		})
	}
}

// TestCancelMemoryCompactsAtHalf: expiry moves the head over the replies it forgets and moves
// nothing else until the head has passed half of the queue.
func TestCancelMemoryCompactsAtHalf(t *testing.T) {
	m := New(ttl)
	for i := range 10 {
		m.Remember("a", uint64(i), "orders", cancelHandles(int64(i)), cancelEpoch.Add(time.Duration(i)*time.Millisecond))
	}
	m.Take("a", 3, cancelEpoch) // spent in the middle
	tick := func(at time.Duration) { m.Take("x", 0, cancelEpoch.Add(at)) }
	tick(ttl + 2*time.Millisecond) // forgets 0, 1, 2; passes 3
	if m.head != 4 || len(m.queue) != 10 || m.len() != 6 {
		t.Fatalf("head %d, queue %d, len %d; want 4, 10, 6", m.head, len(m.queue), m.len())
	}
	tick(ttl + 4*time.Millisecond) // forgets 4: the head passed half
	if m.head != 0 || len(m.queue) != 5 || m.len() != 5 || m.base != 5 {
		t.Fatalf("head %d, queue %d, len %d, base %d; want 0, 5, 5, 5", m.head, len(m.queue), m.len(), m.base)
	}
	checkCancelMemory(t, m)
	for i := 5; i < 10; i++ {
		if _, got, ok := m.Take("a", uint64(i), cancelEpoch.Add(ttl+4*time.Millisecond)); !ok || got[0].Offset != int64(i) {
			t.Fatalf("take(%d) = %v, %v after the compaction", i, got, ok)
		}
	}
}

// TestCancelMemoryLetsGoOfABurst: once a burst's entries are all spent, the memory does not
// keep the burst's queue and map.
func TestCancelMemoryLetsGoOfABurst(t *testing.T) {
	m := New(ttl)
	now := cancelEpoch
	for i := range 100_000 {
		m.Remember("a", uint64(i), "orders", cancelHandles(int64(i)), now)
		now = now.Add(time.Microsecond)
	}
	if m.len() != 100_000 {
		t.Fatalf("len %d, want 100000", m.len())
	}
	now = now.Add(ttl)
	m.Remember("a", 1e9, "orders", cancelHandles(1), now)
	checkCancelMemory(t, m)
	if m.len() != 1 || cap(m.queue) > keepSize || len(m.entries) > keepSize {
		t.Fatalf("after the burst: len %d, queue capacity %d, entries %d", m.len(), cap(m.queue), len(m.entries))
	}
	// The index lets go of the burst within two epochs.
	now = now.Add(ttl)
	m.Remember("a", 1e9+1, "orders", cancelHandles(1), now)
	now = now.Add(ttl)
	m.Remember("a", 1e9+2, "orders", cancelHandles(1), now)
	if len(m.cur)+len(m.prev) > 2*keepSize {
		t.Fatalf("after the burst: index tables of %d and %d places", len(m.cur), len(m.prev))
	}
	// A burst whose last entries outlive it: the compaction that moves them to the front
	// keeps room for what is held, not for the burst.
	for i := range 50_000 {
		m.Remember("a", uint64(i), "orders", cancelHandles(int64(i)), now)
	}
	now = now.Add(ttl - time.Millisecond)
	for i := range 10 {
		m.Remember("b", uint64(i), "orders", cancelHandles(int64(i)), now)
	}
	now = now.Add(time.Millisecond)
	m.Remember("c", 1, "orders", cancelHandles(1), now)
	checkCancelMemory(t, m)
	if m.len() != 11 || cap(m.queue) > 64 || len(m.entries) > 64 {
		t.Fatalf("after the second burst: len %d, queue capacity %d, entries %d", m.len(), cap(m.queue), len(m.entries))
	}
}

// TestCancelMemoryConcurrent: remember and take from many goroutines (run it with -race).
func TestCancelMemoryConcurrent(t *testing.T) {
	m := New(ttl)
	var wg sync.WaitGroup
	for g := range 8 {
		from := fmt.Sprintf("node-%d", g)
		wg.Go(func() {
			now := cancelEpoch
			for i := range 2000 {
				m.Remember(from, uint64(i), "orders", cancelHandles(int64(i)), now)
				if i%3 == 0 {
					if _, got, ok := m.Take(from, uint64(i), now); !ok || got[0].Offset != int64(i) {
						t.Errorf("%s: take(%d) = %v, %v", from, i, got, ok)
					}
				}
				now = now.Add(time.Millisecond)
			}
		})
	}
	wg.Wait()
	checkCancelMemory(t, m)
	// Each goroutine's clock runs under 2 s (less than ttl), and the memory's is the latest of them: nothing
	// expired, and only the takes removed replies.
	if got, want := m.len(), 8*(2000-667); got != want {
		t.Fatalf("len %d, want the %d remembered and not taken", got, want)
	}
}

// The model: the replies held, in the order they were remembered, each with its deadline, and
// the rules written the obvious way.

type cancelModelKey struct {
	from string
	id   uint64
}

type cancelModelReply struct {
	key      cancelModelKey
	topic    string
	handles  []inflight.Handle
	deadline time.Time
}

type cancelMachine struct {
	m       *Memory
	replies []cancelModelReply
	ready   bool      // a reply was remembered: the memory's clock runs
	clock   time.Time // the latest now given since
	now     time.Time
	next    int64 // the next offset, so every handle remembered is distinct
}

// tick moves the model's clock and forgets the replies whose deadline has come.
func (cm *cancelMachine) tick() {
	if cm.now.After(cm.clock) {
		cm.clock = cm.now
	}
	cm.replies = slices.DeleteFunc(cm.replies, func(r cancelModelReply) bool { return !cm.clock.Before(r.deadline) })
}

func (cm *cancelMachine) key(t *rapid.T) cancelModelKey {
	return cancelModelKey{
		from: rapid.SampledFrom([]string{"a", "b", "c"}).Draw(t, "from"),
		id:   rapid.Uint64Range(0, 5).Draw(t, "id"),
	}
}

func (cm *cancelMachine) remember(t *rapid.T) {
	k := cm.key(t)
	topic := rapid.SampledFrom([]string{"orders", "audit"}).Draw(t, "topic")
	n := rapid.IntRange(0, 3).Draw(t, "handles")
	handles := make([]inflight.Handle, n)
	for i := range handles {
		handles[i] = inflight.Handle{Offset: cm.next, Nonce: uint64(cm.next) ^ 0x5555}
		cm.next++
	}
	want := slices.Clone(handles)
	cm.m.Remember(k.from, k.id, topic, handles, cm.now)
	if n == 0 {
		return
	}
	if !cm.ready {
		cm.ready, cm.clock = true, cm.now
	}
	cm.tick()
	cm.replies = append(cm.replies, cancelModelReply{key: k, topic: topic, handles: want, deadline: cm.clock.Add(ttl)})
}

func (cm *cancelMachine) take(t *rapid.T) {
	k := cm.key(t)
	topic, handles, ok := cm.m.Take(k.from, k.id, cm.now)
	var wantTopic string
	var want []inflight.Handle
	if cm.ready {
		cm.tick()
		for _, r := range cm.replies {
			if r.key == k {
				wantTopic = r.topic
			}
		}
		for _, r := range cm.replies {
			if r.key == k && r.topic == wantTopic {
				want = append(want, r.handles...)
			}
		}
		cm.replies = slices.DeleteFunc(cm.replies, func(r cancelModelReply) bool { return r.key == k })
	}
	if ok != (want != nil) || topic != wantTopic || !slices.Equal(handles, want) {
		t.Fatalf("take(%s, %d) at +%v = %q, %v, %v; model %q, %v",
			k.from, k.id, cm.now.Sub(cancelEpoch), topic, handles, ok, wantTopic, want)
	}
}

func (cm *cancelMachine) advanceTime(t *rapid.T) {
	step := rapid.SampledFrom([]time.Duration{
		0, time.Nanosecond, 500 * time.Millisecond, ttl - 1, ttl, 3 * time.Second, 5 * ttl,
	}).Draw(t, "step")
	cm.now = cm.now.Add(step)
}

// stepBack moves the clock back, as a host's clock can be.
func (cm *cancelMachine) stepBack(t *rapid.T) {
	cm.now = cm.now.Add(-rapid.SampledFrom([]time.Duration{time.Second, ttl, time.Hour}).Draw(t, "back"))
}

// burst remembers many replies at once, so that the queue, the ring and the index grow and
// compact.
func (cm *cancelMachine) burst(t *rapid.T) {
	n := rapid.IntRange(1, 200).Draw(t, "burst")
	from := rapid.SampledFrom([]string{"a", "b", "c"}).Draw(t, "burstFrom")
	for i := range n {
		h := inflight.Handle{Offset: cm.next}
		cm.next++
		cm.m.Remember(from, uint64(1000+i), "orders", []inflight.Handle{h}, cm.now)
		if !cm.ready {
			cm.ready, cm.clock = true, cm.now
		}
		cm.tick()
		cm.replies = append(cm.replies, cancelModelReply{key: cancelModelKey{from, uint64(1000 + i)}, topic: "orders",
			handles: []inflight.Handle{h}, deadline: cm.clock.Add(ttl)})
	}
}

func (cm *cancelMachine) check(t *rapid.T) {
	if got, want := cm.m.len(), len(cm.replies); got != want {
		t.Fatalf("len %d, model %d", got, want)
	}
	checkCancelMemory(t, cm.m)
}

func TestCancelMemoryAgainstModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cm := &cancelMachine{m: New(ttl), now: cancelEpoch}
		// Sequence numbers that cross 2^32, where the index's 32 bits wrap.
		cm.m.base = rapid.SampledFrom([]uint64{0, math.MaxUint32 - 40}).Draw(t, "base")
		t.Repeat(map[string]func(*rapid.T){
			"remember":    cm.remember,
			"take":        cm.take,
			"advanceTime": cm.advanceTime,
			"stepBack":    cm.stepBack,
			"burst":       cm.burst,
			"":            cm.check,
		})
	})
}

// BenchmarkCancelMemory: an owner answering 50,000 forwarded consumes a second, on a simulated
// clock (20 µs per delivery, so 50,000 entries per second of ttl are held at
// steady state: 150,000 at 3 s), each reply
// carrying one record, and one request in a hundred cancelled. An op is one delivery.
//
// The memory owns the handles it is given, so each reply needs a slice of its own; they are
// cut from a ring allocated up front, far larger than what is held, so that the allocations
// reported are the memory's own (a node builds that slice for its reply anyway).
func BenchmarkCancelMemory(b *testing.B) {
	const (
		perDelivery = 20 * time.Microsecond
		ring        = 1 << 19 // > 2 TTLs of deliveries: a slot is reused long after it expired
	)
	froms := []string{"node-1", "node-2", "node-3", "node-4"}
	handles := make([]inflight.Handle, ring)
	for i := range handles {
		handles[i] = inflight.Handle{Partition: int32(i % 12), Offset: int64(i), Nonce: uint64(i)*0x9E3779B97F4A7C15 | 1}
	}
	m := New(ttl)
	now := cancelEpoch
	var i uint64
	deliver := func() {
		j := i % ring
		m.Remember(froms[i%4], i, "orders", handles[j:j+1:j+1], now)
		if i%100 == 99 {
			// A cancel of a request answered 50 deliveries ago: it is held.
			if _, _, ok := m.Take(froms[(i-50)%4], i-50, now); !ok {
				b.Fatalf("request %d not held", i-50)
			}
		}
		now = now.Add(perDelivery)
		i++
	}
	// Reach steady state first: two TTLs of deliveries.
	for range 2 * int(ttl/perDelivery) {
		deliver()
	}
	held := m.len()
	start := i
	b.ReportAllocs()
	for b.Loop() {
		deliver()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(i-start), "ns/delivery")
	b.ReportMetric(float64(held), "held")
}

// BenchmarkCancelMemoryBuiltinMap is the floor a Go map sets for the same load: per delivery,
// one insert into a map keyed by (node, request id) and one delete of the key remembered
// ttl before, as many keys held, on the same simulated clock; no queue, no handles.
func BenchmarkCancelMemoryBuiltinMap(b *testing.B) {
	const perDelivery = 20 * time.Microsecond
	const held = uint64(ttl / perDelivery)
	froms := []string{"node-1", "node-2", "node-3", "node-4"}
	m := map[cancelModelKey]int64{}
	now := cancelEpoch
	var i uint64
	deliver := func() {
		m[cancelModelKey{froms[i%4], i}] = now.UnixNano()
		if i >= held {
			delete(m, cancelModelKey{froms[(i-held)%4], i - held})
		}
		now = now.Add(perDelivery)
		i++
	}
	for range 2 * held {
		deliver()
	}
	b.ReportAllocs()
	for b.Loop() {
		deliver()
	}
	b.ReportMetric(float64(len(m)), "held")
}
