package storecommit

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"narad.dev/consume/internal/ackstate"
	"narad.dev/consume/internal/handoff"
	"narad.dev/consume/offsets"
)

// Store is where the states go: the host's replicated storage, as the methods of the
// router.StateStore the host configured (router.Config.Store), whose doc is their contract.
// That interface is declared in router only: this package may not import router, so it
// takes the methods as values. All three are required.
type Store struct {
	Load   func(ctx context.Context, topic string, partition int32) ([]byte, error)
	Save   func(ctx context.Context, batch []Entry) error
	Delete func(ctx context.Context, topic string) error
}

// Entry is one partition's state in a Save.
type Entry struct {
	Topic     string
	Partition int32
	// State is the partition's encoded state: self-verifying and naming its partition. The
	// store keeps it as given; the slice is the store's to keep.
	State []byte
	// Epoch is the ownership epoch the partition's state was kept under (the host's grant,
	// router.Grant.Epoch); 0 when the host grants none. A store shared by the nodes of a
	// cluster refuses a save whose epoch is below the one it holds for the partition, so
	// that an owner deposed while alive never writes over its successor's state.
	Epoch uint64
}

// ErrFenced is what a Store wraps in its error when it refuses a save because the
// partition's state is kept under a newer ownership epoch than the entry's: the node that
// saved no longer owns the partition. The committer then saves each entry of the batch on
// its own, and tells Config.Fenced of each one refused so.
var ErrFenced = errors.New("router: the state store holds the partition under a newer ownership epoch")

// Defaults of Config's zero fields.
const (
	DefaultTimeout  = 10 * time.Second
	DefaultMaxBatch = 1024
)

// Config configures a Committer. Store and Source are required.
type Config struct {
	Store  Store
	Source offsets.Source
	// Interval is the durability interval D; zero means offsets.DefaultInterval.
	Interval time.Duration
	// Timeout bounds each Load and Save; zero means DefaultTimeout.
	Timeout time.Duration
	// MaxBatch bounds the partitions of one Save; zero means DefaultMaxBatch.
	MaxBatch int
	Logger   *slog.Logger
	// Fenced is told of each partition whose save the store refused with ErrFenced, and the
	// epoch of the refused entry (off the committer's locks, so it may Forget the partition):
	// its state is not marked again, and the durable waits on it answer that it is gone. Nil:
	// nobody is told.
	Fenced func(topic string, partition int32, epoch uint64)
}

type key struct {
	topic     string
	partition int32
}

// part is the committer's state of one partition.
type part struct {
	marked  bool
	waiters []*waiter // Durable waits registered since the last snapshot
	saving  int       // saves in flight holding a snapshot of it
}

// mark is an entry of Committer.marked: the partition, and its part when it was marked, so
// that the entry of a part Forget dropped is told from the one of the part marked since.
type mark struct {
	k key
	p *part
}

type waiter struct {
	done      chan error // buffered: the answer
	withdrawn bool       // its ctx ended: answered, neither kept nor counted (guarded by mu)
}

// A Committer saves partitions' states to a Store. It is safe for concurrent use.
type Committer struct {
	cfg Config
	log *slog.Logger

	// pass holds a token while a save pass runs, Run's or Close's: one at a time, so one
	// Save is in flight and one caller in Source. (A channel: a wait for it is a blocked
	// goroutine to testing/synctest, where a mutex's is not.)
	pass chan struct{}

	mu      sync.Mutex
	parts   map[key]*part
	marked  []mark // in the order they were marked; forgotten ones stay until the next pass
	nmarked int    // partitions marked now (marked, less the forgotten)
	urgent  bool   // a Durable wait is registered
	closed  bool
	saved   *sync.Cond // signalled when a save ends (Forget waits on it)

	wake chan struct{} // a mark or a wait since Run last looked

	stats      counters
	lastWarned atomic.Int64 // Unix nanoseconds of the last failure log line
}

type counters struct {
	saves, partitionsSaved, failures, durables, early, overruns, ignored, clamps atomic.Uint64
}

