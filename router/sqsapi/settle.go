package sqsapi

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"narad.dev/consume/router"
)

// deleteInput is DeleteMessage's body.
type deleteInput struct {
	QueueUrl      *string
	ReceiptHandle *string
}

// deleteMessage serves DeleteMessage: an ack. A handle whose lease is gone (it lapsed, was
// released, or the message is deleted already) succeeds and deletes nothing, as SQS's
// DeleteMessage of a stale handle does.
func (h *Handler) deleteMessage(w http.ResponseWriter, r *http.Request, body []byte) error {
	var in deleteInput
	if err := decode(body, &in); err != nil {
		return err
	}
	rc, err := parseReceipt(in.ReceiptHandle)
	if err != nil {
		return err
	}
	queue, topic, err := h.openQueue(r, "DeleteMessage", in.QueueUrl, body)
	if err != nil {
		return err
	}
	handle, err := h.tags.check(rc, queue)
	if err != nil {
		return err
	}
	if err := h.deleted(topic, handle, h.node.Ack(r.Context(), topic, handle)); err != nil {
		return err
	}
	writeJSON(w, emptyObject)
	return nil
}

var emptyObject = []byte("{}")

// deleted is what a DeleteMessage answers for an ack's error: a stale handle is no error. A
// record deleted is forgotten by the first receive times.
func (h *Handler) deleted(topic string, handle router.Handle, err error) error {
	if err == nil || errors.Is(err, router.ErrAlreadySettled) {
		h.first.forget(topic, handle)
	}
	if errors.Is(err, router.ErrGone) { // router.ErrAlreadySettled too
		return nil
	}
	return err
}

// batchEntry is an entry of DeleteMessageBatch and ChangeMessageVisibilityBatch.
type batchEntry struct {
	Id                *string
	ReceiptHandle     *string
	VisibilityTimeout *int64 // ChangeMessageVisibilityBatch's
}

type batchInput struct {
	QueueUrl *string
	Entries  []batchEntry
}

// batchResponse answers a batch action: the entries that succeeded and those that failed,
// each by its Id.
type batchResponse struct {
	Successful []batchSuccess `json:"Successful"`
	Failed     []batchFailure `json:"Failed"`
}

type batchSuccess struct {
	Id               string `json:"Id"`
	MessageId        string `json:"MessageId,omitempty"`        // SendMessageBatch's
	MD5OfMessageBody string `json:"MD5OfMessageBody,omitempty"` // SendMessageBatch's
	// SendMessageBatch's, for an entry with message attributes, or an AWSTraceHeader.
	MD5OfMessageAttributes       string `json:"MD5OfMessageAttributes,omitempty"`
	MD5OfMessageSystemAttributes string `json:"MD5OfMessageSystemAttributes,omitempty"`
}

type batchFailure struct {
	Id          string `json:"Id"`
	SenderFault bool   `json:"SenderFault"`
	Code        string `json:"Code"`
	Message     string `json:"Message"`
}

// failEntry answers a batch's entry id with err in Failed, logging what is the service's
// fault as a failed request's is.
func (h *Handler) failEntry(b *batchResponse, r *http.Request, action, id string, err error) {
	c, msg := codeOf(err)
	if c == codeInternalFailure {
		h.log.Error("sqsapi: internal failure", "action", action, "entry", id, "remote", r.RemoteAddr, "err", err)
	}
	b.Failed = append(b.Failed, batchFailure{Id: id, SenderFault: c.sender, Code: c.query, Message: msg})
}

func writeBatch(w http.ResponseWriter, b *batchResponse) {
	if b.Successful == nil {
		b.Successful = []batchSuccess{}
	}
	if b.Failed == nil {
		b.Failed = []batchFailure{}
	}
	body, _ := json.Marshal(b) // strings and bools: it always marshals
	writeJSON(w, body)
}

// decodeBatch reads and checks a batch's body: its entries' Ids, and that each names a
// receipt handle (whether it parses is answered per entry).
func decodeBatch(body []byte) (*batchInput, error) {
	var in batchInput
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	if err := batchIDs(len(in.Entries), func(i int) *string { return in.Entries[i].Id }); err != nil {
		return nil, err
	}
	for i := range in.Entries {
		if in.Entries[i].ReceiptHandle == nil {
			return nil, missing("Entries." + strconv.Itoa(i+1) + ".ReceiptHandle")
		}
	}
	return &in, nil
}

