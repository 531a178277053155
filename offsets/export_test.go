package offsets

import "time"

// Knobs and views for the external tests (crash sweeps, rapid), which cannot see inside.

// SetLevelInterval shortens the 30 s levelling interval so short workloads level.
func SetLevelInterval(c *Committer, d time.Duration) { c.levelEvery = d }

// SetOpenHook runs f inside the open-then-check window of primes, levellings and reopens.
func SetOpenHook(c *Committer, f func(dir string)) { c.hookOpened = f }

// Floor is what a crash must not undercut for one partition (invariant I2): the frontier known
// durable (the anchor, a levelled consumer.offset), the one in the page cache (adds the last
// window written), and the anchor slot when it holds a record.
type Floor struct {
	Primed     bool
	Durable    int64
	PageCache  int64
	AnchorSlot int // -1 when the anchor holds nothing
}

// Floors reads the committer's view of a partition. Call it between ticks.
func Floors(c *Committer, topic string, partition int32) Floor {
	c.markMu.Lock()
	p := c.lookup(key{topic, partition})
	c.markMu.Unlock()
	if p == nil || !p.primed || p.stranded {
		return Floor{Durable: -1, PageCache: -1, AnchorSlot: -1}
	}
	fl := Floor{Primed: true, Durable: -1, AnchorSlot: -1}
	if p.hasAnchor {
		fl.Durable, fl.AnchorSlot = p.anchorFrontier, p.anchor
	}
	if p.levelledOK {
		fl.Durable = max(fl.Durable, p.levelled)
	}
	fl.PageCache = max(fl.Durable, p.windowFrontier)
	return fl
}

// Stranded reports whether the committer holds the partition stranded.
func Stranded(c *Committer, topic string, partition int32) bool {
	c.markMu.Lock()
	defer c.markMu.Unlock()
	p := c.lookup(key{topic, partition})
	return p != nil && p.stranded
}

// Known reports whether the committer holds any state for the partition.
func Known(c *Committer, topic string, partition int32) bool {
	c.markMu.Lock()
	defer c.markMu.Unlock()
	return c.lookup(key{topic, partition}) != nil
}

// Waiters reports how many Durable calls wait on the partition.
func Waiters(c *Committer, topic string, partition int32) int {
	c.markMu.Lock()
	defer c.markMu.Unlock()
	p := c.lookup(key{topic, partition})
	if p == nil {
		return 0
	}
	return len(p.waiters)
}

// Turn reports the tick number modulo the ticks per interval at which the partition is written
// out on its turn, and the number the next tick will have.
func Turn(c *Committer, topic string, partition int32) (turn, next uint64) {
	c.tickMu.Lock()
	defer c.tickMu.Unlock()
	return uint64(PartitionKey(topic, partition)) % c.turns, (c.tickNo + 1) % c.turns
}

// EncodeIDForTest writes a consumer.id that adopted nothing, for the external tests' fuzz seeds.
func EncodeIDForTest(dst []byte, key uint32, incarnation uint64) {
	encodeID(dst, key, identity{incarnation: incarnation})
}

// EncodeAdoptedIDForTest writes a consumer.id whose incarnation adopted legacy state at its
// upgrade: the frontier, and the legacy slot (nil for none) whose record it took. It returns
// the file's size.
func EncodeAdoptedIDForTest(dst []byte, key uint32, incarnation uint64, frontier int64, slot []byte) int {
	return encodeID(dst, key, identity{incarnation: incarnation, adopted: adoptionOf(frontier, slot)})
}

// EncodeBoundIDForTest writes a consumer.id bound to the host incarnation host, adopting
// legacy state when adopted (frontier and slot as in EncodeAdoptedIDForTest). It returns the
// file's size.
func EncodeBoundIDForTest(dst []byte, key uint32, incarnation, host uint64, adopted bool, frontier int64, slot []byte) int {
	id := identity{incarnation: incarnation, host: host}
	if adopted {
		id.adopted = adoptionOf(frontier, slot)
	}
	return encodeID(dst, key, id)
}

// IDAdoptsLegacy reports whether b is a valid consumer.id of the partition whose incarnation
// adopted legacy state, and the frontier it adopted.
func IDAdoptsLegacy(b []byte, topic string, partition int32) (bool, int64) {
	id, err := decodeID(b, PartitionKey(topic, partition))
	return err == nil && id.adopted.legacy, id.adopted.frontier
}

// OffsetFrontier decodes a consumer.offset of either form for the partition: its frontier, or
// false when the bytes are not a valid file of the partition.
func OffsetFrontier(b []byte, topic string, partition int32) (int64, bool) {
	o, err := decodeOffset(b, PartitionKey(topic, partition))
	return o.frontier, err == nil
}

// RunsOf and OffsetsOf convert between ascending offsets and runs (State.Ahead);
// RunsContain looks an offset up in runs.
var RunsOf, OffsetsOf, RunsContain = runsOf, offsetsOf, runsContain
