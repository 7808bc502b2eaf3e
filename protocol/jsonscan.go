package protocol

import (
	"errors"
	"fmt"
	"unicode/utf16"
	"unicode/utf8"
)

// maxJSONDepth is encoding/json's nesting limit: a document with more
// objects and arrays open at once is refused, the top-level value counting
// as one. The scanner keeps it so that a hand-written decoder refuses what
// encoding/json refuses.
const maxJSONDepth = 10000

var errUnexpectedEnd = errors.New("unexpected end of JSON input")

// jsonScanner reads one JSON document held in memory, for the hand-written
// decoders of hot message types. It accepts exactly the syntax
// encoding/json accepts (RFC 8259; raw invalid UTF-8 allowed inside
// strings; at most maxJSONDepth levels) and unescapes strings exactly as
// encoding/json does (invalid UTF-8 and unpaired surrogates become U+FFFD),
// so a decoder built on it differs from encoding/json only where it says
// so.
//
// Methods that read a value skip the white space before it; an error leaves
// pos where reading stopped.
type jsonScanner struct {
	data  []byte
	pos   int    // next byte to read
	depth int    // objects and arrays open
	buf   []byte // the last unescaped string, when it had to be copied
}

func (s *jsonScanner) skipSpace() {
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

// peek skips white space and returns the next byte without consuming it,
// or 0 at the end of the input (0 is never valid outside a string, so
// callers need no separate end check).
func (s *jsonScanner) peek() byte {
	s.skipSpace()
	if s.pos >= len(s.data) {
		return 0
	}
	return s.data[s.pos]
}

// atEnd reports whether only white space is left.
func (s *jsonScanner) atEnd() bool {
	s.skipSpace()
	return s.pos >= len(s.data)
}

// syntaxError describes the byte at pos, which does not fit where it is.
func (s *jsonScanner) syntaxError(context string) error {
	if s.pos >= len(s.data) {
		return errUnexpectedEnd
	}
	return fmt.Errorf("invalid character %q %s (offset %d)", s.data[s.pos:s.pos+1], context, s.pos)
}

// typeError describes a well-started value of the wrong kind at pos.
func (s *jsonScanner) typeError(want string) error {
	var got string
	switch c := s.peek(); {
	case c == '{':
		got = "an object"
	case c == '[':
		got = "an array"
	case c == '"':
		got = "a string"
	case c == 't' || c == 'f':
		got = "a boolean"
	case c == 'n':
		got = "null"
	case c == '-' || '0' <= c && c <= '9':
		got = "a number"
	default:
		return s.syntaxError("looking for beginning of value")
	}
	return fmt.Errorf("want %s, got %s (offset %d)", want, got, s.pos)
}

// open consumes the '{' or '[' at pos.
func (s *jsonScanner) open() error {
	s.depth++
	if s.depth > maxJSONDepth {
		return fmt.Errorf("exceeded max depth %d (offset %d)", maxJSONDepth, s.pos)
	}
	s.pos++
	return nil
}

// close consumes the '}' or ']' at pos.
func (s *jsonScanner) close() {
	s.depth--
	s.pos++
}

// beginObject consumes the '{' that starts an object.
func (s *jsonScanner) beginObject() error {
	if s.peek() != '{' {
		return s.syntaxError("looking for beginning of object")
	}
	return s.open()
}

// nextName moves to the next property of the object being read and returns
// its unescaped name, valid until the next string is read; the caller must
// then read or skip the value. ok is false once the closing brace has been
// consumed. first is true on the first call after beginObject, when no
// comma may come first.
func (s *jsonScanner) nextName(first bool) (name []byte, ok bool, err error) {
	switch c := s.peek(); {
	case c == '}':
		s.close()
		return nil, false, nil
	case !first:
		if c != ',' {
			return nil, false, s.syntaxError("after object key:value pair")
		}
		s.pos++
	}
	name, err = s.objectKey()
	return name, err == nil, err
}

// objectKey reads a property name and the colon after it.
func (s *jsonScanner) objectKey() ([]byte, error) {
	if s.peek() != '"' {
		return nil, s.syntaxError("looking for beginning of object key string")
	}
	name, err := s.stringBytes()
	if err != nil {
		return nil, err
	}
	if s.peek() != ':' {
		return nil, s.syntaxError("after object key")
	}
	s.pos++
	return name, nil
}

// stringBytes reads the string at pos and returns it unescaped. That is a
// slice of the input when the string holds no escape and no invalid UTF-8
// (what Java clients send), else a slice of s.buf; either way it is valid
// only until the next string is read.
func (s *jsonScanner) stringBytes() ([]byte, error) {
	if s.peek() != '"' {
		return nil, s.syntaxError("looking for beginning of string")
	}
	start := s.pos + 1
	for i := start; i < len(s.data); {
		switch c := s.data[i]; {
		case c == '"':
			s.pos = i + 1
			return s.data[start:i], nil
		case c == '\\' || c < 0x20:
			return s.unescape(start, i)
		case c < utf8.RuneSelf:
			i++
		default:
			r, n := utf8.DecodeRune(s.data[i:])
			if r == utf8.RuneError && n == 1 {
				return s.unescape(start, i)
			}
			i += n
		}
	}
	s.pos = len(s.data)
	return nil, errUnexpectedEnd
}

// unescape finishes the string that started at start and has no escape
// before i, copying it into s.buf.
func (s *jsonScanner) unescape(start, i int) ([]byte, error) {
	b := append(s.buf[:0], s.data[start:i]...)
	for i < len(s.data) {
		switch c := s.data[i]; {
		case c == '"':
			s.pos = i + 1
			s.buf = b
			return b, nil
		case c < 0x20:
			s.pos = i
			return nil, s.syntaxError("in string literal")
		case c == '\\':
			if i+1 >= len(s.data) {
				s.pos = len(s.data)
				return nil, errUnexpectedEnd
			}
			e := s.data[i+1]
			switch e {
			case '"', '\\', '/':
				b = append(b, e)
			case 'b':
				b = append(b, '\b')
			case 'f':
				b = append(b, '\f')
			case 'n':
				b = append(b, '\n')
			case 'r':
				b = append(b, '\r')
			case 't':
				b = append(b, '\t')
			case 'u':
				r, ok := s.hex4(i + 2)
				if !ok {
					return nil, s.badHex(i + 2)
				}
				i += 6
				if utf16.IsSurrogate(r) {
					// A pair takes the next \u escape too. Anything else,
					// a lone low half included, is U+FFFD, and what follows
					// is read on its own: encoding/json does the same.
					if r2, ok := s.escapedRune(i); ok {
						if pair := utf16.DecodeRune(r, r2); pair != utf8.RuneError {
							b = utf8.AppendRune(b, pair)
							i += 6
							continue
						}
					}
					r = utf8.RuneError
				}
				b = utf8.AppendRune(b, r)
				continue
			default:
				s.pos = i + 1
				return nil, s.syntaxError("in string escape code")
			}
			i += 2
		case c < utf8.RuneSelf:
			b = append(b, c)
			i++
		default:
			r, n := utf8.DecodeRune(s.data[i:])
			if r == utf8.RuneError && n == 1 {
				b = utf8.AppendRune(b, utf8.RuneError)
			} else {
				b = append(b, s.data[i:i+n]...)
			}
			i += n
		}
	}
	s.pos = len(s.data)
	return nil, errUnexpectedEnd
}

// escapedRune returns the rune of a \uXXXX escape at i, if there is one.
func (s *jsonScanner) escapedRune(i int) (rune, bool) {
	if i+1 >= len(s.data) || s.data[i] != '\\' || s.data[i+1] != 'u' {
		return 0, false
	}
	return s.hex4(i + 2)
}

// hex4 decodes the four hex digits at i.
func (s *jsonScanner) hex4(i int) (rune, bool) {
	if i+4 > len(s.data) {
		return 0, false
	}
	var r rune
	for _, c := range s.data[i : i+4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// badHex reports the first byte at or after i that is not a hex digit.
func (s *jsonScanner) badHex(i int) error {
	s.pos = i
	for s.pos < len(s.data) && s.pos < i+4 {
		c := s.data[s.pos]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			break
		}
		s.pos++
	}
	return s.syntaxError("in \\u hexadecimal character escape")
}

// number reads the number at pos and returns its text; integer is false
// when it has a fraction or an exponent.
func (s *jsonScanner) number() (text []byte, integer bool, err error) {
	s.skipSpace()
	start, d := s.pos, s.data
	i := start
	digits := func() {
		for i < len(d) && '0' <= d[i] && d[i] <= '9' {
			i++
		}
	}
	isDigit := func() bool { return i < len(d) && '0' <= d[i] && d[i] <= '9' }
	if i < len(d) && d[i] == '-' {
		i++
	}
	switch {
	case i < len(d) && d[i] == '0':
		i++ // no leading zeros: "01" ends the number after the 0
	case isDigit():
		digits()
	default:
		s.pos = i
		return nil, false, s.syntaxError("in numeric literal")
	}
	integer = true
	if i < len(d) && d[i] == '.' {
		integer = false
		i++
		if !isDigit() {
			s.pos = i
			return nil, false, s.syntaxError("after decimal point in numeric literal")
		}
		digits()
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		integer = false
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		if !isDigit() {
			s.pos = i
			return nil, false, s.syntaxError("in exponent of numeric literal")
		}
		digits()
	}
	s.pos = i
	return d[start:i], integer, nil
}

// literal consumes word (true, false or null).
func (s *jsonScanner) literal(word string) error {
	s.skipSpace()
	for i := 0; i < len(word); i++ {
		if s.pos >= len(s.data) {
			return errUnexpectedEnd
		}
		if s.data[s.pos] != word[i] {
			return s.syntaxError("in literal " + word)
		}
		s.pos++
	}
	return nil
}

// skipValue reads past one value of any kind, checking its syntax and
// depth, without decoding it.
func (s *jsonScanner) skipValue() error {
	// The closing bracket of each container open in this value. The array
	// keeps ordinary nesting off the heap; hostile depths spill over.
	var arr [32]byte
	closers := arr[:0]
	for {
		// A value starts here.
		switch c := s.peek(); {
		case c == '{' || c == '[':
			if err := s.open(); err != nil {
				return err
			}
			closer := byte('}')
			if c == '[' {
				closer = ']'
			}
			if s.peek() == closer {
				s.close()
				break // an empty container is a whole value
			}
			closers = append(closers, closer)
			if c == '{' {
				if _, err := s.objectKey(); err != nil {
					return err
				}
			}
			continue // its first element
		case c == '"':
			if _, err := s.stringBytes(); err != nil {
				return err
			}
		case c == 't':
			if err := s.literal("true"); err != nil {
				return err
			}
		case c == 'f':
			if err := s.literal("false"); err != nil {
				return err
			}
		case c == 'n':
			if err := s.literal("null"); err != nil {
				return err
			}
		case c == '-' || '0' <= c && c <= '9':
			if _, _, err := s.number(); err != nil {
				return err
			}
		default:
			return s.syntaxError("looking for beginning of value")
		}
		// A value ended: close containers until one has another element.
		for {
			if len(closers) == 0 {
				return nil
			}
			closer := closers[len(closers)-1]
			c := s.peek()
			if c == ',' {
				s.pos++
				if closer == '}' {
					if _, err := s.objectKey(); err != nil {
						return err
					}
				}
				break
			}
			if c != closer {
				if closer == '}' {
					return s.syntaxError("after object key:value pair")
				}
				return s.syntaxError("after array element")
			}
			s.close()
			closers = closers[:len(closers)-1]
		}
	}
}
