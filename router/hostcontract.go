package router

import (
	"fmt"
	"log/slog"
	"maps"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// The node's guard on what the host's seams answer (see seams.go): each answer is checked
// where it enters the node, and a wrong one becomes an error wrapping ErrHostContract, named
// after the seam and the call, before anything is changed on the strength of it. The checks
// on the consume path are comparisons of what was answered anyway (a nil Log, a negative
// watermark, a range longer than asked); whatever costs more (judging the routes, reading
// Oldest beside HighWatermark) runs where the node pays for something slower already, or
// once per answer.

// hostFaults counts what the host's seams did wrong, for Stats.
type hostFaults struct {
	violations atomic.Uint64 // answers refused with ErrHostContract
	panics     atomic.Uint64 // panics of the host's code recovered on the node's goroutines

	mu          sync.Mutex
	panicLogged logLimit // the rate limit of the panic log line, for the whole node
}

// hostFault counts err, a wrong answer of a host's seam about a partition of topic, and logs
// it at most once a minute per partition; it returns err.
func (n *Node) hostFault(topic string, partition int32, err error) error {
	n.faults.violations.Add(1)
	t := n.topic(topic)
	if due, suppressed := t.due(&t.contractLogged, partition, n.clock.Now()); due {
		n.logger.Error("consume: the host broke a seam's contract; the node refuses the answer and serves the rest",
			slog.String("topic", topic), slog.Int("partition", int(partition)),
			slog.Int("suppressed", suppressed), slog.Any("err", err))
	}
	return err
}

// getLog is Logs.Get, with a nil Log and no error refused.
func (n *Node) getLog(topic string, partition int32) (Log, error) {
	log, err := n.logs.Get(topic, partition)
	if err == nil && log == nil {
		return nil, n.nilLog(topic, partition)
	}
	return log, err
}

// nilLog is the error of a Logs.Get that returned a nil Log with no error.
func (n *Node) nilLog(topic string, partition int32) error {
	return n.hostFault(topic, partition, fmt.Errorf("%w: Logs.Get(%q, %d) returned a nil Log and no error",
		ErrHostContract, topic, partition))
}

// nilFromGetMany is the error of a GetMany that left the Log of partition nil with no error.
func (n *Node) nilFromGetMany(topic string, partitions []int32, partition int32) error {
	return n.hostFault(topic, partition, fmt.Errorf("%w: Logs.GetMany(%q, %v) left the Log of partition %d nil and returned no error",
		ErrHostContract, topic, partitions, partition))
}

// negativeWatermark is the error of a Log whose HighWatermark is below zero: read alone on
// the consume path, where reading Oldest beside it would cost another call per consume.
func (n *Node) negativeWatermark(topic string, partition int32, hwm int64) error {
	return n.hostFault(topic, partition, fmt.Errorf("%w: Log.HighWatermark() of %s/%d returned %d, below zero",
		ErrHostContract, topic, partition, hwm))
}

// checkWatermarks refuses a Log's Oldest and HighWatermark, read in that order (so that a
// log keeping its contract always passes: neither ever decreases), when either is negative
// or the high watermark is below the oldest offset.
func (n *Node) checkWatermarks(topic string, partition int32, oldest, hwm int64) error {
	switch {
	case oldest < 0:
		return n.hostFault(topic, partition, fmt.Errorf("%w: Log.Oldest() of %s/%d returned %d, below zero",
			ErrHostContract, topic, partition, oldest))
	case hwm < oldest:
		return n.hostFault(topic, partition, fmt.Errorf("%w: Log.HighWatermark() of %s/%d returned %d, below Log.Oldest() %d",
			ErrHostContract, topic, partition, hwm, oldest))
	}
	return nil
}

// checkRetentionMiss refuses a Read of offset that answered ErrNotFound (below retention)
// when the log's Oldest, read after it, says otherwise: at or below offset, the record is
// retained; past the high watermark (read last), a jump there would pass over records not
// written yet. Either would move the frontier on the host's word alone.
func (n *Node) checkRetentionMiss(topic string, partition int32, offset, oldest int64, log Log) error {
	if oldest <= offset {
		return n.hostFault(topic, partition, fmt.Errorf("%w: Log.Read(%d) of %s/%d returned ErrNotFound, yet Log.Oldest() returned %d",
			ErrHostContract, offset, topic, partition, oldest))
	}
	if hwm := log.HighWatermark(); oldest > hwm {
		return n.hostFault(topic, partition, fmt.Errorf("%w: Log.Oldest() of %s/%d returned %d, above Log.HighWatermark() %d",
			ErrHostContract, topic, partition, oldest, hwm))
	}
	return nil
}

// overlongRange is the error of a ReadRange that returned more records than it was asked for.
func (n *Node) overlongRange(topic string, partition int32, offset int64, asked, maxBytes, got int) error {
	return n.hostFault(topic, partition, fmt.Errorf("%w: RangeReader.ReadRange(%d, %d, %d) of %s/%d returned %d records",
		ErrHostContract, offset, asked, maxBytes, topic, partition, got))
}

// nameless is the error of an OwnerFinder that named the owner of a partition "".
func (n *Node) nameless(topic string, partition int32) error {
	return n.hostFault(topic, partition, fmt.Errorf("%w: OwnerFinder.Owner(%q, %d) named the owner \"\"",
		ErrHostContract, topic, partition))
}

// routesVerdict is what the node found wrong in one answer of Routes.Partitions: the
// partitions it names wrongly, each with why. It keeps the answer it judged, to know it
// again: Routes never changes what it returned, so the same local slice and remote map are
// the same answer, and the next call that returns them costs an atomic load and two
// comparisons.
type routesVerdict struct {
	local    []int32
	remote   map[string][]int32
	bad      map[int32]error // nil: the answer is sound
	refusing *routesVerdict  // itself when bad is not nil, else nil: what callers are handed
}

// refuses returns the error of a partition the routes named wrongly, or nil; nil v (a sound
// answer) refuses nothing.
func (v *routesVerdict) refuses(partition int32) error {
	if v == nil {
		return nil
	}
	return v.bad[partition]
}

// judges reports whether v is the verdict on the answer local, remote.
func (v *routesVerdict) judges(local []int32, remote map[string][]int32) bool {
	return sameSlice(v.local, local) && sameMap(v.remote, remote)
}

func sameSlice(a, b []int32) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

func sameMap(a, b map[string][]int32) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b) // no remote partitions, nil or not: the same answer
	}
	// A map value is one pointer to the map's header: the same pointer, the same map. Read
	// as reflect.Value.UnsafePointer reads it, without reflect's calls (every consume and
	// forwarded settle of a topic with remote partitions asks).
	return *(*unsafe.Pointer)(unsafe.Pointer(&a)) == *(*unsafe.Pointer)(unsafe.Pointer(&b))
}

