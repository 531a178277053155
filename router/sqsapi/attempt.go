package sqsapi

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"narad.dev/consume/router"
)

// A FIFO queue's ReceiveMessage retried with the ReceiveRequestAttemptId of an earlier one
// (its answer lost on the way, say) is answered with that receive's messages and receipt
// handles again, their visibility timeout reset, as SQS answers it: the handler remembers
// each such receive's answer for ReceiveAttemptWindow.

// ReceiveAttemptWindow is how long a ReceiveRequestAttemptId's answer is remembered: SQS's
// 5 minutes from the receive, on the handler's clock (Config.Now).
const ReceiveAttemptWindow = 5 * time.Minute

// MaxReceiveAttempts and MaxReceiveAttemptBytes bound what the handler remembers of the
// receives' answers: at most this many answers, whose records' keys, bodies and headers
// together hold at most this many bytes (an answer above it alone is not remembered). Past
// either, the oldest answer is forgotten before its ReceiveAttemptWindow ends, and a retry
// of it is a new receive.
const (
	MaxReceiveAttempts     = 4096
	MaxReceiveAttemptBytes = 32 << 20
)

// receiveAttempts remembers the answers of the receives made with a ReceiveRequestAttemptId.
type receiveAttempts struct {
	live atomic.Int64 // len(byKey): a delete skips the lock while none is remembered

	mu       sync.Mutex
	byKey    map[attemptKey]*receiveAttempt
	byRecord map[recordKey]*receiveAttempt // the latest answer that holds the record
	order    []*receiveAttempt             // in the order remembered; forgotten ones skipped
	head     int
	bytes    int
}

// An attemptKey names a receive attempt: its queue, the access key that signed it ("" when
// no signature is checked), so that no one else is answered its receipt handles, and its id.
type attemptKey struct{ queue, signer, id string }

// A receiveAttempt is one receive's answer.
type receiveAttempt struct {
	key        attemptKey
	at         time.Time
	topic      string
	visibility time.Duration // the receive's: what a retry resets the visibility timeout to
	msgs       []router.Message
	firsts     []int64 // each message's first receive time, as answered
	size       int
	forgotten  bool
}

// find returns the answer remembered for key within ReceiveAttemptWindow of now, or nil.
func (r *receiveAttempts) find(key attemptKey, now time.Time) *receiveAttempt {
	if r.live.Load() == 0 {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	a := r.byKey[key]
	if a == nil || !now.Before(a.at.Add(ReceiveAttemptWindow)) {
		return nil
	}
	return a
}

// remember keeps the answer msgs (and their first receive times) of a receive of topic,
// leased for visibility, made with key at now. The messages are copied.
func (r *receiveAttempts) remember(key attemptKey, topic string, visibility time.Duration, msgs []router.Message, firsts []int64, now time.Time) {
	a := &receiveAttempt{key: key, at: now, topic: topic, visibility: visibility, msgs: make([]router.Message, len(msgs)), firsts: append([]int64(nil), firsts...)}
	for i := range msgs {
		a.msgs[i] = copyMessage(&msgs[i])
		a.size += messageSize(&msgs[i])
	}
	if a.size > MaxReceiveAttemptBytes {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.byKey == nil {
		r.byKey = map[attemptKey]*receiveAttempt{}
		r.byRecord = map[recordKey]*receiveAttempt{}
	}
	for r.head < len(r.order) {
		old := r.order[r.head]
		if !old.forgotten && now.Before(old.at.Add(ReceiveAttemptWindow)) && len(r.byKey) < MaxReceiveAttempts && r.bytes+a.size <= MaxReceiveAttemptBytes {
			break
		}
		r.forgetLocked(old)
		r.order[r.head] = nil
		r.head++
	}
	if old := r.byKey[key]; old != nil {
		r.forgetLocked(old)
	}
	if r.head >= 64 && r.head > len(r.order)/2 || len(r.order)-r.head > 2*len(r.byKey)+64 {
		kept := r.order[:0]
		for _, e := range r.order[r.head:] {
			if !e.forgotten {
				kept = append(kept, e)
			}
		}
		clear(r.order[len(kept):])
		r.order, r.head = kept, 0
	}
	r.byKey[key] = a
	for i := range a.msgs {
		r.byRecord[recordKey{topic, a.msgs[i].Partition, a.msgs[i].Offset}] = a
	}
	r.order = append(r.order, a)
	r.bytes += a.size
	r.live.Store(int64(len(r.byKey)))
}

// forget forgets a, unless it was already.
func (r *receiveAttempts) forget(a *receiveAttempt) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.forgetLocked(a)
}

func (r *receiveAttempts) forgetLocked(a *receiveAttempt) {
	if a.forgotten {
		return
	}
	a.forgotten = true
	if r.byKey[a.key] == a {
		delete(r.byKey, a.key)
	}
	for i := range a.msgs {
		k := recordKey{a.topic, a.msgs[i].Partition, a.msgs[i].Offset}
		if r.byRecord[k] == a {
			delete(r.byRecord, k)
		}
	}
	r.bytes -= a.size
	a.msgs, a.firsts = nil, nil
	r.live.Store(int64(len(r.byKey)))
}

// changed forgets the answer that holds the delivery handle names, of topic: a message
// deleted, or whose visibility was changed, ends its receive's retries, as on SQS.
func (r *receiveAttempts) changed(topic string, handle router.Handle) {
	if r.live.Load() == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	a := r.byRecord[recordKey{topic, handle.Partition, handle.Offset}]
	if a == nil {
		return
	}
	for i := range a.msgs {
		if a.msgs[i].Receipt == handle {
			r.forgetLocked(a)
			return
		}
	}
}

// renew resets the visibility timeout of each of a's messages, as a retry of its receive
// does on SQS, and returns them with their first receive times when every lease was still
// live. A lease gone (its message deleted, given back, or its visibility timeout lapsed)
// forgets a and answers none: the retry is a new receive. Another error of the node is
// returned.
func (h *Handler) renew(ctx context.Context, a *receiveAttempt) ([]router.Message, []int64, error) {
	h.attempts.mu.Lock()
	msgs, firsts := a.msgs, a.firsts // never changed, only dropped, once remembered
	h.attempts.mu.Unlock()
	for i := range msgs {
		_, err := h.node.Extend(ctx, a.topic, msgs[i].Receipt, a.visibility)
		if errors.Is(err, router.ErrGone) { // router.ErrAlreadySettled too
			h.attempts.forget(a)
			return nil, nil, nil
		}
		if err != nil {
			return nil, nil, h.settleErr(a.topic, msgs[i].Receipt, err)
		}
	}
	return msgs, firsts, nil
}

// copyMessage copies m's key, value and headers, which the remembered answer keeps past
// the response.
func copyMessage(m *router.Message) router.Message {
	c := *m
	c.Key = append([]byte(nil), m.Key...)
	c.Value = append([]byte(nil), m.Value...)
	if m.Headers != nil {
		c.Headers = make([]router.Header, len(m.Headers))
		for i, hd := range m.Headers {
			c.Headers[i] = router.Header{Key: hd.Key, Value: append([]byte(nil), hd.Value...)}
		}
	}
	return c
}

// messageSize is what a remembered message counts towards MaxReceiveAttemptBytes.
func messageSize(m *router.Message) int {
	rec := router.Record{Key: m.Key, Value: m.Value, Headers: m.Headers}
	return rec.PayloadBytes()
}
