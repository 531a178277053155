package sqsapi

import (
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"time"

	"narad.dev/consume/router"
)

// deleteInput is DeleteMessage's body.
type deleteInput struct {
	QueueUrl      *string
	ReceiptHandle *string
}

// deleteMessage serves DeleteMessage: an ack. A handle of a message deleted already
// succeeds (a retried delete); one whose lease is gone (it lapsed, was given back or
// superseded, or its owner restarted) is InvalidParameterValue, "The receipt handle has
// expired", as SQS answers an expired handle: it deleted nothing, and the message comes back.
func (h *Handler) deleteMessage(c *call) error {
	var in deleteInput
	if err := c.decode(&in); err != nil {
		return err
	}
	rc, err := parseReceipt(in.ReceiptHandle)
	if err != nil {
		return err
	}
	queue, topic, err := h.openQueue(c, in.QueueUrl)
	if err != nil {
		return err
	}
	handle, err := h.tags.check(rc, queue)
	if err != nil {
		return err
	}
	if err := h.deleted(topic, handle, h.node.Ack(c.r.Context(), topic, handle)); err != nil {
		return err
	}
	c.reply(nil)
	return nil
}

var emptyObject = []byte("{}")

// deleted is what a DeleteMessage answers for an ack's error: a message deleted already is
// no error; a lease gone is an expired handle, never a success that deleted nothing (the
// client would take the message for done, and it comes back). A record deleted is
// forgotten by the first receive times.
func (h *Handler) deleted(topic string, handle router.Handle, err error) error {
	err = h.settleErr(topic, handle, err)
	switch {
	case err == nil || errors.Is(err, router.ErrAlreadySettled):
		h.first.forget(topic, handle)
		h.attempts.changed(topic, handle)
		return nil
	case errors.Is(err, router.ErrGone):
		return invalidValue("ReceiptHandle", handle.String(), "The receipt handle has expired.")
	}
	return err
}

// settleErr is what a settle's error is answered as: a handle the node cannot reach whose
// partition Config.Routes name on no node is ReceiptHandleIsInvalid.
func (h *Handler) settleErr(topic string, handle router.Handle, err error) error {
	if h.routes == nil || !(errors.Is(err, router.ErrNotLocal) || errors.Is(err, router.ErrUnavailable)) {
		return err
	}
	local, remote, ok := h.routes.Partitions(topic)
	if !ok || slices.Contains(local, handle.Partition) {
		return err
	}
	for _, parts := range remote {
		if slices.Contains(parts, handle.Partition) {
			return err
		}
	}
	return fail(codeReceiptHandleIsInvalid, "The receipt handle names partition "+strconv.Itoa(int(handle.Partition))+", which the queue does not have.")
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
	SequenceNumber               string `json:"SequenceNumber,omitempty"` // SendMessageBatch's, to a FIFO queue
}

type batchFailure struct {
	Id          string `json:"Id"`
	SenderFault bool   `json:"SenderFault"`
	Code        string `json:"Code"`
	Message     string `json:"Message"`
}

// failEntry answers a batch's entry id with err in Failed, logging what is the service's
// fault as a failed request's is.
func (h *Handler) failEntry(b *batchResponse, c *call, id string, err error) {
	code, msg := codeOf(err)
	if code == codeInternalFailure {
		h.log.Error("sqsapi: internal failure", "action", c.action, "entry", id, "remote", c.r.RemoteAddr, "err", err)
	}
	b.Failed = append(b.Failed, batchFailure{Id: id, SenderFault: code.sender, Code: code.query, Message: msg})
}

// A batchReply answers a batch action: JSON {"Successful":[...],"Failed":[...]}, or in XML
// an element named entry for each success and a BatchResultErrorEntry for each failure.
type batchReply struct {
	entry string
	resp  *batchResponse
}

func (b *batchReply) appendJSON(dst []byte) []byte {
	if b.resp.Successful == nil {
		b.resp.Successful = []batchSuccess{}
	}
	if b.resp.Failed == nil {
		b.resp.Failed = []batchFailure{}
	}
	body, _ := json.Marshal(b.resp) // strings and bools: it always marshals
	return append(dst, body...)
}

