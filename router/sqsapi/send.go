package sqsapi

import (
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"narad.dev/consume/router"
)

// sendInput is SendMessage's body, and one entry of SendMessageBatch's (with Id).
type sendInput struct {
	QueueUrl                *string
	Id                      *string
	MessageBody             *string
	DelaySeconds            *int64
	MessageAttributes       map[string]attributeValue
	MessageSystemAttributes map[string]attributeValue
	MessageDeduplicationId  *string
	MessageGroupId          *string
}

// A sentMessage is a validated message to send.
type sentMessage struct {
	body  []byte
	attrs []messageAttribute // its message attributes, in order of name
	trace []byte             // its AWSTraceHeader system attribute; nil: none
	group []byte             // its MessageGroupId, the record's key; nil: none
	// dedupID is a FIFO queue's message's MessageDeduplicationId: the one sent, or its
	// body's SHA-256 (content-based deduplication).
	dedupID string
	// delay is how long the message is to wait before it is delivered: its DelaySeconds, or
	// its queue's; deliverAt is when that ends, set as it is sent (zero: at once).
	delay     time.Duration
	deliverAt time.Time
}

// record is the record m is sent as.
func (m *sentMessage) record() router.Record {
	return router.Record{Key: m.group, Value: m.body, Headers: recordHeaders(m.attrs, m.trace, m.dedupID, m.deliverAt)}
}

// size is what the message counts towards SQS's bound: its body, and its attributes' and
// system attribute's names, types and values.
func (m *sentMessage) size() int {
	n := len(m.body) + attributesSize(m.attrs)
	if m.trace != nil {
		n += len("AWSTraceHeader") + len("String") + len(m.trace)
	}
	return n
}

// message validates a message to send, but for what depends on its queue's type (fitQueue).
// What a record cannot carry is refused rather than dropped: message attributes, system
// attributes and message groups when the host's produce cannot keep them (keepsAttributes
// false), and a delay.
func (in *sendInput) message(prefix string, keepsAttributes bool) (sentMessage, error) {
	body, err := in.body(prefix, keepsAttributes)
	if err != nil {
		return sentMessage{}, err
	}
	attrs, err := sentAttributes(prefix, in.MessageAttributes)
	if err != nil {
		return sentMessage{}, err
	}
	trace, err := sentTrace(prefix, in.MessageSystemAttributes)
	if err != nil {
		return sentMessage{}, err
	}
	m := sentMessage{body: body, attrs: attrs, trace: trace}
	if in.MessageGroupId != nil {
		m.group = []byte(*in.MessageGroupId)
	}
	if m.size() > MaxMessageBytes {
		return sentMessage{}, invalidValue(prefix+"MessageBody", "(a body)", fmt.Sprintf("Message must be shorter than %d bytes, its attributes included.", MaxMessageBytes))
	}
	return m, nil
}

// sentTrace validates a sent message's MessageSystemAttributes, of which SQS knows one,
// AWSTraceHeader, a String, and returns its value (nil for none).
func sentTrace(prefix string, in map[string]attributeValue) ([]byte, error) {
	param := prefix + "MessageSystemAttributes"
	var trace []byte
	for name, v := range in {
		if name != "AWSTraceHeader" {
			return nil, invalidValue(param, strconv.Quote(truncate(name)), "Message system attribute name "+strconv.Quote(truncate(name))+" is invalid: SQS knows AWSTraceHeader only.")
		}
		a, err := v.attribute(param, name)
		if err != nil {
			return nil, err
		}
		if a.dataType != "String" {
			return nil, invalidValue(param, strconv.Quote(name), "The AWSTraceHeader system attribute must be of DataType String.")
		}
		trace = a.value
	}
	return trace, nil
}

// systemAttributesMD5Hex is MD5OfMessageSystemAttributes in hex, or "" for a message
// without any (the field is then left out): as MD5OfMessageAttributes, over AWSTraceHeader.
func systemAttributesMD5Hex(trace []byte) string {
	if trace == nil {
		return ""
	}
	return attributesMD5Hex([]messageAttribute{{name: "AWSTraceHeader", dataType: "String", value: trace}})
}

