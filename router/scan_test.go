package router_test

import (
	"cmp"
	"context"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"narad.dev/consume/router"
	"narad.dev/consume/router/routertest"
)

// plainLogs resolves the same logs but hides ReadRange, so the scan reads one record at a
// time.
type plainLogs struct{ logs *routertest.MemLogs }

func (p plainLogs) Get(topic string, partition int32) (router.Log, error) {
	l, err := p.logs.Get(topic, partition)
	if err != nil {
		return nil, err
	}
	return plainLog{l}, nil
}

type plainLog struct{ router.Log }

// A batch reserves a partition's share in one call and then reads it, through ReadRange when
// the log offers it and one Read per record otherwise, and both deliver the same: the
// retention jump, the corrupt skips, the byte bound (what it leaves out is given back, not
// counted as an attempt) and a closed log (everything given back, the attempt fails).
func TestBatchScanWithAndWithoutRangeReader(t *testing.T) {
	for _, ranged := range []bool{true, false} {
		name := map[bool]string{true: "ReadRange", false: "Read"}[ranged]
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHarness(t, 0)
				if !ranged {
					h.close()
					h.cfg.Logs = plainLogs{h.logs}
					h.start()
				}
				defer h.close()
				log := h.logs.Log("orders", 0)
				h.produce(0, 10)
				first := h.one()
				assert.Equal(t, int64(0), first.Offset)

				log.Trim(4)
				log.Corrupt(5)
				log.Corrupt(8)
				msgs := h.consume(router.ConsumeOptions{Max: 10})
				assert.Equal(t, []int64{4, 6, 7, 9}, offsetsOf(msgs),
					"jumped to the oldest retained offset, skipped the corrupt ones")
				st := h.node.Stats().Shards
				assert.Equal(t, uint64(1), st.RetentionJumps)
				assert.Equal(t, uint64(2), st.CorruptSkipped)
				for _, m := range msgs {
					assert.Equal(t, []byte("v"), m.Value)
					require.NoError(t, h.ack(m))
				}

				for range 5 {
					off := log.Append([]byte("k"), make([]byte, 3<<19), time.Now()) // 1.5 MiB
					h.node.Appended("orders", 0, off+1)
				}
				msgs = h.consume(router.ConsumeOptions{Max: 10})
				assert.Equal(t, []int64{10, 11, 12}, offsetsOf(msgs), "stops at 4 MiB, keeping the record that crosses")
				assert.Equal(t, uint64(2), h.node.Stats().Shards.GivenBack, "the rest given back at once")
				rest := h.consume(router.ConsumeOptions{Max: 10})
				assert.Equal(t, []int64{13, 14}, offsetsOf(rest))
				for _, m := range rest {
					assert.Equal(t, uint32(1), m.Attempt, "a give-back is not an attempt")
					assert.Len(t, m.Value, 3<<19)
					assert.Equal(t, []byte("k"), m.Key)
				}

				h.produce(0, 3)
				log.Close()
				_, err := h.node.Consume(context.Background(), "orders", router.ConsumeOptions{Max: 5})
				assert.ErrorIs(t, err, router.ErrLogClosed, "transient: the attempt fails")
				assert.Equal(t, uint64(5), h.node.Stats().Shards.GivenBack, "every reservation given back")
				fresh := routertest.NewMemLog()
				for range 18 {
					fresh.Append(nil, []byte("w"), time.Now())
				}
				h.logs.Replace("orders", 0, fresh)
				msgs = h.consume(router.ConsumeOptions{Max: 5})
				assert.Equal(t, []int64{15, 16, 17}, offsetsOf(msgs))
				for _, m := range msgs {
					assert.Equal(t, uint32(1), m.Attempt)
				}
			})
		})
	}
}

// A batch takes its records from a run of reserved offsets with gaps in it (released
// offsets below the cursor, leased again first) in offset order, whichever way it reads.
func TestBatchScanReadsAroundGaps(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, 0)
		defer h.close()
		h.produce(0, 8)
		msgs := h.consume(router.ConsumeOptions{Max: 6})
		require.Len(t, msgs, 6)
		require.NoError(t, h.node.Nack(context.Background(), "orders", msgs[1].Receipt, 0))
		require.NoError(t, h.node.Nack(context.Background(), "orders", msgs[4].Receipt, 0))
		again := h.consume(router.ConsumeOptions{Max: 10})
		assert.Equal(t, []int64{1, 4, 6, 7}, offsetsOf(again))
		for _, m := range again {
			assert.Equal(t, []byte("v"), m.Value)
		}
	})
}

