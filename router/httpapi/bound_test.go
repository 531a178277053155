package httpapi_test

import (
	"bytes"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"narad.dev/consume/router"
	"narad.dev/consume/router/httpapi"
)

// TestResponseBound: a batch whose encoding passes router.ResponseLimit is cut to what
// fits, counting JSON escapes (each '<' takes six bytes), and the records cut off are
// visible again at once, not after their visibility timeout.
func TestResponseBound(t *testing.T) {
	e := newEnv(t, httpapi.Options{})
	// 1 MiB each, half of it '<': 3.5 MiB encoded. Four are 4 MiB of payload, which one
	// scan takes; counted unescaped they would all fit in 8 MiB, but only two do.
	value := strings.Repeat("<", 512<<10) + strings.Repeat("a", 512<<10)
	e.produce(0, value, value, value, value)

	rec := e.do(http.MethodGet, "/consume?topic=orders&max=10&visibility=1h")
	require.LessOrEqual(t, rec.Body.Len(), router.ResponseLimit)
	msgs := messages(t, rec)
	require.Len(t, msgs, 2)
	for i, m := range msgs {
		require.Equal(t, int64(i), m.Offset)
		require.Equal(t, value, string(m.value()))
	}
	// The two cut off come at once to the next consume, as first deliveries.
	rest := messages(t, e.do(http.MethodGet, "/consume?topic=orders&max=10"))
	require.Len(t, rest, 2)
	require.Equal(t, []int64{2, 3}, []int64{rest[0].Offset, rest[1].Offset})
	require.Equal(t, uint32(1), rest[0].Attempt)
	require.Equal(t, http.StatusNoContent, e.do(http.MethodGet, "/consume?topic=orders").Code)

	// A single record larger than the bound is still delivered: the first always is.
	big := strings.Repeat("&", 2<<20) // 12 MiB encoded
	e.produce(0, big)
	rec = e.do(http.MethodGet, "/consume?topic=orders&max=10")
	require.Greater(t, rec.Body.Len(), router.ResponseLimit)
	require.Equal(t, big, string(one(t, rec).value()))
}

// TestResponseBoundExact: a body of exactly router.ResponseLimit bytes is served whole; one
// byte more and the last record is cut. Replays, whose records carry no lease, make the
// sizes exact to construct.
func TestResponseBoundExact(t *testing.T) {
	for _, over := range []int{0, 1} {
		e := newEnv(t, httpapi.Options{})
		log := e.logs.Log("orders", 0)
		at := time.Unix(1700000000, 0)
		first := router.Message{Topic: "orders", Offset: 0, Value: bytes.Repeat([]byte("<"), 1<<20), Timestamp: at}
		second := router.Message{Topic: "orders", Offset: 1, Value: nil, Timestamp: at}
		// The body: {"messages":[ first , second ]}
		envelope := len(`{"messages":[`) + len(`,`) + len(`]}`)
		fill := router.ResponseLimit - envelope - httpapi.MessageLen(&first) - httpapi.MessageLen(&second) + over
		second.Value = bytes.Repeat([]byte("a"), fill)
		require.Equal(t, router.ResponseLimit+over, envelope+httpapi.MessageLen(&first)+httpapi.MessageLen(&second))
		log.Append(nil, first.Value, at)
		log.Append(nil, second.Value, at)

		rec := e.do(http.MethodGet, "/consume?topic=orders&partition=0&offset=0&max=2")
		size := rec.Body.Len()
		msgs := messages(t, rec)
		if over == 0 {
			require.Len(t, msgs, 2)
			require.Equal(t, router.ResponseLimit, size)
		} else {
			require.Len(t, msgs, 1)
		}
	}
}