// body validates a message's body and its other parameters, and returns the body.
func (in *sendInput) body(prefix string, keepsAttributes bool) ([]byte, error) {
	switch {
	case in.MessageBody == nil:
		return nil, missing(prefix + "MessageBody")
	case len(in.MessageAttributes) > 0 && !keepsAttributes:
		return nil, invalidValue(prefix+"MessageAttributes", "(set)", "Message attributes are not supported by this endpoint: the message was not sent.")
	case len(in.MessageSystemAttributes) > 0 && !keepsAttributes:
		return nil, invalidValue(prefix+"MessageSystemAttributes", "(set)", "Message system attributes are not supported by this endpoint: the message was not sent.")
	case in.MessageGroupId != nil && !keepsAttributes:
		return nil, invalidValue(prefix+"MessageGroupId", strconv.Quote(truncate(*in.MessageGroupId)), "Message groups are not supported by this endpoint: the message was not sent.")
	}
	if in.MessageGroupId != nil {
		if err := checkFIFOID(prefix+"MessageGroupId", *in.MessageGroupId); err != nil {
			return nil, err
		}
	}
	if in.MessageDeduplicationId != nil {
		if err := checkFIFOID(prefix+"MessageDeduplicationId", *in.MessageDeduplicationId); err != nil {
			return nil, err
		}
	}
	body := *in.MessageBody
	switch {
	case body == "":
		return nil, invalidValue(prefix+"MessageBody", `""`, "The message body must be at least one character long.")
	case len(body) > MaxMessageBytes:
		return nil, invalidValue(prefix+"MessageBody", "(a body)", fmt.Sprintf("Message must be shorter than %d bytes.", MaxMessageBytes))
	}
	if r, ok := invalidCharacter(body); !ok {
		return nil, fail(codeInvalidMessageContents, fmt.Sprintf("Invalid binary character '#x%X' was found in the message body, the set of allowed characters is #x9 | #xA | #xD | #x20 to #xD7FF | #xE000 to #xFFFD | #x10000 to #x10FFFF", r))
	}
	return []byte(body), nil
}

// invalidCharacter finds the first character of s outside SQS's set for a body (the XML
// characters), reporting ok when there is none. A byte that is not UTF-8 is refused too (the
// JSON decoder has made it U+FFFD already, so this never finds one in a decoded body).
func invalidCharacter(s string) (rune, bool) {
	for i, r := range s {
		switch {
		case r == utf8.RuneError:
			if _, size := utf8.DecodeRuneInString(s[i:]); size == 1 {
				return r, false
			}
		case r == 0x9 || r == 0xA || r == 0xD:
		case r < 0x20, r >= 0xFFFE && r <= 0xFFFF:
			return r, false
		}
	}
	return 0, true
}

// fitQueue checks what of a message depends on its queue's type, and sets its deduplication
// id and its delay. A FIFO queue's message has a MessageGroupId (MissingParameter), and a
// MessageDeduplicationId unless the queue has ContentBasedDeduplication (whose id is then
// the body's SHA-256), and no DelaySeconds but 0 (the queue's DelaySeconds applies); a
// standard queue's has no MessageDeduplicationId, and a DelaySeconds of 0 to 900 (none: the
// queue's). A standard queue takes a MessageGroupId, as SQS's fair queues do: the record's
// key, with no effect on delivery here.
func (r *queueRef) fitQueue(prefix string, in *sendInput, m *sentMessage) error {
	m.delay = time.Duration(r.attribute("DelaySeconds", 0)) * time.Second
	if !r.fifo {
		switch {
		case in.DelaySeconds != nil && (*in.DelaySeconds < 0 || *in.DelaySeconds > MaxDelaySeconds):
			return invalidValue(prefix+"DelaySeconds", strconv.FormatInt(*in.DelaySeconds, 10), "Value must be between 0 and 900.")
		case in.MessageDeduplicationId != nil:
			return invalidValue(prefix+"MessageDeduplicationId", strconv.Quote(truncate(*in.MessageDeduplicationId)), "The request include parameter that is not valid for this queue type.")
		case in.DelaySeconds != nil:
			m.delay = time.Duration(*in.DelaySeconds) * time.Second
		}
		return nil
	}
	switch {
	case in.DelaySeconds != nil && *in.DelaySeconds != 0:
		return invalidValue(prefix+"DelaySeconds", strconv.FormatInt(*in.DelaySeconds, 10), "The request include parameter that is not valid for this queue type.")
	case in.MessageGroupId == nil:
		return fail(codeMissingParameter, "The request must contain the parameter "+prefix+"MessageGroupId.")
	case in.MessageDeduplicationId != nil:
		m.dedupID = *in.MessageDeduplicationId
	case r.contentBasedDeduplication():
		m.dedupID = contentDeduplicationID(m.body)
	default:
		return invalidValue(prefix+"MessageDeduplicationId", "(none)", "The queue should either have ContentBasedDeduplication enabled or MessageDeduplicationId provided explicitly.")
	}
	return nil
}