// deleteMessageBatch serves DeleteMessageBatch: one AckBatch of the entries whose handles
// parse; each entry answered as DeleteMessage would answer it.
func (h *Handler) deleteMessageBatch(w http.ResponseWriter, r *http.Request, body []byte) error {
	in, err := decodeBatch(body)
	if err != nil {
		return err
	}
	queue, topic, err := h.openQueue(r, "DeleteMessageBatch", in.QueueUrl, body)
	if err != nil {
		return err
	}
	var resp batchResponse
	handles := make([]router.Handle, 0, len(in.Entries))
	ids := make([]string, 0, len(in.Entries))
	for _, e := range in.Entries {
		handle, err := h.receiptOf(e.ReceiptHandle, queue)
		if err != nil {
			h.failEntry(&resp, r, "DeleteMessageBatch", *e.Id, err)
			continue
		}
		handles = append(handles, handle)
		ids = append(ids, *e.Id)
	}
	if len(handles) > 0 {
		errs := h.node.AckBatch(r.Context(), topic, handles)
		for i, id := range ids {
			var err error
			if i < len(errs) {
				err = h.deleted(topic, handles[i], errs[i])
			}
			if err != nil {
				h.failEntry(&resp, r, "DeleteMessageBatch", id, err)
				continue
			}
			resp.Successful = append(resp.Successful, batchSuccess{Id: id})
		}
	}
	writeBatch(w, &resp)
	return nil
}

// visibilityInput is ChangeMessageVisibility's body.
type visibilityInput struct {
	QueueUrl          *string
	ReceiptHandle     *string
	VisibilityTimeout *int64
}

// changeMessageVisibility serves ChangeMessageVisibility.
func (h *Handler) changeMessageVisibility(w http.ResponseWriter, r *http.Request, body []byte) error {
	var in visibilityInput
	if err := decode(body, &in); err != nil {
		return err
	}
	rc, err := parseReceipt(in.ReceiptHandle)
	if err != nil {
		return err
	}
	d, err := visibility(in.VisibilityTimeout, "VisibilityTimeout")
	if err != nil {
		return err
	}
	queue, topic, err := h.openQueue(r, "ChangeMessageVisibility", in.QueueUrl, body)
	if err != nil {
		return err
	}
	handle, err := h.tags.check(rc, queue)
	if err != nil {
		return err
	}
	if err := h.changeVisibility(r, topic, handle, d); err != nil {
		return err
	}
	writeJSON(w, emptyObject)
	return nil
}

// visibility reads a required visibility timeout of a ChangeMessageVisibility: 0 to
// MaxVisibilitySeconds.
func visibility(v *int64, param string) (time.Duration, error) {
	if v == nil {
		return 0, missing(param)
	}
	s, err := integer(param, v, 0, MaxVisibilitySeconds, 0)
	return time.Duration(s) * time.Second, err
}

// changeVisibility makes the leased record visible d from now: an extend (which may also
// shorten the lease), or for 0 a nack with no delay, which ends the lease at once and keeps
// the delivery counted as an attempt, as SQS counts every receive (a release would uncount
// it, and the record would never reach the topic's MaxDeliveries). A handle whose lease is
// gone is MessageNotInflight; one of a message deleted already is InvalidParameterValue, as
// SQS answers both.
func (h *Handler) changeVisibility(r *http.Request, topic string, handle router.Handle, d time.Duration) error {
	var err error
	if d == 0 {
		err = h.node.Nack(r.Context(), topic, handle, 0)
	} else {
		_, err = h.node.Extend(r.Context(), topic, handle, d)
	}
	switch {
	case errors.Is(err, router.ErrAlreadySettled):
		return invalidValue("ReceiptHandle", handle.String(), "Message does not exist or is not available for visibility timeout change.")
	case errors.Is(err, router.ErrGone):
		return fail(codeMessageNotInflight, "Message "+handle.String()+" is not in flight: its visibility timeout lapsed, or it was made visible again.")
	}
	return err
}

// changeMessageVisibilityBatch serves ChangeMessageVisibilityBatch: each entry answered as
// ChangeMessageVisibility would answer it.
func (h *Handler) changeMessageVisibilityBatch(w http.ResponseWriter, r *http.Request, body []byte) error {
	in, err := decodeBatch(body)
	if err != nil {
		return err
	}
	queue, topic, err := h.openQueue(r, "ChangeMessageVisibilityBatch", in.QueueUrl, body)
	if err != nil {
		return err
	}
	var resp batchResponse
	for i, e := range in.Entries {
		handle, err := h.receiptOf(e.ReceiptHandle, queue)
		if err == nil {
			var d time.Duration
			if d, err = visibility(e.VisibilityTimeout, "Entries."+strconv.Itoa(i+1)+".VisibilityTimeout"); err == nil {
				err = h.changeVisibility(r, topic, handle, d)
			}
		}
		if err != nil {
			h.failEntry(&resp, r, "ChangeMessageVisibilityBatch", *e.Id, err)
			continue
		}
		resp.Successful = append(resp.Successful, batchSuccess{Id: *e.Id})
	}
	writeBatch(w, &resp)
	return nil
}

// receiptOf reads a receipt handle of queue: well-formed, and issued for queue.
func (h *Handler) receiptOf(text *string, queue string) (router.Handle, error) {
	rc, err := parseReceipt(text)
	if err != nil {
		return router.Handle{}, err
	}
	return h.tags.check(rc, queue)
}
