package sqsapi

import (
	"cmp"
	"crypto/md5"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"narad.dev/consume/router"
	"narad.dev/consume/router/internal/frontend"
)

// A messageAttribute is one of a message's message attributes: a name, a data type
// ("String", "Number", "Binary", optionally with a custom suffix such as "Number.int") and a
// value, binary for a Binary type. A sent one becomes a header of the record (its name and
// value), and its data type, unless it is "String", a header typeHeaderPrefix+name whose
// value is the type; a received one is a header of the record, of the type its type header
// names, and without one of type String when its value is valid UTF-8 and Binary otherwise.
type messageAttribute struct {
	name     string
	dataType string
	value    []byte
}

// maxMessageAttributes is the most message attributes SQS lets a message carry.
const maxMessageAttributes = 10

// The headers of a record that carry what SQS keeps besides a message attribute's name and
// value. Their keys begin with "AWS.", which no message attribute's name may: no attribute
// is taken for one of them, nor answered as one.
const (
	// internalPrefix begins every such header's key.
	internalPrefix = "AWS.SQS."
	// typeHeaderPrefix and an attribute's name are the key of the header holding the
	// attribute's data type, for a type other than "String".
	typeHeaderPrefix = internalPrefix + "DataType."
	// traceHeader is the key of the header holding the AWSTraceHeader system attribute.
	traceHeader = internalPrefix + "AWSTraceHeader"
)

// recordHeaders are the headers a sent message's record carries: one per message attribute,
// in order of name (its name and value), one per attribute of another type than "String"
// (typeHeaderPrefix and its name, its type), the AWSTraceHeader system attribute
// (traceHeader, its value) when it has one, and a FIFO queue's message's deduplication id
// (deduplicationHeader, the id) when it has one.
func recordHeaders(attrs []messageAttribute, trace []byte, dedupID string, deliverAt time.Time) []router.Header {
	n := len(attrs)
	for i := range attrs {
		if attrs[i].dataType != "String" {
			n++
		}
	}
	if trace != nil {
		n++
	}
	if dedupID != "" {
		n++
	}
	if !deliverAt.IsZero() {
		n++
	}
	if n == 0 {
		return nil
	}
	headers := make([]router.Header, 0, n)
	for i := range attrs {
		headers = append(headers, router.Header{Key: attrs[i].name, Value: attrs[i].value})
	}
	for i := range attrs {
		if attrs[i].dataType != "String" {
			headers = append(headers, router.Header{Key: typeHeaderPrefix + attrs[i].name, Value: []byte(attrs[i].dataType)})
		}
	}
	if trace != nil {
		headers = append(headers, router.Header{Key: traceHeader, Value: trace})
	}
	if dedupID != "" {
		headers = append(headers, router.Header{Key: deduplicationHeader, Value: []byte(dedupID)})
	}
	if !deliverAt.IsZero() {
		headers = append(headers, router.Header{Key: deliverAtHeader, Value: strconv.AppendInt(nil, deliverAt.UnixNano(), 10)})
	}
	return headers
}

// deliverAtHeader is the key of the header of a delayed message's record that holds when it
// may be delivered (Unix nanoseconds on the handler's clock, Config.Now), which NotBefore
// reads. Its key begins with internalPrefix: no receive answers it.
const deliverAtHeader = internalPrefix + "DeliverAt"

// NotBefore is router.Config.NotBefore for a node serving this front end's queues: a message
// sent with a DelaySeconds, or to a queue with one, is not delivered before its delay after
// it was sent, on the sending handler's clock (Config.Now), which the node's clock must
// follow (the same machine's, or synchronized). Any other record is due at once.
func NotBefore(_ string, rec router.Record) time.Time {
	for i := len(rec.Headers) - 1; i >= 0; i-- {
		if rec.Headers[i].Key == deliverAtHeader {
			if ns, err := strconv.ParseInt(string(rec.Headers[i].Value), 10, 64); err == nil {
				return time.Unix(0, ns)
			}
			return time.Time{}
		}
	}
	return time.Time{}
}

// attributeValue is one entry of a sent message's MessageAttributes.
type attributeValue struct {
	DataType         *string
	StringValue      *string
	BinaryValue      []byte // base64 in the JSON
	StringListValues []json.RawMessage
	BinaryListValues []json.RawMessage
}

// size is what an attribute's type and value count towards a message's size, as SQS counts
// it (its name besides).
func (v *attributeValue) size() int {
	n := len(v.BinaryValue)
	if v.DataType != nil {
		n += len(*v.DataType)
	}
	if v.StringValue != nil {
		n += len(*v.StringValue)
	}
	return n
}

