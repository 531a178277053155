package nodeproc

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"narad.dev/consume/examples/internal/launch"
	"narad.dev/consume/examples/internal/queueclient"
	"narad.dev/consume/router"
	"narad.dev/consume/router/routertest"
)

func TestServe(t *testing.T) {
	addrs, err := launch.FreeAddrs(1)
	require.NoError(t, err)
	srv, err := Serve(addrs[0], http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hi") }))
	require.NoError(t, err)
	resp, err := http.Get("http://" + addrs[0])
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, "hi", string(b))

	// The parent closes the node's input: Wait returns, Shutdown stops the server cleanly.
	in, w := io.Pipe()
	gone := InputClosed(in)
	done := make(chan struct{})
	go func() { srv.Wait(t.Context(), gone); close(done) }()
	w.Close()
	<-done
	require.NoError(t, srv.Shutdown())
	_, err = http.Get("http://" + addrs[0])
	require.Error(t, err, "no longer serving")

	// A signal (ctx) ends the wait as well.
	srv, err = Serve(addrs[0], http.NotFoundHandler())
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	srv.Wait(ctx, nil)
	require.NoError(t, srv.Shutdown())

	_, err = Serve("127.0.0.1:-1", http.NotFoundHandler())
	require.Error(t, err)
}

func TestProduce(t *testing.T) {
	h := Produce(func(p int32, value []byte) (int64, error) {
		switch string(value) {
		case "refused":
			return 0, &Refusal{Status: http.StatusConflict, Text: "owner node-2"}
		case "broken":
			return 0, errors.New("disk full")
		}
		return int64(p) * 10, nil
	})
	call := func(query, body string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/produce?"+query, strings.NewReader(body)))
		return rec
	}
	rec := call("partition=3", "v")
	require.Equal(t, http.StatusOK, rec.Code)
	var out queueclient.Produced
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &out))
	require.Equal(t, queueclient.Produced{Partition: 3, Offset: 30}, out)
	require.Equal(t, "application/json", rec.Header().Get("Content-Type"))

	for _, tc := range []struct {
		query, body string
		status      int
	}{
		{"", "v", http.StatusBadRequest},
		{"partition=-1", "v", http.StatusBadRequest},
		{"partition=x", "v", http.StatusBadRequest},
		{"partition=1", "refused", http.StatusConflict},
		{"partition=1", "broken", http.StatusServiceUnavailable},
		{"partition=1", strings.Repeat("x", MaxValue+1), http.StatusBadRequest},
	} {
		require.Equal(t, tc.status, call(tc.query, tc.body).Code, tc.query)
	}
}

func TestPartitions(t *testing.T) {
	logs, routes := &routertest.MemLogs{}, &routertest.Routes{}
	routes.Set("orders", 0, 1)
	logs.Log("orders", 0).Append(nil, []byte("v"), time.Now())
	logs.Log("orders", 1)
	node, err := router.New(router.Config{Logs: logs, Routes: routes, Dir: t.TempDir()})
	require.NoError(t, err)
	defer node.Close()
	node.Appended("orders", 0, 1)

	rec := httptest.NewRecorder()
	parts, ok := Partitions(rec, node, "orders")
	require.True(t, ok)
	want, err := node.TopicStatus("orders")
	require.NoError(t, err)
	require.Len(t, parts, 2)
	for i, p := range want {
		require.Equal(t, PartitionStatus{Partition: p.Partition, Frontier: p.Frontier, HighWatermark: p.HighWatermark,
			Backlog: p.Backlog, Leased: p.Leased, Drained: p.Drained()}, parts[i])
	}
	require.Equal(t, int64(1), parts[0].HighWatermark)

	rec = httptest.NewRecorder()
	_, ok = Partitions(rec, node, "payments")
	require.False(t, ok)
	require.Equal(t, router.HTTPStatus(router.ErrUnknownTopic), rec.Code, "an unknown topic")
}

func TestLogger(t *testing.T) {
	require.True(t, Logger("node-1", 0).Enabled(t.Context(), 0))
	require.False(t, Logger("node-1", 8).Enabled(t.Context(), 4))
}