// New returns a committer.
func New(cfg Config) *Committer {
	cfg.Interval = cmp.Or(cfg.Interval, offsets.DefaultInterval)
	cfg.Timeout = cmp.Or(cfg.Timeout, DefaultTimeout)
	cfg.MaxBatch = cmp.Or(cfg.MaxBatch, DefaultMaxBatch)
	c := &Committer{cfg: cfg, log: cfg.Logger, parts: map[key]*part{}, wake: make(chan struct{}, 1),
		pass: make(chan struct{}, 1)}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	c.saved = sync.NewCond(&c.mu)
	return c
}

func (c *Committer) kick() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// MarkDirty says the partition's state changed: it is saved with the next batch.
func (c *Committer) MarkDirty(topic string, partition int32) {
	c.mu.Lock()
	first := c.markLocked(key{topic, partition})
	c.mu.Unlock()
	if first {
		c.kick()
	}
}

// markLocked marks k, reporting whether the committer had nothing marked before.
func (c *Committer) markLocked(k key) bool {
	p := c.parts[k]
	if p == nil {
		p = &part{}
		c.parts[k] = p
	}
	if p.marked {
		return false
	}
	p.marked = true
	c.marked = append(c.marked, mark{k, p})
	c.nmarked++
	return c.nmarked == 1
}

// Durable returns once every change of the partition reported before the call is saved: a
// save whose snapshot was taken after the call returned from Save. It answers ctx's error
// when ctx ends first, an error matching offsets.ErrShardGone when Forget drops the partition
// or its shard is gone, and offsets.ErrClosed after Close.
func (c *Committer) Durable(ctx context.Context, topic string, partition int32) error {
	w := &waiter{done: make(chan error, 1)}
	k := key{topic, partition}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return offsets.ErrClosed
	}
	c.markLocked(k)
	p := c.parts[k]
	p.waiters = append(p.waiters, w)
	c.urgent = true
	c.mu.Unlock()
	c.kick()
	select {
	case err := <-w.done:
		return err
	case <-ctx.Done():
		c.mu.Lock()
		w.withdrawn = true // a save in flight holding it neither gives it back nor counts it
		if p := c.parts[k]; p != nil {
			p.waiters = deleteWaiter(p.waiters, w)
		}
		c.mu.Unlock()
		return ctx.Err()
	}
}

func deleteWaiter(ws []*waiter, w *waiter) []*waiter {
	for i, x := range ws {
		if x == w {
			return append(ws[:i], ws[i+1:]...)
		}
	}
	return ws
}

// Forget drops the partition (its shard was dropped): its mark goes, its waits answer
// ErrShardGone, and once Forget returns no snapshot taken before it is saved.
func (c *Committer) Forget(topic string, partition int32) {
	k := key{topic, partition}
	c.mu.Lock()
	for {
		p := c.parts[k]
		if p == nil {
			c.mu.Unlock()
			return
		}
		if p.saving > 0 {
			c.saved.Wait() // the save in flight holds a snapshot taken before
			continue
		}
		for _, w := range p.waiters {
			w.done <- gone(topic, partition, "forgotten")
		}
		delete(c.parts, k) // its entry in c.marked is skipped at the next save
		none := false
		if p.marked {
			c.nmarked--
			none = c.nmarked == 0
		}
		c.mu.Unlock()
		if none {
			c.kick() // Run disarms its timer: nothing is marked
		}
		return
	}
}

func gone(topic string, partition int32, why string) error {
	return &offsets.PartitionError{Topic: topic, Partition: partition, Op: "durable",
		Err: fmt.Errorf("%w: %s", offsets.ErrShardGone, why)}
}

// Load reads the partition's state from the store, for its shard's creation: bytes that do
// not verify, or name another partition, are ignored (logged, counted) and read as no state;
// no bytes are no state. State.Incarnation is always set. It is LoadBound for a host that
// names no incarnation of the topic.
func (c *Committer) Load(topic string, partition int32) (offsets.State, error) {
	return c.LoadBound(topic, partition, 0)
}

