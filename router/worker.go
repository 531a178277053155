package router

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"narad.dev/consume/pump"
)

// A Handler processes one delivered record. Returning nil acks it; returning an error (or
// panicking) nacks it, and the topic's Backoff policy decides when it comes again. ctx ends
// when the Work call's context does: a handler should stop then and return an error
// (ctx.Err() will do), and its record is released for another consumer without counting as
// an attempt. A handler that returns nil has finished its record, and it is acked whether ctx
// ended or not: one that cancels Work's context once it is done (to handle one record, say)
// has its record acked, and Work returns once the ack is answered.
type Handler func(ctx context.Context, m Message) error

// WorkOptions shape Work. The zero value runs one handler at a time.
type WorkOptions struct {
	// Concurrency is how many handlers run at once; zero means one. Above MaxBatch, a
	// consume still asks for at most MaxBatch records. Negative is ErrInvalidArgument.
	Concurrency int
	// Wait is the long-poll of each consume; zero means 20 s. Negative, or above MaxWait, is
	// ErrInvalidArgument.
	Wait time.Duration
	// Visibility is the lease of each record; zero means the topic's. While a handler runs
	// the worker extends its lease every half of it, so a slow handler keeps its record
	// (within the topic's MaxLeaseLifetime) and a crashed process loses it one visibility
	// timeout later.
	Visibility time.Duration
	// Pinned restricts the worker to Partition.
	Pinned    bool
	Partition int32
	// OnError, if set, is told of every failure: a handler's error or panic, or an ack, nack
	// or release the node refused (a refused extend is not told: the lease is gone, and the
	// record's ack or nack says so), or a consume that failed and is tried again (m names
	// the topic alone). Nil ignores them. It is called from the record's handler goroutine,
	// or, for the ack of a record another node owns, from a goroutine of the node once the
	// owner answered (see Node.AckAsync): it must return promptly, and may be called for
	// several records at once.
	OnError func(m Message, err error)
}

// ErrHandlerPanic wraps the value a Handler panicked with.
var ErrHandlerPanic = errors.New("router: handler panicked")

// defaultWorkWait is how long Work long-polls per consume.
const defaultWorkWait = 20 * time.Second

// workRetryPause is how long Work waits after a transient consume error before it tries again.
const workRetryPause = 100 * time.Millisecond

// stopsWork reports whether a consume error ends Work: the node closed, the topic went, or
// the request can never succeed.
func stopsWork(err error) bool {
	return errors.Is(err, ErrClosed) || errors.Is(err, ErrUnknownTopic) || errors.Is(err, ErrNotLocal) ||
		errors.Is(err, ErrInvalidArgument) || errors.Is(err, pump.ErrTopicDropped)
}

// Work runs handler on the records of topic until ctx ends, with at most
// opts.Concurrency handlers at a time: it consumes as many records as it has free handlers,
// extends each lease while its handler runs, acks on success and nacks on error or panic.
// An ack does not hold its handler's slot: the slot takes the next record while the ack of a
// record another node owns is on its way (Node.AckAsync).
// When ctx ends it releases at once every record it took but has not handed to a handler,
// then waits for its handlers to return and their acks to be answered: a record whose
// handler returns an error once ctx ended is released (not an attempt), one whose handler
// returns nil is acked (Handler), and a handler that goes on regardless keeps its lease
// extended until it returns. It returns nil when ctx ends, or the error that stopped it (the
// node closed, the topic deleted). A nil handler or options out of range (see WorkOptions and
// ConsumeOptions) answer ErrInvalidArgument before anything is consumed.
func (n *Node) Work(ctx context.Context, topic string, handler Handler, opts WorkOptions) error {
	if n.life.closed.Load() {
		return ErrClosed
	}
	if err := checkTopic(topic); err != nil {
		return err
	}
	wait := opts.Wait
	if wait == 0 {
		wait = defaultWorkWait
	}
	if err := checkWorkOptions(handler, opts.Concurrency, ConsumeOptions{
		Wait: wait, Visibility: opts.Visibility, Pinned: opts.Pinned, Partition: opts.Partition,
	}); err != nil {
		return err
	}
	slots := max(opts.Concurrency, 1)
	w := &worker{n: n, topic: topic, handler: handler, opts: opts, free: make(chan struct{}, slots)}
	for range slots {
		w.free <- struct{}{}
	}
	defer w.running.Wait()
	var msgs []Message // reused: each handler gets its message by value
	for {
		// Take as many free slots as there are, at least one.
		select {
		case <-ctx.Done():
			return nil
		case <-w.free:
		}
		// At most MaxBatch, which a consume may ask for: a Concurrency above it takes the
		// rest of its free slots in the next consumes.
		take := 1
	more:
		for take < min(slots, MaxBatch) {
			select {
			case <-w.free:
				take++
			default:
				break more
			}
		}
		var err error
		msgs, err = n.ConsumeAppend(ctx, msgs[:0], topic, ConsumeOptions{
			Max: take, Wait: wait, Visibility: opts.Visibility, Pinned: opts.Pinned, Partition: opts.Partition,
		})
		for range take - len(msgs) {
			w.free <- struct{}{}
		}
		switch {
		case ctx.Err() != nil:
			w.release(msgs)
			return nil
		case err != nil && stopsWork(err):
			w.release(msgs)
			return err
		case err != nil:
			// Transient (a closed log, the host failing to resolve a log): told, then
			// tried again after a pause rather than in a hot loop.
			w.report(Message{Topic: topic}, err)
			if !w.pause(ctx, workRetryPause) {
				return nil
			}
		}
		for _, m := range msgs {
			w.running.Add(1)
			go w.run(ctx, m)
		}
	}
}

