package sqsapi

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"
)

// SigV4: what the AWS SDKs sign, checked with the host's Config.Credentials. A signed
// request carries
//
//	Authorization: AWS4-HMAC-SHA256 Credential=<key>/<yyyymmdd>/<region>/sqs/aws4_request,
//		SignedHeaders=<h1;h2;...>, Signature=<64 hex digits>
//	X-Amz-Date: <yyyymmdd>T<hhmmss>Z
//
// and its signature is HMAC-SHA256, under the key derived from the secret and the
// credential scope, of the string to sign over the canonical request: the method, the
// path, the query string, the signed headers' values and the hash of the payload (the
// body as it arrived: the JSON, or the query protocol's form).

// MaxClockSkew is how far a signed request's X-Amz-Date may lie from the handler's clock,
// in the past or in the future: AWS's 5 minutes.
const MaxClockSkew = 5 * time.Minute

const (
	sigAlgorithm  = "AWS4-HMAC-SHA256"
	sigService    = "sqs"
	sigTerminator = "aws4_request"
	amzDateLayout = "20060102T150405Z"
	// maxSignedHeaders bounds the names in SignedHeaders, and maxHeaderName each name's
	// length: an SDK signs a dozen at most.
	maxSignedHeaders = 64
	maxHeaderName    = 64
	// maxAccessKey bounds an access key ID (AWS's are 16 to 128 characters).
	maxAccessKey = 128
	// maxCachedKeys bounds the signing keys kept, one per access key, day and region.
	maxCachedKeys = 1024
)

// An authorization is an Authorization header of SigV4, parsed. Its strings are the
// header's.
type authorization struct {
	accessKey     string
	date          string // the credential scope's day: yyyymmdd
	region        string
	service       string
	signedHeaders string // as sent: lowercase names, ascending, separated by ';'
	signature     [sha256.Size]byte
}

// scope appends the credential scope: <date>/<region>/<service>/aws4_request.
func (a *authorization) appendScope(dst []byte) []byte {
	dst = append(dst, a.date...)
	dst = append(dst, '/')
	dst = append(dst, a.region...)
	dst = append(dst, '/')
	dst = append(dst, a.service...)
	dst = append(dst, '/')
	return append(dst, sigTerminator...)
}

func incomplete(msg string) error { return fail(codeIncompleteSignature, msg) }

// parseAuthorization parses an Authorization header of SigV4: the algorithm, a space, and
// the Credential, SignedHeaders and Signature components, each once, in any order,
// separated by commas (and spaces). Anything else is IncompleteSignature. It allocates
// nothing.
func parseAuthorization(header string) (authorization, error) {
	var a authorization
	rest, ok := strings.CutPrefix(header, sigAlgorithm+" ")
	if !ok {
		return a, incomplete("The Authorization header is not of the " + sigAlgorithm + " algorithm (SigV4).")
	}
	const (
		seenCredential = 1 << iota
		seenSignedHeaders
		seenSignature
	)
	var seen uint
	for rest != "" {
		var part string
		part, rest, _ = strings.Cut(rest, ",")
		part = strings.Trim(part, " ")
		name, value, ok := strings.Cut(part, "=")
		var bit uint
		switch {
		case !ok:
			return a, incomplete("The Authorization header's component " + quoteTruncated(part) + " is not name=value.")
		case name == "Credential":
			bit = seenCredential
			if err := a.parseCredential(value); err != nil {
				return a, err
			}
		case name == "SignedHeaders":
			bit = seenSignedHeaders
			if err := checkSignedHeaders(value); err != nil {
				return a, err
			}
			a.signedHeaders = value
		case name == "Signature":
			bit = seenSignature
			if len(value) != 2*sha256.Size {
				return a, incomplete("The Authorization header's Signature is not 64 hex digits.")
			}
			if _, err := hex.Decode(a.signature[:], []byte(value)); err != nil {
				return a, incomplete("The Authorization header's Signature is not 64 hex digits.")
			}
		default:
			return a, incomplete("The Authorization header has an unknown component " + quoteTruncated(name) + ".")
		}
		if seen&bit != 0 {
			return a, incomplete("The Authorization header repeats its " + name + " component.")
		}
		seen |= bit
	}
	if seen != seenCredential|seenSignedHeaders|seenSignature {
		return a, incomplete("The Authorization header requires the Credential, SignedHeaders and Signature components.")
	}
	return a, nil
}

