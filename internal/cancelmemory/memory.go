package cancelmemory

import (
	"hash/maphash"
	"math"
	"math/bits"
	"slices"
	"sync"
	"time"

	"narad.dev/consume/inflight"
)

// Memory is the owner's memory of the replies it sent to other nodes' consumes: for each
// reply, the requesting node, its request id, the topic and the receipt handles, held for the
// TTL given to New. See the package doc for why and how.
//
// Every call costs O(1) amortized, and nothing is allocated per reply once the memory has
// grown to its working size. Three structures share the work, each touched once per reply:
//
//   - The expiry queue: one deadline per reply, in insertion order, which is deadline order
//     (every reply lives the same TTL on a clock that never goes back). A taken reply leaves
//     its place spent where it stands; expiry moves the head forward over spent places and
//     over replies whose deadline has come, and the places still in use move to the front
//     only once the head has passed half of the slice: a compaction copies at most as many
//     places as the head passed since the one before. Each reply is numbered in this order
//     (its sequence number: the place at queue[seq-base]).
//   - The entries: a ring, by sequence number, of what Take hands back (the key, the topic
//     and the handles). Nothing in it moves when the queue compacts, and expiry does not
//     touch it.
//   - The index, which finds a key's replies: an open-addressing hash table (linear probing)
//     of 4-byte entries, each the low 32 bits of a reply's sequence number, placed by the
//     hash of the reply's key. It is generational: a reply is indexed in the current table,
//     and each TTL the current table becomes the previous one and the previous
//     one, all of whose replies have expired by then, is cleared in one sweep. So expiry
//     never touches the index, and an entry whose reply was taken or expired stays until its
//     table is cleared. A lookup (a Take: rare) checks each entry of its probe run against
//     the queue and the entries.
//
// So a reply costs one random access into the index (1 MiB at 100,000 replies held), where a
// Go map of the same keys costs two (an insert and, at expiry, a delete) into a table several
// times the size: on a shared 2-core machine the churn of a Go map alone costs more than the
// whole budget per delivery (compare BenchmarkCancelMemoryBuiltinMap with
// BenchmarkCancelMemory). The queue and the index hold no pointers, so the garbage collector
// does not scan them.
//
// Use New; a Memory is safe for concurrent use.
type Memory struct {
	mu  sync.Mutex
	ttl time.Duration // how long each reply is held

	// The expiry queue: queue[head:] holds the deadline of each reply from sequence number
	// base+head on, or spent.
	queue []int64
	head  int
	base  uint64
	count int // replies held: places in queue[head:] that are not spent

	// entries[seq&(len(entries)-1)] is reply seq's, for every reply held. A place whose
	// reply was forgotten keeps it, unread, until a later reply takes the place or the ring
	// is resized (at most a ring's worth of garbage: what was held a TTL ago); a taken reply's
	// is cleared. Its length is a power of two.
	entries []entry

	// The index: cur and prev hold uint32(seq)+1 per reply indexed at the place its key's
	// hash gives, 0 in an empty place. Each length is a power of two at least twice the
	// entries it holds (curN for cur). cur indexes the replies remembered since epoch (from
	// sequence number epochSeq on), prev those of the epoch before.
	cur, prev []uint32
	curN      int
	epoch     int64
	epochSeq  uint64
	seed      maphash.Seed

	ready bool  // seed, clock and the slices are set
	clock int64 // the latest now given, in Unix nanoseconds: the memory's clock never goes back
}

// entry is what a reply left for Take.
type entry struct {
	from    string
	id      uint64
	topic   string
	handles []inflight.Handle
}

// New returns an empty memory that holds each reply for ttl.
func New(ttl time.Duration) *Memory { return &Memory{ttl: ttl} }

const (
	spent = math.MinInt64 // the deadline of a spent place in the queue

	// keepSize bounds what the queue, the entries and each index table keep
	// across a lull: a burst's memory is let go once it is spent.
	keepSize = 4096
	minSize  = 64
)