// contentBasedDeduplication reports whether the queue has ContentBasedDeduplication (a
// queue of Config.Queues has not).
func (r *queueRef) contentBasedDeduplication() bool {
	return r.rec.Attributes[attrContentBasedDeduplication] == "true"
}

// sendResponse answers SendMessage.
type sendResponse struct {
	MD5OfMessageBody             string `json:"MD5OfMessageBody"`
	MD5OfMessageAttributes       string `json:"MD5OfMessageAttributes,omitempty"`
	MD5OfMessageSystemAttributes string `json:"MD5OfMessageSystemAttributes,omitempty"`
	MessageId                    string `json:"MessageId"`
	SequenceNumber               string `json:"SequenceNumber,omitempty"` // a FIFO queue's
}

func (s *sendResponse) appendJSON(dst []byte) []byte {
	resp, _ := json.Marshal(s)
	return append(dst, resp...)
}

func (s *sendResponse) appendXML(dst []byte) []byte {
	dst = appendXMLElement(dst, "MD5OfMessageBody", s.MD5OfMessageBody)
	if s.MD5OfMessageAttributes != "" {
		dst = appendXMLElement(dst, "MD5OfMessageAttributes", s.MD5OfMessageAttributes)
	}
	if s.MD5OfMessageSystemAttributes != "" {
		dst = appendXMLElement(dst, "MD5OfMessageSystemAttributes", s.MD5OfMessageSystemAttributes)
	}
	dst = appendXMLElement(dst, "MessageId", s.MessageId)
	if s.SequenceNumber != "" {
		dst = appendXMLElement(dst, "SequenceNumber", s.SequenceNumber)
	}
	return dst
}

// sendMessage serves SendMessage through Config.Produce or Config.ProduceRecord.
func (h *Handler) sendMessage(c *call) error {
	var in sendInput
	if err := c.decode(&in); err != nil {
		return err
	}
	if h.produce == nil {
		return fail(codeUnsupportedOperation, "SendMessage is not supported by this endpoint.")
	}
	msg, err := in.message("", h.keepsAttributes)
	if err != nil {
		return err
	}
	queue, ref, err := h.openRef(c, in.QueueUrl)
	if err != nil {
		return err
	}
	if err := ref.fitQueue("", &in, &msg); err != nil {
		return err
	}
	if err := ref.fits("", &msg); err != nil {
		return err
	}
	id, seq, err := h.send(c, queue, &ref, &msg)
	if err != nil {
		return err
	}
	c.reply(&sendResponse{MD5OfMessageBody: md5Hex(msg.body), MD5OfMessageAttributes: attributesMD5Hex(msg.attrs),
		MD5OfMessageSystemAttributes: systemAttributesMD5Hex(msg.trace), MessageId: id, SequenceNumber: seq})
	return nil
}

// fits refuses a message over the queue's MaximumMessageSize (with Config.Store).
func (r *queueRef) fits(prefix string, m *sentMessage) error {
	if limit := r.attribute("MaximumMessageSize", MaxMessageBytes); int64(m.size()) > limit {
		return invalidValue(prefix+"MessageBody", "(a body)", fmt.Sprintf("Message must be shorter than %d bytes, its attributes included: the queue's MaximumMessageSize.", limit))
	}
	return nil
}

// send produces one message to queue, its attributes as the record's headers
// (recordHeaders), and returns its MessageId, and for a FIFO queue its SequenceNumber (a
// duplicate's are the original's: see sendFIFO).
func (h *Handler) send(c *call, queue string, ref *queueRef, m *sentMessage) (id, seq string, err error) {
	if m.delay > 0 {
		if !h.keepsAttributes {
			// The delay rides in a header, which a host's Produce of bodies drops.
			return "", "", invalidValue("DelaySeconds", strconv.FormatInt(int64(m.delay/time.Second), 10), "Delayed messages are not supported by this endpoint: the message was not sent.")
		}
		m.deliverAt = h.now().Add(m.delay)
	}
	if ref.fifo {
		return h.sendFIFO(c.r.Context(), queue, ref, m)
	}
	partition, offset, err := h.produce(c.r.Context(), ref.topic, m.record())
	if err != nil {
		return "", "", err
	}
	return string(appendMessageID(nil, partition, offset)), "", nil
}

