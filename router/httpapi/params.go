package httpapi

import (
	"fmt"
	"io"
	"maps"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"narad.dev/consume/router"
)

// The bounds of what a request may carry.
const (
	// MaxQueryBytes bounds a request's raw query string.
	MaxQueryBytes = 8 << 10
	// MaxBodyBytes bounds a request's body: a form of a settle, or the JSON of a batch ack
	// (router.MaxBatch handles fit twice over).
	MaxBodyBytes = 128 << 10
	// maxNumberText bounds the text of a duration or a number before it is parsed.
	maxNumberText = 32
)

// A paramError is a request refused before it reaches the node: a 400 naming the
// parameter (or "query", "body", "Content-Type") at fault.
type paramError struct {
	param string
	msg   string
}

func (e *paramError) Error() string { return e.param + ": " + e.msg }

func badParam(param, format string, args ...any) error {
	return &paramError{param: param, msg: fmt.Sprintf(format, args...)}
}

// params are a request's parameters, each given at most once, from its query and, for a
// form, its body.
type params map[string]string

// parseParams parses a raw query (or form body, where is "body") into params, refusing an
// undecodable one, a parameter given twice (within it, or in both the query and the body,
// when into already holds the query) and one not in allowed.
func parseParams(into params, raw, where string, allowed ...string) error {
	values, err := url.ParseQuery(raw)
	if err != nil {
		return badParam(where, "not a valid URL-encoded form: %v", err)
	}
	for _, name := range slices.Sorted(maps.Keys(values)) { // the first fault, by name
		vs := values[name]
		if !slices.Contains(allowed, name) {
			return badParam(quoteName(name), "unknown parameter (this route takes %v)", allowed)
		}
		if _, dup := into[name]; dup || len(vs) > 1 {
			return badParam(name, "given more than once")
		}
		into[name] = vs[0]
	}
	return nil
}

// quoteName makes a parameter name a caller sent fit for an error message: short, and
// quoted when it is not plain.
func quoteName(name string) string {
	if len(name) > 64 {
		name = name[:64] + "..."
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; c <= ' ' || c >= 0x7f || c == '"' {
			return strconv.Quote(name)
		}
	}
	return name
}

// queryParams parses the request's query.
func queryParams(r *http.Request, allowed ...string) (params, error) {
	if len(r.URL.RawQuery) > MaxQueryBytes {
		return nil, badParam("query", "longer than %d bytes", MaxQueryBytes)
	}
	p := params{}
	return p, parseParams(p, r.URL.RawQuery, "query", allowed...)
}

// formParams parses the request's query and, when it has one, its URL-encoded form body,
// read through a MaxBytesReader.
func formParams(w http.ResponseWriter, r *http.Request, allowed ...string) (params, error) {
	p, err := queryParams(r, allowed...)
	if err != nil {
		return nil, err
	}
	body, err := readBody(w, r, "application/x-www-form-urlencoded")
	if err != nil || len(body) == 0 {
		return p, err
	}
	return p, parseParams(p, string(body), "body", allowed...)
}

// readBody reads a request's body, at most MaxBodyBytes of it. A body with another media
// type than want is refused; a body with none is taken to be of want; an empty body is
// none, whatever its media type.
func readBody(w http.ResponseWriter, r *http.Request, want string) ([]byte, error) {
	if r.Body == nil || r.Body == http.NoBody {
		return nil, nil
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err != nil {
		if _, ok := err.(*http.MaxBytesError); ok {
			return nil, badParam("body", "larger than %d bytes", MaxBodyBytes)
		}
		return nil, badParam("body", "unreadable: %v", err)
	}
	if ct := r.Header.Get("Content-Type"); ct != "" && len(body) > 0 {
		media, _, err := mime.ParseMediaType(ct)
		if err != nil || media != want {
			return nil, badParam("Content-Type", "the body must be %s", want)
		}
	}
	return body, nil
}

// topic reads the required topic parameter: 1 to router.MaxTopicLength bytes of UTF-8.
func (p params) topic() (string, error) {
	t, ok := p["topic"]
	switch {
	case !ok:
		return "", badParam("topic", "missing")
	case t == "":
		return "", badParam("topic", "empty")
	case len(t) > router.MaxTopicLength:
		return "", badParam("topic", "%d bytes, longer than %d", len(t), router.MaxTopicLength)
	case !utf8.ValidString(t):
		return "", badParam("topic", "not valid UTF-8")
	}
	return t, nil
}

// handle reads the required receipt_handle parameter, which must parse.
func (p params) handle() (router.Handle, error) {
	text, ok := p["receipt_handle"]
	switch {
	case !ok:
		return router.Handle{}, badParam("receipt_handle", "missing")
	case text == "":
		return router.Handle{}, badParam("receipt_handle", "empty")
	}
	h, err := router.ParseHandle(text)
	if err != nil {
		return router.Handle{}, badParam("receipt_handle", "not a receipt handle (partition:offset:nonce)")
	}
	return h, nil
}

// duration reads an optional duration parameter, at most limit: a Go duration ("1.5s",
// "250ms", "2m") or a bare number of milliseconds ("1500"). Absent, it is zero.
func (p params) duration(name string, limit time.Duration) (time.Duration, error) {
	s, ok := p[name]
	if !ok {
		return 0, nil
	}
	switch {
	case s == "":
		return 0, badParam(name, "empty")
	case len(s) > maxNumberText:
		return 0, badParam(name, "longer than %d bytes", maxNumberText)
	case s[0] == '-':
		return 0, badParam(name, "negative")
	case s[0] == '+':
		return 0, badParam(name, "%q has a sign", s)
	}
	var d time.Duration
	if digits(s) {
		ms, err := strconv.ParseUint(s, 10, 64)
		if err != nil || ms > uint64(limit/time.Millisecond) {
			return 0, badParam(name, "%s ms is over the limit of %v", s, limit)
		}
		d = time.Duration(ms) * time.Millisecond
	} else {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			return 0, badParam(name, "%q is neither a duration (such as 1.5s or 250ms) nor a number of milliseconds", s)
		}
	}
	switch {
	case d < 0:
		return 0, badParam(name, "negative")
	case d > limit:
		return 0, badParam(name, "%v is over the limit of %v", d, limit)
	}
	return d, nil
}

// number reads an optional decimal parameter within [lo, hi]; absent, it is def.
func (p params) number(name string, lo, hi, def int64) (int64, error) {
	s, ok := p[name]
	if !ok {
		return def, nil
	}
	switch {
	case s == "":
		return 0, badParam(name, "empty")
	case s[0] == '-' && len(s) > 1 && digits(s[1:]):
		return 0, badParam(name, "negative")
	case len(s) > maxNumberText || !digits(s):
		return 0, badParam(name, "%q is not a decimal number", truncate(s))
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v < lo || v > hi {
		return 0, badParam(name, "%s is outside [%d, %d]", s, lo, hi)
	}
	return v, nil
}

func digits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

func truncate(s string) string {
	if len(s) > maxNumberText {
		return s[:maxNumberText] + "..."
	}
	return s
}
