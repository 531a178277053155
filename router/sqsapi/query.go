package sqsapi

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// SQS's query protocol: a POST whose body is a form (application/x-www-form-urlencoded)
// naming its action in Action=, answered in XML. A form's parameters are those of SQS's
// query API, which the AWS SDKs before the JSON protocol (botocore before 1.31, Debian's
// python3-boto3 and awscli among them) send: lists flattened as Name.1, Name.2, ...; maps
// as MessageAttribute.1.Name and MessageAttribute.1.Value.DataType; a batch's entries as
// SendMessageBatchRequestEntry.1.Id and so on. formJSON translates a form into the JSON
// body the action takes, so that both protocols are checked by one decoder.

// queryContentType is the media type of a query request's body.
const queryContentType = "application/x-www-form-urlencoded"

// xmlNamespace is the namespace of SQS's XML answers.
const xmlNamespace = "http://queue.amazonaws.com/doc/2012-11-05/"

// isQuery reports whether r is a request of the query protocol: no X-Amz-Target, and a
// form body. A form whose media type has a malformed parameter (a charset's name mangled) is
// a form still: it is answered in the query protocol's XML, as its client expects.
func isQuery(r *http.Request) bool {
	if r.Header.Get("X-Amz-Target") != "" {
		return false
	}
	ct := r.Header.Get("Content-Type")
	if ct == queryContentType || ct == queryContentType+"; charset=utf-8" { // what the SDKs send
		return true
	}
	media, _, err := mime.ParseMediaType(ct)
	return (err == nil || errors.Is(err, mime.ErrInvalidMediaParameter)) && media == queryContentType
}

// The kinds of a form's parameters.
type formKind uint8

const (
	formString  formKind = iota // Key=value
	formInt                     // Key=12
	formList                    // Key.1=a&Key.2=b
	formAttrs                   // Key.1.Name=n&Key.1.Value.DataType=String&Key.1.Value.StringValue=v
	formEntries                 // Key.1.Id=a&Key.1.<field>=...
	formMap                     // Key.1.<mapKey>=k&Key.1.<mapValue>=v
)

// A formField maps a query parameter onto the JSON member of the action's input.
type formField struct {
	member string
	key    string
	kind   formKind
	entry  []formField // formEntries: an entry's fields
	// formMap: the names of an entry's key and value
	mapKey, mapValue string
}

var (
	queueURLField = formField{member: "QueueUrl", key: "QueueUrl"}
	handleField   = formField{member: "ReceiptHandle", key: "ReceiptHandle"}
	idField       = formField{member: "Id", key: "Id"}
	visField      = formField{member: "VisibilityTimeout", key: "VisibilityTimeout", kind: formInt}
	sendFields    = []formField{
		{member: "MessageBody", key: "MessageBody"},
		{member: "DelaySeconds", key: "DelaySeconds", kind: formInt},
		{member: "MessageAttributes", key: "MessageAttribute", kind: formAttrs},
		{member: "MessageSystemAttributes", key: "MessageSystemAttribute", kind: formAttrs},
		{member: "MessageDeduplicationId", key: "MessageDeduplicationId"},
		{member: "MessageGroupId", key: "MessageGroupId"},
	}
)

