package router_test

import (
	"context"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"narad.dev/consume/crashfs"
	"narad.dev/consume/inflight"
	"narad.dev/consume/internal/wire"
	"narad.dev/consume/router"
	"narad.dev/consume/router/routertest"
)

// Wire constants, as the format in wire.go lays them out.
const (
	wireAck      = 1
	wireAckBatch = 4
	wireAcks     = 21 // plain acks, compact (version 16)

	wireOK          = 0
	wireSettled     = 1
	wireGone        = 2
	wireBadRequest  = 3
	wireUnavailable = 4
	wireUnsupported = 6
)

// recorder serves a node's frames and records the op and record count of each.
type recorder struct {
	serve func(ctx context.Context, from string, frame []byte) ([]byte, error)
	// before, if set, runs before each frame is served (a slow owner), with its number.
	before func(call int)

	mu     sync.Mutex
	frames [][2]int // op, records
}

func (r *recorder) Serve(ctx context.Context, from string, frame []byte) ([]byte, error) {
	r.mu.Lock()
	call := len(r.frames)
	op, count := int(frame[0]), 1
	if op == wireAckBatch || op == wireAcks {
		topic := int(binary.BigEndian.Uint16(frame[1:]))
		count = int(binary.BigEndian.Uint16(frame[3+topic:]))
	}
	r.frames = append(r.frames, [2]int{op, count})
	r.mu.Unlock()
	if r.before != nil {
		r.before(call)
	}
	return r.serve(ctx, from, frame)
}

func (r *recorder) Frames() [][2]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([][2]int(nil), r.frames...)
}

// record joins a recorder in front of node a's Serve.
func (p *pair) record(before func(call int)) *recorder {
	r := &recorder{serve: p.a.node.Serve, before: before}
	p.net.Join("a", r.Serve)
	return r
}

// ackAll acks msgs through b, each from its own goroutine, and returns their errors.
func ackAll(p *pair, msgs []router.Message) []error {
	errs := make([]error, len(msgs))
	var wg sync.WaitGroup
	for i, m := range msgs {
		wg.Go(func() { errs[i] = p.b.node.Ack(context.Background(), "orders", m.Receipt) })
	}
	wg.Wait()
	return errs
}

// Issue 11: a batch used to run on its oldest member's deadline, so acks queued late behind
// an old one were all answered 502 at the old one's deadline, unapplied. Each member keeps
// its own 2 s budget: the batch's RPC runs until its youngest member's deadline.
func TestForwardedAckKeepsItsOwnBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPair(t, 100*time.Millisecond, 1)
		defer p.close()
		p.record(func(call int) {
			if call == 0 {
				time.Sleep(1850 * time.Millisecond) // a slow owner: the first reply comes at 1.95 s
			}
		})
		p.a.produce(0, 10)
		msgs := p.a.consume(router.ConsumeOptions{Max: 10})
		require.Len(t, msgs, 10)
		ctx := context.Background()

		var first, old error
		var wg sync.WaitGroup
		wg.Go(func() { first = p.b.node.Ack(ctx, "orders", msgs[0].Receipt) })
		synctest.Wait()
		wg.Go(func() { old = p.b.node.Ack(ctx, "orders", msgs[1].Receipt) }) // queued at 0 s
		time.Sleep(1900 * time.Millisecond)
		late := ackAll(p, msgs[2:]) // queued at 1.9 s, sent at 1.95 s with the old one
		wg.Wait()

		require.NoError(t, first)
		assert.ErrorIs(t, old, router.ErrTransport, "in flight at its own deadline: no reply came back in time")
		for i, err := range late {
			require.NoError(t, err, "ack %d queued at 1.9 s", i)
			assert.ErrorIs(t, p.b.node.Ack(ctx, "orders", msgs[2+i].Receipt), inflight.ErrAlreadySettled, "applied")
		}
	})
}

// Issue 11: an ack that never left (it waited for a slot past its budget) answers 503 and
// is never applied, while the acks that queued after it are answered on their own budgets.
func TestQueuedAckPastItsBudgetIsNotApplied(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPair(t, 0, 1)
		defer p.close()
		p.record(func(call int) {
			if call == 0 {
				time.Sleep(3 * time.Second) // the slot is held past the queued ack's budget
			}
		})
		p.a.produce(0, 2)
		msgs := p.a.consume(router.ConsumeOptions{Max: 2})
		var first error
		var wg sync.WaitGroup
		wg.Go(func() { first = p.b.node.Ack(context.Background(), "orders", msgs[0].Receipt) })
		synctest.Wait()
		queued := p.b.node.Ack(context.Background(), "orders", msgs[1].Receipt)
		assert.ErrorIs(t, queued, router.ErrUnavailable)
		assert.Equal(t, 503, router.HTTPStatus(queued))
		wg.Wait()
		assert.ErrorIs(t, first, router.ErrTransport, "no reply within its budget")
		require.NoError(t, p.a.ack(msgs[1]), "the 503 ack was not applied: its lease is still live")
		time.Sleep(time.Second) // the slow owner's Call, abandoned at 2 s, ends at 3 s
	})
}

