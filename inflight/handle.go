package inflight

import (
	"fmt"
	"strconv"
)

// A Handle is a receipt handle, partition:offset:nonce in text. It names one lease: the
// nonce is drawn from the shard's random stream when the lease is granted, so a handle that
// was not handed out cannot be guessed, and an old handle never matches a newer lease on the
// same offset (invariant "the nonce is the authority").
//
// A Handle does not name its topic: the host knows the topic from the request that carries
// the handle, as an SQS receipt handle is used with its queue URL.
type Handle struct {
	Partition int32
	Offset    int64
	Nonce     uint64
}

// maxHandleLen bounds the work ParseHandle does: three canonical decimal numbers and two
// colons, "2147483647:9223372036854775807:18446744073709551615".
const maxHandleLen = 10 + 1 + 19 + 1 + 20

// String formats h as partition:offset:nonce, each in canonical decimal.
func (h Handle) String() string {
	var b [maxHandleLen]byte
	return string(h.AppendText(b[:0]))
}

// AppendText appends the text form of h to b, allocation-free when b has room.
func (h Handle) AppendText(b []byte) []byte {
	b = strconv.AppendInt(b, int64(h.Partition), 10)
	b = append(b, ':')
	b = strconv.AppendInt(b, h.Offset, 10)
	b = append(b, ':')
	return strconv.AppendUint(b, h.Nonce, 10)
}

// MarshalText implements encoding.TextMarshaler.
func (h Handle) MarshalText() ([]byte, error) { return h.AppendText(nil), nil }

// UnmarshalText implements encoding.TextUnmarshaler with the rules of ParseHandle. On error h
// is unchanged.
func (h *Handle) UnmarshalText(text []byte) error {
	parsed, err := parseHandle(text)
	if err != nil {
		return err
	}
	*h = parsed
	return nil
}

// ParseHandle parses a receipt handle. It accepts exactly what String produces: three
// canonical decimal numbers (ASCII digits only, no sign, no leading zeros, no spaces)
// separated by single colons, a partition that fits an int32, an offset that fits an
// int64, and a nonzero nonce that fits a uint64. Anything else is ErrMalformedHandle: the
// parser is total (never panics) and bounded (it reads at most 53 bytes).
func ParseHandle(s string) (Handle, error) {
	return parseHandle(s)
}

func parseHandle[T string | []byte](text T) (Handle, error) {
	if len(text) > maxHandleLen {
		return Handle{}, fmt.Errorf("%w: longer than %d bytes", ErrMalformedHandle, maxHandleLen)
	}
	var fields [3]uint64
	limits := [3]uint64{1<<31 - 1, 1<<63 - 1, 1<<64 - 1}
	rest := text
	for i := range fields {
		end := 0
		for end < len(rest) && rest[end] != ':' {
			end++
		}
		n, ok := parseCanonical(rest[:end], limits[i])
		if !ok {
			return Handle{}, fmt.Errorf("%w: field %d is not a canonical decimal in range", ErrMalformedHandle, i+1)
		}
		fields[i] = n
		last := i == len(fields)-1
		if last != (end == len(rest)) {
			return Handle{}, fmt.Errorf("%w: want partition:offset:nonce", ErrMalformedHandle)
		}
		if !last {
			rest = rest[end+1:]
		}
	}
	if fields[2] == 0 {
		return Handle{}, fmt.Errorf("%w: zero nonce", ErrMalformedHandle)
	}
	return Handle{Partition: int32(fields[0]), Offset: int64(fields[1]), Nonce: fields[2]}, nil
}

// parseCanonical parses ASCII decimal digits with no sign and no leading zero (except "0"
// itself) and reports whether the value is at most limit.
func parseCanonical[T string | []byte](digits T, limit uint64) (uint64, bool) {
	if len(digits) == 0 || len(digits) > 20 || (digits[0] == '0' && len(digits) > 1) {
		return 0, false
	}
	var n uint64
	for i := range len(digits) {
		c := digits[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if n > (limit-d)/10 {
			return 0, false
		}
		n = n*10 + d
	}
	return n, true
}