// attributesSize is what attrs count towards a message's size: names, types and values.
func attributesSize(attrs []messageAttribute) int {
	n := 0
	for i := range attrs {
		n += len(attrs[i].name) + len(attrs[i].dataType) + len(attrs[i].value)
	}
	return n
}

// sentAttributes validates a sent message's MessageAttributes as SQS does and returns them
// in order of name: at most 10; each name 1 to 256 of A-Z, a-z, 0-9, '_', '-' and '.', no
// period first, last or twice in a row, not beginning with "AWS." or "Amazon."; each data
// type String, Number or Binary, perhaps with a custom suffix after a period (256 bytes in
// all); a String's or Number's StringValue non-empty, of the characters a body may hold (a
// Number's a number), a Binary's BinaryValue non-empty; no list values. prefix is the
// batch entry's, for the parameter's name in an error.
func sentAttributes(prefix string, in map[string]attributeValue) ([]messageAttribute, error) {
	if len(in) == 0 {
		return nil, nil
	}
	param := prefix + "MessageAttributes"
	if len(in) > maxMessageAttributes {
		return nil, invalidValue(param, "(set)", fmt.Sprintf("Number of message attributes [%d] exceeds the allowed maximum [%d].", len(in), maxMessageAttributes))
	}
	attrs := make([]messageAttribute, 0, len(in))
	for name, v := range in {
		if err := checkAttributeName(param, name); err != nil {
			return nil, err
		}
		a, err := v.attribute(param, name)
		if err != nil {
			return nil, err
		}
		attrs = append(attrs, a)
	}
	slices.SortFunc(attrs, func(a, b messageAttribute) int { return cmp.Compare(a.name, b.name) })
	return attrs, nil
}

