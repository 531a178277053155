package sqsapi

import (
	"crypto/md5"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"narad.dev/consume/router"
	"narad.dev/consume/router/internal/frontend"
)

// receiveInput is ReceiveMessage's body.
type receiveInput struct {
	QueueUrl                    *string
	MaxNumberOfMessages         *int64
	WaitTimeSeconds             *int64
	VisibilityTimeout           *int64
	AttributeNames              []string // the older name of MessageSystemAttributeNames
	MessageSystemAttributeNames []string
	MessageAttributeNames       []string
	ReceiveRequestAttemptId     *string // FIFO queues only: a retry's (see receiveAttempts)
}

// The system attributes a received message can carry, by bit (systemAttributes[i] is bit i).
const (
	attrReceiveCount = 1 << iota
	attrSentTimestamp
	attrFirstReceive
	attrTraceHeader
	attrGroupID
	attrDeduplicationID
	attrSequenceNumber
)

var systemAttributes = []string{
	"ApproximateReceiveCount", "SentTimestamp", "ApproximateFirstReceiveTimestamp", "AWSTraceHeader",
	"MessageGroupId", "MessageDeduplicationId", "SequenceNumber",
}

// fifoOnlyAttributes are the system attributes of a FIFO queue's messages only.
const fifoOnlyAttributes = attrDeduplicationID | attrSequenceNumber

// knownMessageAttributeNames are the names SQS knows in a ReceiveMessage's
// MessageSystemAttributeNames, and in its older AttributeNames (which the SDKs type as queue
// attribute names): any other is InvalidAttributeName. Those not in systemAttributes are
// accepted and not returned.
var knownMessageAttributeNames = setOf(
	"SenderId", "SentTimestamp", "ApproximateReceiveCount", "ApproximateFirstReceiveTimestamp",
	"SequenceNumber", "MessageDeduplicationId", "MessageGroupId", "AWSTraceHeader",
	"DeadLetterQueueSourceArn",
)