// LoadBound is Load for a host that knows the incarnation of the topic in its own log, host
// (0: it names none), as the file committer's LoadBound is: a state bound to another host
// incarnation (a stale entry of a deleted topic's earlier life, a backup of it restored) is
// ignored like a damaged one, logged and counted, and the partition starts as new; an
// unbound state is trusted and bound to host at its next save. State.HostIncarnation is
// host, or the stored state's binding when host is 0.
func (c *Committer) LoadBound(topic string, partition int32, host uint64) (offsets.State, error) {
	st, damage, err := c.fetch(topic, partition, host)
	if err != nil {
		return st, err
	}
	if damage != nil {
		c.stats.ignored.Add(1)
		c.log.Error("consume: ignoring damaged or foreign state from the state store; the partition's retained records are delivered again",
			"topic", topic, "partition", partition, "err", damage)
	}
	return st, nil
}

// Peek reads the partition's state from the store for a look (the status of a partition no
// shard holds): nothing is logged or counted, however often it is asked, and bytes that do
// not verify or name another partition are an error, as a failed load is.
func (c *Committer) Peek(topic string, partition int32) (offsets.State, error) {
	st, damage, err := c.fetch(topic, partition, 0)
	if err == nil && damage != nil {
		err = &offsets.PartitionError{Topic: topic, Partition: partition, Op: "peek", Err: damage}
	}
	return st, err
}

// fetch loads and decodes the partition's stored state (see LoadBound): err is the store's
// failure; damage what makes the stored bytes unusable, with no state returned.
func (c *Committer) fetch(topic string, partition int32, host uint64) (st offsets.State, damage, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.Timeout)
	defer cancel()
	b, err := c.cfg.Store.Load(ctx, topic, partition)
	if err != nil {
		return offsets.State{Frontier: -1}, nil, &offsets.PartitionError{Topic: topic, Partition: partition, Op: "load", Err: err}
	}
	none := offsets.State{Frontier: -1, Incarnation: handoff.NewID(), HostIncarnation: host}
	if b == nil {
		return none, nil, nil
	}
	p, damage := handoff.Decode(b, time.Time{})
	switch bound := p.State.HostIncarnation; {
	case damage != nil:
	case p.Topic != topic || p.Partition != partition:
		damage = fmt.Errorf("the state of %s/%d", p.Topic, p.Partition)
	case host != 0 && bound != 0 && bound != host:
		damage = fmt.Errorf("a state bound to host incarnation %016x of the topic, not the host's %016x: an earlier life's state",
			bound, host)
	}
	if damage != nil {
		return none, damage, nil
	}
	st = offsets.State{Found: true}
	ackstate.ToOffsets(&st, &p.State)
	if host != 0 {
		st.HostIncarnation = host
	}
	return st, nil, nil
}

// ClampToWatermark clamps a loaded frontier at or above hwm (a log that lost its tail), as
// the file committer does, logged and counted.
func (c *Committer) ClampToWatermark(topic string, partition int32, st offsets.State, hwm int64) offsets.State {
	clamped, changed := offsets.ClampState(st, hwm)
	if changed {
		c.stats.clamps.Add(1)
		c.log.Error("consume: stored frontier at or above the log's high watermark; clamped below it",
			"topic", topic, "partition", partition, "frontier", st.Frontier, "high_watermark", hwm,
			"clamped_to", clamped.Frontier)
	}
	return clamped
}

// Delete removes the states of every partition of topic from the store.
func (c *Committer) Delete(topic string) error {
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.Timeout)
	defer cancel()
	if err := c.cfg.Store.Delete(ctx, topic); err != nil {
		return fmt.Errorf("router: delete the stored state of topic %q: %w", topic, err)
	}
	return nil
}