// formSchemas are the parameters of each action served, by action.
var formSchemas = map[string][]formField{
	"ReceiveMessage": {queueURLField,
		{member: "MaxNumberOfMessages", key: "MaxNumberOfMessages", kind: formInt},
		{member: "WaitTimeSeconds", key: "WaitTimeSeconds", kind: formInt},
		visField,
		{member: "AttributeNames", key: "AttributeName", kind: formList},
		{member: "MessageSystemAttributeNames", key: "MessageSystemAttributeName", kind: formList},
		{member: "MessageAttributeNames", key: "MessageAttributeName", kind: formList},
		{member: "ReceiveRequestAttemptId", key: "ReceiveRequestAttemptId"},
	},
	"DeleteMessage": {queueURLField, handleField},
	"DeleteMessageBatch": {queueURLField, {member: "Entries", key: "DeleteMessageBatchRequestEntry", kind: formEntries,
		entry: []formField{idField, handleField}}},
	"ChangeMessageVisibility": {queueURLField, handleField, visField},
	"ChangeMessageVisibilityBatch": {queueURLField, {member: "Entries", key: "ChangeMessageVisibilityBatchRequestEntry", kind: formEntries,
		entry: []formField{idField, handleField, visField}}},
	"SendMessage": append([]formField{queueURLField}, sendFields...),
	"SendMessageBatch": {queueURLField, {member: "Entries", key: "SendMessageBatchRequestEntry", kind: formEntries,
		entry: append([]formField{idField}, sendFields...)}},
	"GetQueueUrl":        {{member: "QueueName", key: "QueueName"}, {member: "QueueOwnerAWSAccountId", key: "QueueOwnerAWSAccountId"}},
	"GetQueueAttributes": {queueURLField, {member: "AttributeNames", key: "AttributeName", kind: formList}},
	"CreateQueue":        {{member: "QueueName", key: "QueueName"}, attributeMapField, {member: "tags", key: "Tag", kind: formMap, mapKey: "Key", mapValue: "Value"}},
	"DeleteQueue":        {queueURLField},
	"PurgeQueue":         {queueURLField},
	"ListQueues": {{member: "QueueNamePrefix", key: "QueueNamePrefix"}, {member: "NextToken", key: "NextToken"},
		{member: "MaxResults", key: "MaxResults", kind: formInt}},
	"SetQueueAttributes": {queueURLField, attributeMapField},
	"TagQueue":           {queueURLField, {member: "Tags", key: "Tag", kind: formMap, mapKey: "Key", mapValue: "Value"}},
	"UntagQueue":         {queueURLField, {member: "TagKeys", key: "TagKey", kind: formList}},
	"ListQueueTags":      {queueURLField},
	"StartMessageMoveTask": {{member: "SourceArn", key: "SourceArn"}, {member: "DestinationArn", key: "DestinationArn"},
		{member: "MaxNumberOfMessagesPerSecond", key: "MaxNumberOfMessagesPerSecond", kind: formInt}},
	"ListMessageMoveTasks":  {{member: "SourceArn", key: "SourceArn"}, {member: "MaxResults", key: "MaxResults", kind: formInt}},
	"CancelMessageMoveTask": {{member: "TaskHandle", key: "TaskHandle"}},
	"ListDeadLetterSourceQueues": {queueURLField, {member: "NextToken", key: "NextToken"},
		{member: "MaxResults", key: "MaxResults", kind: formInt}},
}

// attributeMapField is the queue attributes of CreateQueue and SetQueueAttributes:
// Attribute.N.Name and Attribute.N.Value.
var attributeMapField = formField{member: "Attributes", key: "Attribute", kind: formMap, mapKey: "Name", mapValue: "Value"}

// maxFormIndex bounds the index of a list's member, a map's entry or a batch's entry.
const maxFormIndex = 1000

// A formNode is a form's parameters as a tree of their dotted names' parts.
type formNode struct {
	value *string
	kids  map[string]*formNode
}

func (n *formNode) kid(name string) *formNode {
	if n == nil {
		return nil
	}
	return n.kids[name]
}

func (n *formNode) text() (string, bool) {
	if n == nil || n.value == nil {
		return "", false
	}
	return *n.value, true
}

// indexed returns the kids of n named by an index, 1 to maxFormIndex written without
// leading zeros, in order of index; other kids are ignored, as unknown parameters are.
func (n *formNode) indexed() []*formNode {
	if n == nil {
		return nil
	}
	type item struct {
		i int
		n *formNode
	}
	var items []item
	for name, kid := range n.kids {
		if name == "" || name[0] == '0' || len(name) > 4 {
			continue
		}
		i, err := strconv.Atoi(name)
		if err != nil || i < 1 || i > maxFormIndex {
			continue
		}
		items = append(items, item{i, kid})
	}
	slices.SortFunc(items, func(a, b item) int { return a.i - b.i })
	out := make([]*formNode, len(items))
	for j := range items {
		out[j] = items[j].n
	}
	return out
}

// formTree builds the tree of the parameters of form whose first part the action has
// (fields); the others are ignored. A repeated parameter is its first value.
func formTree(form url.Values, fields []formField) *formNode {
	root := &formNode{kids: map[string]*formNode{}}
	for key, values := range form {
		first, _, _ := strings.Cut(key, ".")
		if !slices.ContainsFunc(fields, func(f formField) bool { return f.key == first }) || len(values) == 0 {
			continue
		}
		n := root
		for part := range strings.SplitSeq(key, ".") {
			kid := n.kids[part]
			if kid == nil {
				kid = &formNode{}
				if n.kids == nil {
					n.kids = map[string]*formNode{}
				}
				n.kids[part] = kid
			}
			n = kid
		}
		n.value = &values[0]
	}
	return root
}