// partitions is Routes.Partitions with the node's verdict on the answer (nil when sound).
func (n *Node) partitions(topic string) (local []int32, remote map[string][]int32, ok bool, verdict *routesVerdict) {
	r := n.readRoutes(topic)
	return r.local, r.remote, r.ok, r.verdict
}

// routesRead is one answer of Routes.Partitions for a topic, with the node's verdict on it
// (nil when sound) and the topic's state when judging it looked that up (nil otherwise).
type routesRead struct {
	local   []int32
	remote  map[string][]int32
	ok      bool
	verdict *routesVerdict
	state   *topicState
}

// readRoutes is partitions, as a routesRead.
func (n *Node) readRoutes(topic string) (r routesRead) {
	r.local, r.remote, r.ok = n.routes.Partitions(topic)
	if !r.ok {
		return r
	}
	if len(r.local) > 1 || len(r.remote) > 0 { // what judgeRoutes would look it up for
		r.state = n.topic(topic)
	}
	r.verdict = n.judgeRoutes(r.state, topic, r.local, r.remote)
	return r
}

// judgeRoutes returns the verdict on an answer of Routes.Partitions for topic (nil when it is
// sound), judging it only if it is not the answer judged last; t is the topic's state, when
// the caller has it (nil: looked up here, if needed).
func (n *Node) judgeRoutes(t *topicState, topic string, local []int32, remote map[string][]int32) *routesVerdict {
	if t == nil && len(local) > 1 {
		t = n.topic(topic)
	}
	if verdict, known := t.judged(local, remote); known {
		return verdict
	}
	return n.judgeRoutesOf(t, topic, local, remote)
}