// checkAttributeName refuses a message attribute name SQS refuses.
func checkAttributeName(param, name string) error {
	bad := func(why string) error {
		return invalidValue(param, strconv.Quote(truncate(name)), "Message attribute name "+why)
	}
	switch {
	case name == "" || len(name) > maxAttributeName:
		return bad(fmt.Sprintf("must be 1 to %d characters long.", maxAttributeName))
	case name[0] == '.' || name[len(name)-1] == '.' || strings.Contains(name, ".."):
		return bad("must not begin or end with a period, nor hold two in a row.")
	case hasPrefixFold(name, "AWS.") || hasPrefixFold(name, "Amazon."):
		return bad("must not begin with AWS. or Amazon., which are reserved.")
	}
	for i := 0; i < len(name); i++ {
		switch c := name[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '_', c == '-', c == '.':
		default:
			return bad("can only contain alphanumeric characters, hyphens, underscores and periods.")
		}
	}
	return nil
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

// attribute validates one sent attribute value, named name, and returns it.
func (v *attributeValue) attribute(param, name string) (messageAttribute, error) {
	bad := func(why string) error {
		return invalidValue(param, strconv.Quote(truncate(name)), "Message attribute "+why)
	}
	if v.DataType == nil || *v.DataType == "" {
		return messageAttribute{}, bad("has no DataType.")
	}
	dataType := *v.DataType
	base, ok := checkDataType(dataType)
	switch {
	case len(dataType) > maxAttributeName:
		return messageAttribute{}, bad(fmt.Sprintf("has a DataType longer than %d characters.", maxAttributeName))
	case !ok:
		return messageAttribute{}, bad("has DataType " + strconv.Quote(truncate(dataType)) + ": it must be String, Number or Binary, perhaps with a custom type after a period.")
	case v.StringListValues != nil || v.BinaryListValues != nil:
		return messageAttribute{}, bad("has list values, which SQS does not support.")
	}
	a := messageAttribute{name: name, dataType: dataType}
	if base == "Binary" {
		if len(v.BinaryValue) == 0 || v.StringValue != nil {
			return messageAttribute{}, bad("of type Binary must have a non-empty BinaryValue, and no StringValue.")
		}
		a.value = v.BinaryValue
		return a, nil
	}
	switch {
	case v.StringValue == nil || *v.StringValue == "" || v.BinaryValue != nil:
		return messageAttribute{}, bad("of type " + base + " must have a non-empty StringValue, and no BinaryValue.")
	case base == "Number" && !isNumber(*v.StringValue):
		return messageAttribute{}, bad("of type Number must hold a number.")
	}
	if r, ok := invalidCharacter(*v.StringValue); !ok {
		return messageAttribute{}, fail(codeInvalidMessageContents, fmt.Sprintf("Invalid binary character '#x%X' was found in the value of message attribute %q.", r, truncate(name)))
	}
	a.value = []byte(*v.StringValue)
	return a, nil
}

// checkDataType reads a data type: String, Number or Binary, perhaps with a non-empty
// custom type after a period (of the characters a body may hold), at most 256 bytes.
func checkDataType(dataType string) (base string, ok bool) {
	base, custom, dotted := strings.Cut(dataType, ".")
	if len(dataType) > maxAttributeName || (base != "String" && base != "Number" && base != "Binary") || (dotted && custom == "") {
		return "", false
	}
	if _, valid := invalidCharacter(custom); !valid {
		return "", false
	}
	return base, true
}

// isNumber reports whether s is a number as SQS takes one: an integer or a decimal, perhaps
// signed, perhaps with an exponent.
func isNumber(s string) bool {
	_, err := strconv.ParseFloat(s, 64)
	return err == nil && !strings.ContainsAny(s, "xXpP_") && !strings.EqualFold(strings.TrimLeft(s, "+-"), "inf") &&
		!strings.EqualFold(strings.TrimLeft(s, "+-"), "infinity") && !strings.EqualFold(s, "nan")
}

// attributeSelection is a ReceiveMessage's MessageAttributeNames: the message attributes it
// asks for. The zero value selects none.
type attributeSelection struct {
	all      bool            // "All" or ".*"
	names    map[string]bool // names asked for exactly
	prefixes []string        // "foo.*" asks for every name beginning with "foo."
}

// selectAttributes reads MessageAttributeNames, whose names have been checked already.
func selectAttributes(names []string) attributeSelection {
	var sel attributeSelection
	for _, name := range names {
		switch {
		case name == "All" || name == ".*":
			sel.all = true
		case strings.HasSuffix(name, ".*"):
			sel.prefixes = append(sel.prefixes, strings.TrimSuffix(name, "*"))
		default:
			if sel.names == nil {
				sel.names = map[string]bool{}
			}
			sel.names[name] = true
		}
	}
	return sel
}

// selects reports whether sel asks for the attribute named name.
func (sel *attributeSelection) selects(name string) bool {
	if sel.all || sel.names[name] {
		return true
	}
	for _, p := range sel.prefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// none reports whether sel asks for no attribute.
func (sel *attributeSelection) none() bool {
	return !sel.all && len(sel.names) == 0 && len(sel.prefixes) == 0
}

// receivedAttributes appends to dst[:0] the message attributes sel asks for of a message
// whose record carries headers, in order of name: one per header key, the last header of a
// repeated key (SQS's attributes are a map), of the data type its type header names
// (typeHeaderPrefix and its key), and without one (a record another producer wrote) String
// when the value is valid UTF-8 and Binary otherwise. A header whose key is empty, not valid
// UTF-8, or one of the internal headers (internalPrefix) is left out, since no SQS client
// could name it (nor check its MD5); a type header whose type SQS would refuse, or that
// names a String or Number for a value that is not valid UTF-8, is not followed.
func receivedAttributes(dst []messageAttribute, headers []router.Header, sel *attributeSelection) []messageAttribute {
	dst = dst[:0]
	if sel.none() {
		return dst
	}
	for i := len(headers) - 1; i >= 0; i-- { // the last of a repeated key first
		h := &headers[i]
		if h.Key == "" || !utf8.ValidString(h.Key) || strings.HasPrefix(h.Key, internalPrefix) || !sel.selects(h.Key) ||
			slices.ContainsFunc(dst, func(a messageAttribute) bool { return a.name == h.Key }) {
			continue
		}
		valid := utf8.Valid(h.Value)
		a := messageAttribute{name: h.Key, dataType: "Binary", value: h.Value}
		if valid {
			a.dataType = "String"
		}
		if t, ok := headerType(headers, h.Key); ok {
			if base, ok := checkDataType(t); ok && (base == "Binary" || valid) {
				a.dataType = t
			}
		}
		dst = append(dst, a)
	}
	slices.SortFunc(dst, func(a, b messageAttribute) int { return cmp.Compare(a.name, b.name) })
	return dst
}

// headerType finds the data type the last type header of the attribute name holds.
func headerType(headers []router.Header, name string) (string, bool) {
	for i := len(headers) - 1; i >= 0; i-- {
		k := headers[i].Key
		if len(k) == len(typeHeaderPrefix)+len(name) && strings.HasPrefix(k, typeHeaderPrefix) && k[len(typeHeaderPrefix):] == name {
			return string(headers[i].Value), true
		}
	}
	return "", false
}

// traceOf is the AWSTraceHeader system attribute a record's headers carry: the last
// traceHeader whose value is valid UTF-8.
func traceOf(headers []router.Header) ([]byte, bool) {
	for i := len(headers) - 1; i >= 0; i-- {
		if headers[i].Key == traceHeader && utf8.Valid(headers[i].Value) {
			return headers[i].Value, true
		}
	}
	return nil, false
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
