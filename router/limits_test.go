package router_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"narad.dev/consume/inflight"
	"narad.dev/consume/router"
)

// Issue 11: requests past the node's bounds are refused with ErrInvalidArgument, a 400, and
// change nothing: no lease granted, no allocation sized by what was asked.
func TestConsumeOptionsBounds(t *testing.T) {
	h := newHarness(t, 0)
	defer h.close()
	h.produce(0, 3)
	for _, opts := range []router.ConsumeOptions{
		{Max: -1},
		{Max: router.MaxBatch + 1},
		{Max: 1 << 40},
		{Wait: -time.Second},
		{Wait: router.MaxWait + 1},
		{Visibility: -time.Second},
		{Visibility: router.MaxVisibility + 1},
		{Visibility: 1<<63 - 1},
		{Pinned: true, Partition: -1},
	} {
		msgs, err := h.node.Consume(context.Background(), "orders", opts)
		require.ErrorIs(t, err, router.ErrInvalidArgument, "%+v", opts)
		require.Equal(t, 400, router.HTTPStatus(err))
		require.Empty(t, msgs)
	}
	require.Zero(t, h.node.Stats().Delivered, "nothing leased")
	require.Len(t, h.consume(router.ConsumeOptions{Max: router.MaxBatch}), 3)
}

// A batch consume's slice is sized by what is delivered, not by what was asked: a long-poll
// for MaxBatch that gets one record allocates room for a few, not a thousand.
func TestLongPollAllocatesByDelivery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, 0)
		defer h.close()
		got := h.async(router.ConsumeOptions{Max: router.MaxBatch, Wait: time.Minute})
		synctest.Wait()
		h.produce(0, 1)
		msgs := <-got
		require.Len(t, msgs, 1)
		require.Less(t, cap(msgs), 64)
	})
}

// Extend and nack durations: negative or past their maximum are ErrInvalidArgument, and the
// lease is untouched; before, Extend(-1h) meant the default, and an overflowing duration
// answered success with an expiry in the past.
func TestSettleDurationBounds(t *testing.T) {
	h := newHarness(t, 0)
	defer h.close()
	h.produce(0, 1)
	m := h.one()
	ctx := context.Background()
	for _, d := range []time.Duration{-time.Hour, router.MaxVisibility + 1, 232 * 365 * 24 * time.Hour, 1<<63 - 1} {
		_, err := h.node.Extend(ctx, "orders", m.Receipt, d)
		require.ErrorIs(t, err, router.ErrInvalidArgument, "extend %v", d)
		require.ErrorIs(t, err, inflight.ErrInvalidDuration)
	}
	for _, d := range []time.Duration{-time.Nanosecond, router.MaxDelay + 1, 1<<63 - 1} {
		err := h.node.Nack(ctx, "orders", m.Receipt, d)
		require.ErrorIs(t, err, router.ErrInvalidArgument, "nack %v", d)
	}
	expiry, err := h.node.Extend(ctx, "orders", m.Receipt, router.MaxVisibility)
	require.NoError(t, err, "the lease is still live and extends to the maximum")
	require.True(t, expiry.After(time.Now()))
	require.NoError(t, h.ack(m))
}

// Topic names: empty or longer than MaxTopicLength refused at every entry point; the longest
// accepted, in any script, is consumed, acked and persisted (before, a name whose escaped
// form passed 255 bytes answered 500 "file name too long" forever).
func TestTopicNameBounds(t *testing.T) {
	h := newHarness(t)
	defer h.close()
	ctx := context.Background()
	for _, topic := range []string{"", strings.Repeat("x", router.MaxTopicLength+1), strings.Repeat("y", 1<<16+1)} {
		_, err := h.node.Consume(ctx, topic, router.ConsumeOptions{})
		require.ErrorIs(t, err, router.ErrInvalidArgument)
		require.ErrorIs(t, h.node.Ack(ctx, topic, router.Handle{Offset: 1, Nonce: 2}), router.ErrInvalidArgument)
		_, err = h.node.Extend(ctx, topic, router.Handle{Offset: 1, Nonce: 2}, 0)
		require.ErrorIs(t, err, router.ErrInvalidArgument)
		require.ErrorIs(t, h.node.Nack(ctx, topic, router.Handle{Offset: 1, Nonce: 2}, 0), router.ErrInvalidArgument)
		require.ErrorIs(t, h.node.AckBatch(ctx, topic, []router.Handle{{Offset: 1, Nonce: 2}})[0], router.ErrInvalidArgument)
		require.ErrorIs(t, h.node.Persist(ctx, topic, 0), router.ErrInvalidArgument)
		_, err = h.node.Replay(ctx, topic, 0, 0, 1)
		require.ErrorIs(t, err, router.ErrInvalidArgument)
		require.ErrorIs(t, h.node.DeleteTopic(topic), router.ErrInvalidArgument)
		_, err = h.node.PartitionStatus(topic, 0)
		require.ErrorIs(t, err, router.ErrInvalidArgument)
		_, err = h.node.TopicStatus(topic)
		require.ErrorIs(t, err, router.ErrInvalidArgument)
		_, err = h.node.QueueStatus(ctx, topic)
		require.ErrorIs(t, err, router.ErrInvalidArgument)
		_, err = h.node.HandOff(ctx, topic, 0)
		require.ErrorIs(t, err, router.ErrInvalidArgument)
		require.ErrorIs(t, h.node.Adopt(ctx, topic, 0, nil), router.ErrInvalidArgument)
		_, err = h.node.Quarantined(topic, 0)
		require.ErrorIs(t, err, router.ErrInvalidArgument)
		_, err = h.node.RequeueAll(topic, 0)
		require.ErrorIs(t, err, router.ErrInvalidArgument)
		_, err = h.node.Purge(ctx, topic)
		require.ErrorIs(t, err, router.ErrInvalidArgument)
		require.ErrorIs(t, h.node.Release(ctx, topic, router.Handle{Offset: 1, Nonce: 2}), router.ErrInvalidArgument)
		require.ErrorIs(t, h.node.Reject(ctx, topic, router.Handle{Offset: 1, Nonce: 2}), router.ErrInvalidArgument)
	}
	for _, topic := range []string{
		strings.Repeat("注", router.MaxTopicLength/3),
		strings.Repeat("😀", router.MaxTopicLength/4),
		strings.Repeat("Z", router.MaxTopicLength),
	} {
		h.routes.Set(topic, 0)
		log := h.logs.Log(topic, 0)
		log.Append(nil, []byte("v"), time.Now())
		msgs, err := h.node.Consume(ctx, topic, router.ConsumeOptions{})
		require.NoError(t, err)
		require.Len(t, msgs, 1)
		require.NoError(t, h.node.AckDurable(ctx, topic, msgs[0].Receipt))
	}
}