// parseCredential parses <access key>/<yyyymmdd>/<region>/<service>/aws4_request.
func (a *authorization) parseCredential(cred string) error {
	var parts [5]string
	rest := cred
	for i := range parts {
		var found bool
		parts[i], rest, found = strings.Cut(rest, "/")
		if found != (i < len(parts)-1) {
			return incomplete("The Authorization header's Credential is not <access key>/<date>/<region>/<service>/aws4_request.")
		}
	}
	a.accessKey, a.date, a.region, a.service = parts[0], parts[1], parts[2], parts[3]
	switch {
	case parts[4] != sigTerminator:
		return incomplete("The Authorization header's Credential should be scoped with a valid terminator: 'aws4_request'.")
	case !validAccessKey(a.accessKey):
		return incomplete("The Authorization header's access key ID is not 1 to 128 letters, digits, '-', '_' and '.'.")
	case len(a.date) != 8 || !digits(a.date):
		return incomplete("The Authorization header's Credential's date is not yyyymmdd.")
	case a.region == "" || len(a.region) > 64 || !tokenChars(a.region) || a.service == "" || len(a.service) > 64 || !tokenChars(a.service):
		return incomplete("The Authorization header's Credential's region or service is not 1 to 64 letters, digits and '-'.")
	}
	return nil
}

// checkSignedHeaders checks SignedHeaders: 1 to maxSignedHeaders names of lowercase letters,
// digits and '-', ascending and distinct, separated by ';', host and x-amz-date among them.
func checkSignedHeaders(list string) error {
	prev, n := "", 0
	host, date := false, false
	for rest := list; ; {
		name, more, found := strings.Cut(rest, ";")
		n++
		switch {
		case n > maxSignedHeaders:
			return incomplete("The Authorization header's SignedHeaders names more than 64 headers.")
		case name == "" || len(name) > maxHeaderName || !lowerToken(name):
			return incomplete("The Authorization header's SignedHeaders holds a name that is not 1 to 64 lowercase letters, digits and '-'.")
		case name <= prev:
			return incomplete("The Authorization header's SignedHeaders are not in ascending order, each once.")
		}
		host = host || name == "host"
		date = date || name == "x-amz-date"
		prev, rest = name, more
		if !found {
			break
		}
	}
	if !host || !date {
		return incomplete("The Authorization header's SignedHeaders must include host and x-amz-date.")
	}
	return nil
}

