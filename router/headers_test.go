package router_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"narad.dev/consume/internal/wire"
	"narad.dev/consume/router"
)

// headersOf returns the headers the tests produce record off of a partition with: none for
// every third record, otherwise some naming off, a key repeated, an empty value.
func headersOf(p int32, off int64) []router.Header {
	if off%3 == 2 {
		return nil
	}
	id := fmt.Sprintf("%d/%d", p, off)
	return []router.Header{{Key: "trace", Value: []byte("t-" + id)}, {Key: "retry", Value: nil}, {Key: "trace", Value: []byte{0xff, byte(off)}}}
}

// checkHeaders checks each message carries the headers its record was produced with, or,
// with none set, no headers at all.
func checkHeaders(t *testing.T, msgs []router.Message, none bool) {
	t.Helper()
	require.NotEmpty(t, msgs)
	for _, m := range msgs {
		want := headersOf(m.Partition, m.Offset)
		if none {
			want = nil
		}
		assert.Equal(t, normalized(want), normalized(m.Headers), "offset %d/%d", m.Partition, m.Offset)
	}
}

// normalized is headers with empty values as nil, so that equal headers compare equal.
func normalized(headers []router.Header) []router.Header {
	if len(headers) == 0 {
		return nil
	}
	out := make([]router.Header, len(headers))
	for i, h := range headers {
		out[i] = h
		if len(h.Value) == 0 {
			out[i].Value = nil
		}
	}
	return out
}

// Checklist: headers pass from the log's records to the messages on every local path: a
// single consume (Read), a batch (ReadRange), a parked consume handed a record by the pump,
// a pinned consume, and a replay.
func TestLocalDeliveryCarriesHeaders(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, 0, 1)
		defer h.close()
		produce := func(p int32, n int) {
			log := h.logs.Log("orders", p)
			for range n {
				off := log.HighWatermark()
				log.AppendRecord(router.Record{Value: []byte("v"), Timestamp: time.Now(), Headers: headersOf(p, off)})
				h.node.Appended("orders", p, off+1)
			}
		}
		produce(0, 12)
		single := h.consume(router.ConsumeOptions{})
		require.Len(t, single, 1)
		checkHeaders(t, single, false)
		batch := h.consume(router.ConsumeOptions{Max: 10})
		require.Len(t, batch, 10)
		checkHeaders(t, batch, false)

		got := h.async(router.ConsumeOptions{Pinned: true, Partition: 1, Wait: time.Minute})
		synctest.Wait()
		produce(1, 2)
		parked := <-got
		checkHeaders(t, parked, false)
		pinned := h.consume(router.ConsumeOptions{Pinned: true, Partition: 1, Max: 5})
		checkHeaders(t, pinned, false)
		assert.Len(t, append(parked, pinned...), 2)

		replayed, err := h.node.Replay(context.Background(), "orders", 0, 0, 12)
		require.NoError(t, err)
		require.Len(t, replayed, 12)
		checkHeaders(t, replayed, false)

		// The caller owns what it was handed: changing a message's headers changes no
		// later delivery.
		require.NotEmpty(t, batch[0].Headers)
		batch[0].Headers[0].Value[0] ^= 0xff
		again, err := h.node.Replay(context.Background(), "orders", 0, batch[0].Offset, 1)
		require.NoError(t, err)
		checkHeaders(t, again, false)
	})
}

// Checklist: the batch bound counts headers: records whose bytes are all in their headers
// stop a batch at BatchPayloadBytes as their values would.
func TestBatchBoundCountsHeaders(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, 0)
		defer h.close()
		log := h.logs.Log("orders", 0)
		big := strings.Repeat("h", router.BatchPayloadBytes/4)
		for range 10 {
			off := log.AppendRecord(router.Record{Headers: []router.Header{{Key: big[:10], Value: []byte(big)}}})
			h.node.Appended("orders", 0, off+1)
		}
		// Each record carries a quarter of the bound and a little more: the fourth crosses it.
		assert.Len(t, h.consume(router.ConsumeOptions{Max: 10}), 4)
		replayed, err := h.node.Replay(context.Background(), "orders", 0, 0, 10)
		require.NoError(t, err)
		assert.Len(t, replayed, 4, "a replay's bound too")
	})
}

