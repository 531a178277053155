package httpapi

import (
	"encoding/base64"
	"strconv"
	"time"
	"unicode/utf8"

	"narad.dev/consume/router"
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
// always there. A replayed record (no receipt) carries no receipt_handle, attempt, reason,
// expiry or fence.
func appendMessage(dst []byte, m *router.Message) []byte {
	dst = append(dst, `{"topic":`...)
	dst = appendString(dst, m.Topic)
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
	if !leased(m) {
		return append(dst, '}')
	}
	dst = append(dst, `,"receipt_handle":"`...)
	dst = m.Receipt.AppendText(dst)
	dst = append(dst, `","attempt":`...)
	dst = strconv.AppendUint(dst, uint64(m.Attempt), 10)
	dst = append(dst, `,"reason":`...)
	dst = appendString(dst, m.Reason.String())
	dst = append(dst, `,"expiry":"`...)
	dst = m.Expiry.UTC().AppendFormat(dst, timeFormat)
	dst = append(dst, `","fence":"`...)
	dst = strconv.AppendUint(dst, m.Fence, 10)
	return append(dst, `"}`...)
}

// messageLen is len(appendMessage(nil, m)), counted without encoding: what FitResponse
// measures each message with.
func messageLen(m *router.Message) int {
	n := len(`{"topic":`) + stringLen(m.Topic) +
		len(`,"partition":`) + intLen(int64(m.Partition)) +
		len(`,"offset":`) + intLen(m.Offset)
	if len(m.Key) > 0 {
		n += bytesLen("key", m.Key)
	}
	n += bytesLen("value", m.Value)
	n += len(`,"timestamp":"`) + timeLen(m.Timestamp) + 1
	if !leased(m) {
		return n + 1
	}
	n += len(`,"receipt_handle":"`) + handleLen(m.Receipt) +
		len(`","attempt":`) + uintLen(uint64(m.Attempt)) +
		len(`,"reason":`) + stringLen(m.Reason.String()) +
		len(`,"expiry":"`) + timeLen(m.Expiry) +
		len(`","fence":"`) + uintLen(m.Fence) + len(`"}`)
	return n
}

// leased reports whether m carries a lease: a consumed record does, a replayed one does not.
func leased(m *router.Message) bool { return m.Receipt != (router.Handle{}) }

// appendBytes appends ,"name":"..." when b is valid UTF-8, ,"name_base64":"..." otherwise.
func appendBytes(dst []byte, name string, b []byte) []byte {
	dst = append(dst, ',', '"')
	dst = append(dst, name...)
	if utf8.Valid(b) {
		dst = append(dst, '"', ':')
		return appendString(dst, b)
	}
	dst = append(dst, `_base64":"`...)
	dst = base64.StdEncoding.AppendEncode(dst, b)
	return append(dst, '"')
}

func bytesLen(name string, b []byte) int {
	if utf8.Valid(b) {
		return len(`,"":`) + len(name) + stringLen(b)
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

const hexDigits = "0123456789abcdef"

// appendString appends src as a JSON string, escaped as encoding/json escapes it by
// default: ", \ and the control bytes (\b, \f, \n, \r, \t short, the others as \u00XX), <, >
// and & as \u003c, \u003e and \u0026, U+2028 and U+2029 as \u2028 and \u2029, and each byte
// of an invalid UTF-8 sequence as \ufffd (the callers pass only valid UTF-8).
func appendString[T string | []byte](dst []byte, src T) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(src); {
		c := src[i]
		if c < utf8.RuneSelf {
			if plain(c) {
				i++
				continue
			}
			dst = append(dst, src[start:i]...)
			switch c {
			case '\\', '"':
				dst = append(dst, '\\', c)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := decodeRune(src, i)
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, src[start:i]...)
			dst = append(dst, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			dst = append(dst, src[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	dst = append(dst, src[start:]...)
	return append(dst, '"')
}

// stringLen is len(appendString(nil, src)).
func stringLen[T string | []byte](src T) int {
	n := 2
	for i := 0; i < len(src); {
		c := src[i]
		if c < utf8.RuneSelf {
			switch {
			case plain(c):
				n++
			case c == '\\', c == '"', c == '\b', c == '\f', c == '\n', c == '\r', c == '\t':
				n += 2
			default:
				n += 6
			}
			i++
			continue
		}
		r, size := decodeRune(src, i)
		switch {
		case r == utf8.RuneError && size == 1, r == '\u2028' || r == '\u2029':
			n += 6
		default:
			n += size
		}
		i += size
	}
	return n
}

// plain reports whether an ASCII byte is written as itself.
func plain(c byte) bool {
	return c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
}

// decodeRune decodes the rune at src[i:]. The conversion of at most utf8.UTFMax bytes to a
// string stays on the stack.
func decodeRune[T string | []byte](src T, i int) (rune, int) {
	return utf8.DecodeRuneInString(string(src[i : i+min(len(src)-i, utf8.UTFMax)]))
}