// Issue 11: an owner does not apply an AckBatch record whose own budget ran out, even while
// the frame's RPC is still live; the other records are applied.
func TestServeSkipsARecordPastItsBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPair(t, 0, 0)
		defer p.close()
		p.a.produce(0, 2)
		msgs := p.a.consume(router.ConsumeOptions{Max: 2})
		frame := ackBatchFrame("orders", []inflight.Handle{msgs[0].Receipt, msgs[1].Receipt}, []time.Duration{time.Second, 0})
		reply, err := p.a.node.Serve(context.Background(), "b", frame)
		require.NoError(t, err)
		assert.Equal(t, []byte{wireOK, wireUnavailable}, replyStatuses(t, reply))
		require.NoError(t, p.a.ack(msgs[1]), "not applied")
		assert.ErrorIs(t, p.a.ack(msgs[0]), inflight.ErrAlreadySettled, "applied")
	})
}

// Checklist 165, issue 11: an owner that refused AckBatch is remembered for two minutes by
// a client's batch ack too (it used to send a refused AckBatch every time); after two minutes
// a batch is tried again.
func TestClientBatchAckRemembersAnOlderOwner(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPairWith(t, 0, 0, atVersion("a", 1))
		defer p.close()
		older := &olderOwner{node: p.a.node}
		p.net.Join("a", older.serve)
		ctx := context.Background()
		batchAck := func() {
			t.Helper()
			p.a.produce(0, 2)
			msgs := p.a.consume(router.ConsumeOptions{Max: 2})
			require.Len(t, msgs, 2)
			for _, err := range p.b.node.AckBatch(ctx, "orders", []router.Handle{msgs[0].Receipt, msgs[1].Receipt}) {
				require.NoError(t, err)
			}
		}
		batchAck()
		require.Equal(t, 1, older.batches)
		batchAck()
		assert.Equal(t, 1, older.batches, "single ops within two minutes of the refusal")
		time.Sleep(2*time.Minute - time.Nanosecond)
		batchAck()
		assert.Equal(t, 1, older.batches, "still remembered just before two minutes")
		time.Sleep(time.Nanosecond)
		batchAck()
		assert.Equal(t, 2, older.batches, "after two minutes a batch is tried again")
	})
}

// Issue 11: a refusal is recognised by its status, not its text: an owner whose refusal of
// an unknown op says anything at all still gets single ops, and a frame refused as
// malformed, whose text happens to name an unsupported op, is not taken for an older owner.
func TestRefusalIsAStatus(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPair(t, 0, 0)
		defer p.close()
		var refusals atomic.Int32
		status := byte(wireUnsupported)
		p.net.Join("a", func(ctx context.Context, from string, frame []byte) ([]byte, error) {
			if frame[0] == wireAckBatch || frame[0] == wireAcks {
				refusals.Add(1)
				return encodeOneAnswer(status, "nope"), nil
			}
			return p.a.node.Serve(ctx, from, frame)
		})
		p.a.produce(0, 4)
		msgs := p.a.consume(router.ConsumeOptions{Max: 4})
		ctx := context.Background()
		for _, err := range p.b.node.AckBatch(ctx, "orders", []router.Handle{msgs[0].Receipt, msgs[1].Receipt}) {
			require.NoError(t, err, "sent again one by one")
		}
		assert.Equal(t, int32(2), refusals.Load(), "the plain acks refused, then the batch")

		p2 := newPair(t, 0, 0)
		defer p2.close()
		p2.net.Join("a", func(ctx context.Context, from string, frame []byte) ([]byte, error) {
			refusals.Add(1)
			return encodeOneAnswer(3, router.ErrUnsupportedOp.Error()), nil // 400, malformed
		})
		p2.a.produce(0, 4)
		msgs = p2.a.consume(router.ConsumeOptions{Max: 4})
		for _, err := range p2.b.node.AckBatch(ctx, "orders", []router.Handle{msgs[0].Receipt, msgs[1].Receipt}) {
			assert.ErrorIs(t, err, router.ErrInvalidArgument)
		}
		assert.Equal(t, int32(3), refusals.Load(), "no other frame: a malformed frame is no older owner")
	})
}

