package queueclient

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// fakeNode answers as a node does, recording the requests.
func fakeNode(t *testing.T) (*Client, string) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /queue/consume", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if q.Get("topic") != "orders" || q.Get("max") != "2" || q.Get("wait") != "10ms" {
			http.Error(w, `{"error":"bad query","code":"bad_request"}`, http.StatusBadRequest)
			return
		}
		w.Header().Set("Peer-Calls", "3")
		json.NewEncoder(w).Encode(map[string]any{"messages": []Message{{Partition: 1, Offset: 7, Value: "v", Receipt: "h1", Attempt: 2, Reason: "nacked"}}})
	})
	mux.HandleFunc("POST /queue/ack", func(w http.ResponseWriter, r *http.Request) {
		r.ParseForm()
		switch r.Form.Get("receipt_handle") {
		case "ok":
			w.WriteHeader(http.StatusNoContent)
		case "settled":
			w.WriteHeader(http.StatusGone)
			io.WriteString(w, `{"error":"settled","code":"already_settled"}`)
		case "late":
			w.WriteHeader(http.StatusGone)
			io.WriteString(w, `{"error":"lapsed","code":"gone"}`)
		case "down":
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, "owner down\n")
		case "bad-gateway":
			w.WriteHeader(http.StatusBadGateway)
		default:
			w.WriteHeader(http.StatusBadRequest)
			io.WriteString(w, `{"error":"no such handle","code":"bad_request"}`)
		}
	})
	mux.HandleFunc("POST /queue/nack", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	mux.HandleFunc("POST /queue/ack-batch", func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Topic   string   `json:"topic"`
			Handles []string `json:"receipt_handles"`
		}
		json.NewDecoder(r.Body).Decode(&body)
		res := []map[string]any{}
		for _, h := range body.Handles {
			if h == "ok" {
				res = append(res, map[string]any{"status": 204})
			} else {
				res = append(res, map[string]any{"status": 410, "code": "gone", "error": "lapsed"})
			}
		}
		if body.Topic == "short" {
			res = res[:0]
		}
		json.NewEncoder(w).Encode(map[string]any{"results": res})
	})
	mux.HandleFunc("POST /produce", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if r.URL.Query().Get("partition") != "2" || string(b) != "hello" {
			w.WriteHeader(http.StatusConflict)
			return
		}
		json.NewEncoder(w).Encode(Produced{Partition: 2, Offset: 41})
	})
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"id":"node-1"}`)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return &Client{HTTP: srv.Client(), Topic: "orders"}, srv.URL
}

func TestConsume(t *testing.T) {
	c, base := fakeNode(t)
	msgs, h, err := c.ConsumeHeader(t.Context(), base, 2, 10*time.Millisecond)
	require.NoError(t, err)
	require.Equal(t, "3", h.Get("Peer-Calls"))
	require.Equal(t, []Message{{Partition: 1, Offset: 7, Value: "v", Receipt: "h1", Attempt: 2, Reason: "nacked"}}, msgs)

	msgs, err = c.Consume(t.Context(), base, 2, 10*time.Millisecond)
	require.NoError(t, err)
	require.Len(t, msgs, 1)

	_, h, err = c.ConsumeHeader(t.Context(), base, 3, 10*time.Millisecond)
	var ae *Error
	require.ErrorAs(t, err, &ae)
	require.Equal(t, Error{Status: 400, Code: "bad_request", Text: "bad query"}, *ae)
	require.NotNil(t, h, "the header of a refusal too")
	require.Equal(t, "400 bad_request: bad query", ae.Error())
}

func TestAck(t *testing.T) {
	c, base := fakeNode(t)
	for handle, want := range map[string]Answer{
		"ok": Acked, "settled": Settled, "late": Late, "down": Refused, "bad-gateway": Unsure, "what": Rejected,
	} {
		require.Equal(t, want, AckAnswer(c.Ack(t.Context(), base, handle)), handle)
	}
	err := c.Ack(t.Context(), base, "down")
	var ae *Error
	require.ErrorAs(t, err, &ae)
	require.Equal(t, "owner down", ae.Text, "a body that is not JSON is the text")
	require.NoError(t, c.Nack(t.Context(), base, "h"))

	// No answer at all.
	require.Equal(t, Unsure, AckAnswer(c.Ack(t.Context(), "http://127.0.0.1:1", "ok")))
	require.Equal(t, Unsure, AckAnswer(errors.New("timeout")))
}

func TestAckBatch(t *testing.T) {
	c, base := fakeNode(t)
	errs, err := c.AckBatch(t.Context(), base, []string{"ok", "late", "ok"})
	require.NoError(t, err)
	require.Len(t, errs, 3)
	require.NoError(t, errs[0])
	require.Equal(t, Late, AckAnswer(errs[1]))
	require.NoError(t, errs[2])

	short := &Client{HTTP: c.HTTP, Topic: "short"}
	_, err = short.AckBatch(t.Context(), base, []string{"ok"})
	require.ErrorContains(t, err, "0 results for 1 handles")
}

func TestProduceStatus(t *testing.T) {
	c, base := fakeNode(t)
	off, err := c.Produce(t.Context(), base, 2, "hello")
	require.NoError(t, err)
	require.Equal(t, int64(41), off)
	_, err = c.Produce(t.Context(), base, 3, "hello")
	var ae *Error
	require.ErrorAs(t, err, &ae)
	require.Equal(t, http.StatusConflict, ae.Status)

	var st struct {
		ID string `json:"id"`
	}
	require.NoError(t, c.Status(t.Context(), base, &st))
	require.Equal(t, "node-1", st.ID)
	st, err = StatusOf[struct {
		ID string `json:"id"`
	}](t.Context(), New(c.HTTP.Transport, "orders"), base)
	require.NoError(t, err)
	require.Equal(t, "node-1", st.ID)
}
