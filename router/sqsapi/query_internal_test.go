package sqsapi

import (
	"errors"
	"mime"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestIsQuery: a form is a query request whatever its media type's spelling, and isQuery's
// shortcut for the SDKs' two spellings answers as mime.ParseMediaType does.
func TestIsQuery(t *testing.T) {
	for _, tc := range []struct {
		contentType, target string
		want                bool
	}{
		{"application/x-www-form-urlencoded", "", true},
		{"application/x-www-form-urlencoded; charset=utf-8", "", true},
		{"Application/X-WWW-Form-Urlencoded; Charset=UTF-8", "", true},
		{"application/x-www-form-urlencoded;charset=utf-8", "", true},
		{"application/x-www-form-urlencoded; charset", "", true}, // a malformed parameter
		{"application/x-www-form-urlencoded; a=1; a=2", "", false},
		{"application/x-www-form-urlencoded; charset=utf-8", "AmazonSQS.SendMessage", false},
		{"application/x-www-form-urlencodedx", "", false},
		{"application/x-amz-json-1.0", "", false},
		{"", "", false},
	} {
		r := httptest.NewRequest("POST", "/", strings.NewReader(""))
		r.Header.Set("Content-Type", tc.contentType)
		if tc.target != "" {
			r.Header.Set("X-Amz-Target", tc.target)
		}
		if got := isQuery(r); got != tc.want {
			t.Errorf("isQuery(%q, target %q) = %v", tc.contentType, tc.target, got)
		}
		media, _, err := mime.ParseMediaType(tc.contentType)
		parsed := tc.target == "" && (err == nil || errors.Is(err, mime.ErrInvalidMediaParameter)) && media == queryContentType
		if parsed != tc.want {
			t.Errorf("%q: mime.ParseMediaType says %v", tc.contentType, parsed)
		}
	}
}
