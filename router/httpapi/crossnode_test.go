package httpapi_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"narad.dev/consume/crashfs"
	"narad.dev/consume/router"
	"narad.dev/consume/router/httpapi"
	"narad.dev/consume/router/routertest"
)

// TestThroughAGateway: a client of a node that owns none of the topic's partitions
// consumes, long-polls, releases and acks records another node owns; an owner that cannot
// be reached is a 502.
func TestThroughAGateway(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		nw := &routertest.Network{RTT: time.Millisecond}
		logs := &routertest.MemLogs{}
		log := logs.Log("orders", 0)
		ownerRoutes, gatewayRoutes := &routertest.Routes{}, &routertest.Routes{}
		ownerRoutes.Set("orders", 0)
		gatewayRoutes.SetRemote("orders", "a", 0)
		owner, err := router.New(router.Config{Logs: logs, Routes: ownerRoutes, Dir: "/a", FS: crashfs.New(), Transport: nw.Transport("a")})
		require.NoError(t, err)
		defer owner.Close()
		gateway, err := router.New(router.Config{Logs: logs, Routes: gatewayRoutes, Dir: "/g", FS: crashfs.New(), Transport: nw.Transport("g")})
		require.NoError(t, err)
		defer gateway.Close()
		nw.Join("a", owner.Serve)
		nw.Join("g", gateway.Serve)
		h, err := httpapi.New(gateway, httpapi.Options{})
		require.NoError(t, err)

		// A long-poll on the gateway, woken by an append on the owner.
		done := make(chan *httptest.ResponseRecorder)
		go func() { done <- do(h, http.MethodGet, "/consume?topic=orders&wait=20s") }()
		synctest.Wait()
		log.Append(nil, []byte("v"), time.Unix(1, 0))
		owner.Appended("orders", 0, 1)
		m := one(t, <-done)
		require.Equal(t, "v", string(m.value()))

		// A release from the gateway is a release at the owner: visible again at once, and
		// the delivery not counted.
		require.Equal(t, http.StatusNoContent, do(h, http.MethodPost, settle("/release", m.ReceiptHandle)).Code)
		m2 := one(t, do(h, http.MethodGet, "/consume?topic=orders"))
		require.Equal(t, int64(0), m2.Offset)
		require.Equal(t, "first", m2.Reason)
		require.Equal(t, http.StatusNoContent, do(h, http.MethodPost, settle("/ack", m2.ReceiptHandle)).Code)
		require.Equal(t, "already_settled", failed(t, do(h, http.MethodPost, settle("/ack", m2.ReceiptHandle)), http.StatusGone).Code)

		// A replay of the owner's partition is read from it.
		require.Equal(t, "v", string(one(t, do(h, http.MethodGet, "/consume?topic=orders&partition=0&offset=0")).value()))

		nw.SetDown("a", true)
		require.Equal(t, "owner_unreachable", failed(t, do(h, http.MethodPost, settle("/ack", m2.ReceiptHandle)), http.StatusBadGateway).Code)
		nw.SetDown("a", false)
	})
}

// TestRejectThroughAGateway: a reject on a gateway is a reject at the owner; an owner on a
// release before the node wire's version 10 (pinned to 9 here) cannot apply it, which is a
// 501 that changes nothing there.
func TestRejectThroughAGateway(t *testing.T) {
	for _, ownerVersion := range []uint8{0, 9} {
		synctest.Test(t, func(t *testing.T) {
			nw := &routertest.Network{RTT: time.Millisecond}
			logs := &routertest.MemLogs{}
			logs.Log("orders", 0).Append(nil, []byte("v"), time.Unix(1, 0))
			ownerRoutes, gatewayRoutes := &routertest.Routes{}, &routertest.Routes{}
			ownerRoutes.Set("orders", 0)
			gatewayRoutes.SetRemote("orders", "a", 0)
			owner, err := router.New(router.Config{Logs: logs, Routes: ownerRoutes, Dir: "/a", FS: crashfs.New(), Transport: nw.Transport("a"), WireVersion: ownerVersion})
			require.NoError(t, err)
			defer owner.Close()
			gateway, err := router.New(router.Config{Logs: logs, Routes: gatewayRoutes, Dir: "/g", FS: crashfs.New(), Transport: nw.Transport("g")})
			require.NoError(t, err)
			defer gateway.Close()
			nw.Join("a", owner.Serve)
			nw.Join("g", gateway.Serve)
			h, err := httpapi.New(gateway, httpapi.Options{})
			require.NoError(t, err)

			m := one(t, do(h, http.MethodGet, "/consume?topic=orders"))
			rec := do(h, http.MethodPost, settle("/reject", m.ReceiptHandle))
			q, err := owner.Quarantined("orders", 0)
			require.NoError(t, err)
			if ownerVersion == 9 {
				require.Equal(t, "unsupported", failed(t, rec, http.StatusNotImplemented).Code)
				require.Empty(t, q)
				require.Equal(t, http.StatusNoContent, do(h, http.MethodPost, settle("/ack", m.ReceiptHandle)).Code, "the lease lives on")
				return
			}
			require.Equal(t, http.StatusNoContent, rec.Code, rec.Body.String())
			require.Equal(t, []int64{0}, q)
		})
	}
}