// Issue 11: a Transport that ignores its context cannot hold a forwarded ack past its 2 s
// budget: the node stops waiting at the deadline (502, no reply came back) and discards the
// late reply; the Call's goroutine ends when the Call returns.
func TestForwardOutlastsATransportIgnoringContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		var returned atomic.Int32
		stuck := transportFunc(func(ctx context.Context, to string, frame []byte) ([]byte, error) {
			<-release // ignores ctx
			returned.Add(1)
			return encodeOneAnswer(wireOK, ""), nil
		})
		routes := &routertest.Routes{}
		routes.SetRemote("orders", "a", 0)
		node, err := router.New(router.Config{Logs: &routertest.MemLogs{}, Routes: routes, Dir: "/x", FS: crashfs.New(), Transport: stuck})
		require.NoError(t, err)
		ctx := context.Background()
		h := router.Handle{Partition: 0, Offset: 1, Nonce: 1}

		var ackErr error
		var batchErrs []error
		answered := make(chan struct{})
		go func() {
			defer close(answered)
			ackErr = node.Ack(ctx, "orders", h)
			batchErrs = node.AckBatch(ctx, "orders", []router.Handle{h, h})
		}()
		time.Sleep(2 * router.ForwardBudget)
		synctest.Wait()
		select {
		case <-answered:
		default:
			close(release)
			t.Fatal("still waiting for the Transport past the budget")
		}
		assert.ErrorIs(t, ackErr, router.ErrTransport)
		assert.Equal(t, 502, router.HTTPStatus(ackErr))
		for _, err := range batchErrs {
			assert.ErrorIs(t, err, router.ErrTransport)
		}
		assert.Zero(t, returned.Load(), "answered while the Calls were still running")
		close(release)
		synctest.Wait()
		assert.Equal(t, int32(2), returned.Load())
		require.NoError(t, node.Close())
	})
}

// Issue 11: a topic longer than MaxTopicLength (here over 64 KiB, whose length wrapped on the
// wire) is refused with ErrInvalidArgument before anything is sent.
func TestForwardRefusesALongTopic(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPair(t, 0, 0)
		defer p.close()
		ctx := context.Background()
		h := router.Handle{Partition: 0, Offset: 1, Nonce: 1}
		for _, topic := range []string{strings.Repeat("t", 1<<16+6), strings.Repeat("t", router.MaxTopicLength+1)} {
			p.b.routes.SetRemote(topic, "a", 0)
			calls := p.net.Calls()
			err := p.b.node.Ack(ctx, topic, h)
			assert.ErrorIs(t, err, router.ErrInvalidArgument)
			assert.Equal(t, 400, router.HTTPStatus(err))
			for _, err := range p.b.node.AckBatch(ctx, topic, []router.Handle{h, h}) {
				assert.ErrorIs(t, err, router.ErrInvalidArgument)
			}
			assert.Equal(t, calls, p.net.Calls(), "nothing reached the wire")
		}
	})
}

// Checklist 159: below the window every ack is its own RPC, a single op.
func TestForwardBelowTheWindowIsOneRPCPerAck(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const window = 8
		p := newPair(t, 10*time.Millisecond, window)
		defer p.close()
		r := p.record(nil)
		p.a.produce(0, window)
		msgs := p.a.consume(router.ConsumeOptions{Max: window})
		for _, err := range ackAll(p, msgs) {
			require.NoError(t, err)
		}
		frames := r.Frames()
		require.Len(t, frames, window, "one RPC per ack")
		for _, f := range frames {
			assert.Equal(t, [2]int{wireAck, 1}, f)
		}
	})
}

// Checklist 160: an AckBatch carries at most 64 records, a bigger queue leaving as several
// batches, and a queue of one leaves as the single op.
func TestForwardBatchCapAndQueueOfOne(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPair(t, 10*time.Millisecond, 1)
		defer p.close()
		r := p.record(nil)
		const acks = 1 + 150
		p.a.produce(0, acks)
		msgs := p.a.consume(router.ConsumeOptions{Max: acks})
		require.Len(t, msgs, acks)
		var wg sync.WaitGroup
		wg.Go(func() { assert.NoError(t, p.b.node.Ack(context.Background(), "orders", msgs[0].Receipt)) })
		synctest.Wait() // in flight, holding the only slot
		for _, err := range ackAll(p, msgs[1:]) {
			require.NoError(t, err)
		}
		wg.Wait()
		assert.Equal(t, [][2]int{{wireAck, 1}, {wireAcks, 64}, {wireAcks, 64}, {wireAcks, 22}}, r.Frames())

		p.a.produce(0, 2)
		msgs = p.a.consume(router.ConsumeOptions{Max: 2})
		wg.Go(func() { assert.NoError(t, p.b.node.Ack(context.Background(), "orders", msgs[0].Receipt)) })
		synctest.Wait()
		require.NoError(t, p.b.node.Ack(context.Background(), "orders", msgs[1].Receipt))
		wg.Wait()
		assert.Equal(t, [][2]int{{wireAck, 1}, {wireAck, 1}}, r.Frames()[4:], "a queue of one leaves as the single op")
	})
}