// formJSON translates the form of a query request of action into the JSON body the
// action's decoder takes. A parameter the action does not have is ignored, as a JSON member
// is; an integer that is not one, or a map's entry without a name or with a name another
// entry has, is InvalidParameterValue. The JSON is written straight from the form's tree
// (its members in the action's fields' order), not through maps and encoding/json: it is on
// every query request's path.
func formJSON(action string, form url.Values) ([]byte, error) {
	fields := formSchemas[action]
	return appendFormObject(make([]byte, 0, 256), formTree(form, fields), "", fields)
}

// appendMember appends the name of an object's member, after a comma unless it is the
// object's first: a member's value never ends in '{', so dst does only at the object's start.
func appendMember(dst []byte, name string) []byte {
	if dst[len(dst)-1] != '{' {
		dst = append(dst, ',')
	}
	dst = appendJSONString(dst, name)
	return append(dst, ':')
}

// appendStrings appends a JSON array of the texts of items ("" for an item without one), or
// null for none, as encoding/json writes a nil slice.
func appendStrings(dst []byte, items []*formNode) []byte {
	if len(items) == 0 {
		return append(dst, "null"...)
	}
	dst = append(dst, '[')
	for i, it := range items {
		if i > 0 {
			dst = append(dst, ',')
		}
		s, _ := it.text()
		dst = appendJSONString(dst, s)
	}
	return append(dst, ']')
}

// repeated reports whether name is among names, noting it there.
func repeated(names map[string]bool, name string) bool {
	if names[name] {
		return true
	}
	names[name] = true
	return false
}

func appendFormObject(dst []byte, n *formNode, prefix string, fields []formField) ([]byte, error) {
	dst = append(dst, '{')
	for _, f := range fields {
		kid := n.kid(f.key)
		if kid == nil {
			continue
		}
		param := prefix + f.key
		switch f.kind {
		case formString:
			if v, ok := kid.text(); ok {
				dst = appendJSONString(appendMember(dst, f.member), v)
			}
		case formInt:
			v, ok := kid.text()
			if !ok {
				continue
			}
			i, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return nil, &apiError{code: codeInvalidParameterValue, cause: errWrongType,
					msg: "Value " + strconv.Quote(truncate(v)) + " for parameter " + param + " is invalid. Reason: it must be an integer."}
			}
			dst = strconv.AppendInt(appendMember(dst, f.member), i, 10)
		case formList:
			var texts []*formNode
			for _, item := range kid.indexed() {
				if _, ok := item.text(); ok {
					texts = append(texts, item)
				}
			}
			dst = appendStrings(appendMember(dst, f.member), texts)
		case formMap:
			dst = append(appendMember(dst, f.member), '{')
			keys := map[string]bool{}
			for i, item := range kid.indexed() {
				k, ok := item.kid(f.mapKey).text()
				if !ok {
					return nil, missing(param + "." + strconv.Itoa(i+1) + "." + f.mapKey)
				}
				if repeated(keys, k) {
					return nil, invalidValue(param, strconv.Quote(truncate(k)), strconv.Quote(truncate(k))+" is repeated.")
				}
				v, _ := item.kid(f.mapValue).text()
				dst = appendJSONString(appendMember(dst, k), v)
			}
			dst = append(dst, '}')
		case formAttrs:
			var err error
			if dst, err = appendFormAttributes(appendMember(dst, f.member), kid, param); err != nil {
				return nil, err
			}
		case formEntries:
			dst = append(appendMember(dst, f.member), '[')
			for i, item := range kid.indexed() {
				if i > 0 {
					dst = append(dst, ',')
				}
				var err error
				if dst, err = appendFormObject(dst, item, param+"."+strconv.Itoa(i+1)+".", f.entry); err != nil {
					return nil, err
				}
			}
			dst = append(dst, ']')
		}
	}
	return append(dst, '}'), nil
}

