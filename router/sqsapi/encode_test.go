package sqsapi

import (
	"crypto/md5"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"narad.dev/consume/router"
)

// TestMD5OfMessageAttributes: SQS's MD5 of message attributes, against the values other
// implementations publish for the same attributes (moto/localstack, sqslite, the JavaScript
// consumer's tests).
func TestMD5OfMessageAttributes(t *testing.T) {
	for _, tc := range []struct {
		attrs []messageAttribute
		want  string
	}{
		{[]messageAttribute{{name: "timestamp", dataType: "Number", value: []byte("1493147359900")}}, "235c5c510d26fb653d073faed50ae77c"},
		{[]messageAttribute{{name: "SellerName", dataType: "String", value: []byte("Example Store")}}, "cd28f3b68aeee4b2eac9c66f2f694b58"},
		{[]messageAttribute{ // given out of order: the MD5 sorts them by name
			{name: "ordinal", dataType: "Number", value: []byte("1")},
			{name: "category", dataType: "String", value: []byte("test")},
		}, "d21ae90c49061e927f57df5f5d72be1f"},
	} {
		sum := md5OfMessageAttributes(tc.attrs)
		require.Equal(t, tc.want, hex.EncodeToString(sum[:]))
	}
}

// wireMessage is a received message as an SDK decodes it.
type wireMessage struct {
	MessageId              string
	ReceiptHandle          string
	MD5OfBody              string
	Body                   string
	Attributes             map[string]string
	MD5OfMessageAttributes string
	MessageAttributes      map[string]struct {
		DataType    string
		StringValue *string
		BinaryValue []byte
	}
}

// TestMessageAttributesEncoding: a received message's message attributes are written as
// SQS writes them, with their MD5.
func TestMessageAttributesEncoding(t *testing.T) {
	m := router.Message{Partition: 2, Offset: 7, Value: []byte("v"), Receipt: router.Handle{Partition: 2, Offset: 7, Nonce: 9}, Attempt: 1}
	attrs := []messageAttribute{
		{name: "category", dataType: "String", value: []byte("t<e>st")},
		{name: "blob", dataType: "Binary", value: []byte{0, 0xff}},
	}
	var got wireMessage
	require.NoError(t, json.Unmarshal(appendMessage(nil, &m, delivery{receipt: m.Receipt.AppendText(nil), mattrs: attrs}), &got))
	require.Equal(t, "t<e>st", *got.MessageAttributes["category"].StringValue)
	require.Equal(t, "String", got.MessageAttributes["category"].DataType)
	require.Equal(t, []byte{0, 0xff}, got.MessageAttributes["blob"].BinaryValue)
	require.Equal(t, "Binary", got.MessageAttributes["blob"].DataType)
	sum := md5OfMessageAttributes(attrs)
	require.Equal(t, hex.EncodeToString(sum[:]), got.MD5OfMessageAttributes)
	require.Nil(t, got.Attributes)

	var none map[string]any
	require.NoError(t, json.Unmarshal(appendMessage(nil, &m, delivery{receipt: m.Receipt.AppendText(nil)}), &none))
	require.NotContains(t, none, "MessageAttributes")
	require.NotContains(t, none, "MD5OfMessageAttributes")
}