func validAccessKey(s string) bool {
	if s == "" || len(s) > maxAccessKey {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

func digits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func tokenChars(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

func lowerToken(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

func quoteTruncated(s string) string { return "'" + truncate(s) + "'" }

// parseAmzDate parses X-Amz-Date's ISO 8601 basic form, yyyymmddThhmmssZ, without
// allocating.
func parseAmzDate(s string) (time.Time, bool) {
	if len(s) != len(amzDateLayout) || s[8] != 'T' || s[15] != 'Z' || !digits(s[:8]) || !digits(s[9:15]) {
		return time.Time{}, false
	}
	n := func(i, j int) int {
		v := 0
		for _, c := range []byte(s[i:j]) {
			v = v*10 + int(c-'0')
		}
		return v
	}
	year, month, day, hour, minute, sec := n(0, 4), n(4, 6), n(6, 8), n(9, 11), n(11, 13), n(13, 15)
	if month < 1 || month > 12 || day < 1 || day > 31 || hour > 23 || minute > 59 || sec > 59 {
		return time.Time{}, false
	}
	t := time.Date(year, time.Month(month), day, hour, minute, sec, 0, time.UTC)
	if t.Day() != day { // the 31st of a shorter month
		return time.Time{}, false
	}
	return t, true
}

// A verifier checks SigV4 signatures with the host's credentials. It is safe for
// concurrent use.
type verifier struct {
	credentials func(accessKeyID string) (secret string, ok bool)
	region      string // "": any

	// The signing keys derived, by access key, day and region, with the secret each was
	// derived from: a key is derived once a day, not once a request. Cleared when full.
	mu   sync.Mutex
	keys map[keyScope]signingKey
}

type keyScope struct{ accessKey, date, region string }

type signingKey struct {
	secret string
	key    [sha256.Size]byte
}

func newVerifier(credentials func(string) (string, bool), region string) *verifier {
	return &verifier{credentials: credentials, region: region, keys: map[keyScope]signingKey{}}
}

// sigBuffers are the buffers a verification builds its strings in: pooled.
var sigBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// verify checks r's SigV4 signature over body at now, and returns the access key ID it was
// signed with. A request without an Authorization header is MissingAuthenticationToken; one
// whose header or X-Amz-Date is malformed, or that leaves a header the handler acts on
// (X-Amz-Target, X-Amz-Content-Sha256, X-Amz-Security-Token) unsigned, IncompleteSignature;
// an access key the host does not know, InvalidClientTokenId; a scope of another service,
// region or day than X-Amz-Date's, an X-Amz-Date more than MaxClockSkew away from now, an
// X-Amz-Content-Sha256 that is not the body's hash, or a signature that is not the one the
// key gives, SignatureDoesNotMatch (which the AWS SDKs take, with the response's Date, as
// a sign of clock skew). The signatures are compared in constant time.
func (v *verifier) verify(r *http.Request, body []byte, now time.Time) (string, error) {
	values := r.Header["Authorization"]
	switch {
	case len(values) == 0 || values[0] == "":
		return "", fail(codeMissingAuthenticationToken, "Request is missing Authentication Token: it must be signed with SigV4 (an Authorization header of "+sigAlgorithm+").")
	case len(values) > 1:
		return "", incomplete("The request has more than one Authorization header.")
	}
	auth, err := parseAuthorization(values[0])
	if err != nil {
		return "", err
	}
	amzDate := r.Header.Get("X-Amz-Date")
	at, ok := parseAmzDate(amzDate)
	if !ok {
		return "", incomplete("The request's X-Amz-Date " + quoteTruncated(amzDate) + " is not an ISO 8601 basic date and time (yyyymmddThhmmssZ).")
	}
	for _, h := range [...]struct{ header, name string }{
		{"X-Amz-Target", "x-amz-target"}, {"X-Amz-Content-Sha256", "x-amz-content-sha256"}, {"X-Amz-Security-Token", "x-amz-security-token"},
	} {
		if _, present := r.Header[h.header]; present && !signedHeader(auth.signedHeaders, h.name) {
			return "", incomplete("The request's " + h.header + " header is not among its SignedHeaders.")
		}
	}
	secret, known := v.credentials(auth.accessKey)
	if !known {
		return "", fail(codeInvalidClientTokenID, "The security token included in the request is invalid: the access key ID "+quoteTruncated(auth.accessKey)+" is not known.")
	}
	switch {
	case auth.service != sigService:
		return "", fail(codeSignatureDoesNotMatch, "Credential should be scoped to correct service: '"+sigService+"'.")
	case v.region != "" && auth.region != v.region:
		return "", fail(codeSignatureDoesNotMatch, "Credential should be scoped to a valid region, not "+quoteTruncated(auth.region)+": this endpoint's is '"+v.region+"'.")
	case auth.date != amzDate[:8]:
		return "", fail(codeSignatureDoesNotMatch, "Date in Credential scope does not match YYYYMMDD from ISO-8601 version of date from HTTP: '"+auth.date+"' != '"+amzDate[:8]+"', from '"+amzDate+"'.")
	case at.Before(now.Add(-MaxClockSkew)):
		now = now.UTC()
		return "", fail(codeSignatureDoesNotMatch, "Signature expired: "+amzDate+" is now earlier than "+now.Add(-MaxClockSkew).Format(amzDateLayout)+" ("+now.Format(amzDateLayout)+" - 5 min.)")
	case at.After(now.Add(MaxClockSkew)):
		now = now.UTC()
		return "", fail(codeSignatureDoesNotMatch, "Signature not yet current: "+amzDate+" is still later than "+now.Add(MaxClockSkew).Format(amzDateLayout)+" ("+now.Format(amzDateLayout)+" + 5 min.)")
	}
	payload := sha256.Sum256(body)
	var payloadHex [2 * sha256.Size]byte
	hex.Encode(payloadHex[:], payload[:])
	claimed := payloadHex[:]
	if cs := r.Header.Get("X-Amz-Content-Sha256"); cs != "" {
		var sum [sha256.Size]byte
		if len(cs) != len(payloadHex) {
			return "", fail(codeSignatureDoesNotMatch, "The X-Amz-Content-Sha256 header is not the SHA-256 of the body: this endpoint takes signed payloads only.")
		}
		if _, err := hex.Decode(sum[:], []byte(cs)); err != nil || sum != payload {
			return "", fail(codeSignatureDoesNotMatch, "The X-Amz-Content-Sha256 header is not the SHA-256 of the body.")
		}
		claimed = []byte(cs) // signed as sent
	}

	bp := sigBuffers.Get().(*[]byte)
	buf := appendCanonicalRequest((*bp)[:0], r, &auth, claimed)
	request := sha256.Sum256(buf)
	// The string to sign.
	buf = append(buf[:0], sigAlgorithm+"\n"...)
	buf = append(buf, amzDate...)
	buf = append(buf, '\n')
	buf = auth.appendScope(buf)
	buf = append(buf, '\n')
	buf = hex.AppendEncode(buf, request[:])
	key := v.signingKey(&auth, secret)
	sig := hmacSHA256(key[:], buf)
	*bp = buf[:0]
	sigBuffers.Put(bp)
	if !hmac.Equal(sig[:], auth.signature[:]) {
		return "", fail(codeSignatureDoesNotMatch, "The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method.")
	}
	return auth.accessKey, nil
}

// signingKey is the key the secret gives the authorization's scope: HMAC-SHA256 chained
// over "AWS4"+secret, the day, the region, the service and "aws4_request". It is derived
// once per access key, day and region, and kept while the host's secret stays the same.
func (v *verifier) signingKey(a *authorization, secret string) [sha256.Size]byte {
	ks := keyScope{a.accessKey, a.date, a.region}
	v.mu.Lock()
	cached, ok := v.keys[ks]
	v.mu.Unlock()
	if ok && cached.secret == secret {
		return cached.key
	}
	key := hmacSHA256([]byte("AWS4"+secret), []byte(a.date))
	for _, part := range [...]string{a.region, a.service, sigTerminator} {
		key = hmacSHA256(key[:], []byte(part))
	}
	v.mu.Lock()
	if len(v.keys) >= maxCachedKeys {
		clear(v.keys)
	}
	v.keys[keyScope{strings.Clone(a.accessKey), strings.Clone(a.date), strings.Clone(a.region)}] = signingKey{secret: secret, key: key}
	v.mu.Unlock()
	return key
}

// hmacSHA256 is HMAC-SHA256(key, data), worked out on the stack rather than in an
// hmac.New's allocations (data of up to 320 bytes, as a string to sign is, allocates
// nothing).
func hmacSHA256(key, data []byte) [sha256.Size]byte {
	const block = 64
	var k [block]byte
	if len(key) > block {
		sum := sha256.Sum256(key)
		copy(k[:], sum[:])
	} else {
		copy(k[:], key)
	}
	var in [block + 320]byte
	for i, b := range k {
		in[i] = b ^ 0x36
	}
	inner := sha256.Sum256(append(in[:block], data...))
	var out [block + sha256.Size]byte
	for i, b := range k {
		out[i] = b ^ 0x5c
	}
	copy(out[block:], inner[:])
	return sha256.Sum256(out[:])
}

// signedHeader reports whether the SignedHeaders list names name.
func signedHeader(list, name string) bool {
	for rest := list; rest != ""; {
		var n string
		n, rest, _ = strings.Cut(rest, ";")
		if n == name {
			return true
		}
	}
	return false
}

// appendCanonicalRequest appends SigV4's canonical request of r:
//
//	POST
//	<the path, URI-encoded again, as the SDKs encode it for every service but S3>
//	<the query string's parameters, URI-encoded and sorted>
//	<name>:<value> of each signed header, in SignedHeaders' order
//
//	<SignedHeaders>
//	<the payload's hash, hex>
func appendCanonicalRequest(dst []byte, r *http.Request, a *authorization, payloadHash []byte) []byte {
	dst = append(dst, r.Method...)
	dst = append(dst, '\n')
	path := r.URL.EscapedPath()
	if path == "" {
		path = "/"
	}
	dst = appendURIEncoded(dst, path, false)
	dst = append(dst, '\n')
	dst = appendCanonicalQuery(dst, r.URL.RawQuery)
	dst = append(dst, '\n')
	for rest := a.signedHeaders; rest != ""; {
		var name string
		name, rest, _ = strings.Cut(rest, ";")
		dst = append(dst, name...)
		dst = append(dst, ':')
		if name == "host" {
			dst = appendHeaderValue(dst, r.Host)
		} else {
			var canon [maxHeaderName]byte
			for i := 0; i < len(name); i++ {
				c := name[i]
				if c >= 'a' && c <= 'z' && (i == 0 || name[i-1] == '-') {
					c -= 'a' - 'A'
				}
				canon[i] = c
			}
			for i, v := range r.Header[string(canon[:len(name)])] {
				if i > 0 {
					dst = append(dst, ',')
				}
				dst = appendHeaderValue(dst, v)
			}
		}
		dst = append(dst, '\n')
	}
	dst = append(dst, '\n')
	dst = append(dst, a.signedHeaders...)
	dst = append(dst, '\n')
	return append(dst, payloadHash...)
}

// appendHeaderValue appends a header's value as SigV4 canonicalizes it: without leading and
// trailing spaces, each run of spaces inside it one space.
func appendHeaderValue(dst []byte, v string) []byte {
	v = strings.Trim(v, " \t")
	space := false
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c == ' ' || c == '\t' {
			space = true
			continue
		}
		if space {
			dst = append(dst, ' ')
			space = false
		}
		dst = append(dst, c)
	}
	return dst
}

// appendURIEncoded appends s URI-encoded as SigV4 encodes: every byte but the unreserved
// (letters, digits, '-', '.', '_', '~') as %XX, '/' too when slash.
func appendURIEncoded(dst []byte, s string, slash bool) []byte {
	const upperHex = "0123456789ABCDEF"
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~' || c == '/' && !slash {
			dst = append(dst, c)
			continue
		}
		dst = append(dst, '%', upperHex[c>>4], upperHex[c&15])
	}
	return dst
}

// appendCanonicalQuery appends the query string's parameters as SigV4 canonicalizes them:
// each name and value decoded and URI-encoded again, sorted by name and then value, joined
// with '&'. The SQS clients send none; a parameter that does not decode is taken as sent.
func appendCanonicalQuery(dst []byte, raw string) []byte {
	if raw == "" {
		return dst
	}
	type param struct{ k, v string }
	var params []param
	for part := range strings.SplitSeq(raw, "&") {
		if part == "" {
			continue
		}
		k, v, _ := strings.Cut(part, "=")
		if dk, err := url.QueryUnescape(k); err == nil {
			k = dk
		}
		if dv, err := url.QueryUnescape(v); err == nil {
			v = dv
		}
		params = append(params, param{k, v})
	}
	slices.SortFunc(params, func(a, b param) int {
		if c := strings.Compare(a.k, b.k); c != 0 {
			return c
		}
		return strings.Compare(a.v, b.v)
	})
	for i, p := range params {
		if i > 0 {
			dst = append(dst, '&')
		}
		dst = appendURIEncoded(dst, p.k, true)
		dst = append(dst, '=')
		dst = appendURIEncoded(dst, p.v, true)
	}
	return dst
}