// appendFormAttributes appends a map of message attributes: Key.N.Name and
// Key.N.Value.DataType, .StringValue, .BinaryValue (base64), .StringListValue.M and
// .BinaryListValue.M.
func appendFormAttributes(dst []byte, n *formNode, param string) ([]byte, error) {
	dst = append(dst, '{')
	names := map[string]bool{}
	for i, item := range n.indexed() {
		name, ok := item.kid("Name").text()
		if !ok {
			return nil, missing(param + "." + strconv.Itoa(i+1) + ".Name")
		}
		if repeated(names, name) {
			return nil, invalidValue(param, strconv.Quote(truncate(name)), "Message attribute name "+strconv.Quote(truncate(name))+" is repeated.")
		}
		dst = append(appendMember(dst, name), '{')
		value := item.kid("Value")
		for _, member := range [...]string{"DataType", "StringValue", "BinaryValue"} {
			if s, ok := value.kid(member).text(); ok {
				dst = appendJSONString(appendMember(dst, member), s)
			}
		}
		for _, list := range [...]string{"StringListValue", "BinaryListValue"} {
			if items := value.kid(list).indexed(); len(items) > 0 {
				dst = appendStrings(appendMember(dst, list+"s"), items)
			}
		}
		dst = append(dst, '}')
	}
	return append(dst, '}'), nil
}

// readQuery reads a query request's body, at most MaxRequestBytes. A body over the bound is
// InvalidParameterValue (BatchRequestTooLong for a batch action, as its first
// MaxRequestBytes name it).
func readQuery(w http.ResponseWriter, r *http.Request) (body []byte, err error) {
	if r.Body != nil && r.Body != http.NoBody {
		body, err = io.ReadAll(http.MaxBytesReader(w, r.Body, MaxRequestBytes))
	}
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		c := codeInvalidParameterValue
		if i := strings.LastIndexByte(string(body), '&'); i >= 0 {
			if partial, perr := url.ParseQuery(string(body[:i])); perr == nil && strings.HasSuffix(partial.Get("Action"), "Batch") {
				c = codeBatchRequestTooLong
			}
		}
		return nil, &apiError{code: c, cause: errTooLarge, msg: fmt.Sprintf("The request body is longer than %d bytes.", MaxRequestBytes)}
	case err != nil:
		return nil, &apiError{code: codeMalformedQueryString, cause: errMalformed, msg: "the body could not be read: " + err.Error()}
	}
	return body, nil
}

// parseQuery parses a query request's body: the form it holds and its action. A body that
// is no form is MalformedQueryString; no Action is MissingAction.
func parseQuery(body []byte) (form url.Values, action string, err error) {
	form, err = url.ParseQuery(string(body))
	if err != nil {
		return nil, "", &apiError{code: codeMalformedQueryString, cause: errMalformed, msg: "The request body is not a form: " + err.Error()}
	}
	for key, values := range form {
		if !utf8.ValidString(key) || slices.ContainsFunc(values, func(v string) bool { return !utf8.ValidString(v) }) {
			return nil, "", &apiError{code: codeMalformedQueryString, cause: errMalformed, msg: "The request body holds a parameter that is not UTF-8."}
		}
	}
	action = form.Get("Action")
	if action == "" {
		return nil, "", fail(codeMissingAction, "The request must contain the parameter Action.")
	}
	return form, action, nil
}

// serveQuery serves a request of the query protocol. With Config.Credentials, its signature
// is checked over the body as it arrived before the form is looked at.
func (h *Handler) serveQuery(w http.ResponseWriter, r *http.Request) {
	c := &call{w: w, r: r, query: true, requestID: rand.Text()}
	body, err := readQuery(w, r)
	if err == nil && h.verifier != nil {
		c.body = body
		err = h.authenticate(c)
	}
	var form url.Values
	if err == nil {
		form, c.action, err = parseQuery(body)
	}
	if err != nil {
		h.writeErr(c, err)
		return
	}
	c.body = body
	act, served := actions[c.action]
	switch {
	case unsupported[c.action]:
		h.writeErr(c, fail(codeUnsupportedOperation, c.action+" is not supported by this endpoint."))
		return
	case !served:
		h.writeErr(c, fail(codeInvalidAction, "The action "+strconv.Quote(truncate(c.action))+" is not valid for this endpoint."))
		return
	}
	if c.json, err = formJSON(c.action, form); err == nil {
		err = act.serve(h, c)
	}
	if err != nil {
		h.writeErr(c, err)
	}
}

