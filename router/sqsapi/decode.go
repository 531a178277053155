package sqsapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"narad.dev/consume/router"
	"narad.dev/consume/router/internal/frontend"
)

// The bounds of what a request may carry.
const (
	// MaxMessageBytes bounds a message SendMessage takes (its body and attributes), and the
	// messages of one SendMessageBatch together: SQS's 1 MiB (1,048,576 bytes).
	MaxMessageBytes = 1 << 20
	// MaxRequestBytes bounds a request body, read through an http.MaxBytesReader: a
	// message of MaxMessageBytes fits even if every byte of it is escaped (\u0001, six bytes).
	MaxRequestBytes = 6*MaxMessageBytes + 64<<10
	// MaxBatchEntries bounds the entries of a batch action, as SQS does.
	MaxBatchEntries = 10
	// MaxReceive is the most messages one ReceiveMessage returns (MaxNumberOfMessages).
	MaxReceive = 10
	// MaxWaitSeconds is the longest long-poll a ReceiveMessage may ask for (WaitTimeSeconds).
	MaxWaitSeconds = 20
	// MaxDelaySeconds is the longest delay a message or a queue may ask for (DelaySeconds):
	// SQS's 15 minutes.
	MaxDelaySeconds = 900
	// MaxVisibilitySeconds is the longest visibility timeout a ReceiveMessage or a
	// ChangeMessageVisibility may ask for: SQS's 12 hours, router.MaxVisibility.
	MaxVisibilitySeconds = int64(router.MaxVisibility / time.Second)
	// maxQueueName is SQS's bound on a queue name.
	maxQueueName = 80
	// maxQueueURL bounds a QueueUrl before it is parsed.
	maxQueueURL = 2048
	// maxBatchID is SQS's bound on a batch entry's Id.
	maxBatchID = 80
	// maxAttributeName bounds a name in AttributeNames and the like.
	maxAttributeName = 256
)

// contentType is what the SQS JSON protocol's requests and responses carry.
const contentType = "application/x-amz-json-1.0"

// readBody reads a request's body, at most MaxRequestBytes of it. A body over the bound is
// InvalidParameterValue, or BatchRequestTooLong for a batch.
func readBody(w http.ResponseWriter, r *http.Request, batch bool) ([]byte, error) {
	if r.Body == nil || r.Body == http.NoBody {
		return nil, nil
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxRequestBytes))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		c := codeInvalidParameterValue
		if batch {
			c = codeBatchRequestTooLong
		}
		return nil, &apiError{code: c, cause: errTooLarge, msg: fmt.Sprintf("The request body is longer than %d bytes.", MaxRequestBytes)}
	case err != nil:
		return nil, &apiError{code: codeSerialization, cause: errMalformed, msg: "the body could not be read: " + err.Error()}
	}
	return body, nil
}

// checkContentType refuses a JSON request of another media type than the JSON protocol's
// (none is taken to be it).
func checkContentType(r *http.Request) error {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		media, _, err := mime.ParseMediaType(ct)
		if err != nil || (media != contentType && media != "application/x-amz-json-1.1") {
			return &apiError{code: codeSerialization, cause: errMalformed,
				msg: "with X-Amz-Target the body must be " + contentType + " (a form, of the query protocol, comes without X-Amz-Target)"}
		}
	}
	return nil
}

// decode unmarshals a request body into the action's input: one JSON object and nothing
// after it (an empty body is {}). Members the handler does not know are ignored, as SQS
// ignores them, so that a newer client's optional fields do not break it; a known member
// with a value of another type is refused, naming it.
func decode(body []byte, into any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	err := dec.Decode(into)
	var typeErr *json.UnmarshalTypeError
	switch {
	case errors.As(err, &typeErr) && typeErr.Field != "":
		return &apiError{code: codeSerialization, cause: errWrongType,
			msg: fmt.Sprintf("%s: a JSON %s where SQS takes %s", typeErr.Field, typeErr.Value, typeName(typeErr.Type.String()))}
	case err != nil:
		return &apiError{code: codeSerialization, cause: errMalformed, msg: "the body is not a JSON object: " + err.Error()}
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return &apiError{code: codeSerialization, cause: errMalformed, msg: "the body has data after its JSON object"}
	}
	return nil
}

// typeName says in SQS's terms what a Go field type of an input takes.
func typeName(goType string) string {
	switch strings.TrimLeft(goType, "*[]") {
	case "int64":
		return "an integer"
	case "string":
		return "a string"
	}
	return "an object"
}

