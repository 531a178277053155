package router_test

import (
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"narad.dev/consume/router"
)

// delayHeader is the header the tests' records carry their delay in, in seconds.
const delayHeader = "delay-seconds"

// notBeforeOf is a host's Config.NotBefore: a record is due its delay after its timestamp.
func notBeforeOf(_ string, rec router.Record) time.Time {
	for _, h := range rec.Headers {
		if h.Key == delayHeader {
			s, _ := strconv.Atoi(string(h.Value))
			return rec.Timestamp.Add(time.Duration(s) * time.Second)
		}
	}
	return time.Time{}
}

// delayedHarness is a one-partition node with Config.NotBefore, and ordered when asked.
func delayedHarness(t *testing.T, cfg router.TopicConfig) *harness {
	t.Helper()
	h := newHarness(t, 0)
	h.cfg.NotBefore = notBeforeOf
	cfg.VisibilityTimeout = vt
	h.cfg.Topic = func(string) router.TopicConfig { return cfg }
	h.restart(nil)
	return h
}

// produceDelayed appends a record of key (none when empty) due delay after now.
func (h *harness) produceDelayed(key string, delay time.Duration) {
	rec := router.Record{Value: []byte("v"), Timestamp: time.Now()}
	if key != "" {
		rec.Key = []byte(key)
	}
	if delay > 0 {
		rec.Headers = []router.Header{{Key: delayHeader, Value: []byte(strconv.Itoa(int(delay / time.Second)))}}
	}
	off := h.logs.Log("orders", 0).AppendRecord(rec)
	h.node.Appended("orders", 0, off+1)
}

// A record due later is not delivered before its time, spends no attempt (MaxDeliveries 1
// quarantines nothing), holds nothing up, and is delivered when due: to a consume then, and
// to a consumer parked for it, woken at its time.
func TestNotBefore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := delayedHarness(t, router.TopicConfig{MaxDeliveries: 1})
		defer h.close()
		h.produceDelayed("", time.Minute)
		h.produceDelayed("", 0)
		now := h.consume(router.ConsumeOptions{Max: 10})
		require.Equal(t, []int64{1}, offsetsOf(now))
		require.NoError(t, h.ack(now[0]))
		require.Empty(t, h.consume(router.ConsumeOptions{Max: 10}))
		st, err := h.node.PartitionStatus("orders", 0)
		require.NoError(t, err)
		require.Equal(t, 1, st.Delayed)
		require.Equal(t, uint64(1), h.node.Stats().Shards.Postponed)

		start := time.Now()
		got := h.consume(router.ConsumeOptions{Wait: 5 * time.Minute})
		require.Equal(t, []int64{0}, offsetsOf(got), "a parked consumer gets it when it is due")
		require.Equal(t, time.Minute, time.Since(start))
		require.Equal(t, uint32(1), got[0].Attempt)
		require.Equal(t, router.ReasonFirst, got[0].Reason)
		require.Zero(t, h.node.Stats().Shards.Quarantined)
	})
}

// A consumer already parked when a delayed record arrives (the pump reserves it for the
// consumer, which reads it and finds it due later) waits on, and gets it when it is due;
// a restart meanwhile postpones it again to the same time.
func TestNotBeforeThroughThePump(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := delayedHarness(t, router.TopicConfig{})
		start := time.Now()
		got := h.async(router.ConsumeOptions{Wait: 5 * time.Minute})
		synctest.Wait()
		h.produceDelayed("", 30*time.Second)
		synctest.Wait()
		select {
		case msgs := <-got:
			t.Fatalf("delivered before its time: %v", offsetsOf(msgs))
		default:
		}
		msgs := <-got
		require.Equal(t, []int64{0}, offsetsOf(msgs))
		require.Equal(t, 30*time.Second, time.Since(start))

		h.produceDelayed("", time.Minute)
		h.restart(nil)
		defer h.close()
		again := h.consume(router.ConsumeOptions{Max: 10})
		require.Equal(t, []int64{0}, offsetsOf(again), "0's lease died with the process")
		require.NoError(t, h.ack(again[0]))
		time.Sleep(time.Minute)
		require.Equal(t, []int64{1}, offsetsOf(h.consume(router.ConsumeOptions{Max: 10})))
	})
}

// On an ordered topic a record due later holds its key's later records back until it is
// delivered; the other keys go on.
func TestNotBeforeOrdered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := delayedHarness(t, router.TopicConfig{Ordered: true})
		defer h.close()
		h.produceDelayed("a", time.Minute)
		h.produceDelayed("a", 0)
		h.produceDelayed("b", 0)
		b := h.consume(router.ConsumeOptions{Max: 10})
		require.Equal(t, []int64{2}, offsetsOf(b))
		require.NoError(t, h.ack(b[0]))
		time.Sleep(time.Minute)
		first := h.consume(router.ConsumeOptions{Max: 10})
		require.Equal(t, []int64{0}, offsetsOf(first), "a's delayed 0 first; its 1 once 0 is settled")
		require.NoError(t, h.ack(first[0]))
		require.Equal(t, []int64{1}, offsetsOf(h.consume(router.ConsumeOptions{Max: 10})))
	})
}