// The XML of an answer: a response element named after the action holding a result element
// (none for an action that answers nothing) and the request's id.
func appendXMLOpen(dst []byte, action string, result bool) []byte {
	dst = append(dst, `<?xml version="1.0" encoding="UTF-8"?><`...)
	dst = append(dst, action...)
	dst = append(dst, `Response xmlns="`+xmlNamespace+`">`...)
	if result {
		dst = append(dst, '<')
		dst = append(dst, action...)
		dst = append(dst, "Result>"...)
	}
	return dst
}

func appendXMLClose(dst []byte, action string, result bool, requestID string) []byte {
	if result {
		dst = append(dst, "</"...)
		dst = append(dst, action...)
		dst = append(dst, "Result>"...)
	}
	dst = append(dst, "<ResponseMetadata><RequestId>"...)
	dst = appendXMLText(dst, requestID)
	dst = append(dst, "</RequestId></ResponseMetadata></"...)
	dst = append(dst, action...)
	return append(dst, "Response>"...)
}

// appendXMLElement appends <name>value</name>, value escaped.
func appendXMLElement[S ~string | ~[]byte](dst []byte, name string, value S) []byte {
	dst = append(dst, '<')
	dst = append(dst, name...)
	dst = append(dst, '>')
	dst = appendXMLText(dst, value)
	dst = append(dst, "</"...)
	dst = append(dst, name...)
	return append(dst, '>')
}

// appendXMLText appends s escaped as XML character data, as encoding/xml.EscapeText
// escapes it (a character XML cannot hold becomes U+FFFD; the handler writes none: see
// xmlSafe).
func appendXMLText[S ~string | ~[]byte](dst []byte, s S) []byte {
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(string(s[i:min(len(s), i+utf8.UTFMax)]))
		i += size
		switch {
		case r == '&':
			dst = append(dst, "&amp;"...)
		case r == '<':
			dst = append(dst, "&lt;"...)
		case r == '>':
			dst = append(dst, "&gt;"...)
		case r == '"':
			dst = append(dst, "&#34;"...)
		case r == '\'':
			dst = append(dst, "&#39;"...)
		case r == '\t':
			dst = append(dst, "&#x9;"...)
		case r == '\n':
			dst = append(dst, "&#xA;"...)
		case r == '\r':
			dst = append(dst, "&#xD;"...)
		case r == utf8.RuneError && size == 1, !xmlChar(r):
			dst = utf8.AppendRune(dst, utf8.RuneError)
		default:
			dst = append(dst, s[i-size:i]...)
		}
	}
	return dst
}

// xmlChar reports whether XML 1.0 can hold r: SQS's set of body characters.
func xmlChar(r rune) bool {
	return r == 0x9 || r == 0xA || r == 0xD || r >= 0x20 && r <= 0xD7FF || r >= 0xE000 && r <= 0xFFFD || r >= 0x10000 && r <= 0x10FFFF
}

// xmlSafe reports whether an XML answer holds b as it is: valid UTF-8 of XML's characters.
func xmlSafe(b []byte) bool {
	_, ok := invalidCharacter(string(b))
	return ok && utf8.Valid(b)
}

// writeXMLError answers err as SQS's query protocol does: the status and
//
//	<ErrorResponse><Error><Type>Sender</Type><Code>AWS.SimpleQueueService.NonExistentQueue</Code>
//	<Message>...</Message><Detail/></Error><RequestId>...</RequestId></ErrorResponse>
//
// whose Code is the query code, which the SDKs report as the error's code.
func writeXMLError(w http.ResponseWriter, c *code, msg, requestID string) {
	fault := "Receiver"
	if c.sender {
		fault = "Sender"
	}
	body := make([]byte, 0, 256+len(msg))
	body = append(body, `<?xml version="1.0" encoding="UTF-8"?><ErrorResponse xmlns="`+xmlNamespace+`"><Error>`...)
	body = appendXMLElement(body, "Type", fault)
	body = appendXMLElement(body, "Code", c.query)
	body = appendXMLElement(body, "Message", msg)
	body = append(body, "<Detail/></Error>"...)
	body = appendXMLElement(body, "RequestId", requestID)
	body = append(body, "</ErrorResponse>"...)
	hdr := w.Header()
	hdr.Set("Content-Type", "text/xml")
	hdr.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(c.status)
	w.Write(body)
}