// queueName reads the queue a QueueUrl names: its last path segment. The rest of the URL
// is not looked at, so that a queue is reached whatever host name a client uses for the
// broker (127.0.0.1, a load balancer's, the BaseURL's).
func queueName(queueURL *string) (string, error) {
	if queueURL == nil {
		return "", missing("QueueUrl")
	}
	raw := *queueURL
	if raw == "" || len(raw) > maxQueueURL {
		return "", fail(codeInvalidAddress, fmt.Sprintf("The QueueUrl is empty or longer than %d bytes.", maxQueueURL))
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", fail(codeInvalidAddress, "The address "+strconv.Quote(raw)+" is not a valid queue URL.")
	}
	path := strings.TrimSuffix(u.Path, "/")
	name := path[strings.LastIndexByte(path, '/')+1:]
	if err := checkQueueName(name); err != nil {
		return "", fail(codeQueueDoesNotExist, "The specified queue does not exist.")
	}
	return name, nil
}

// checkQueueName refuses a name no queue can have: SQS's 1 to 80 characters of letters,
// digits, hyphens and underscores, and here dots too, so that a host may name its queues
// after dotted topics.
func checkQueueName(name string) error {
	if name == "" || len(name) > maxQueueName {
		return invalidValue("QueueName", strconv.Quote(truncate(name)), fmt.Sprintf("A queue name is 1 to %d characters long.", maxQueueName))
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return invalidValue("QueueName", strconv.Quote(truncate(name)), "A queue name is letters, digits, hyphens, underscores and dots.")
		}
	}
	return nil
}

// queueNameParam reads a request's required QueueName, refused as checkQueueName refuses it.
func queueNameParam(name *string) (string, error) {
	if name == nil {
		return "", missing("QueueName")
	}
	return *name, checkQueueName(*name)
}

// integer reads an optional integer parameter within [lo, hi]; absent, it is def.
func integer(param string, v *int64, lo, hi, def int64) (int64, error) {
	switch {
	case v == nil:
		return def, nil
	case *v < lo || *v > hi:
		return 0, invalidValue(param, strconv.FormatInt(*v, 10), fmt.Sprintf("Must be between %d and %d, if provided.", lo, hi))
	}
	return *v, nil
}

// batchIDs checks a batch's entry Ids: 1 to MaxBatchEntries entries, each Id 1 to 80
// letters, digits, hyphens and underscores, no two the same.
func batchIDs(n int, id func(i int) *string) error {
	switch {
	case n == 0:
		return fail(codeEmptyBatchRequest, "There should be at least one entry in the request.")
	case n > MaxBatchEntries:
		return fail(codeTooManyEntriesInBatch, fmt.Sprintf("Maximum number of entries per request are %d. You have sent %d.", MaxBatchEntries, n))
	}
	seen := make(map[string]bool, n)
	for i := range n {
		p := id(i)
		if p == nil {
			return missing(fmt.Sprintf("Entries.%d.Id", i+1))
		}
		if !validBatchID(*p) {
			return fail(codeInvalidBatchEntryID, "A batch entry id can only contain alphanumeric characters, hyphens and underscores. It can be at most 80 letters long.")
		}
		if seen[*p] {
			return fail(codeBatchEntryIdsNotDistinct, "Id "+*p+" repeated.")
		}
		seen[*p] = true
	}
	return nil
}

func validBatchID(id string) bool {
	if id == "" || len(id) > maxBatchID {
		return false
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// attributeNames checks a list of attribute names against the names SQS knows (known),
// and returns the set of those this handler serves (bits of served, by position), with
// "All" meaning every one.
func attributeNames(param string, names []string, known map[string]bool, served []string) (uint, error) {
	var set uint
	for _, name := range names {
		if name == "All" {
			set = 1<<len(served) - 1
			continue
		}
		if len(name) > maxAttributeName || !known[name] {
			return 0, fail(codeInvalidAttributeName, "Unknown Attribute "+strconv.Quote(truncate(name))+" in "+param+".")
		}
		for i, s := range served {
			if s == name {
				set |= 1 << i
			}
		}
	}
	return set, nil
}

// truncate shortens a value a client sent for an error message.
func truncate(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

func appendJSONString(dst []byte, s string) []byte { return frontend.AppendString(dst, s) }
