package httpapi_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"narad.dev/consume/router/httpapi"
)

// TestLongPollWokenByAppend: a parked consume answers with the record an append brings.
func TestLongPollWokenByAppend(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, httpapi.Options{})
		done := make(chan *httptest.ResponseRecorder)
		go func() { done <- e.do(http.MethodGet, "/consume?topic=orders&wait=20s&max=5") }()
		synctest.Wait()
		require.Equal(t, 1, e.node.Parked("orders"))
		start := time.Now()
		e.produce(0, "hello")
		m := one(t, <-done)
		require.Equal(t, "hello", string(m.value()))
		require.Equal(t, start, time.Now(), "answered at the append, not at the wait's end")
	})
}

// TestWaitEndsEmpty: a wait that nothing ends answers 204 when it runs out; wait is a Go
// duration or a number of milliseconds.
func TestWaitEndsEmpty(t *testing.T) {
	for _, tc := range []struct {
		wait string
		want time.Duration
	}{{"86400000", 24 * time.Hour}, {"1500", 1500 * time.Millisecond}, {"1.5s", 1500 * time.Millisecond}, {"2m", 2 * time.Minute}, {"0", 0}} {
		t.Run(tc.wait, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newEnv(t, httpapi.Options{})
				start := time.Now()
				rec := e.do(http.MethodGet, "/consume?topic=orders&wait="+tc.wait)
				require.Equal(t, http.StatusNoContent, rec.Code, rec.Body.String())
				require.Empty(t, rec.Body.String())
				require.Equal(t, tc.want, time.Since(start))
			})
		})
	}
}

// TestDisconnectCancelsLongPoll: a client that goes away ends its long-poll at once, and
// the next record goes to the next consumer, not to the one that left.
func TestDisconnectCancelsLongPoll(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, httpapi.Options{})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan *httptest.ResponseRecorder)
		go func() { done <- doCtx(ctx, e.h, "/consume?topic=orders&wait=1h") }()
		synctest.Wait()
		require.Equal(t, 1, e.node.Parked("orders"))
		start := time.Now()
		cancel()
		rec := <-done
		require.Equal(t, start, time.Now())
		require.Equal(t, http.StatusServiceUnavailable, rec.Code)
		synctest.Wait()
		require.Equal(t, 0, e.node.Parked("orders"))

		e.produce(0, "v")
		m := one(t, e.do(http.MethodGet, "/consume?topic=orders"))
		require.Equal(t, uint32(1), m.Attempt)
	})
}

// TestLeaseExpiry: a record whose lease lapses is delivered again, and the old handle is gone.
func TestLeaseExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, httpapi.Options{})
		e.produce(0, "v")
		m := one(t, e.do(http.MethodGet, "/consume?topic=orders&visibility=2s"))
		require.Equal(t, http.StatusNoContent, e.do(http.MethodGet, "/consume?topic=orders&wait=1s").Code)
		m2 := one(t, e.do(http.MethodGet, "/consume?topic=orders&wait=5s"))
		require.Equal(t, int64(0), m2.Offset)
		require.Equal(t, uint32(2), m2.Attempt)
		require.Equal(t, "expired", m2.Reason)
		require.Equal(t, "gone", failed(t, e.do(http.MethodPost, settle("/ack", m.ReceiptHandle)), http.StatusGone).Code)
		require.Equal(t, http.StatusNoContent, e.do(http.MethodPost, settle("/ack", m2.ReceiptHandle)).Code)
	})
}

// TestIdentityBound: past MaxInFlight consume requests of one identity in flight, held
// long-polls included (on a topic no node serves yet too), the next is a 429 with
// Retry-After; other identities are not affected, and the slots come back as requests end.
func TestIdentityBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, httpapi.Options{})
		e.routes.Set("later") // a topic with no owner yet: a long-poll on it is held
		h, err := httpapi.New(e.node, httpapi.Options{
			MaxInFlight: 3,
			RetryAfter:  1500 * time.Millisecond,
			Identity:    func(r *http.Request) string { return r.Header.Get("X-Client") },
		})
		require.NoError(t, err)
		var held []chan *httptest.ResponseRecorder
		for _, target := range []string{"/consume?topic=orders&wait=10s", "/consume?topic=orders&wait=10s", "/consume?topic=later&wait=10s"} {
			ch := make(chan *httptest.ResponseRecorder)
			go func() { ch <- doCtx(context.Background(), h, target, "X-Client", "a") }()
			held = append(held, ch)
		}
		synctest.Wait()
		require.Equal(t, 2, e.node.Parked("orders"))

		rec := doCtx(context.Background(), h, "/consume?topic=orders", "X-Client", "a")
		require.Equal(t, "too_many_requests", failed(t, rec, http.StatusTooManyRequests).Code)
		require.Equal(t, "2", rec.Header().Get("Retry-After"))
		// Replays count too.
		failed(t, doCtx(context.Background(), h, "/consume?topic=orders&partition=0&offset=0", "X-Client", "a"), http.StatusTooManyRequests)
		// Another identity has its own bound; settles are not bounded.
		require.Equal(t, http.StatusNoContent, doCtx(context.Background(), h, "/consume?topic=orders", "X-Client", "b").Code)
		require.Equal(t, http.StatusGone, do(h, http.MethodPost, settle("/ack", "0:0:1")).Code)

		// One record ends one long-poll and frees its slot.
		e.produce(0, "v")
		var rec1 *httptest.ResponseRecorder
		select {
		case rec1 = <-held[0]:
		case rec1 = <-held[1]:
		}
		one(t, rec1)
		require.Equal(t, http.StatusNoContent, doCtx(context.Background(), h, "/consume?topic=orders", "X-Client", "a").Code)
		for range 2 {
			select {
			case rec := <-held[0]:
				require.Equal(t, http.StatusNoContent, rec.Code)
			case rec := <-held[1]:
				require.Equal(t, http.StatusNoContent, rec.Code)
			case rec := <-held[2]:
				require.Equal(t, http.StatusNoContent, rec.Code)
			}
		}
	})
}

// TestDefaultIdentityIsRemoteHost: with no Identity, clients are told apart by the host of
// their remote address, ports aside.
func TestDefaultIdentityIsRemoteHost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, httpapi.Options{})
		h, err := httpapi.New(e.node, httpapi.Options{MaxInFlight: 1})
		require.NoError(t, err)
		get := func(addr string, wait string) *httptest.ResponseRecorder {
			req := httptest.NewRequest(http.MethodGet, "/consume?topic=orders&wait="+wait, nil)
			req.RemoteAddr = addr
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			return rec
		}
		done := make(chan *httptest.ResponseRecorder)
		go func() { done <- get("10.0.0.1:1000", "10s") }()
		synctest.Wait()
		require.Equal(t, http.StatusTooManyRequests, get("10.0.0.1:2000", "0").Code)
		require.Equal(t, http.StatusNoContent, get("10.0.0.2:1000", "0").Code)
		require.Equal(t, http.StatusNoContent, (<-done).Code)
		require.Equal(t, http.StatusNoContent, get("10.0.0.1:2000", "0").Code)
	})
}