// Remember records the handles a forwarded reply to from's request id carried, topic being
// the request's, for the memory's TTL from now. The memory takes ownership of handles: the
// caller must not read or write the slice afterwards (Take hands it over again). A reply
// that carried nothing is not remembered. Replies whose TTL has run out are forgotten on the
// way.
//
// Each reply is remembered on its own: should a request get two replies, Take returns the
// handles of both (of those still held).
//
// The memory's clock is the latest now any call gave it, read as Unix time (a monotonic
// reading is not used: the memory is an optimisation, and either way a step of the clock
// costs nothing but that). Should the clock step back, the memory's waits for it, so a reply
// is kept longer (giving back a handle whose lease has ended since changes nothing); should
// it step forward, replies are forgotten early, and their records come back when their
// leases lapse, as without a Cancel.
func (m *Memory) Remember(from string, id uint64, topic string, handles []inflight.Handle, now time.Time) {
	if len(handles) == 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.ready {
		m.seed, m.clock, m.epoch, m.ready = maphash.MakeSeed(), now.UnixNano(), now.UnixNano(), true
		m.entries = make([]entry, minSize)
		m.cur = make([]uint32, minSize)
		m.prev = make([]uint32, minSize)
	}
	m.tick(now)
	if uint32(m.base+uint64(len(m.queue))) == math.MaxUint32 {
		// This number would index as an empty place: pass over it.
		m.queue = append(m.queue, spent)
	}
	seq := m.base + uint64(len(m.queue))
	if len(m.queue)-m.head >= len(m.entries) {
		m.resizeEntries(2 * len(m.entries))
	}
	if 2*(m.curN+1) > len(m.cur) {
		m.growIndex()
	}
	m.queue = append(m.queue, m.clock+int64(m.ttl))
	m.entries[seq&uint64(len(m.entries)-1)] = entry{from: from, id: id, topic: topic, handles: handles}
	m.count++
	placeIndex(m.cur, m.hash(from, id), seq)
	m.curN++
}

// Take removes and returns what was remembered for (from, id) and has not expired: the handles
// of every reply to that request still held, oldest first, and the request's topic (should
// replies name two topics, the newest's, and the handles of the replies of that topic). The
// caller owns the handles. Replies whose TTL has run out are forgotten on the way.
func (m *Memory) Take(from string, id uint64, now time.Time) (topic string, handles []inflight.Handle, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.ready {
		return "", nil, false
	}
	m.tick(now)
	if m.count == 0 {
		return "", nil, false
	}
	var buf [4]uint64
	found := m.lookup(m.cur, from, id, buf[:0])
	found = m.lookup(m.prev, from, id, found)
	if len(found) == 0 {
		return "", nil, false
	}
	slices.Sort(found)
	mask := uint64(len(m.entries) - 1)
	topic = m.entries[found[len(found)-1]&mask].topic
	for _, seq := range found {
		e := &m.entries[seq&mask]
		if e.topic == topic {
			if handles == nil {
				handles = e.handles
			} else {
				handles = append(handles[:len(handles):len(handles)], e.handles...)
			}
		}
		*e = entry{}
		m.queue[seq-m.base] = spent
		m.count--
	}
	return topic, handles, true
}

// len returns the number of replies held: remembered, neither taken nor forgotten yet.
func (m *Memory) len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.count
}

// tick moves the memory's clock to now, if now is later, rotates the index when an epoch has
// passed, and forgets the replies whose deadline has come.
func (m *Memory) tick(now time.Time) {
	m.clock = max(m.clock, now.UnixNano())
	if since := m.clock - m.epoch; since >= int64(m.ttl) {
		// Every reply prev indexes was remembered before epoch, so its deadline, before
		// epoch+TTL, has come: prev can go, and cur becomes prev. When two epochs have
		// passed, cur's replies have all expired too.
		old := m.prev
		m.prev = m.cur
		want := max(minSize, 2<<bits.Len(uint(m.curN))) // for the epoch that ended
		if since >= 2*int64(m.ttl) {
			clear(m.prev)
			want = minSize
		}
		if len(old) == want || (len(old) > want && len(old) <= keepSize) {
			clear(old)
			m.cur = old
		} else {
			m.cur = make([]uint32, want)
		}
		m.curN, m.epoch, m.epochSeq = 0, m.clock, m.base+uint64(len(m.queue))
	}
	m.expire()
}

