package nodeproc

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"

	"narad.dev/consume/examples/internal/queueclient"
	"narad.dev/consume/router"
)

// MaxValue bounds a produced value.
const MaxValue = 1 << 20

// A Refusal is an append's refusal with the HTTP status that says why (404: not this node's
// partition; 409: another node owns it, or it is being handed off). Any other error of an
// append answers 503.
type Refusal struct {
	Status int
	Text   string
}

func (r *Refusal) Error() string { return r.Text }

// Produce is the examples' produce endpoint: POST /produce?partition=N, with the value as the
// body. appendValue appends it to partition N (whose log's OnAppend tells the node) and
// returns its offset; the answer is a queueclient.Produced.
func Produce(appendValue func(p int32, value []byte) (int64, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		p, ok := Partition(w, r)
		if !ok {
			return
		}
		value, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxValue))
		if err != nil {
			http.Error(w, "body: "+err.Error(), http.StatusBadRequest)
			return
		}
		offset, err := appendValue(p, value)
		if ref, ok := errors.AsType[*Refusal](err); ok {
			http.Error(w, ref.Text, ref.Status)
			return
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		WriteJSON(w, queueclient.Produced{Partition: p, Offset: offset})
	}
}

// Partition reads the request's partition parameter (?partition=N); a missing or bad one is
// answered 400, and ok is false.
func Partition(w http.ResponseWriter, r *http.Request) (p int32, ok bool) {
	n, err := strconv.ParseInt(r.URL.Query().Get("partition"), 10, 32)
	if err != nil || n < 0 {
		http.Error(w, "partition: a partition number, please", http.StatusBadRequest)
		return 0, false
	}
	return int32(n), true
}

// PartitionStatus is a partition's part of a node's status (GET /status): what the
// examples' parents read of router.PartitionStatus.
type PartitionStatus struct {
	Partition     int32 `json:"partition"`
	Frontier      int64 `json:"frontier"`
	HighWatermark int64 `json:"high_watermark"`
	Backlog       int64 `json:"backlog"`
	Leased        int   `json:"leased"`
	Drained       bool  `json:"drained"`
}

// Partitions returns the status of each partition of topic the node holds. An error is
// answered on w (with router.HTTPStatus), and ok is false.
func Partitions(w http.ResponseWriter, node *router.Node, topic string) (_ []PartitionStatus, ok bool) {
	parts, err := node.TopicStatus(topic)
	if err != nil {
		http.Error(w, err.Error(), router.HTTPStatus(err))
		return nil, false
	}
	out := []PartitionStatus{}
	for _, p := range parts {
		out = append(out, PartitionStatus{Partition: p.Partition, Frontier: p.Frontier, HighWatermark: p.HighWatermark,
			Backlog: p.Backlog, Leased: p.Leased, Drained: p.Drained()})
	}
	return out, true
}

// WriteJSON answers v as JSON.
func WriteJSON(w http.ResponseWriter, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(b)
}