func (b *batchReply) appendXML(dst []byte) []byte {
	for _, s := range b.resp.Successful {
		dst = append(dst, '<')
		dst = append(dst, b.entry...)
		dst = append(dst, '>')
		dst = appendXMLElement(dst, "Id", s.Id)
		for _, f := range [][2]string{{"MessageId", s.MessageId}, {"MD5OfMessageBody", s.MD5OfMessageBody},
			{"MD5OfMessageAttributes", s.MD5OfMessageAttributes}, {"MD5OfMessageSystemAttributes", s.MD5OfMessageSystemAttributes},
			{"SequenceNumber", s.SequenceNumber}} {
			if f[1] != "" {
				dst = appendXMLElement(dst, f[0], f[1])
			}
		}
		dst = append(dst, "</"...)
		dst = append(dst, b.entry...)
		dst = append(dst, '>')
	}
	for _, f := range b.resp.Failed {
		dst = append(dst, "<BatchResultErrorEntry>"...)
		dst = appendXMLElement(dst, "Id", f.Id)
		dst = appendXMLElement(dst, "SenderFault", strconv.FormatBool(f.SenderFault))
		dst = appendXMLElement(dst, "Code", f.Code)
		dst = appendXMLElement(dst, "Message", f.Message)
		dst = append(dst, "</BatchResultErrorEntry>"...)
	}
	return dst
}

// decodeBatch reads and checks a batch's body: its entries' Ids, and that each names a
// receipt handle (whether it parses is answered per entry).
func decodeBatch(c *call) (*batchInput, error) {
	var in batchInput
	if err := c.decode(&in); err != nil {
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
func (h *Handler) deleteMessageBatch(c *call) error {
	in, err := decodeBatch(c)
	if err != nil {
		return err
	}
	queue, topic, err := h.openQueue(c, in.QueueUrl)
	if err != nil {
		return err
	}
	var resp batchResponse
	handles := make([]router.Handle, 0, len(in.Entries))
	ids := make([]string, 0, len(in.Entries))
	for _, e := range in.Entries {
		handle, err := h.receiptOf(e.ReceiptHandle, queue)
		if err != nil {
			h.failEntry(&resp, c, *e.Id, err)
			continue
		}
		handles = append(handles, handle)
		ids = append(ids, *e.Id)
	}
	if len(handles) > 0 {
		errs := h.node.AckBatch(c.r.Context(), topic, handles)
		for i, id := range ids {
			var err error
			if i < len(errs) {
				err = h.deleted(topic, handles[i], errs[i])
			}
			if err != nil {
				h.failEntry(&resp, c, id, err)
				continue
			}
			resp.Successful = append(resp.Successful, batchSuccess{Id: id})
		}
	}
	c.reply(&batchReply{entry: c.action + "ResultEntry", resp: &resp})
	return nil
}

// visibilityInput is ChangeMessageVisibility's body.
type visibilityInput struct {
	QueueUrl          *string
	ReceiptHandle     *string
	VisibilityTimeout *int64
}

// changeMessageVisibility serves ChangeMessageVisibility.
func (h *Handler) changeMessageVisibility(c *call) error {
	var in visibilityInput
	if err := c.decode(&in); err != nil {
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
	queue, topic, err := h.openQueue(c, in.QueueUrl)
	if err != nil {
		return err
	}
	handle, err := h.tags.check(rc, queue)
	if err != nil {
		return err
	}
	if err := h.changeVisibility(c, topic, handle, d); err != nil {
		return err
	}
	c.reply(nil)
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
// shorten the lease), or for 0 a nack-now (NowNacker), which ends the lease at once, skips
// the topic's Backoff and keeps the delivery counted as an attempt, as SQS counts every
// receive (a release would uncount it, and the record would never reach the topic's
// MaxDeliveries). A handle whose lease is gone is MessageNotInflight; one of a message
// deleted already is InvalidParameterValue, as SQS answers both.
func (h *Handler) changeVisibility(c *call, topic string, handle router.Handle, d time.Duration) error {
	var err error
	if nacker, ok := h.node.(NowNacker); ok && d == 0 {
		err = nacker.NackNow(c.r.Context(), topic, handle)
	} else if d == 0 {
		err = h.node.Nack(c.r.Context(), topic, handle, 0)
	} else {
		_, err = h.node.Extend(c.r.Context(), topic, handle, d)
	}
	err = h.settleErr(topic, handle, err)
	if err == nil {
		h.attempts.changed(topic, handle)
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
func (h *Handler) changeMessageVisibilityBatch(c *call) error {
	in, err := decodeBatch(c)
	if err != nil {
		return err
	}
	queue, topic, err := h.openQueue(c, in.QueueUrl)
	if err != nil {
		return err
	}
	var resp batchResponse
	for i, e := range in.Entries {
		handle, err := h.receiptOf(e.ReceiptHandle, queue)
		if err == nil {
			var d time.Duration
			if d, err = visibility(e.VisibilityTimeout, "Entries."+strconv.Itoa(i+1)+".VisibilityTimeout"); err == nil {
				err = h.changeVisibility(c, topic, handle, d)
			}
		}
		if err != nil {
			h.failEntry(&resp, c, *e.Id, err)
			continue
		}
		resp.Successful = append(resp.Successful, batchSuccess{Id: *e.Id})
	}
	c.reply(&batchReply{entry: c.action + "ResultEntry", resp: &resp})
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
