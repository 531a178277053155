package httpapi

import (
	"encoding/base64"
	"strconv"
	"time"
	"unicode/utf8"

	"narad.dev/consume/router"
	"narad.dev/consume/router/internal/frontend"
)

// The envelope of a consume's response body: {"messages":[m1,m2,...]}.
const (
	envelopeOpen  = `{"messages":[`
	envelopeClose = `]}`
	// envelopeBytes is what a body holds besides its messages and the commas between them:
	// with each message counted with one byte for its separator (a comma, or nothing for
	// the last), a body of n messages is envelopeBytes - 1 + Σ (len + 1).
	envelopeBytes = len(envelopeOpen) + len(envelopeClose)
)

// timeFormat is how timestamps and expiries are written: RFC 3339 with nanoseconds, in UTC,
// as encoding/json writes a UTC time.Time.
const timeFormat = time.RFC3339Nano

// appendMessage appends the JSON object of one message to dst. The bytes are exactly those
// encoding/json writes for the wireMessage the tests declare (escaping <, >, &, U+2028 and
// U+2029, as its default does), and exactly messageLen(m) of them.
//
// A key or value that is valid UTF-8 is a JSON string ("key", "value"); any other is base64
// with padding in "key_base64" or "value_base64". An empty key is left out; the value is
// always there. Headers, when the record has some, are "headers": an array of {"key": a
// JSON string, "value": base64 with padding}, in the record's order. A replayed record (no
// receipt) carries no receipt_handle, attempt, reason, expiry or fence.
func appendMessage(dst []byte, m *router.Message) []byte {
	dst = append(dst, `{"topic":`...)
	dst = frontend.AppendString(dst, m.Topic)
	dst = append(dst, `,"partition":`...)
	dst = strconv.AppendInt(dst, int64(m.Partition), 10)
	dst = append(dst, `,"offset":`...)
	dst = strconv.AppendInt(dst, m.Offset, 10)
	if len(m.Key) > 0 {
		dst = appendBytes(dst, "key", m.Key)
	}
	dst = appendBytes(dst, "value", m.Value)
	dst = append(dst, `,"timestamp":"`...)
	dst = m.Timestamp.UTC().AppendFormat(dst, timeFormat)
	dst = append(dst, '"')
	if len(m.Headers) > 0 {
		dst = appendHeaders(dst, m.Headers)
	}
	if !frontend.Leased(m) {
		return append(dst, '}')
	}
	dst = append(dst, `,"receipt_handle":"`...)
	dst = m.Receipt.AppendText(dst)
	dst = append(dst, `","attempt":`...)
	dst = strconv.AppendUint(dst, uint64(m.Attempt), 10)
	dst = append(dst, `,"reason":`...)
	dst = frontend.AppendString(dst, m.Reason.String())
	dst = append(dst, `,"expiry":"`...)
	dst = m.Expiry.UTC().AppendFormat(dst, timeFormat)
	dst = append(dst, `","fence":"`...)
	dst = strconv.AppendUint(dst, m.Fence, 10)
	return append(dst, `"}`...)
}

// messageLen is len(appendMessage(nil, m)), counted without encoding: what FitResponse
// measures each message with.
func messageLen(m *router.Message) int {
	n := len(`{"topic":`) + frontend.StringLen(m.Topic) +
		len(`,"partition":`) + intLen(int64(m.Partition)) +
		len(`,"offset":`) + intLen(m.Offset)
	if len(m.Key) > 0 {
		n += bytesLen("key", m.Key)
	}
	n += bytesLen("value", m.Value)
	n += len(`,"timestamp":"`) + timeLen(m.Timestamp) + 1
	if len(m.Headers) > 0 {
		n += headersLen(m.Headers)
	}
	if !frontend.Leased(m) {
		return n + 1
	}
	n += len(`,"receipt_handle":"`) + handleLen(m.Receipt) +
		len(`","attempt":`) + uintLen(uint64(m.Attempt)) +
		len(`,"reason":`) + frontend.StringLen(m.Reason.String()) +
		len(`,"expiry":"`) + timeLen(m.Expiry) +
		len(`","fence":"`) + uintLen(m.Fence) + len(`"}`)
	return n
}

// appendBytes appends ,"name":"..." when b is valid UTF-8, ,"name_base64":"..." otherwise.
func appendBytes(dst []byte, name string, b []byte) []byte {
	dst = append(dst, ',', '"')
	dst = append(dst, name...)
	if utf8.Valid(b) {
		dst = append(dst, '"', ':')
		return frontend.AppendString(dst, b)
	}
	dst = append(dst, `_base64":"`...)
	dst = base64.StdEncoding.AppendEncode(dst, b)
	return append(dst, '"')
}

// appendHeaders appends ,"headers":[{"key":...,"value":"<base64>"},...].
func appendHeaders(dst []byte, headers []router.Header) []byte {
	dst = append(dst, `,"headers":[`...)
	for i := range headers {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"key":`...)
		dst = frontend.AppendString(dst, headers[i].Key)
		dst = append(dst, `,"value":"`...)
		dst = base64.StdEncoding.AppendEncode(dst, headers[i].Value)
		dst = append(dst, `"}`...)
	}
	return append(dst, ']')
}

// headersLen is len(appendHeaders(nil, headers)).
func headersLen(headers []router.Header) int {
	n := len(`,"headers":[]`) + len(headers) - 1 // the commas between them
	for i := range headers {
		n += len(`{"key":,"value":""}`) + frontend.StringLen(headers[i].Key) + base64.StdEncoding.EncodedLen(len(headers[i].Value))
	}
	return n
}

func bytesLen(name string, b []byte) int {
	if utf8.Valid(b) {
		return len(`,"":`) + len(name) + frontend.StringLen(b)
	}
	return len(`,"_base64":""`) + len(name) + base64.StdEncoding.EncodedLen(len(b))
}

func timeLen(t time.Time) int {
	var b [64]byte
	return len(t.UTC().AppendFormat(b[:0], timeFormat))
}

func handleLen(h router.Handle) int {
	var b [64]byte
	return len(h.AppendText(b[:0]))
}

func intLen(v int64) int {
	var b [24]byte
	return len(strconv.AppendInt(b[:0], v, 10))
}

func uintLen(v uint64) int {
	var b [24]byte
	return len(strconv.AppendUint(b[:0], v, 10))
}