// checkWorkOptions refuses what Work cannot run: without it a nil handler would be called
// (a panic, recovered) and nack every record it took, and a negative Concurrency or Wait
// would be taken silently for the default. consume is Work's consumes with a batch of one.
func checkWorkOptions(handler Handler, concurrency int, consume ConsumeOptions) error {
	switch {
	case handler == nil:
		return fmt.Errorf("%w: Work's handler is nil", ErrInvalidArgument)
	case concurrency < 0:
		return fmt.Errorf("%w: WorkOptions.Concurrency %d is negative", ErrInvalidArgument, concurrency)
	}
	if err := consume.check(); err != nil {
		return fmt.Errorf("WorkOptions: %w", err)
	}
	return nil
}

type worker struct {
	n       *Node
	topic   string
	handler Handler
	opts    WorkOptions
	free    chan struct{} // one token per free handler slot
	running sync.WaitGroup
}

// run processes one record: the handler under a lease kept alive by extensions, then the
// ack, the nack, or (the handler gave up because ctx ended) the release. What the handler
// returns decides, not when ctx ended: a handler that returned nil finished its record,
// even one that cancelled Work's context itself.
func (w *worker) run(ctx context.Context, m Message) {
	defer w.running.Done()
	defer func() { w.free <- struct{}{} }()
	handle := m.Receipt
	stopExtending := w.keepAlive(handle, m.Expiry)
	err := w.call(ctx, m)
	stopExtending()
	switch {
	case err == nil:
		// Without waiting for the answer: the slot takes the next record while an ack of a
		// record another node owns travels to its owner (and shares an RPC with others).
		// The ack takes no context, so an ended ctx does not refuse it; whatever does
		// (a closed node, a lease gone) OnError is told.
		w.running.Add(1) // Work returns once the ack is answered
		w.n.AckAsync(w.topic, handle, func(err error) {
			w.report(m, err)
			w.running.Done()
		})
	case ctx.Err() != nil:
		// The handler gave up because the worker is shutting down: a shutdown, not a
		// failure of the record, unless it panicked.
		if errors.Is(err, ErrHandlerPanic) {
			w.report(m, err)
		}
		w.report(m, w.n.Release(context.Background(), w.topic, handle))
	default:
		w.report(m, err)
		w.report(m, w.n.Nack(context.Background(), w.topic, handle, 0))
	}
}

// call runs the handler, turning a panic into an error.
func (w *worker) call(ctx context.Context, m Message) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: %v", ErrHandlerPanic, p)
		}
	}()
	return w.handler(ctx, m)
}

// keepAlive extends the lease every half of its remaining life, on the node's clock, until
// the returned stop is called.
func (w *worker) keepAlive(handle Handle, expiry time.Time) (stop func()) {
	var mu sync.Mutex
	stopped := false
	var cancel func() bool
	var schedule func(expiry time.Time)
	schedule = func(expiry time.Time) {
		every := max(expiry.Sub(w.n.clock.Now())/2, time.Millisecond)
		cancel = w.n.clock.AfterFunc(every, func() {
			mu.Lock()
			defer mu.Unlock()
			if stopped {
				return
			}
			next, err := w.n.Extend(context.Background(), w.topic, handle, w.opts.Visibility)
			if err != nil {
				return // the lease is gone (lifetime cap, node closed): the handler's ack will say
			}
			schedule(next)
		})
	}
	mu.Lock()
	schedule(expiry)
	mu.Unlock()
	return func() {
		mu.Lock()
		defer mu.Unlock()
		stopped = true
		cancel()
	}
}

// pause waits d on the node's clock; it reports false if ctx ended first.
func (w *worker) pause(ctx context.Context, d time.Duration) bool {
	done := make(chan struct{})
	stop := w.n.clock.AfterFunc(d, func() { close(done) })
	select {
	case <-done:
		return true
	case <-ctx.Done():
		stop()
		return false
	}
}

// release gives back records taken but not handed to a handler.
func (w *worker) release(msgs []Message) {
	for _, m := range msgs {
		w.report(m, w.n.Release(context.Background(), w.topic, m.Receipt))
		w.free <- struct{}{}
	}
}

func (w *worker) report(m Message, err error) {
	if err != nil && w.opts.OnError != nil {
		w.opts.OnError(m, err)
	}
}
