package inflight

// lowestAttempts keeps the k attempts of lowest offset among as, in as's own storage and in
// no particular order, and reports how many it dropped. It runs in O(n log k) time at worst
// and close to O(n) for offsets in random order (a map's), where sorting all of them would
// be O(n log n): it keeps the k lowest seen so far in a max-heap on as[:k], so each later
// attempt costs one comparison with the heap's top unless it belongs among them.
func lowestAttempts(as []Attempt, k int) ([]Attempt, int) {
	if k < 0 {
		k = 0
	}
	if len(as) <= k {
		return as, 0
	}
	heap := as[:k]
	for i := k/2 - 1; i >= 0; i-- {
		siftDownByOffset(heap, i)
	}
	for _, a := range as[k:] {
		if k > 0 && a.Offset < heap[0].Offset {
			heap[0] = a
			siftDownByOffset(heap, 0)
		}
	}
	return heap, len(as) - k
}

// siftDownByOffset restores the max-heap order (largest offset on top) of h below i.
func siftDownByOffset(h []Attempt, i int) {
	for {
		largest, left, right := i, 2*i+1, 2*i+2
		if left < len(h) && h[left].Offset > h[largest].Offset {
			largest = left
		}
		if right < len(h) && h[right].Offset > h[largest].Offset {
			largest = right
		}
		if largest == i {
			return
		}
		h[i], h[largest] = h[largest], h[i]
		i = largest
	}
}

// attemptsInOrderLocked fills dst.Attempts in ascending order by looking up each offset
// that may have a pending entry, when they are few against the entries (leases granted in
// order, the common case): no sort is needed then. It reports false, leaving dst.Attempts
// to the caller, when that walk would cost more than going over the entries, or when it
// finds more than maxAttempts attempts (the caller then selects the lowest and counts the
// rest). Every pending entry above the frontier lies below the cursor or at most at
// pendingAbove, so the walk misses none.
func (s *Shard) attemptsInOrderLocked(dst *State, maxAttempts int) bool {
	last := max(s.cursor-1, s.pendingAbove)
	if last-s.frontier > 2*int64(s.pending.len())+64 {
		return false
	}
	dst.Attempts = dst.Attempts[:0]
	for off := s.frontier + 1; off <= last; off++ {
		if p, ok := s.pending.get(off); ok && p.persistedAttempts() > 0 {
			if len(dst.Attempts) == maxAttempts {
				return false
			}
			dst.Attempts = append(dst.Attempts, Attempt{Offset: off, Count: p.persistedAttempts()})
		}
	}
	return true
}

// persistedAttempts is the attempts of p that count, as Snapshot persists them: the live
// lease's is left out while it is a reservation not yet confirmed (ReserveAhead) or a scan's
// lease not handed over yet (see grantKind).
func (p pending) persistedAttempts() uint32 {
	if p.nonce != 0 && p.grant != grantCounted {
		return p.attempts - 1
	}
	return p.attempts
}
