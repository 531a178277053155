package sqsapi

import (
	"cmp"
	"crypto/md5"
	"encoding/base64"
	"encoding/binary"
	"slices"
	"strings"

	"narad.dev/consume/router/internal/frontend"
)

// A messageAttribute is one of a message's message attributes, as ReceiveMessage returns
// them: a name, a data type ("String", "Number", "Binary", optionally with a custom suffix
// such as "Number.int") and a value, binary for a Binary type.
//
// Records carry no headers yet, so no received message has any: this is where they plug in
// (appendMessage takes them, with their MD5) once records carry headers.
type messageAttribute struct {
	name     string
	dataType string
	value    []byte
}

func (a *messageAttribute) binary() bool { return strings.HasPrefix(a.dataType, "Binary") }

// md5OfMessageAttributes is SQS's MD5OfMessageAttributes: the MD5 of the attributes in
// order of name, each written as its name, its data type (each a 4-byte big-endian length
// and the bytes), a transport byte (1 for a string value, 2 for a binary one) and its
// value, length first.
func md5OfMessageAttributes(attrs []messageAttribute) [md5.Size]byte {
	sorted := slices.SortedFunc(slices.Values(attrs), func(a, b messageAttribute) int { return cmp.Compare(a.name, b.name) })
	h := md5.New()
	var buf []byte
	for _, a := range sorted {
		buf = appendLengthPrefixed(buf[:0], []byte(a.name))
		buf = appendLengthPrefixed(buf, []byte(a.dataType))
		if a.binary() {
			buf = append(buf, 2)
		} else {
			buf = append(buf, 1)
		}
		buf = appendLengthPrefixed(buf, a.value)
		h.Write(buf)
	}
	var sum [md5.Size]byte
	h.Sum(sum[:0])
	return sum
}

func appendLengthPrefixed(dst, b []byte) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(b)))
	return append(dst, b...)
}

// appendMessageAttributes appends the MessageAttributes object of a received message:
//
//	{"name":{"DataType":"String","StringValue":"..."},"bin":{"DataType":"Binary","BinaryValue":"<base64>"}}
func appendMessageAttributes(dst []byte, attrs []messageAttribute) []byte {
	dst = append(dst, '{')
	for i := range attrs {
		a := &attrs[i]
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = frontend.AppendString(dst, a.name)
		dst = append(dst, `:{"DataType":`...)
		dst = frontend.AppendString(dst, a.dataType)
		if a.binary() {
			dst = append(dst, `,"BinaryValue":"`...)
			dst = base64.StdEncoding.AppendEncode(dst, a.value)
			dst = append(dst, `"}`...)
			continue
		}
		dst = append(dst, `,"StringValue":`...)
		dst = frontend.AppendString(dst, a.value)
		dst = append(dst, '}')
	}
	return append(dst, '}')
}