// Checklist 164, 166, 167: one client batch ack with every outcome: acked, gone, already
// settled, not owned by the owner it was routed to, no owner at all, malformed; one RPC.
func TestClientBatchAckMixedOutcomes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPair(t, 0, 0)
		defer p.close()
		p.a.produce(0, 3)
		msgs := p.a.consume(router.ConsumeOptions{Max: 3})
		ctx := context.Background()
		require.NoError(t, p.a.node.Nack(ctx, "orders", msgs[1].Receipt, time.Hour))
		require.NoError(t, p.a.ack(msgs[2]))
		p.b.routes.SetRemote("orders", "a", 0, 7) // a does not own 7
		calls := p.net.Calls()
		errs := p.b.node.AckBatch(ctx, "orders", []router.Handle{
			msgs[0].Receipt, msgs[1].Receipt, msgs[2].Receipt,
			{Partition: 7, Offset: 0, Nonce: 1}, {Partition: 9, Nonce: 1}, {},
		})
		require.NoError(t, errs[0])
		assert.ErrorIs(t, errs[1], inflight.ErrGone)
		assert.ErrorIs(t, errs[2], inflight.ErrAlreadySettled)
		assert.Equal(t, 503, router.HTTPStatus(errs[3]), "the owner does not own it")
		assert.ErrorIs(t, errs[4], router.ErrUnavailable)
		assert.ErrorIs(t, errs[5], inflight.ErrMalformedHandle)
		assert.Equal(t, []int{204, 410, 410, 503, 503, 400}, statuses(errs))
		assert.Equal(t, calls+1, p.net.Calls(), "one AckBatch")
	})
}

// Spec, "Forwarded acks": a batch whose requester gave up is answered 503, unapplied.
func TestServeAnswers503WhenTheRequesterGaveUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPair(t, 0, 0)
		defer p.close()
		p.a.produce(0, 2)
		msgs := p.a.consume(router.ConsumeOptions{Max: 2})
		gaveUp, cancel := context.WithCancel(context.Background())
		cancel()
		frame := ackBatchFrame("orders", []inflight.Handle{msgs[0].Receipt, msgs[1].Receipt}, []time.Duration{time.Second, time.Second})
		reply, err := p.a.node.Serve(gaveUp, "b", frame)
		require.NoError(t, err)
		assert.Equal(t, []byte{wireUnavailable, wireUnavailable}, replyStatuses(t, reply))
		require.NoError(t, p.a.ack(msgs[0]), "not applied")
		require.NoError(t, p.a.ack(msgs[1]), "not applied")
	})
}

func statuses(errs []error) []int {
	out := make([]int, len(errs))
	for i, err := range errs {
		out[i] = router.HTTPStatus(err)
	}
	return out
}

// ackBatchFrame lays out an AckBatch of acks by hand, each with its budget.
func ackBatchFrame(topic string, handles []inflight.Handle, budgets []time.Duration) []byte {
	b := []byte{wireAckBatch}
	b = binary.BigEndian.AppendUint16(b, uint16(len(topic)))
	b = append(b, topic...)
	b = binary.BigEndian.AppendUint16(b, uint16(len(handles)))
	for i, h := range handles {
		b = append(b, wireAck)
		b = binary.BigEndian.AppendUint32(b, uint32(h.Partition))
		b = binary.BigEndian.AppendUint64(b, uint64(h.Offset))
		b = binary.BigEndian.AppendUint64(b, h.Nonce)
		b = binary.BigEndian.AppendUint64(b, 0)
		b = binary.BigEndian.AppendUint64(b, uint64(budgets[i]))
	}
	return b
}

// encodeOneAnswer lays out a reply of one answer by hand.
func encodeOneAnswer(status byte, message string) []byte {
	b := binary.BigEndian.AppendUint16(nil, 1)
	b = append(b, status)
	b = binary.BigEndian.AppendUint64(b, 0)
	b = binary.BigEndian.AppendUint16(b, uint16(len(message)))
	return append(b, message...)
}