// Run saves until ctx is done or the committer is closed: each batch once the interval since
// the last has passed, or at once for a Durable wait; a failed save is retried one interval
// after it failed. It arms no timer while nothing is marked.
func (c *Committer) Run(ctx context.Context, clk offsets.Clock) error {
	var last time.Time
	var stop func() bool
	var fired chan struct{} // the armed timer's; nil when none is
	disarm := func() {
		if stop != nil {
			stop()
			stop, fired = nil, nil
		}
	}
	defer disarm()
	// ctx is looked at on every turn: saves that overrun the interval follow one another
	// without reaching the select.
	for ctx.Err() == nil {
		c.mu.Lock()
		pending, urgent, closed := c.nmarked > 0, c.urgent, c.closed
		c.mu.Unlock()
		if closed {
			return nil
		}
		now := clk.Now()
		due := last.Add(c.cfg.Interval)
		if pending && (urgent || !now.Before(due)) {
			disarm()
			if urgent && now.Before(due) {
				c.stats.early.Add(1)
			}
			last = now
			err := c.saveAll(ctx)
			end := clk.Now()
			if end.Sub(now) > c.cfg.Interval {
				c.stats.overruns.Add(1)
			}
			if err != nil {
				last = end
			}
			continue
		}
		if !pending {
			disarm()
		} else if stop == nil {
			ch := make(chan struct{}, 1)
			fired = ch
			stop = clk.AfterFunc(due.Sub(now), func() { ch <- struct{}{} })
		}
		select {
		case <-ctx.Done():
		case <-c.wake:
		case <-fired:
			stop, fired = nil, nil
		}
	}
	return nil
}

// saveAll saves every partition marked now, in batches, unless the committer is closed (Close
// makes the last pass).
func (c *Committer) saveAll(ctx context.Context) error {
	c.pass <- struct{}{}
	defer func() { <-c.pass }()
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.mu.Unlock()
	return c.savePass(ctx)
}

// savePass saves every partition marked now, in batches. The caller holds the pass token.
func (c *Committer) savePass(ctx context.Context) error {
	c.mu.Lock()
	keys := c.marked
	c.marked = nil
	c.urgent = false
	c.mu.Unlock()
	var firstErr error
	for len(keys) > 0 {
		n := min(len(keys), c.cfg.MaxBatch)
		if err := c.saveBatch(ctx, keys[:n]); err != nil && firstErr == nil {
			firstErr = err
		}
		keys = keys[n:]
	}
	return firstErr
}

// saveBatch takes the snapshots of keys, saves them as one batch, and answers the waits
// registered before the snapshots; on failure it marks them again, their waits kept.
func (c *Committer) saveBatch(ctx context.Context, keys []mark) error {
	type taken struct {
		k       key
		waiters []*waiter
		epoch   uint64 // the saved state's
	}
	var batch []Entry
	var held []taken
	var snap offsets.State
	for _, m := range keys {
		k := m.k
		c.mu.Lock()
		p := c.parts[k]
		if p != m.p || !p.marked {
			c.mu.Unlock()
			continue // forgotten since it was marked (and maybe marked again since)
		}
		p.marked = false
		c.nmarked--
		waiters := p.waiters
		p.waiters = nil
		p.saving++
		c.mu.Unlock()
		// The snapshot follows the waits' registration: it holds every change they wait for.
		if !c.cfg.Source.State(k.topic, k.partition, &snap) {
			c.mu.Lock()
			p.saving--
			c.mu.Unlock()
			c.saved.Broadcast()
			for _, w := range waiters {
				w.done <- gone(k.topic, k.partition, "its shard is gone")
			}
			continue
		}
		st := ackstate.ToInflight(&snap)
		hp := handoff.Partition{Topic: k.topic, Partition: k.partition, ID: handoff.NewID(), State: st}
		batch = append(batch, Entry{Topic: k.topic, Partition: k.partition, State: handoff.Append(nil, &hp, time.Time{}), Epoch: st.Epoch})
		held = append(held, taken{k, waiters, st.Epoch})
	}
	if len(batch) == 0 {
		return nil
	}
	errs, err := c.save(ctx, batch)
	var fenced []taken
	c.mu.Lock()
	for i, t := range held {
		p := c.parts[t.k]
		if p == nil {
			continue // cannot happen: Forget waits for saving to reach zero
		}
		p.saving--
		isFenced := errors.Is(errs[i], ErrFenced)
		for _, w := range t.waiters {
			switch {
			case w.withdrawn:
			case isFenced:
				w.done <- gone(t.k.topic, t.k.partition, "the store holds it under a newer ownership epoch")
			case errs[i] != nil:
				p.waiters = append(p.waiters, w)
			default:
				c.stats.durables.Add(1)
				w.done <- nil
			}
		}
		switch {
		case isFenced:
			fenced = append(fenced, t)
		case errs[i] != nil:
			c.markLocked(t.k)
		}
	}
	c.mu.Unlock()
	c.saved.Broadcast()
	if c.cfg.Fenced != nil {
		for _, t := range fenced {
			c.cfg.Fenced(t.k.topic, t.k.partition, t.epoch)
		}
	}
	if err != nil {
		c.warn("consume: the state store refused a save; the partitions are saved again at the next interval",
			"partitions", len(batch), "err", err)
		return err
	}
	return nil
}

