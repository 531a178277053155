package sqsapi

import (
	"sync"
	"time"
)

// RecentWindow is how long SQS refuses a second PurgeQueue of a queue
// (PurgeQueueInProgress) and a CreateQueue of a queue's name after it was deleted
// (QueueDeletedRecently): 60 s, on the handler's clock (Config.Now).
const RecentWindow = 60 * time.Second

// recent remembers, per queue name, when something happened to it (a purge, a delete) on
// the handler's clock, for RecentWindow: in memory, per handler, as a restart may forget
// what only delays a client.
type recent struct {
	mu    sync.Mutex
	at    map[string]time.Time
	swept int // len(at) after the last sweep: the next comes once it has doubled
}

// within reports whether name's time is less than RecentWindow before now.
func (r *recent) within(name string, now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	t, ok := r.at[name]
	return ok && now.Before(t.Add(RecentWindow))
}

// claim sets name's time to now, unless it is within RecentWindow of now (false): two
// purges at once are told apart here, before either reaches the store.
func (r *recent) claim(name string, now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if t, had := r.at[name]; had && now.Before(t.Add(RecentWindow)) {
		return false
	}
	r.setLocked(name, now)
	return true
}

// set sets name's time to now and returns what it replaced, for undo.
func (r *recent) set(name string, now time.Time) (prev time.Time, had bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	prev, had = r.at[name]
	r.setLocked(name, now)
	return prev, had
}

// undo puts back what set or claim replaced, if name's time is still at (a later one stays):
// a purge or delete that failed did not happen.
func (r *recent) undo(name string, at, prev time.Time, had bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if t, ok := r.at[name]; !ok || !t.Equal(at) {
		return
	}
	if had {
		r.at[name] = prev
	} else {
		delete(r.at, name)
	}
}

func (r *recent) setLocked(name string, now time.Time) {
	if r.at == nil {
		r.at = map[string]time.Time{}
	}
	r.at[name] = now
	if len(r.at) >= 2*r.swept+16 { // amortized: the map holds about a window's names
		for n, t := range r.at {
			if !now.Before(t.Add(RecentWindow)) {
				delete(r.at, n)
			}
		}
		r.swept = len(r.at)
	}
}