// replyStatuses reads the status of each answer of a reply frame.
func replyStatuses(t *testing.T, reply []byte) []byte {
	t.Helper()
	require.GreaterOrEqual(t, len(reply), 2)
	count := int(binary.BigEndian.Uint16(reply))
	reply = reply[2:]
	var out []byte
	for range count {
		require.GreaterOrEqual(t, len(reply), 11)
		out = append(out, reply[0])
		n := int(binary.BigEndian.Uint16(reply[9:]))
		reply = reply[11+n:]
	}
	return out
}

// A node at WireVersion 1 plays a release before AckBatch: it refuses an AckBatch with the
// unsupported status, applying none of it, and a newer requester then sends single ops,
// which it applies.
func TestWireVersionOneRefusesAckBatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPairWith(t, 0, 0, atVersion("a", 1))
		defer p.close()
		p.a.produce(0, 2)
		msgs := p.a.consume(router.ConsumeOptions{Max: 2})
		frame := ackBatchFrame("orders", []inflight.Handle{msgs[0].Receipt, msgs[1].Receipt}, []time.Duration{time.Second, time.Second})
		reply, err := p.a.node.Serve(context.Background(), "b", frame)
		require.NoError(t, err)
		assert.Equal(t, []byte{wireUnsupported}, replyStatuses(t, reply))
		assert.Zero(t, p.a.node.Stats().Shards.Acked, "nothing of the refused batch applied")

		r := p.record(nil)
		for _, err := range p.b.node.AckBatch(context.Background(), "orders", []router.Handle{msgs[0].Receipt, msgs[1].Receipt}) {
			require.NoError(t, err)
		}
		assert.Equal(t, [][2]int{{wireAcks, 2}, {wireAckBatch, 2}, {wireAck, 1}, {wireAck, 1}}, r.Frames(), "refused plain acks, a refused batch, then single ops")
		assert.Equal(t, uint64(2), p.a.node.Stats().Shards.Acked)
	})
}

// An AckBatch of a consume's whole batch goes to its owner in one frame (wire version 13),
// as plain acks in their compact form (version 16). An owner on a release before 16 refuses
// the Acks op, applying none of it: the acks go again as an AckBatch, and so do the next for
// two minutes. One before 13 refuses a batch past wire.MaxBatch records too: the batch goes
// again in batches of MaxBatch, and so does the next for two minutes; a requester before
// either sends the frames it knows itself.
func TestAckBatchOfAWholeConsumeInOneFrame(t *testing.T) {
	const size = 100
	for _, tc := range []struct {
		name        string
		edit        func(string, *router.Config)
		first, next [][2]int
	}{
		{"both newest", nil, [][2]int{{wireAcks, size}}, [][2]int{{wireAcks, size}}},
		{"owner at version 15", atVersion("a", 15),
			[][2]int{{wireAcks, size}, {wireAckBatch, size}},
			[][2]int{{wireAckBatch, size}}},
		{"owner at version 11", atVersion("a", 11),
			[][2]int{{wireAcks, size}, {wireAckBatch, size}, {wireAckBatch, wire.MaxBatch}, {wireAckBatch, size - wire.MaxBatch}},
			[][2]int{{wireAckBatch, wire.MaxBatch}, {wireAckBatch, size - wire.MaxBatch}}},
		{"requester at version 15", atVersion("b", 15),
			[][2]int{{wireAckBatch, size}},
			[][2]int{{wireAckBatch, size}}},
		{"requester at version 11", atVersion("b", 11),
			[][2]int{{wireAckBatch, wire.MaxBatch}, {wireAckBatch, size - wire.MaxBatch}},
			[][2]int{{wireAckBatch, wire.MaxBatch}, {wireAckBatch, size - wire.MaxBatch}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := newPairWith(t, 0, 0, tc.edit)
				defer p.close()
				p.a.produce(0, 3*size)
				r := p.record(nil)
				for round, want := range [][][2]int{tc.first, tc.next, tc.first} {
					if round == 2 {
						time.Sleep(2*time.Minute + time.Second) // the refusal forgotten
					}
					msgs := p.a.consume(router.ConsumeOptions{Max: size})
					require.Len(t, msgs, size)
					handles := make([]router.Handle, len(msgs))
					for i := range msgs {
						handles[i] = msgs[i].Receipt
					}
					before := len(r.Frames())
					for _, err := range p.b.node.AckBatch(context.Background(), "orders", handles) {
						require.NoError(t, err)
					}
					assert.Equal(t, want, r.Frames()[before:], "round %d", round)
					assert.Equal(t, uint64((round+1)*size), p.a.node.Stats().Shards.Acked, "each acked once")
				}
			})
		})
	}
}