// TestAppendMessage: whatever the record, its encoding is JSON an SDK decodes to the
// record: the body (its base64 when it is not UTF-8) with its MD5, the MessageId, the handle,
// and exactly the system attributes asked for that the record can answer.
func TestAppendMessage(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := router.Message{
			Partition: rapid.Int32Min(0).Draw(t, "partition"),
			Offset:    rapid.Int64Min(0).Draw(t, "offset"),
			Value:     rapid.SliceOfN(rapid.Byte(), 0, 64).Draw(t, "value"),
			Attempt:   rapid.Uint32Range(1, 5).Draw(t, "attempt"),
		}
		if rapid.Bool().Draw(t, "utf8") {
			m.Value = []byte(rapid.String().Draw(t, "text"))
		}
		if rapid.Bool().Draw(t, "timestamped") {
			m.Timestamp = time.UnixMilli(rapid.Int64Range(0, 1<<45).Draw(t, "ms"))
		}
		m.Receipt = router.Handle{Partition: m.Partition, Offset: m.Offset, Nonce: rapid.Uint64Min(1).Draw(t, "nonce")}
		attrs := rapid.UintRange(0, 7).Draw(t, "attrs")
		first := rapid.Int64Range(0, 1<<45).Draw(t, "first")
		enc := appendMessage(nil, &m, delivery{receipt: m.Receipt.AppendText(nil), attrs: attrs, firstReceive: first})

		var got wireMessage
		require.NoError(t, json.Unmarshal(enc, &got), string(enc))
		want := string(m.Value)
		if !utf8.Valid(m.Value) {
			want = base64.StdEncoding.EncodeToString(m.Value)
		}
		require.Equal(t, want, got.Body)
		sum := md5.Sum([]byte(got.Body))
		require.Equal(t, hex.EncodeToString(sum[:]), got.MD5OfBody)
		require.Equal(t, strconv.Itoa(int(m.Partition))+":"+strconv.FormatInt(m.Offset, 10), got.MessageId)
		require.Equal(t, m.Receipt.String(), got.ReceiptHandle)
		wantAttrs := map[string]string{}
		if attrs&attrReceiveCount != 0 {
			wantAttrs["ApproximateReceiveCount"] = strconv.Itoa(int(m.Attempt))
		}
		if attrs&attrSentTimestamp != 0 && !m.Timestamp.IsZero() {
			wantAttrs["SentTimestamp"] = strconv.FormatInt(m.Timestamp.UnixMilli(), 10)
		}
		if attrs&attrFirstReceive != 0 {
			wantAttrs["ApproximateFirstReceiveTimestamp"] = strconv.FormatInt(first, 10)
		}
		if len(wantAttrs) == 0 {
			wantAttrs = nil
		}
		require.Equal(t, wantAttrs, got.Attributes)
	})
}

// TestTypedErrors: what the decoder refuses is told apart by errors.Is, by its code and by
// its cause.
func TestTypedErrors(t *testing.T) {
	var in receiveInput
	for body, cause := range map[string]error{
		`{`:                             errMalformed,
		`{} {}`:                         errMalformed,
		`"x"`:                           errMalformed,
		`{"MaxNumberOfMessages":"1"}`:   errWrongType,
		`{"MaxNumberOfMessages":1e400}`: errWrongType,
		`{"AttributeNames":[1]}`:        errWrongType,
		`{"QueueUrl":{"a":1}}`:          errWrongType,
		`{"MaxNumberOfMessages":1.5}`:   errWrongType,
		`{"WaitTimeSeconds":99999999999999999999}`: errWrongType,
	} {
		err := decode([]byte(body), &in)
		require.ErrorIs(t, err, cause, body)
		require.ErrorIs(t, err, codeSerialization, body)
		require.NotErrorIs(t, err, codeInvalidParameterValue)
	}
	require.NoError(t, decode([]byte(" \n"), &in), "an empty body is {}")

	for _, batch := range []bool{false, true} {
		w := httptest.NewRecorder()
		r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(strings.Repeat(" ", MaxRequestBytes+1)))
		_, err := readBody(w, r, batch)
		require.ErrorIs(t, err, errTooLarge)
		want := codeInvalidParameterValue
		if batch {
			want = codeBatchRequestTooLong
		}
		require.ErrorIs(t, err, want)
		r = httptest.NewRequest(http.MethodPost, "/", strings.NewReader(strings.Repeat(" ", MaxRequestBytes)))
		body, err := readBody(w, r, batch)
		require.NoError(t, err)
		require.Len(t, body, MaxRequestBytes, "the bound itself is allowed")
	}
	_, err := (&receiveInput{MaxNumberOfMessages: ptr(int64(11))}).request()
	require.ErrorIs(t, err, codeInvalidParameterValue)
	var ae *apiError
	require.True(t, errors.As(err, &ae))
	require.Equal(t, "InvalidParameterValue: Value 11 for parameter MaxNumberOfMessages is invalid. Reason: Must be between 1 and 10, if provided.", err.Error())
}

func ptr[T any](v T) *T { return &v }