// Two topics whose names differ only in case keep apart states (on a case-insensitive file
// system they shared one directory, and DeleteTopic of one removed the other's).
func TestTopicsDifferingInCase(t *testing.T) {
	h := newHarness(t)
	defer h.close()
	ctx := context.Background()
	for _, topic := range []string{"Orders", "orders"} {
		h.routes.Set(topic, 0)
		h.logs.Log(topic, 0).Append(nil, []byte(topic), time.Now())
	}
	require.False(t, strings.EqualFold(h.node.PartitionDir("Orders", 0), h.node.PartitionDir("orders", 0)))
	m, err := h.node.Consume(ctx, "Orders", router.ConsumeOptions{})
	require.NoError(t, err)
	require.NoError(t, h.node.AckDurable(ctx, "Orders", m[0].Receipt))
	h.routes.Delete("orders")
	require.NoError(t, h.node.DeleteTopic("orders"))
	_, err = h.fs.Stat(h.node.PartitionDir("Orders", 0) + "/consumer.ahead")
	require.NoError(t, err, "deleting orders leaves Orders' state")
}

// A consumer parked on a topic that is then deleted is told the topic is unknown (a 400),
// not an internal error.
func TestParkedOnDeletedTopic(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, 0)
		defer h.close()
		done := make(chan error, 1)
		go func() {
			_, err := h.node.Consume(context.Background(), "orders", router.ConsumeOptions{Wait: time.Hour})
			done <- err
		}()
		synctest.Wait()
		h.routes.Delete("orders")
		require.NoError(t, h.node.DeleteTopic("orders"))
		err := <-done
		require.True(t, errors.Is(err, router.ErrUnknownTopic), "%v", err)
		require.Equal(t, 400, router.HTTPStatus(err))
	})
}

// A topic whose directory an earlier release named differently (url path escaping kept
// uppercase letters) keeps its ack state across the upgrade: the directory moves to its new
// name at the topic's first touch.
func TestLegacyTopicDirAdopted(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	h.routes.Set("Orders", 0)
	for range 4 {
		h.logs.Log("Orders", 0).Append(nil, []byte("v"), time.Now())
	}
	msgs, err := h.node.Consume(ctx, "Orders", router.ConsumeOptions{Max: 2})
	require.NoError(t, err)
	for _, m := range msgs {
		require.NoError(t, h.node.Ack(ctx, "Orders", m.Receipt))
	}
	h.close()
	require.NoError(t, h.fs.Rename("/state/%4Frders", "/state/Orders")) // the old layout
	h.start()
	defer h.close()
	msgs, err = h.node.Consume(ctx, "Orders", router.ConsumeOptions{Max: 10})
	require.NoError(t, err)
	require.Equal(t, []int64{2, 3}, offsetsOf(msgs), "the acked records stay acked")
	_, err = h.fs.Stat("/state/Orders")
	require.Error(t, err, "the legacy directory moved")
}

// Leases alone write nothing to disk: a partition consumed and not acked has no new window
// unless its topic sets MaxDeliveries, whose attempt counts must survive a crash.
func TestUnackedConsumesWriteNothing(t *testing.T) {
	for _, maxDeliveries := range []int{0, 3} {
		synctest.Test(t, func(t *testing.T) {
			h := newHarness(t, 0)
			h.cfg.Topic = func(string) router.TopicConfig {
				return router.TopicConfig{VisibilityTimeout: time.Hour, MaxDeliveries: maxDeliveries}
			}
			h.close()
			h.start()
			defer h.close()
			h.produce(0, 5)
			h.one()
			time.Sleep(2 * time.Second) // the first touch primes the partition
			before := h.node.Stats().Committer.Windows
			h.consume(router.ConsumeOptions{Max: 4})
			time.Sleep(2 * time.Second)
			after := h.node.Stats().Committer.Windows
			if maxDeliveries == 0 {
				require.Equal(t, before, after, "no window for leases alone")
			} else {
				require.Greater(t, after, before, "attempt counts are persisted under MaxDeliveries")
			}
		})
	}
}