// expire moves the head over spent places and over replies whose deadline has come,
// forgetting those, and compacts the queue once the head has passed half of it. It touches
// the queue alone: a forgotten reply's entry stays in the ring, unread, until its place is
// reused or the ring is resized.
func (m *Memory) expire() {
	q := m.queue
	h := m.head
	for ; h < len(q); h++ {
		if d := q[h]; d != spent {
			if m.clock < d {
				break
			}
			m.count--
		}
	}
	m.head = h
	switch {
	case h == len(q):
		// Empty: start again at the front, and let go of what a burst grew.
		m.base += uint64(h)
		m.head = 0
		m.queue = q[:0]
		if cap(q) > keepSize {
			m.queue = nil
		}
		if len(m.entries) > keepSize {
			m.entries = make([]entry, minSize)
		}
	case h >= len(q)-h:
		// The spent prefix is at least half: move the rest to the front.
		n := copy(q, q[h:])
		m.base += uint64(h)
		m.head = 0
		m.queue = q[:n]
		if cap(q) > keepSize && n < cap(q)/4 {
			// Traffic fell: keep room for twice what is queued, not for the burst's peak.
			m.queue = append(make([]int64, 0, 2*n), q[:n]...)
		}
		if len(m.entries) > keepSize && n < len(m.entries)/8 {
			m.resizeEntries(2 << bits.Len(uint(n)))
		}
	}
}

// resizeEntries moves the entries of the replies queued to a ring of n places.
func (m *Memory) resizeEntries(n int) {
	old, oldMask := m.entries, uint64(len(m.entries)-1)
	m.entries = make([]entry, n)
	mask := uint64(n - 1)
	for seq := m.base + uint64(m.head); seq < m.base+uint64(len(m.queue)); seq++ {
		m.entries[seq&mask] = old[seq&oldMask]
	}
}

// lookup appends to found the sequence number of every reply held for (from, id) that table
// indexes.
func (m *Memory) lookup(table []uint32, from string, id uint64, found []uint64) []uint64 {
	lo, end := m.base+uint64(m.head), m.base+uint64(len(m.queue))
	mask := uint64(len(table) - 1)
	for at := m.hash(from, id) & mask; table[at] != 0; at = (at + 1) & mask {
		// Fewer than 2^32 replies are remembered while an index entry lives, so 32 bits
		// of the sequence number place it; an entry from before lo lands past end.
		seq := lo + uint64(table[at]-1-uint32(lo))
		if seq >= end || m.queue[seq-m.base] == spent {
			continue
		}
		if en := &m.entries[seq&uint64(len(m.entries)-1)]; en.id == id && en.from == from {
			found = append(found, seq)
		}
	}
	return found
}

// hash is the index's hash of (from, id).
func (m *Memory) hash(from string, id uint64) uint64 {
	x := maphash.String(m.seed, from) ^ id
	// splitmix64's finalizer: every bit of the id reaches the bits the index uses.
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

// placeIndex indexes seq in the first empty place of the probe run of hash h.
func placeIndex(table []uint32, h, seq uint64) {
	mask := uint64(len(table) - 1)
	at := h & mask
	for table[at] != 0 {
		at = (at + 1) & mask
	}
	table[at] = uint32(seq) + 1
}

// growIndex doubles cur, indexing again the replies of the epoch still held (the entries of
// those taken or expired go).
func (m *Memory) growIndex() {
	m.cur = make([]uint32, 2*len(m.cur))
	m.curN = 0
	mask := uint64(len(m.entries) - 1)
	from := m.head
	if m.epochSeq > m.base+uint64(from) {
		from = int(m.epochSeq - m.base)
	}
	for i := from; i < len(m.queue); i++ {
		if m.queue[i] != spent {
			seq := m.base + uint64(i)
			e := &m.entries[seq&mask]
			placeIndex(m.cur, m.hash(e.from, e.id), seq)
			m.curN++
		}
	}
}