// judged is judgeRoutes's answer where it needs no judging, small enough for the consume
// path to inline: an answer of at most one partition, all local, or the answer judged last
// when it names no other node. known is false otherwise. t may be nil only for an answer of
// at most one partition.
func (t *topicState) judged(local []int32, remote map[string][]int32) (verdict *routesVerdict, known bool) {
	switch {
	case len(remote) != 0:
		return nil, false
	case len(local) <= 1:
		return nil, len(local) == 0 || local[0] >= 0
	}
	if last := t.routes.Load(); last.remote == nil && sameSlice(last.local, local) {
		return last.refusing, true
	}
	return nil, false
}

// judgeRoutesOf is judgeRoutes past judged.
func (n *Node) judgeRoutesOf(t *topicState, topic string, local []int32, remote map[string][]int32) *routesVerdict {
	if len(remote) == 0 && (len(local) == 0 || len(local) == 1 && local[0] >= 0) {
		return nil
	}
	if t == nil {
		t = n.topic(topic)
	}
	last := t.routes.Load()
	if last.judges(local, remote) {
		return last.refusing
	}
	next := &routesVerdict{local: local, bad: wrongPartitions(topic, local, remote)}
	if len(remote) != 0 {
		next.remote = remote // else nil, for judged
	}
	if next.bad != nil {
		next.refusing = next
	}
	if !t.routes.CompareAndSwap(last, next) {
		// Another call stored its verdict meanwhile, most likely on this same answer: it
		// counted and logged it.
		return next.refusing
	}
	for _, p := range slices.Sorted(maps.Keys(next.bad)) {
		n.hostFault(topic, p, next.bad[p])
	}
	return next.refusing
}

// wrongPartitions finds the partitions an answer of Routes.Partitions for topic names wrongly:
// negative ones, and those it names more than once (twice as local, here and on another
// node, on two other nodes), or under an owner named "".
func wrongPartitions(topic string, local []int32, remote map[string][]int32) map[int32]error {
	var bad map[int32]error
	refuse := func(p int32, format string, args ...any) {
		if _, ok := bad[p]; ok {
			return
		}
		if bad == nil {
			bad = map[int32]error{}
		}
		bad[p] = fmt.Errorf("%w: Routes.Partitions(%q) "+format, append([]any{ErrHostContract, topic}, args...)...)
	}
	const here = "\x00this node" // no owner's name: a name is never checked against it
	owners := make(map[int32]string, len(local))
	name := func(owner string) string {
		if owner == here {
			return "this node"
		}
		return fmt.Sprintf("%q", owner)
	}
	place := func(p int32, owner string) {
		prev, seen := owners[p]
		switch {
		case p < 0:
			refuse(p, "named partition %d for %s: partitions are never negative", p, name(owner))
		case owner == "":
			refuse(p, "named the owner of partition %d \"\"", p)
		case seen && prev == owner:
			refuse(p, "named partition %d twice for %s", p, name(owner))
		case seen:
			refuse(p, "named partition %d for both %s and %s", p, name(prev), name(owner))
		}
		owners[p] = owner
	}
	for _, p := range local {
		place(p, here)
	}
	for _, owner := range slices.Sorted(maps.Keys(remote)) { // the same answer, the same errors
		for _, p := range remote[owner] {
			place(p, owner)
		}
	}
	return bad
}

// recoverHostPanic, deferred at a boundary where the node runs the host's code on a
// goroutine no caller of the host's can recover (see seams.go), recovers a panic: it is
// counted (Stats.HostPanics) and logged with its stack at most once a minute, and, when
// into is not nil, becomes the error stored there, wrapping ErrHostContract and naming
// where it happened and about what (a topic, a peer).
func (n *Node) recoverHostPanic(where, about string, into *error) {
	r := recover()
	if r == nil {
		return
	}
	err := fmt.Errorf("%w: a panic in the host's code, %s (%s): %v", ErrHostContract, where, about, r)
	if into != nil {
		*into = err
	}
	n.faults.panics.Add(1)
	f := &n.faults
	now := n.clock.Now()
	f.mu.Lock()
	due := f.panicLogged.last.IsZero() || now.Sub(f.panicLogged.last) >= time.Minute
	suppressed := f.panicLogged.suppressed
	if due {
		f.panicLogged = logLimit{last: now}
	} else {
		f.panicLogged.suppressed++
	}
	f.mu.Unlock()
	if due {
		n.logger.Error("consume: recovered a panic in the host's code on a goroutine of the node",
			slog.String("where", where), slog.String("about", about), slog.Any("panic", r), slog.Int("suppressed", suppressed),
			slog.String("stack", string(debug.Stack())))
	}
}