// attributesMD5Hex is MD5OfMessageAttributes in hex, or "" for a message without any (the
// field is then left out).
func attributesMD5Hex(attrs []messageAttribute) string {
	if len(attrs) == 0 {
		return ""
	}
	sum := md5OfMessageAttributes(attrs)
	return hex.EncodeToString(sum[:])
}

func md5Hex(b []byte) string {
	sum := md5.Sum(b)
	return hex.EncodeToString(sum[:])
}

type sendBatchInput struct {
	QueueUrl *string
	Entries  []sendInput
}

// batchEntrySent is what became of one entry of a SendMessageBatch: its message, and the
// MessageId and SequenceNumber its send answered, or why it was not sent.
type batchEntrySent struct {
	msg     sentMessage
	id, seq string
	err     error
}

// sendMessageBatch serves SendMessageBatch through Config.Produce, one record per entry (a
// standard queue's concurrently, a FIFO queue's in order); an entry refused or failed is
// answered in Failed, the others are sent.
func (h *Handler) sendMessageBatch(c *call) error {
	var in sendBatchInput
	if err := c.decode(&in); err != nil {
		return err
	}
	if h.produce == nil {
		return fail(codeUnsupportedOperation, "SendMessageBatch is not supported by this endpoint.")
	}
	if err := batchIDs(len(in.Entries), func(i int) *string { return in.Entries[i].Id }); err != nil {
		return err
	}
	total := 0
	for _, e := range in.Entries {
		if e.MessageBody != nil {
			total += len(*e.MessageBody)
		}
		for name, v := range e.MessageAttributes {
			total += len(name) + v.size()
		}
		for name, v := range e.MessageSystemAttributes {
			total += len(name) + v.size()
		}
	}
	if total > MaxMessageBytes {
		return fail(codeBatchRequestTooLong, fmt.Sprintf("Batch requests cannot be longer than %d bytes. You have sent %d bytes.", MaxMessageBytes, total))
	}
	queue, ref, err := h.openRef(c, in.QueueUrl)
	if err != nil {
		return err
	}
	// A standard queue's entries are sent at once, each on its own goroutine: their order
	// is not kept anyway, and a host's log may then share one write or fsync among them
	// (a group commit) where one after the other each waits for its own. A FIFO queue's go
	// in order, one after the other, so that a group's messages keep the batch's order.
	sent := make([]batchEntrySent, len(in.Entries))
	var sends sync.WaitGroup
	for i := range in.Entries {
		e, r := &in.Entries[i], &sent[i]
		prefix := "Entries." + strconv.Itoa(i+1) + "."
		r.msg, r.err = e.message(prefix, h.keepsAttributes)
		if r.err == nil {
			r.err = ref.fitQueue(prefix, e, &r.msg)
		}
		if r.err == nil {
			r.err = ref.fits(prefix, &r.msg)
		}
		switch {
		case r.err != nil:
		case ref.fifo:
			r.id, r.seq, r.err = h.send(c, queue, &ref, &r.msg)
		default:
			sends.Go(func() { r.id, r.seq, r.err = h.send(c, queue, &ref, &r.msg) })
		}
	}
	sends.Wait()
	var resp batchResponse
	for i, r := range sent {
		id := *in.Entries[i].Id
		if r.err != nil {
			h.failEntry(&resp, c, id, r.err)
			continue
		}
		resp.Successful = append(resp.Successful, batchSuccess{Id: id, MessageId: r.id, MD5OfMessageBody: md5Hex(r.msg.body),
			MD5OfMessageAttributes: attributesMD5Hex(r.msg.attrs), MD5OfMessageSystemAttributes: systemAttributesMD5Hex(r.msg.trace),
			SequenceNumber: r.seq})
	}
	c.reply(&batchReply{entry: c.action + "ResultEntry", resp: &resp})
	return nil
}