// save stores batch and returns each entry's outcome, and the first error. A batch the store
// refuses as fenced (ErrFenced) is saved again one entry at a time, to learn which entries
// it refuses: the others are saved.
func (c *Committer) save(ctx context.Context, batch []Entry) ([]error, error) {
	errs := make([]error, len(batch))
	err := c.saveOnce(ctx, batch)
	if err != nil && errors.Is(err, ErrFenced) && len(batch) > 1 {
		err = nil
		for i := range batch {
			if errs[i] = c.saveOnce(ctx, batch[i:i+1]); err == nil {
				err = errs[i]
			}
		}
		return errs, err
	}
	for i := range errs {
		errs[i] = err
	}
	return errs, err
}

// saveOnce is one Save, bounded by the store's timeout, and counted.
func (c *Committer) saveOnce(ctx context.Context, batch []Entry) error {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.Timeout)
	err := c.cfg.Store.Save(sctx, batch)
	cancel()
	if err != nil {
		c.stats.failures.Add(1)
	} else {
		c.stats.saves.Add(1)
		c.stats.partitionsSaved.Add(uint64(len(batch)))
	}
	return err
}

func (c *Committer) warn(msg string, args ...any) {
	now := time.Now().UnixNano()
	if last := c.lastWarned.Load(); now-last >= int64(time.Minute) && c.lastWarned.CompareAndSwap(last, now) {
		c.log.Warn(msg, args...)
	}
}

// Close saves every partition marked, answers the waits it saved with nil and the others with
// offsets.ErrClosed joined with its error, and returns that error. Run returns.
func (c *Committer) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.mu.Unlock()
	c.kick()
	c.pass <- struct{}{} // after a pass of Run's in flight: what it failed to save is marked again
	defer func() { <-c.pass }()
	err := c.savePass(context.Background())
	c.mu.Lock()
	for _, p := range c.parts {
		for _, w := range p.waiters {
			w.done <- errors.Join(offsets.ErrClosed, err)
		}
		p.waiters = nil
	}
	c.mu.Unlock()
	return err
}

// Stats returns the committer's counters, in the file committer's terms: a save is a
// writeout, a failed save a sync failure.
func (c *Committer) Stats() offsets.Stats {
	return offsets.Stats{
		Ticks:          c.stats.saves.Load() + c.stats.failures.Load(),
		Windows:        c.stats.partitionsSaved.Load(),
		Writeouts:      c.stats.saves.Load(),
		SyncFailures:   c.stats.failures.Load(),
		Durables:       c.stats.durables.Load(),
		EarlyWriteouts: c.stats.early.Load(),
		Overruns:       c.stats.overruns.Load(),
		IgnoredFiles:   c.stats.ignored.Load(),
		Clamps:         c.stats.clamps.Load(),
	}
}
