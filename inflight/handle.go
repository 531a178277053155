package inflight

import (
	"encoding/binary"
	"fmt"
	"math/bits"
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

// formatBuf holds a handle's text while it is formatted, back to front, at its end. Digits
// are stored eight at a time, so up to seven bytes before the text are written too: the
// buffer has room for them ahead of the longest text.
type formatBuf [maxSignedHandleLen + 8]byte

// String formats h as partition:offset:nonce, each in canonical decimal.
func (h Handle) String() string {
	var buf formatBuf
	return string(buf[h.format(&buf):])
}

// AppendText appends the text form of h to b, allocation-free when b has room.
func (h Handle) AppendText(b []byte) []byte {
	var buf formatBuf
	return append(b, buf[h.format(&buf):]...)
}

// format writes the text form of h at the end of buf and returns where it starts: the
// fields go back to front, eight digits at a time, and the caller copies them out once.
func (h Handle) format(buf *formatBuf) int {
	i := putDecimal(buf, len(buf), h.Nonce)
	buf[i-1] = ':'
	i = putSigned(buf, i-1, h.Offset)
	buf[i-1] = ':'
	return putSigned(buf, i-1, int64(h.Partition))
}

// putDecimal writes v in decimal to buf, ending just before end, and returns where the
// digits start. It stores eight digits at a time, the lowest first: the last store also
// writes the leading zeros of its eight digits, before the start it returns.
func putDecimal(buf *formatBuf, end int, v uint64) int {
	for v >= 1e8 {
		q := v / 1e8
		binary.LittleEndian.PutUint64(buf[end-8:], eightDigits(uint32(v-q*1e8))|asciiZeros)
		end -= 8
		v = q
	}
	digits := eightDigits(uint32(v))
	binary.LittleEndian.PutUint64(buf[end-8:], digits|asciiZeros)
	leadingZeros := bits.TrailingZeros64(digits) / 8 // the first digit is the lowest byte
	return end - max(8-leadingZeros, 1)              // zero itself is one digit
}

// putSigned is putDecimal with a leading minus sign for a negative v.
func putSigned(buf *formatBuf, end int, v int64) int {
	if v >= 0 {
		return putDecimal(buf, end, uint64(v))
	}
	i := putDecimal(buf, end, uint64(-v)) // -MinInt64 wraps to its own magnitude as a uint64
	buf[i-1] = '-'
	return i - 1
}

// asciiZeros is '0' in each byte: added to (or'ed with) digit values 0 to 9, their text.
const asciiZeros = 0x3030303030303030

// eightDigits returns the eight decimal digits of x < 1e8, leading zeros included, as byte
// values 0 to 9, the most significant in the lowest byte (the first in memory, stored little
// endian). It splits x into two halves of four digits in 32-bit lanes, each half into two
// pairs in 16-bit lanes, and each pair into two digits in bytes: a division per step for all
// lanes at once, by a multiply and a shift that is exact over the lane's range (x/100 is
// x*10486>>20 below 10,000; x/10 is x*103>>10 below 100).
func eightDigits(x uint32) uint64 {
	v := uint64(x/10000) | uint64(x%10000)<<32
	hundreds := (v * 10486 >> 20) & 0x0000_007f_0000_007f
	v = hundreds | (v-hundreds*100)<<16
	tens := (v * 103 >> 10) & 0x000f_000f_000f_000f
	return tens | (v-tens*10)<<8
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
	h := Handle{Partition: int32(fields[0]), Offset: int64(fields[1]), Nonce: fields[2]}
	if err := h.Check(); err != nil {
		return Handle{}, err
	}
	return h, nil
}

// Check answers ErrMalformedHandle for a handle no lease can have (and whose text ParseHandle
// refuses): a negative partition or offset, or a zero nonce, which is what the zero Handle of
// a replayed record holds. It says nothing of whether the lease is live.
func (h Handle) Check() error {
	switch {
	case h.Partition < 0 || h.Offset < 0:
		return fmt.Errorf("%w: negative partition or offset", ErrMalformedHandle)
	case h.Nonce == 0:
		return fmt.Errorf("%w: zero nonce", ErrMalformedHandle)
	}
	return nil
}

// parseCanonical parses the field of text that starts at from and runs to the next colon or
// the end: ASCII decimal digits with no sign and no leading zero (except "0" itself). It
// returns the value and where the field ends, and reports whether the field is such a
// number and at most limit. It reads eight bytes at a time: up to twenty digits, the most a
// uint64 has, in three reads, of which only the third can overflow.
func parseCanonical[T string | []byte](text T, from int, limit uint64) (n uint64, end int, ok bool) {
	chunk := load8(text, from)
	count := leadingDigits(chunk)
	n, end = digitsValue(chunk, count), from+count
	if count == 8 {
		chunk = load8(text, end)
		count = leadingDigits(chunk)
		n, end = n*powersOf10[count]+digitsValue(chunk, count), end+count
		if count == 8 {
			chunk = load8(text, end)
			count = leadingDigits(chunk)
			if count > 4 { // more than twenty digits
				return 0, end + count, false
			}
			hi, lo := bits.Mul64(n, powersOf10[count])
			lo, carry := bits.Add64(lo, digitsValue(chunk, count), 0)
			if hi != 0 || carry != 0 {
				return 0, end + count, false
			}
			n, end = lo, end+count
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

// load8 returns the eight bytes of text from at (at most len(text)), little endian (the
// first byte lowest), with zeros for those past its end: a zero byte is not a digit, so a
// field never runs past the text.
func load8[T string | []byte](text T, at int) uint64 {
	if at+8 <= len(text) {
		return loadLittleEndian(text[at : at+8])
	}
	if len(text) >= 8 { // the last eight bytes, those before at shifted out
		return loadLittleEndian(text[len(text)-8:]) >> (8 * (at + 8 - len(text)))
	}
	var v uint64
	for i := len(text) - 1; i >= at; i-- {
		v = v<<8 | uint64(text[i])
	}
	return v
}

// loadLittleEndian is binary.LittleEndian.Uint64 for a string as well; the compiler makes
// it one load.
func loadLittleEndian[T string | []byte](b T) uint64 {
	_ = b[7]
	return uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
		uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
}

// powersOf10 holds 10^0 to 10^8.
var powersOf10 = [9]uint64{1, 10, 100, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8}

// leadingDigits returns how many of the eight bytes of chunk, read little endian (the first
// byte lowest), are ASCII digits before the first that is not one.
func leadingDigits(chunk uint64) int {
	t := chunk ^ asciiZeros // a digit's byte becomes its value, 0 to 9; any other byte is above 9
	// A byte's high bit ends up set when it is above 9: its low seven bits plus 0x76 carry
	// into the high bit from 10 on (and never into the next byte), or its high bit was set.
	notDigit := ((t & 0x7f7f7f7f7f7f7f7f) + 0x7676767676767676 | t) & 0x8080808080808080
	return bits.TrailingZeros64(notDigit) / 8 // 8 when all are digits
}

// digitsValue returns the number the first count bytes of chunk spell, read little endian,
// when they are ASCII digits (count at most 8). The digits are shifted to the top of the word
// (zeros in front of a number leave it as it is) and combined in pairs, then in fours, then
// in eights, each step for all lanes at once by one multiply.
func digitsValue(chunk uint64, count int) uint64 {
	v := (chunk & 0x0f0f0f0f0f0f0f0f) << (64 - 8*count) // a shift of 64 leaves 0
	v = (v * (10<<8 + 1)) >> 8 & 0x00ff00ff00ff00ff
	v = (v * (100<<16 + 1)) >> 16 & 0x0000ffff0000ffff
	return (v * (10000<<32 + 1)) >> 32
}