// ackBatchesAtOnce consumes batches batches of size on p's owner a, then acks each through
// b, from its own goroutine, all at once, and returns each batch's handles and errors.
func ackBatchesAtOnce(t *testing.T, p *pair, batches, size int) ([][]router.Handle, [][]error) {
	var handles [][]router.Handle
	for range batches {
		msgs := p.a.consume(router.ConsumeOptions{Max: size})
		require.Len(t, msgs, size)
		handles = append(handles, receipts(msgs))
	}
	errs := make([][]error, batches)
	var wg sync.WaitGroup
	for i := range batches {
		wg.Go(func() { errs[i] = p.b.node.AckBatch(context.Background(), "orders", handles[i]) })
	}
	wg.Wait()
	return handles, errs
}

// The AckBatches of consumers acking at once share frames: two go out at once, and the
// six that came while they were out leave together when they come back (in one frame, or
// two when the second slot is passed on before the first batch to leave took the rest).
func TestConcurrentAckBatchesShareAFrame(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPair(t, 10*time.Millisecond, 0)
		defer p.close()
		p.a.produce(0, 800)
		r := p.record(nil)
		_, batches := ackBatchesAtOnce(t, p, 8, 100)
		for _, errs := range batches {
			for _, err := range errs {
				require.NoError(t, err)
			}
		}
		frames := r.Frames()
		assert.LessOrEqual(t, len(frames), 4, "%v", frames)
		sent := 0
		for _, f := range frames {
			assert.Equal(t, wireAcks, f[0])
			sent += f[1]
		}
		assert.Equal(t, 800, sent, "each sent once: %v", frames)
		assert.Equal(t, uint64(800), p.a.node.Stats().Shards.Acked, "each acked once")
	})
}

// A batch queued behind batches out to an owner that hangs keeps its own budget: spent in
// the queue, its acks are answered 503 and never sent, so the owner never applies them.
func TestQueuedAckBatchSpentIsNotSent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPair(t, time.Millisecond, 0)
		defer p.close()
		p.a.produce(0, 400)
		r := p.record(func(call int) {
			if call < 2 {
				time.Sleep(router.ForwardBudget + time.Second) // the two out hang past their budgets
			}
		})
		handles, errs := ackBatchesAtOnce(t, p, 4, 100)
		var queued [][]router.Handle
		for i, batch := range errs {
			switch {
			case errors.Is(batch[0], router.ErrTransport): // out, unanswered: applied or not
			case errors.Is(batch[0], router.ErrUnavailable): // spent in the queue: not applied
				queued = append(queued, handles[i])
			default:
				t.Fatalf("batch %d answered %v", i, batch[0])
			}
			for _, err := range batch {
				assert.Equal(t, batch[0], err, "batch %d: each ack answered as the others", i)
			}
		}
		assert.Len(t, queued, 2, "two were out, two queued")
		time.Sleep(2 * time.Second) // the hung owner is done with the two it got
		synctest.Wait()
		assert.Len(t, r.Frames(), 2, "the queued batches were never sent")
		for _, batch := range queued {
			for _, err := range p.a.node.AckBatch(context.Background(), "orders", batch) {
				assert.NoError(t, err, "still leased at the owner: the queued ack was not applied")
			}
		}
	})
}

// A requester at WireVersion 1 sends no AckBatch: its batch acks, and the acks queued behind
// a full window, leave one at a time.
func TestWireVersionOneSendsSingleOps(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPairWith(t, 10*time.Millisecond, 1, atVersion("b", 1))
		defer p.close()
		r := p.record(nil)
		p.a.produce(0, 6)
		msgs := p.a.consume(router.ConsumeOptions{Max: 6})
		require.Len(t, msgs, 6)
		for _, err := range p.b.node.AckBatch(context.Background(), "orders", []router.Handle{msgs[0].Receipt, msgs[1].Receipt}) {
			require.NoError(t, err)
		}
		var wg sync.WaitGroup
		wg.Go(func() { assert.NoError(t, p.b.node.Ack(context.Background(), "orders", msgs[2].Receipt)) })
		synctest.Wait() // in flight, holding the only slot
		for _, err := range ackAll(p, msgs[3:]) {
			require.NoError(t, err)
		}
		wg.Wait()
		frames := r.Frames()
		require.Len(t, frames, 6)
		for _, f := range frames {
			assert.Equal(t, [2]int{wireAck, 1}, f)
		}
		assert.Equal(t, uint64(6), p.a.node.Stats().Shards.Acked)
	})
}

