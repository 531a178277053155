package httpapi_test

import (
	"encoding/json"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"narad.dev/consume/router"
	"narad.dev/consume/router/httpapi"
)

// mirror is the wireMessage encoding/json writes for m: what the handler's encoder must
// write, byte for byte.
func mirror(m *router.Message) wireMessage {
	w := wireMessage{Topic: m.Topic, Partition: m.Partition, Offset: m.Offset, Timestamp: m.Timestamp.UTC()}
	if len(m.Key) > 0 {
		if utf8.Valid(m.Key) {
			k := string(m.Key)
			w.Key = &k
		} else {
			w.KeyBase64 = m.Key
		}
	}
	if utf8.Valid(m.Value) {
		v := string(m.Value)
		w.Value = &v
	} else {
		w.ValueBase64 = m.Value
	}
	for _, h := range m.Headers {
		w.Headers = append(w.Headers, wireHeader{Key: h.Key, Value: orEmpty(h.Value)})
	}
	if m.Receipt != (router.Handle{}) {
		w.ReceiptHandle = m.Receipt.String()
		w.Attempt = m.Attempt
		w.Reason = m.Reason.String()
		expiry := m.Expiry.UTC()
		w.Expiry = &expiry
		w.Fence = itoaU(m.Fence)
	}
	return w
}

func itoaU(v uint64) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// bytesGen draws byte strings rich in what JSON escapes: quotes, backslashes, control
// bytes, <, >, &, U+2028, U+2029, multi-byte runes and invalid UTF-8.
func bytesGen() *rapid.Generator[[]byte] {
	pieces := []string{"a", "é", "\"", "\\", "\n", "\t", "\b", "\f", "\r", "\x00", "\x1f", "\x7f",
		"<", ">", "&", "\u2028", "\u2029", "\U0001F600", "\xff", "\xc3", "\xe2\x80", "\xed\xa0\x80", "/"}
	return rapid.Custom(func(t *rapid.T) []byte {
		if rapid.Bool().Draw(t, "raw") {
			return rapid.SliceOfN(rapid.Byte(), 0, 64).Draw(t, "bytes")
		}
		var b []byte
		for _, p := range rapid.SliceOfN(rapid.SampledFrom(pieces), 0, 32).Draw(t, "pieces") {
			b = append(b, p...)
		}
		return b
	})
}

func messageGen() *rapid.Generator[router.Message] {
	return rapid.Custom(func(t *rapid.T) router.Message {
		topic := string(bytesGen().Draw(t, "topic"))
		if !utf8.ValidString(topic) {
			topic = "orders" // the handler takes only UTF-8 topics
		}
		m := router.Message{
			Topic:     topic,
			Partition: rapid.Int32Min(0).Draw(t, "partition"),
			Offset:    rapid.Int64Min(0).Draw(t, "offset"),
			Key:       bytesGen().Draw(t, "key"),
			Value:     bytesGen().Draw(t, "value"),
			Timestamp: time.Unix(rapid.Int64Range(-62135596800, 253402300799).Draw(t, "sec"), rapid.Int64Range(0, 999999999).Draw(t, "nsec")),
			Headers: rapid.SliceOfN(rapid.Custom(func(t *rapid.T) router.Header {
				return router.Header{Key: string(bytesGen().Draw(t, "header key")), Value: bytesGen().Draw(t, "header value")}
			}), 0, 3).Draw(t, "headers"),
		}
		if rapid.Bool().Draw(t, "leased") {
			m.Receipt = router.Handle{Partition: m.Partition, Offset: m.Offset, Nonce: rapid.Uint64Min(1).Draw(t, "nonce")}
			m.Attempt = rapid.Uint32Min(1).Draw(t, "attempt")
			m.Reason = router.Reason(rapid.Uint8Range(0, 5).Draw(t, "reason"))
			m.Expiry = time.Unix(rapid.Int64Range(0, 253402300799).Draw(t, "expiry"), rapid.Int64Range(0, 999999999).Draw(t, "expiryNsec")).In(time.FixedZone("x", 3600))
			m.Fence = rapid.Uint64().Draw(t, "fence")
		}
		return m
	})
}

// TestEncodingIsEncodingJSONs: the handler's encoding of a message is byte for byte what
// encoding/json writes for it, and MessageLen, what FitResponse measures with, is its exact
// length, escapes and base64 included.
func TestEncodingIsEncodingJSONs(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := messageGen().Draw(t, "message")
		want, err := json.Marshal(mirror(&m))
		require.NoError(t, err)
		got := httpapi.AppendMessage(nil, &m)
		require.Equal(t, string(want), string(got))
		require.Equal(t, len(got), httpapi.MessageLen(&m))
		// And it decodes back to the message, losslessly.
		var back wireMessage
		require.NoError(t, json.Unmarshal(got, &back))
		require.Equal(t, orEmpty(m.Value), orEmpty(back.value()))
		require.Equal(t, orEmpty(m.Key), orEmpty(back.key()))
		require.True(t, m.Timestamp.Equal(back.Timestamp))
		require.Len(t, back.Headers, len(m.Headers))
		for i, h := range m.Headers {
			require.Equal(t, orEmpty(h.Value), orEmpty(back.Headers[i].Value), "header %d's value", i)
			if utf8.ValidString(h.Key) {
				require.Equal(t, h.Key, back.Headers[i].Key, "header %d's key", i)
			}
		}
	})
}

func orEmpty(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// TestEscapesCount: the bytes that inflate in JSON are counted at their escaped size.
func TestEscapesCount(t *testing.T) {
	base := router.Message{Topic: "t", Value: []byte("")}
	empty := httpapi.MessageLen(&base)
	for value, extra := range map[string]int{"a": 1, "<": 6, ">": 6, "&": 6, "\x01": 6, "\n": 2, "\"": 2, "\u2028": 6, "é": 2} {
		m := base
		m.Value = []byte(value)
		require.Equal(t, empty+extra, httpapi.MessageLen(&m), "%q", value)
	}
	m := base
	m.Value = []byte{0xff, 0xfe, 0xfd}
	require.Equal(t, empty-len(`,"value":""`)+len(`,"value_base64":"//79"`), httpapi.MessageLen(&m))
}
