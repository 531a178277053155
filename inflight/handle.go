package inflight

import (
	"fmt"
	"math"
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

// maxSignedHandleLen is the longest text a Handle formats to: a handle no shard grants,
// "-2147483648:-9223372036854775808:18446744073709551615", formats all the same.
const maxSignedHandleLen = maxHandleLen + 2

// String formats h as partition:offset:nonce, each in canonical decimal.
func (h Handle) String() string {
	var buf [maxSignedHandleLen]byte
	return string(buf[h.format(&buf):])
}

// AppendText appends the text form of h to b, allocation-free when b has room.
func (h Handle) AppendText(b []byte) []byte {
	var buf [maxSignedHandleLen]byte
	return append(b, buf[h.format(&buf):]...)
}

// format writes the text form of h at the end of buf and returns where it starts: the
// digits go back to front, two at a time, and the caller copies them out once.
func (h Handle) format(buf *[maxSignedHandleLen]byte) int {
	i := putDecimal(buf[:], len(buf), h.Nonce)
	buf[i-1] = ':'
	i = putSigned(buf[:], i-1, h.Offset)
	buf[i-1] = ':'
	return putSigned(buf[:], i-1, int64(h.Partition))
}

// digitPairs holds "00" to "99", for writing two digits at a time.
const digitPairs = "00010203040506070809101112131415161718192021222324252627282930313233343536373839" +
	"4041424344454647484950515253545556575859606162636465666768697071727374757677787980" +
	"81828384858687888990919293949596979899"

// putDecimal writes v in decimal to buf, ending just before end, and returns where the
// digits start.
func putDecimal(buf []byte, end int, v uint64) int {
	i := end
	for v >= 100 {
		q := v / 100
		r := (v - q*100) * 2
		i -= 2
		buf[i], buf[i+1] = digitPairs[r], digitPairs[r+1]
		v = q
	}
	if v >= 10 {
		i -= 2
		buf[i], buf[i+1] = digitPairs[v*2], digitPairs[v*2+1]
		return i
	}
	i--
	buf[i] = byte('0' + v)
	return i
}

// putSigned is putDecimal with a leading minus sign for a negative v.
func putSigned(buf []byte, end int, v int64) int {
	if v >= 0 {
		return putDecimal(buf, end, uint64(v))
	}
	i := putDecimal(buf, end, uint64(-v)) // -MinInt64 wraps to its own magnitude as a uint64
	buf[i-1] = '-'
	return i - 1
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
	from := 0
	for i := range fields {
		n, end, ok := parseCanonical(text, from, limits[i])
		if !ok {
			return Handle{}, fmt.Errorf("%w: field %d is not a canonical decimal in range", ErrMalformedHandle, i+1)
		}
		fields[i] = n
		last := i == len(fields)-1
		if last != (end == len(text)) {
			return Handle{}, fmt.Errorf("%w: want partition:offset:nonce", ErrMalformedHandle)
		}
		from = end + 1
	}
	if fields[2] == 0 {
		return Handle{}, fmt.Errorf("%w: zero nonce", ErrMalformedHandle)
	}
	return Handle{Partition: int32(fields[0]), Offset: int64(fields[1]), Nonce: fields[2]}, nil
}

// parseCanonical parses the field of text that starts at from and runs to the next colon or
// the end, in one pass: ASCII decimal digits with no sign and no leading zero (except "0"
// itself). It returns the value and where the field ends, and reports whether the field is
// such a number and at most limit. Nineteen digits cannot overflow a uint64, so only a
// twentieth needs an overflow check.
func parseCanonical[T string | []byte](text T, from int, limit uint64) (n uint64, end int, ok bool) {
	const safeDigits = 19
	end = from
	for end < len(text) && end-from < safeDigits {
		d := text[end] - '0'
		if d > 9 {
			break
		}
		n = n*10 + uint64(d)
		end++
	}
	if end-from == safeDigits && end < len(text) {
		if d := text[end] - '0'; d <= 9 {
			if n > (math.MaxUint64-uint64(d))/10 {
				return 0, end, false
			}
			n = n*10 + uint64(d)
			end++
		}
	}
	digits := end - from
	switch {
	case end < len(text) && text[end] != ':': // a sign, a space, a 21st digit...
		return 0, end, false
	case digits == 0 || (text[from] == '0' && digits > 1):
		return 0, end, false
	}
	return n, end, n <= limit
}