// Checklist: across nodes, a record's headers reach the consumer when both nodes speak wire
// version 9: on a probe, a batch, a claim after a notification, a pinned consume and a
// replay; when either is pinned to version 8, the records come without them (the owner
// drops them for a requester that did not ask; a requester at 8 cannot ask), and a
// version 9 requester asking an owner at 8 costs one refused request, remembered.
func TestHeadersAcrossNodes(t *testing.T) {
	for _, tc := range []struct {
		name    string
		pinned  string // the node pinned to version 8, if any
		headers bool
	}{
		{"both at version 9", "", true},
		{"owner at version 8", "b", false},
		{"requester at version 8", "g", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var seen frames
				c := newCluster(t, rtt, map[string][]int32{"b": {0, 1}, "g": nil}, func(id string, cfg *router.Config) {
					if id == tc.pinned {
						cfg.WireVersion = 8
					}
					cfg.Transport = observedTransport{cfg.Transport, &seen}
				})
				defer c.close()
				produce := func(p int32, n int) {
					log := c.logs.Log("orders", p)
					for range n {
						off := log.HighWatermark()
						log.AppendRecord(router.Record{Value: []byte("v"), Headers: headersOf(p, off)})
						c.owner(p).node.Appended("orders", p, off+1)
					}
				}
				ctx := context.Background()
				g := c.nodes["g"]
				produce(0, 9)
				calls := c.net.Calls()
				probe := g.consume(ctx, router.ConsumeOptions{})
				require.Len(t, probe, 1)
				wantCalls := int64(1)
				if tc.pinned == "b" {
					// The Compact flag refused (version 16), then the Reserve flag (reading
					// ahead), then the Headers flag, then the probe without any.
					wantCalls = 4
				}
				assert.Equal(t, wantCalls, c.net.Calls()-calls, "the probe's requests")
				checkHeaders(t, probe, !tc.headers)
				batch := g.consume(ctx, router.ConsumeOptions{Max: 5})
				require.Len(t, batch, 5)
				checkHeaders(t, batch, !tc.headers)

				// A claim after a notification.
				got := g.async(ctx, router.ConsumeOptions{Pinned: true, Partition: 1, Wait: time.Minute})
				time.Sleep(100 * time.Millisecond)
				synctest.Wait()
				produce(1, 1)
				claimed := <-got
				require.Len(t, claimed, 1)
				checkHeaders(t, claimed, !tc.headers)

				replayed, err := g.node.Replay(ctx, "orders", 0, 0, 9)
				require.NoError(t, err)
				require.Len(t, replayed, 9)
				checkHeaders(t, replayed, !tc.headers)

				// Remembered: a second replay and consume at an older owner are refused no more.
				calls = c.net.Calls()
				_, err = g.node.Replay(ctx, "orders", 0, 0, 1)
				require.NoError(t, err)
				require.Len(t, g.consume(ctx, router.ConsumeOptions{}), 1)
				assert.Equal(t, int64(2), c.net.Calls()-calls, "no refusal once remembered")
			})
		})
	}
}

// Checklist: an owner writes headers into a consume or replay reply only for a frame that
// asks for them (a requester at version 9): to one that does not, the reply is the version
// 8 reply, byte for byte in form (mark 0xC5, no headers after the values).
func TestServeSendsHeadersOnlyWhenAsked(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, 0)
		defer h.close()
		log := h.logs.Log("orders", 0)
		for off := range int64(4) {
			log.AppendRecord(router.Record{Value: []byte("v"), Headers: headersOf(0, off)})
		}
		h.node.Appended("orders", 0, 4)
		for _, tc := range []struct {
			name    string
			req     wire.Request
			headers bool
		}{
			{"consume at version 8", wire.Request{Op: wire.OpConsume, Topic: "orders", Consume: wire.Consume{RequestID: 1, Pinned: -1, Max: 2, RelativeExpiry: true}}, false},
			{"consume at version 9", wire.Request{Op: wire.OpConsume, Topic: "orders", Consume: wire.Consume{RequestID: 2, Pinned: -1, Max: 2, RelativeExpiry: true, Headers: true}}, true},
			{"replay at version 8", wire.Request{Op: wire.OpReplay, Topic: "orders", Replay: wire.Replay{Limit: 4}}, false},
			{"replay at version 9", wire.Request{Op: wire.OpReplay, Topic: "orders", Replay: wire.Replay{Limit: 4, Headers: true}}, true},
		} {
			frame, err := wire.EncodeRequest(tc.req)
			require.NoError(t, err)
			raw, err := h.node.Serve(context.Background(), "b", frame)
			require.NoError(t, err)
			reply, err := wire.DecodeConsumeReply(raw)
			require.NoError(t, err, tc.name)
			require.NotEmpty(t, reply.Deliveries, tc.name)
			want := byte(0xC5)
			if tc.headers {
				want = 0xC7
			}
			assert.Equal(t, want, raw[0], "%s: the reply's mark", tc.name)
			for _, d := range reply.Deliveries {
				var got []router.Header
				for _, hd := range d.Headers {
					got = append(got, router.Header(hd))
				}
				wantHeaders := headersOf(0, d.Offset)
				if !tc.headers {
					wantHeaders = nil
				}
				assert.Equal(t, normalized(wantHeaders), normalized(got), "%s: offset %d", tc.name, d.Offset)
			}
		}
	})
}