// Checklist 152-154: a node answers each frame of consumption across nodes in its reply
// format; one whose version predates the op refuses it with the unsupported status, and one
// whose version predates a Consume's field refuses it as a bad request, as an older release
// does (in the ack reply format, which a requester reads as a consume reply too).
func TestServeAnswersConsumptionFrames(t *testing.T) {
	probe := wire.Request{Op: wire.OpConsume, Topic: "orders", Consume: wire.Consume{RequestID: 1, Pinned: -1}}
	claim, batch := probe, probe
	claim.Consume.Claim = true
	batch.Consume.Max = 10
	register := wire.Request{Op: wire.OpRegister, Registrations: []wire.Registration{{Topic: "orders", TTL: time.Minute}}}
	for _, tc := range []struct {
		name    string
		version uint8
		req     wire.Request
		status  byte
	}{
		{"consume", 0, probe, wire.StatusOK},
		{"claim", 0, claim, wire.StatusOK},
		{"batch", 0, batch, wire.StatusOK},
		{"replay", 0, wire.Request{Op: wire.OpReplay, Topic: "orders", Replay: wire.Replay{Limit: 1}}, wire.StatusOK},
		{"replay elsewhere", 0, wire.Request{Op: wire.OpReplay, Topic: "orders", Replay: wire.Replay{Partition: 7, Limit: 1}}, wire.StatusUnavailable},
		{"cancel", 0, wire.Request{Op: wire.OpCancel, Topic: "orders", RequestID: 1}, wire.StatusOK},
		{"register", 0, register, wire.StatusOK},
		{"notify with nobody parked", 0, wire.Request{Op: wire.OpNotify, Topic: "orders", Hold: time.Second}, wire.StatusPass},
		{"pass", 0, wire.Request{Op: wire.OpPass, Topic: "orders"}, wire.StatusOK},
		{"drop", 0, wire.Request{Op: wire.OpDrop, Topic: "orders"}, wire.StatusOK},
		{"consume at v2", 2, probe, wire.StatusUnsupported},
		{"register at v3", 3, register, wire.StatusUnsupported},
		{"claim at v4", 4, claim, wire.StatusBadRequest},
		{"batch at v5", 5, batch, wire.StatusBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			routes := &routertest.Routes{}
			routes.Set("orders", 0)
			logs := &routertest.MemLogs{}
			logs.Log("orders", 0)
			node, err := router.New(router.Config{Logs: logs, Routes: routes, Dir: "/state", FS: crashfs.New(), WireVersion: tc.version, Transport: unreachable{}})
			require.NoError(t, err)
			defer node.Close()
			frame, err := wire.EncodeRequest(tc.req)
			require.NoError(t, err)
			reply, err := node.Serve(context.Background(), "b", frame)
			require.NoError(t, err)
			if tc.req.Op == wire.OpConsume || tc.req.Op == wire.OpReplay {
				r, err := wire.DecodeConsumeReply(reply)
				require.NoError(t, err)
				assert.Equal(t, tc.status, r.Status, r.Message)
				return
			}
			assert.Equal(t, []byte{tc.status}, replyStatuses(t, reply))
		})
	}
}

// A node pinned to version 6 (a rolling upgrade) refuses the frames of version 7 as a version
// 6 release does: a record op it does not know as unsupported, a batch carrying one or a
// Consume carrying a newer field as a bad request.
func TestServeRefusesFramesNewerThanItServes(t *testing.T) {
	h := wire.Handle{Partition: 0, Offset: 0, Nonce: 1}
	relative := wire.Request{Op: wire.OpConsume, Topic: "orders", Consume: wire.Consume{RequestID: 1, Pinned: -1, Max: 5, RelativeExpiry: true}}
	for _, tc := range []struct {
		name   string
		req    wire.Request
		status byte
	}{
		{"release", wire.Request{Op: wire.OpRelease, Topic: "orders", Records: []wire.Record{{Op: wire.OpRelease, Handle: h}}}, wire.StatusUnsupported},
		{"extend-left", wire.Request{Op: wire.OpExtendLeft, Topic: "orders", Records: []wire.Record{{Op: wire.OpExtendLeft, Handle: h, Arg: time.Second}}}, wire.StatusUnsupported},
		{"durable ack", wire.Request{Op: wire.OpAckDurable, Topic: "orders", Records: []wire.Record{{Op: wire.OpAckDurable, Handle: h}}}, wire.StatusUnsupported},
		{"a batch with a release", wire.Request{Op: wire.OpAckBatch, Topic: "orders", Records: []wire.Record{{Op: wire.OpAck, Handle: h, Budget: time.Second}, {Op: wire.OpRelease, Handle: h, Budget: time.Second}}}, wire.StatusBadRequest},
		{"relative expiry", relative, wire.StatusBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			routes := &routertest.Routes{}
			routes.Set("orders", 0)
			logs := &routertest.MemLogs{}
			logs.Log("orders", 0)
			node, err := router.New(router.Config{Logs: logs, Routes: routes, Dir: "/state", FS: crashfs.New(), Transport: unreachable{}, WireVersion: 6})
			require.NoError(t, err)
			defer node.Close()
			frame, err := wire.EncodeRequest(tc.req)
			require.NoError(t, err)
			reply, err := node.Serve(context.Background(), "b", frame)
			require.NoError(t, err)
			if tc.req.Op == wire.OpConsume {
				r, err := wire.DecodeConsumeReply(reply)
				require.NoError(t, err)
				assert.Equal(t, tc.status, r.Status, r.Message)
				return
			}
			assert.Equal(t, []byte{tc.status}, replyStatuses(t, reply))
		})
	}
}