func setOf(names ...string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

// receiveRequest is a validated ReceiveMessage.
type receiveRequest struct {
	opts   router.ConsumeOptions
	attrs  uint               // the system attributes asked for
	mattrs attributeSelection // the message attributes asked for
}

// request validates a ReceiveMessage's parameters.
func (in *receiveInput) request() (receiveRequest, error) {
	var req receiveRequest
	max, err := integer("MaxNumberOfMessages", in.MaxNumberOfMessages, 1, MaxReceive, 1)
	if err != nil {
		return req, err
	}
	wait, err := integer("WaitTimeSeconds", in.WaitTimeSeconds, 0, MaxWaitSeconds, 0)
	if err != nil {
		return req, err
	}
	// A lease of 0 s (visible again at once) is refused rather than stretched: absent, the
	// topic's visibility timeout applies.
	vis, err := integer("VisibilityTimeout", in.VisibilityTimeout, 1, MaxVisibilitySeconds, 0)
	if err != nil {
		return req, err
	}
	req.opts = router.ConsumeOptions{Max: int(max), Wait: time.Duration(wait) * time.Second, Visibility: time.Duration(vis) * time.Second}
	for _, list := range []struct {
		param string
		names []string
	}{{"AttributeNames", in.AttributeNames}, {"MessageSystemAttributeNames", in.MessageSystemAttributeNames}} {
		set, err := attributeNames(list.param, list.names, knownMessageAttributeNames, systemAttributes)
		if err != nil {
			return req, err
		}
		req.attrs |= set
	}
	for _, name := range in.MessageAttributeNames {
		if name == "" || len(name) > maxAttributeName {
			return req, invalidValue("MessageAttributeNames", strconv.Quote(truncate(name)), fmt.Sprintf("A message attribute name is 1 to %d characters long.", maxAttributeName))
		}
	}
	req.mattrs = selectAttributes(in.MessageAttributeNames)
	return req, nil
}

// receiveMessage serves ReceiveMessage: a consume of up to MaxNumberOfMessages records,
// long-polling up to WaitTimeSeconds, leased for VisibilityTimeout.
func (h *Handler) receiveMessage(c *call) error {
	var in receiveInput
	if err := c.decode(&in); err != nil {
		return err
	}
	req, err := in.request()
	if err != nil {
		return err
	}
	queue, ref, err := h.openRef(c, in.QueueUrl)
	if err != nil {
		return err
	}
	topic := ref.topic
	if !ref.fifo {
		req.attrs &^= fifoOnlyAttributes
	} else if in.ReceiveRequestAttemptId != nil {
		if err := checkFIFOID("ReceiveRequestAttemptId", *in.ReceiveRequestAttemptId); err != nil {
			return err
		}
	}
	// The queue's defaults, with Config.Store.
	if in.VisibilityTimeout == nil && ref.managed {
		req.opts.Visibility = time.Duration(ref.attribute("VisibilityTimeout", 0)) * time.Second
	}
	if in.WaitTimeSeconds == nil && ref.managed {
		req.opts.Wait = time.Duration(ref.attribute("ReceiveMessageWaitTimeSeconds", 0)) * time.Second
	}
	id := c.accessKey
	if h.customIdentity || id == "" {
		id = h.identity(c.r)
	}
	if !h.slots.Acquire(id) {
		return fail(codeRequestThrottled, fmt.Sprintf("%d ReceiveMessage requests of this client are in flight already.", h.slots.Max()))
	}
	defer h.slots.Release(id)
	ctx := c.r.Context()
	enc := encoders.Get().(*encoder)
	defer enc.release()
	// A FIFO queue's receive retried with its ReceiveRequestAttemptId: the same answer, while
	// its leases live.
	var attempt attemptKey
	var msgs []router.Message // a retry's, until a new receive's
	if ref.fifo && in.ReceiveRequestAttemptId != nil {
		attempt = attemptKey{queue: queue, signer: c.accessKey, id: *in.ReceiveRequestAttemptId}
		if a := h.attempts.find(attempt, h.now()); a != nil {
			var firsts []int64
			if msgs, firsts, err = h.renew(ctx, a); err != nil {
				return err
			}
			enc.firsts = append(enc.firsts[:0], firsts...)
		}
	}
	retried := msgs != nil
	if !retried {
		// A record taken as the client left is given back, not left invisible.
		if msgs, err = frontend.Consume(ctx, h.node, topic, req.opts); err != nil {
			return err
		}
		enc.firsts = h.first.stamp(topic, msgs, h.now().UnixMilli(), enc.firsts)
	}
	enc.envelope(c)
	msgs = enc.encode(h.node, msgs, h.tags, queue, req.attrs, &req.mattrs)
	if attempt.id != "" && !retried && len(msgs) > 0 {
		h.attempts.remember(attempt, topic, req.opts.Visibility, msgs, enc.firsts[:len(msgs)], h.now())
	}
	write := writeJSON
	if c.query {
		write = writeXML
	}
	if _, err := write(c.w, enc.buf); err != nil {
		frontend.GiveBack(ctx, h.node, topic, msgs) // the client cannot parse a cut body: none reached it
	}
	return nil
}

// The envelope of a ReceiveMessage's response in JSON: {"Messages":[m1,m2,...]}, and {}
// for none. In XML it is the response and result elements (appendXMLOpen, appendXMLClose)
// around the messages' elements, with nothing between two.
const (
	envelopeOpen  = `{"Messages":[`
	envelopeClose = `]}`
)

// An encoder writes a ReceiveMessage response. Pooled: its buffer is reused.
type encoder struct {
	xml     bool   // the query protocol's XML
	open    []byte // the envelope before the messages
	close   []byte // the envelope after them
	buf     []byte
	ends    []int // ends[i]: where message i's encoding ends in buf
	msgs    []router.Message
	mattrs  []messageAttribute // one message's attributes, reused
	firsts  []int64            // each message's first receive time, ms since the epoch
	receipt []byte             // one message's receipt handle, reused
}

var encoders = sync.Pool{New: func() any { return new(encoder) }}

// maxPooledBuffer bounds the buffer an encoder keeps in the pool: a rare large response
// does not pin its memory.
const maxPooledBuffer = 1 << 20

// envelope sets the envelope of the call's protocol.
func (e *encoder) envelope(c *call) {
	e.xml = c.query
	if !c.query {
		e.open = append(e.open[:0], envelopeOpen...)
		e.close = append(e.close[:0], envelopeClose...)
		return
	}
	e.open = appendXMLOpen(e.open[:0], c.action, true)
	e.close = appendXMLClose(e.close[:0], c.action, true, c.requestID)
}

// empty writes the response that holds no message.
func (e *encoder) empty() {
	if !e.xml {
		e.buf = append(e.buf[:0], emptyObject...)
		return
	}
	e.buf = append(append(e.buf[:0], e.open...), e.close...)
}

func (e *encoder) release() {
	clear(e.mattrs[:cap(e.mattrs)]) // the messages' values: not kept past the response
	e.mattrs = e.mattrs[:0]
	if cap(e.buf) <= maxPooledBuffer {
		encoders.Put(e)
	}
}

// encode writes the response for msgs, received from queue, into e.buf and returns the
// messages it holds: the longest prefix within router.ResponseLimit, as the node's
// FitResponse cuts it (giving back the rest at once). e.firsts holds each message's first
// receive time, in ms since the epoch; sel selects each message's attributes among its
// record's headers.
func (e *encoder) encode(node Node, msgs []router.Message, tags *receiptTagger, queue string, attrs uint, sel *attributeSelection) []router.Message {
	if len(msgs) == 0 {
		e.empty()
		return msgs
	}
	e.buf = append(e.buf[:0], e.open...)
	e.ends = e.ends[:0]
	for i := range msgs {
		e.mattrs = receivedAttributes(e.mattrs, msgs[i].Headers, sel)
		e.receipt = tags.appendReceipt(e.receipt[:0], queue, msgs[i].Receipt)
		d := delivery{receipt: e.receipt, attrs: attrs, firstReceive: e.firsts[i], mattrs: e.mattrs}
		if e.xml {
			e.buf = appendMessageXML(e.buf, &msgs[i], d)
		} else {
			if i > 0 {
				e.buf = append(e.buf, ',')
			}
			e.buf = appendMessage(e.buf, &msgs[i], d)
		}
		e.ends = append(e.ends, len(e.buf))
	}
	if len(msgs) > 1 {
		e.msgs = msgs
		// What FitResponse may give the messages, each counted with the comma before it
		// (none for the first) in JSON.
		msgs = node.FitResponse(msgs, e.size, router.ResponseLimit-len(e.open)-len(e.close))
		e.msgs = nil
	}
	if len(msgs) == 0 { // FitResponse keeps the first; a node that closed keeps them all
		e.empty()
		return msgs
	}
	e.buf = append(e.buf[:e.ends[len(msgs)-1]], e.close...)
	return msgs
}

// size is what message m adds to a response: its encoding, with the comma before it.
func (e *encoder) size(m *router.Message) int {
	start := len(e.open)
	for i := range e.msgs {
		if &e.msgs[i] == m {
			return e.ends[i] - start
		}
		start = e.ends[i]
	}
	return 0 // not one of the batch's: FitResponse measures only those
}

// A delivery is what a received message's encoding takes besides its record.
type delivery struct {
	receipt      []byte             // its receipt handle (receiptTagger.appendReceipt)
	attrs        uint               // the system attributes asked for
	firstReceive int64              // its first receive time, ms since the epoch
	mattrs       []messageAttribute // its message attributes asked for, in order of name
}

// appendMessage appends one received message's JSON object:
//
//	{"MessageId":"0:42","ReceiptHandle":"0:42:1311768467294899695",
//	 "MD5OfBody":"...","Body":"...",
//	 "Attributes":{"ApproximateReceiveCount":"1","SentTimestamp":"1700000000000",...},
//	 "MD5OfMessageAttributes":"...","MessageAttributes":{...}}
//
// The body is the record's value when it is valid UTF-8, and its standard base64 otherwise
// (an SQS body is text); MD5OfBody is the MD5 of the body as written. Attributes holds the
// system attributes asked for (none: no Attributes); MessageAttributes, with its MD5, the
// message attributes given, ordered by name.
func appendMessage(dst []byte, m *router.Message, d delivery) []byte {
	attrs, mattrs := d.attrs, d.mattrs
	dst = append(dst, `{"MessageId":"`...)
	dst = appendMessageID(dst, m.Partition, m.Offset)
	dst = append(dst, `","ReceiptHandle":"`...)
	dst = append(dst, d.receipt...)
	body := m.Value
	if !utf8.Valid(body) {
		body = base64.StdEncoding.AppendEncode(nil, body)
	}
	sum := md5.Sum(body)
	dst = append(dst, `","MD5OfBody":"`...)
	dst = hex.AppendEncode(dst, sum[:])
	dst = append(dst, `","Body":`...)
	dst = frontend.AppendString(dst, body)
	attrs &^= absentAttributes(m)
	if attrs != 0 {
		dst = append(dst, `,"Attributes":{`...)
		first := true
		attribute := func(name string, v int64) {
			if !first {
				dst = append(dst, ',')
			}
			first = false
			dst = append(dst, '"')
			dst = append(dst, name...)
			dst = append(dst, `":"`...)
			dst = strconv.AppendInt(dst, v, 10)
			dst = append(dst, '"')
		}
		if attrs&attrReceiveCount != 0 {
			attribute("ApproximateReceiveCount", int64(m.Attempt))
		}
		if attrs&attrSentTimestamp != 0 {
			attribute("SentTimestamp", m.Timestamp.UnixMilli())
		}
		if attrs&attrFirstReceive != 0 {
			attribute("ApproximateFirstReceiveTimestamp", d.firstReceive)
		}
		text := func(name string, v []byte) {
			if !first {
				dst = append(dst, ',')
			}
			first = false
			dst = append(dst, '"')
			dst = append(dst, name...)
			dst = append(dst, `":`...)
			dst = frontend.AppendString(dst, v)
		}
		if attrs&attrTraceHeader != 0 {
			trace, _ := traceOf(m.Headers)
			text("AWSTraceHeader", trace)
		}
		if attrs&attrGroupID != 0 {
			text("MessageGroupId", m.Key)
		}
		if attrs&attrDeduplicationID != 0 {
			id, _ := deduplicationIDOf(m.Headers)
			text("MessageDeduplicationId", id)
		}
		if attrs&attrSequenceNumber != 0 {
			var num [40]byte
			text("SequenceNumber", appendSequenceNumber(num[:0], m.Partition, m.Offset))
		}
		dst = append(dst, '}')
	}
	if len(mattrs) > 0 {
		sum := md5OfMessageAttributes(mattrs)
		dst = append(dst, `,"MD5OfMessageAttributes":"`...)
		dst = hex.AppendEncode(dst, sum[:])
		dst = append(dst, `","MessageAttributes":`...)
		dst = appendMessageAttributes(dst, mattrs)
	}
	return append(dst, '}')
}

// appendMessageXML appends one received message's element in the query protocol's XML:
//
//	<Message><MessageId>0:42</MessageId><ReceiptHandle>...</ReceiptHandle><MD5OfBody>...</MD5OfBody>
//	 <Body>...</Body><Attribute><Name>ApproximateReceiveCount</Name><Value>1</Value></Attribute>...
//	 <MD5OfMessageAttributes>...</MD5OfMessageAttributes>
//	 <MessageAttribute><Name>n</Name><Value><StringValue>..</StringValue><DataType>String</DataType></Value></MessageAttribute>...</Message>
//
// as appendMessage writes JSON, but that a body XML cannot hold as it is (not UTF-8, or with
// a character outside XML's, which only a host's own producer can have written) is its
// base64, and so is a String attribute's value (then a Binary).
func appendMessageXML(dst []byte, m *router.Message, d delivery) []byte {
	attrs, mattrs := d.attrs, d.mattrs
	dst = append(dst, "<Message><MessageId>"...)
	dst = appendMessageID(dst, m.Partition, m.Offset)
	dst = append(dst, "</MessageId>"...)
	dst = appendXMLElement(dst, "ReceiptHandle", d.receipt)
	body := m.Value
	if !xmlSafe(body) {
		body = base64.StdEncoding.AppendEncode(nil, body)
	}
	sum := md5.Sum(body)
	dst = append(dst, "<MD5OfBody>"...)
	dst = hex.AppendEncode(dst, sum[:])
	dst = append(dst, "</MD5OfBody>"...)
	dst = appendXMLElement(dst, "Body", body)
	attrs &^= absentAttributes(m)
	attribute := func(name string, value []byte) {
		dst = append(dst, "<Attribute>"...)
		dst = appendXMLElement(dst, "Name", name)
		dst = appendXMLElement(dst, "Value", value)
		dst = append(dst, "</Attribute>"...)
	}
	var num [20]byte
	if attrs&attrReceiveCount != 0 {
		attribute("ApproximateReceiveCount", strconv.AppendInt(num[:0], int64(m.Attempt), 10))
	}
	if attrs&attrSentTimestamp != 0 {
		attribute("SentTimestamp", strconv.AppendInt(num[:0], m.Timestamp.UnixMilli(), 10))
	}
	if attrs&attrFirstReceive != 0 {
		attribute("ApproximateFirstReceiveTimestamp", strconv.AppendInt(num[:0], d.firstReceive, 10))
	}
	if trace, _ := traceOf(m.Headers); attrs&attrTraceHeader != 0 && xmlSafe(trace) {
		attribute("AWSTraceHeader", trace)
	}
	if attrs&attrGroupID != 0 && xmlSafe(m.Key) {
		attribute("MessageGroupId", m.Key)
	}
	if id, _ := deduplicationIDOf(m.Headers); attrs&attrDeduplicationID != 0 && xmlSafe(id) {
		attribute("MessageDeduplicationId", id)
	}
	if attrs&attrSequenceNumber != 0 {
		var seq [40]byte
		attribute("SequenceNumber", appendSequenceNumber(seq[:0], m.Partition, m.Offset))
	}
	if len(mattrs) == 0 {
		return append(dst, "</Message>"...)
	}
	for i := range mattrs {
		if a := &mattrs[i]; !a.binary() && !xmlSafe(a.value) {
			a.dataType = "Binary"
		}
	}
	sum = md5OfMessageAttributes(mattrs)
	dst = append(dst, "<MD5OfMessageAttributes>"...)
	dst = hex.AppendEncode(dst, sum[:])
	dst = append(dst, "</MD5OfMessageAttributes>"...)
	for i := range mattrs {
		a := &mattrs[i]
		dst = append(dst, "<MessageAttribute>"...)
		dst = appendXMLElement(dst, "Name", a.name)
		dst = append(dst, "<Value>"...)
		if a.binary() {
			dst = append(dst, "<BinaryValue>"...)
			dst = base64.StdEncoding.AppendEncode(dst, a.value)
			dst = append(dst, "</BinaryValue>"...)
		} else {
			dst = appendXMLElement(dst, "StringValue", a.value)
		}
		dst = appendXMLElement(dst, "DataType", a.dataType)
		dst = append(dst, "</Value></MessageAttribute>"...)
	}
	return append(dst, "</Message>"...)
}

// absentAttributes are the system attributes m cannot answer: a SentTimestamp for a record
// without a timestamp, an AWSTraceHeader for one sent without, a MessageGroupId for a record
// without a key (or one that is not UTF-8, which no client sent), a MessageDeduplicationId
// for one without its header.
func absentAttributes(m *router.Message) uint {
	var absent uint
	if m.Timestamp.IsZero() {
		absent |= attrSentTimestamp
	}
	if _, ok := traceOf(m.Headers); !ok {
		absent |= attrTraceHeader
	}
	if len(m.Key) == 0 || !utf8.Valid(m.Key) {
		absent |= attrGroupID
	}
	if _, ok := deduplicationIDOf(m.Headers); !ok {
		absent |= attrDeduplicationID
	}
	return absent
}

// deduplicationIDOf is the MessageDeduplicationId a FIFO queue's record carries: the last
// deduplicationHeader whose value is valid UTF-8.
func deduplicationIDOf(headers []router.Header) ([]byte, bool) {
	for i := len(headers) - 1; i >= 0; i-- {
		if headers[i].Key == deduplicationHeader && utf8.Valid(headers[i].Value) {
			return headers[i].Value, true
		}
	}
	return nil, false
}

// appendMessageID appends a record's MessageId, partition:offset: the same for every
// delivery of the record, and what SendMessage answered for it.
func appendMessageID(dst []byte, partition int32, offset int64) []byte {
	dst = strconv.AppendInt(dst, int64(partition), 10)
	dst = append(dst, ':')
	return strconv.AppendInt(dst, offset, 10)
}

// writeJSON writes a 200 with body.
func writeJSON(w http.ResponseWriter, body []byte) (int, error) {
	hdr := w.Header()
	hdr.Set("Content-Type", contentType)
	hdr.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	return w.Write(body)
}
