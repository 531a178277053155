package pump

import (
	"slices"
	"sync"
)

// rec is the record type of the tests: which record, from where, and which Take handed it out.
type rec struct {
	topic string
	part  int32
	id    int
	take  int // sequence number of the Take that returned it: one per lease
}

// memSource is a Source over in-memory partitions. Take looks at the pinned partition, or at the
// partitions owned() returns at the moment of the call, in order.
type memSource struct {
	mu       sync.Mutex
	parts    map[string]map[int32][]int // topic → partition → ids available, oldest first
	owned    map[string][]int32         // topic → partitions this node owns
	takes    int                        // Take calls
	leases   int                        // Take calls that returned a record
	released []rec

	// beforeTake, when set, runs at the start of every Take (without mu held).
	beforeTake func(topic string, pinned int32)
	// afterEmpty, when set, runs in a Take that found nothing, before it returns (without mu held).
	afterEmpty func(topic string, pinned int32)
	// afterTake, when set, runs in a Take that found a record, before it returns (without mu held).
	afterTake func(r rec)
}

func newMemSource() *memSource {
	return &memSource{parts: map[string]map[int32][]int{}, owned: map[string][]int32{}}
}

// add makes record id available on (topic, part), and makes part owned.
func (s *memSource) add(topic string, part int32, ids ...int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.parts[topic] == nil {
		s.parts[topic] = map[int32][]int{}
	}
	s.parts[topic][part] = append(s.parts[topic][part], ids...)
	if !slices.Contains(s.owned[topic], part) {
		s.owned[topic] = append(s.owned[topic], part)
	}
}

func (s *memSource) setOwned(topic string, parts ...int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.owned[topic] = parts
}

func (s *memSource) Take(topic string, pinned int32) (rec, bool) {
	if s.beforeTake != nil {
		s.beforeTake(topic, pinned)
	}
	s.mu.Lock()
	s.takes++
	scan := s.owned[topic]
	if pinned >= 0 {
		scan = []int32{pinned}
	}
	for _, p := range scan {
		if q := s.parts[topic][p]; len(q) > 0 {
			s.parts[topic][p] = q[1:]
			s.leases++
			r := rec{topic: topic, part: p, id: q[0], take: s.leases}
			s.mu.Unlock()
			if s.afterTake != nil {
				s.afterTake(r)
			}
			return r, true
		}
	}
	s.mu.Unlock()
	if s.afterEmpty != nil {
		s.afterEmpty(topic, pinned)
	}
	return rec{}, false
}

func (s *memSource) Release(topic string, r rec) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.released = append(s.released, r)
	q := s.parts[topic][r.part]
	s.parts[topic][r.part] = append([]int{r.id}, q...)
}

func (s *memSource) takeCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.takes
}

func (s *memSource) releasedRecs() []rec {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.released)
}

var _ Source[rec] = (*memSource)(nil)
