package offsets

import (
	"cmp"
	"path/filepath"
	"sync"
	"sync/atomic"
)

// primeChunk primes chunk: each partition's file work by one of workers goroutines (this one
// alone when workers is 1, which keeps a simulator's op order fixed), then one sync per
// directory among them, one device flush per device, and the completions. Each prime opens
// its descriptors under limit; one that finds no room is put off and returned in the deferred
// prefix of chunk, rearranged. It returns how many were put off.
func (c *Committer) primeChunk(t *tickScratch, chunk []*partition, res []primeResult, workers int, limit int64) int {
	for i, p := range chunk {
		res[i] = primeResult{p: p}
	}
	each(len(chunk), workers, func(i int, buf *primeBuf) {
		res[i].err = c.prime(res[i].p, &res[i], buf, limit)
	})

	// One directory sync per directory: every entry the chunk created is in it by now.
	first := make(map[[2]uint64]int, len(res))
	var syncs []int
	for i := range res {
		if res[i].err != nil || res[i].blank {
			continue // a blank prime's directory is synced by its first writeout
		}
		k := [2]uint64{res[i].dirDev, res[i].dirIno}
		if _, ok := first[k]; !ok {
			first[k] = i
			syncs = append(syncs, i)
		}
	}
	dirErr := make([]error, len(res))
	each(len(syncs), workers, func(j int, _ *primeBuf) {
		i := syncs[j]
		if err := res[i].root.Sync(); err != nil {
			c.stats.syncFailures.Add(1)
			dirErr[i] = err
		}
	})
	var dirs []string
	for i := range res {
		if res[i].err == nil && !res[i].blank {
			dirs = append(dirs, res[i].p.dir)
		}
	}
	parentErr := c.syncParents(dirs, limit)
	for i := range res {
		pr := &res[i]
		if pr.root != nil {
			c.closeFD(pr.root)
			pr.root = nil
		}
		if pr.err != nil || pr.blank {
			continue
		}
		if err := cmp.Or(dirErr[first[[2]uint64{pr.dirDev, pr.dirIno}]], parentErr[filepath.Dir(pr.p.dir)]); err != nil {
			pr.err = err
			c.closePrime(pr)
			continue
		}
		t.addDevice(pr.fileDev, pr.f)
		if pr.offFile != nil {
			t.addDevice(pr.offDev, pr.offFile)
		}
	}
	c.flushDevices(t)

	deferred := 0
	c.ioMu.Lock()
	for i := range res {
		pr := &res[i]
		if pr.offFile != nil {
			c.closeFD(pr.offFile)
		}
		if c.completePrime(t, pr, workers > 1) {
			chunk[deferred] = pr.p
			deferred++
		}
	}
	c.ioMu.Unlock()
	clear(res)
	t.devices = t.devices[:0]
	return deferred
}

// each calls f(i, s) for i in [0, n) on up to workers goroutines, s being the calling
// goroutine's own state (a zero S for each), and returns the states used.
func each[S any](n, workers int, f func(i int, s *S)) []S {
	if n == 0 {
		return nil
	}
	if workers <= 1 || n == 1 {
		states := make([]S, 1)
		for i := range n {
			f(i, &states[0])
		}
		return states
	}
	states := make([]S, min(workers, n))
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := range states {
		s := &states[w]
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				f(i, s)
			}
		})
	}
	wg.Wait()
	return states
}

// primeChunkInline primes the front of q on the tick's goroutine. It returns the size of the
// chunk it took and how many of it were put off for want of a descriptor, now at its front.
func (c *Committer) primeChunkInline(t *tickScratch, q []*partition) (n, deferred int) {
	chunk := q[:min(len(q), primeChunk)]
	res := make([]primeResult, len(chunk))
	deferred = c.primeChunk(t, chunk, res, 1, c.maxOpen)
	if deferred > 0 {
		c.ioMu.Lock()
		for _, p := range chunk[:deferred] {
			p.priming = true // still queued
		}
		c.ioMu.Unlock()
	}
	return len(chunk), deferred
}

// primePool is Run's prime pool: it takes chunks off the queue the ticks fill, leaving room
// under the cap for the tick and the writeout worker, until stop is closed.
func (c *Committer) primePool(stop <-chan struct{}) {
	var chunk []*partition
	var res []primeResult
	for {
		select {
		case <-stop:
			return
		case <-c.primeC:
		}
		for {
			limit := c.primeLimit()
			room := int(limit-c.fds.Load()) / 2
			c.primeMu.Lock()
			if c.primeOff || len(c.primeQA) == 0 || room < 1 {
				c.primeMu.Unlock()
				break
			}
			n := min(len(c.primeQA), primeChunk, room)
			chunk = append(chunk[:0], c.primeQA[:n]...)
			rest := copy(c.primeQA, c.primeQA[n:])
			clear(c.primeQA[rest:])
			c.primeQA = c.primeQA[:rest]
			c.bg.Add(1)
			c.priming.Add(1)
			c.primeMu.Unlock()

			if cap(res) < n {
				res = make([]primeResult, n)
			}
			t := &c.pt
			deferred := c.primeChunk(t, chunk, res[:n], primeWorkers, limit)
			c.ioMu.Lock()
			for _, p := range chunk[:deferred] {
				c.markPrimed(p) // queued again by the next tick
			}
			primed := 0
			for _, p := range chunk[deferred:n] {
				if p.primed {
					primed++
				}
			}
			c.ioMu.Unlock()
			c.addAsyncErr(t)
			t.release()
			clear(chunk)
			c.priming.Add(-1)
			c.bg.Done()
			if primed > 0 {
				// The partitions just primed get their first window at once rather than at
				// the next tick: their acks wait for the prime, not for the cadence too. (A
				// failed prime waits for the next tick: no busy retry.)
				c.kick(true)
			}
			if deferred == n {
				break // no room: wait for the next tick's hand-off
			}
		}
	}
}

// primeLimit is the pool's share of the cap: all of it but room for the tick's and the
// writeout worker's reopens (2 each), as far as the held descriptors leave that room.
func (c *Committer) primeLimit() int64 {
	return c.maxOpen - int64(min(4, int(c.maxOpen)-c.maxHeld-2))
}

// syncParents makes the entries of partition directories durable: the host created each
// directory (the committer never does) and the entry lives in its parent, which nothing else
// syncs; so does the parent's own entry, in the grandparent, for a topic created with it. One
// sync per distinct parent and grandparent of dirs, so many partitions of a topic share two.
// It returns the error met for each parent; a prime whose parent could not be synced is
// retried.
func (c *Committer) syncParents(dirs []string, limit int64) map[string]error {
	errs := map[string]error{}
	synced := map[string]error{}
	syncDir := func(dir string) error {
		if err, ok := synced[dir]; ok {
			return err
		}
		root, err := c.openRoot(dir, limit)
		if err == nil {
			if err = root.Sync(); err != nil {
				c.stats.syncFailures.Add(1)
			}
			c.closeFD(root)
		}
		synced[dir] = err
		return err
	}
	for _, dir := range dirs {
		parent := filepath.Dir(dir)
		if _, done := errs[parent]; done {
			continue
		}
		errs[parent] = cmp.Or(syncDir(parent), syncDir(filepath.Dir(parent)))
	}
	return errs
}