// leaseThreeEach starts a node owning partitions 0 and 1 of "orders", produces three
// records to each and consumes all six.
func leaseThreeEach(t *testing.T) (*harness, []router.Message) {
	h := newHarness(t, 0, 1)
	h.produce(0, 3)
	h.produce(1, 3)
	msgs := h.consume(router.ConsumeOptions{Max: 6})
	require.Len(t, msgs, 6)
	return h, msgs
}

// AckBatch answers handles already in partition order (as one consume returns them) each on
// its own too, with a malformed one among them and a repeat in the run.
func TestAckBatchInPartitionOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, msgs := leaseThreeEach(t)
		defer h.close()
		slices.SortStableFunc(msgs, func(a, b router.Message) int { return cmp.Compare(a.Partition, b.Partition) })
		handles := []router.Handle{msgs[0].Receipt, msgs[1].Receipt, msgs[1].Receipt,
			msgs[2].Receipt, {}, msgs[3].Receipt, msgs[4].Receipt, msgs[5].Receipt}
		errs := h.node.AckBatch(context.Background(), "orders", handles)
		require.Len(t, errs, len(handles))
		for i, err := range errs {
			switch i {
			case 2:
				assert.ErrorIs(t, err, router.ErrAlreadySettled, "the repeat")
			case 4:
				assert.ErrorIs(t, err, router.ErrMalformedHandle)
			default:
				assert.NoError(t, err, "handle %d", i)
			}
		}
		for _, p := range []int32{0, 1} {
			st, err := h.node.PartitionStatus("orders", p)
			require.NoError(t, err)
			assert.Equal(t, int64(2), st.Frontier, "partition %d", p)
		}
	})
}

// AckBatch settles the local handles of each partition together and answers each handle as
// Ack would have, in order: repeats, stale and malformed handles included.
func TestAckBatchLocalByPartition(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, msgs := leaseThreeEach(t)
		defer h.close()
		stale := msgs[5]
		require.NoError(t, h.node.Nack(context.Background(), "orders", stale.Receipt, time.Hour))
		var handles []router.Handle
		for i := len(msgs) - 1; i >= 0; i-- { // in reverse order
			handles = append(handles, msgs[i].Receipt)
		}
		handles = append(handles, msgs[0].Receipt, router.Handle{})
		errs := h.node.AckBatch(context.Background(), "orders", handles)
		require.Len(t, errs, len(handles))
		assert.ErrorIs(t, errs[0], router.ErrGone, "the nacked lease")
		for i := 1; i < 6; i++ {
			assert.NoError(t, errs[i])
		}
		assert.ErrorIs(t, errs[6], router.ErrAlreadySettled, "the repeat")
		assert.ErrorIs(t, errs[7], router.ErrMalformedHandle)
		st, err := h.node.PartitionStatus("orders", msgs[0].Partition)
		require.NoError(t, err)
		assert.Equal(t, int64(2), st.Frontier)
	})
}

// A batch that took records from one partition and then meets a closed log on the next
// returns what it took, with the closed partition's reservations given back, and the next
// consume finds them: the scan does not reserve them again and again (it did, forever).
func TestBatchScanEndsAtAClosedLogAfterTakingRecords(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, 0, 1)
		defer h.close()
		h.produce(0, 2)
		h.produce(1, 10)
		h.logs.Log("orders", 1).Close()
		msgs := h.consume(router.ConsumeOptions{Max: 5}) // starts at partition 0
		assert.Equal(t, []int64{0, 1}, offsetsOf(msgs))
		_, err := h.node.Consume(context.Background(), "orders", router.ConsumeOptions{Max: 5})
		require.ErrorIs(t, err, router.ErrLogClosed, "given back, read again, closed again")
		st, err := h.node.PartitionStatus("orders", 1)
		require.NoError(t, err)
		assert.Zero(t, st.Leased, "nothing kept leased")
	})
}