// Config.WireVersion is zero (the newest) or a version this release speaks, which a version
// the codec knows but router does not serve yet is not.
func TestNewRefusesAnUnknownWireVersion(t *testing.T) {
	for version := range uint8(wire.Newest) + 2 {
		fsys := crashfs.New()
		node, err := router.New(router.Config{Logs: &routertest.MemLogs{}, Routes: &routertest.Routes{}, Dir: "/state", FS: fsys, WireVersion: version})
		if version <= uint8(wire.Newest) {
			require.NoError(t, err, "version %d", version)
			require.NoError(t, node.Close())
			continue
		}
		require.ErrorIs(t, err, router.ErrInvalidArgument)
		assert.Contains(t, err.Error(), "Config.WireVersion")
		assert.Equal(t, 400, router.HTTPStatus(err))
	}
}

// Queued forwarded acks given up at random moments, round after round on one lane (whose
// answer channels are reused), half of them with a handle whose nonce is wrong: each call
// gets its own ack's answer. One answered success was applied on the owner and was a real
// handle; one given up before its batch left (context.Canceled) was not applied; a wrong
// handle is never answered success, a real one never ErrGone.
func TestQueuedAcksGetTheirOwnAnswersUnderCancels(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPair(t, 10*time.Millisecond, 1) // one slot: every ack but one queues
		defer p.close()
		p.record(func(int) { time.Sleep(40 * time.Millisecond) }) // the slot is held a while
		rng := rand.New(rand.NewPCG(7, 11))
		counts := map[string]int{}
		for round := range 4 {
			const acks = 24
			p.a.produce(0, acks)
			msgs := p.a.consume(router.ConsumeOptions{Max: acks})
			require.Len(t, msgs, acks)
			errs := make([]error, acks)
			wrong := make([]bool, acks)
			var wg sync.WaitGroup
			for i, m := range msgs {
				handle := m.Receipt
				if wrong[i] = rng.IntN(2) == 0; wrong[i] {
					handle.Nonce++
				}
				cancelAfter := time.Duration(rng.IntN(120)) * time.Millisecond
				wg.Go(func() {
					ctx, cancel := context.WithTimeout(context.Background(), cancelAfter)
					defer cancel()
					errs[i] = p.b.node.Ack(ctx, "orders", handle)
				})
			}
			wg.Wait()
			for i, m := range msgs {
				again := p.a.ack(m) // on the owner: settled already, or still leased
				switch {
				case wrong[i]:
					assert.Error(t, errs[i], "round %d, ack %d: a wrong nonce is never answered success", round, i)
					assert.NoError(t, again, "round %d, ack %d: a wrong nonce settles nothing", round, i)
					counts["wrong"]++
				case errs[i] == nil:
					assert.ErrorIs(t, again, router.ErrAlreadySettled, "round %d, ack %d answered success: applied", round, i)
					counts["applied"]++
				case errors.Is(errs[i], context.DeadlineExceeded):
					assert.NoError(t, again, "round %d, ack %d given up before it left: not applied", round, i)
					counts["given up"]++
				default: // a 502 or 503: no answer came back in time, or no slot
					assert.NotErrorIs(t, errs[i], router.ErrGone, "round %d, ack %d: a real handle", round, i)
					if again != nil {
						assert.ErrorIs(t, again, router.ErrAlreadySettled, "round %d, ack %d", round, i)
					}
				}
			}
		}
		for _, outcome := range []string{"wrong", "applied", "given up"} {
			assert.Positive(t, counts[outcome], outcome)
		}
	})
}
