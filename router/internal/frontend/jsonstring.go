package frontend

import "unicode/utf8"

const hexDigits = "0123456789abcdef"

// AppendString appends src as a JSON string, escaped as encoding/json escapes it by
// default: ", \ and the control bytes (\b, \f, \n, \r, \t short, the others as \u00XX), <, >
// and & as \u003c, \u003e and \u0026, U+2028 and U+2029 as \u2028 and \u2029, and each byte
// of an invalid UTF-8 sequence as \ufffd (the front ends pass only valid UTF-8).
func AppendString[T string | []byte](dst []byte, src T) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(src); {
		c := src[i]
		if c < utf8.RuneSelf {
			if plain(c) {
				i++
				continue
			}
			dst = append(dst, src[start:i]...)
			switch c {
			case '\\', '"':
				dst = append(dst, '\\', c)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := decodeRune(src, i)
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, src[start:i]...)
			dst = append(dst, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			dst = append(dst, src[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	dst = append(dst, src[start:]...)
	return append(dst, '"')
}

// StringLen is len(AppendString(nil, src)), counted without encoding.
func StringLen[T string | []byte](src T) int {
	n := 2
	for i := 0; i < len(src); {
		c := src[i]
		if c < utf8.RuneSelf {
			switch {
			case plain(c):
				n++
			case c == '\\', c == '"', c == '\b', c == '\f', c == '\n', c == '\r', c == '\t':
				n += 2
			default:
				n += 6
			}
			i++
			continue
		}
		r, size := decodeRune(src, i)
		switch {
		case r == utf8.RuneError && size == 1, r == '\u2028' || r == '\u2029':
			n += 6
		default:
			n += size
		}
		i += size
	}
	return n
}

// plain reports whether an ASCII byte is written as itself.
func plain(c byte) bool {
	return c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
}

// decodeRune decodes the rune at src[i:]. The conversion of at most utf8.UTFMax bytes to a
// string stays on the stack.
func decodeRune[T string | []byte](src T, i int) (rune, int) {
	return utf8.DecodeRuneInString(string(src[i : i+min(len(src)-i, utf8.UTFMax)]))
}
