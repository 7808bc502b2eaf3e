package compat

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"unicode/utf16"
)

// Properties is a parsed .properties file: key to value, escapes resolved.
type Properties map[string]string

// SyntaxError reports a line that java.util.Properties would also refuse.
// The only such line has a malformed \uXXXX escape.
type SyntaxError struct {
	Line int // 1-based line on which the logical line starts
	Msg  string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("properties line %d: %s", e.Line, e.Msg)
}

// utf8BOM is what editors on Windows put in front of UTF-8 files.
var utf8BOM = []byte{0xef, 0xbb, 0xbf}

// LoadProperties reads and parses the file at path (see ParseProperties).
func LoadProperties(path string) (Properties, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("load properties: %w", err)
	}
	defer f.Close()
	p, err := ParseProperties(f)
	if err != nil {
		return nil, fmt.Errorf("load properties %s: %w", path, err)
	}
	return p, nil
}

// ParseProperties parses the java.util.Properties text format the way Java
// 9+ Properties.load does, rule for rule (the comments below name the JDK
// behaviour they mirror):
//
//   - Lines end at \n, \r or \r\n. Leading spaces, tabs and form feeds are
//     ignored; a line that is then empty is skipped, and so is one starting
//     with # or ! (a comment, which never continues).
//   - A line ending in an odd number of backslashes continues on the next
//     one, whose leading whitespace is dropped. At the end of input a
//     trailing lone backslash is dropped.
//   - The key runs to the first unescaped '=', ':' or whitespace; then
//     whitespace, at most one '=' or ':', and more whitespace are skipped,
//     and the rest of the line, trailing whitespace included, is the value
//     (possibly empty).
//   - Escapes in keys and values: \t \n \r \f, \uXXXX (exactly four hex
//     digits, else a SyntaxError, as Java throws), and \ before any other
//     character stands for that character.
//   - A repeated key keeps its last value.
//
// Encoding: Properties.load(InputStream) reads ISO-8859-1, but Nacos loads
// application.properties through Spring Boot, which reads UTF-8, so this
// reads UTF-8 (an invalid byte becomes U+FFFD, as Java's decoder does). A
// leading UTF-8 byte order mark is stripped; Java would keep it as part of
// the first key, which silently loses that property.
//
// Surrogate pairs written as two \u escapes combine into one character, as
// they do in a Java string; a lone surrogate becomes U+FFFD, because Go
// strings hold UTF-8.
func ParseProperties(r io.Reader) (Properties, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("read properties: %w", err)
	}
	data = bytes.TrimPrefix(data, utf8BOM)
	lr := lineReader{in: []rune(string(data)), line: 1}
	props := Properties{}
	for {
		line, start, ok := lr.next()
		if !ok {
			return props, nil
		}
		key, value, err := splitLine(line)
		if err != nil {
			return nil, &SyntaxError{Line: start, Msg: err.Error()}
		}
		props[key] = value
	}
}

func isSpace(c rune) bool { return c == ' ' || c == '\t' || c == '\f' }

func isEOL(c rune) bool { return c == '\n' || c == '\r' }

// lineReader yields logical lines, a port of the JDK's
// Properties.LineReader.readLine: comments and blank lines dropped,
// continuations joined, escapes left in place.
type lineReader struct {
	in   []rune
	off  int
	line int  // line number of in[off]
	prev rune // the rune before in[off], for counting \r\n as one line end
	buf  []rune
}

func (lr *lineReader) read() rune {
	c := lr.in[lr.off]
	lr.off++
	if c == '\r' || (c == '\n' && lr.prev != '\r') {
		lr.line++
	}
	lr.prev = c
	return c
}

// next returns the next logical line and the line number it starts on, or
// ok=false at the end of input. The slice is reused by the following call.
func (lr *lineReader) next() (line []rune, start int, ok bool) {
	buf := lr.buf[:0]
	defer func() { lr.buf = buf[:0] }()
	skipSpace := true          // skipping leading whitespace
	appendedLineBegin := false // at the start of a continuation line
	precedingBackslash := false
	skipLF := false // after a continued \r, a following \n belongs to it
	for {
		if lr.off >= len(lr.in) {
			if len(buf) == 0 {
				return nil, 0, false
			}
			if precedingBackslash { // a trailing lone backslash is dropped
				buf = buf[:len(buf)-1]
			}
			return buf, start, true
		}
		at := lr.line
		c := lr.read()
		if skipLF {
			skipLF = false
			if c == '\n' {
				continue
			}
		}
		if skipSpace {
			if isSpace(c) {
				continue
			}
			// Blank lines are skipped, but a continuation that runs into one
			// ends there (below).
			if !appendedLineBegin && isEOL(c) {
				continue
			}
			skipSpace = false
			appendedLineBegin = false
		}
		// Java 9+ checks for a comment whenever the buffer is empty, so a
		// continuation of a lone backslash can still begin a comment.
		if len(buf) == 0 && (c == '#' || c == '!') {
			for lr.off < len(lr.in) && !isEOL(lr.read()) {
			}
			skipSpace = true
			continue
		}
		if !isEOL(c) {
			if len(buf) == 0 {
				start = at
			}
			buf = append(buf, c)
			precedingBackslash = c == '\\' && !precedingBackslash
			continue
		}
		// End of a natural line.
		if len(buf) == 0 {
			skipSpace = true
			continue
		}
		if lr.off >= len(lr.in) {
			if precedingBackslash {
				buf = buf[:len(buf)-1]
			}
			return buf, start, true
		}
		if !precedingBackslash {
			return buf, start, true
		}
		buf = buf[:len(buf)-1] // the continuation backslash is not content
		skipSpace = true
		appendedLineBegin = true
		precedingBackslash = false
		skipLF = c == '\r'
	}
}

// splitLine splits a logical line into its key and value and resolves their
// escapes, as the JDK's Properties.load0 and loadConvert do.
func splitLine(line []rune) (key, value string, err error) {
	keyLen := 0
	valueStart := len(line)
	hasSep := false
	precedingBackslash := false
	for keyLen < len(line) {
		c := line[keyLen]
		if (c == '=' || c == ':') && !precedingBackslash {
			valueStart = keyLen + 1
			hasSep = true
			break
		}
		if isSpace(c) && !precedingBackslash {
			valueStart = keyLen + 1
			break
		}
		precedingBackslash = c == '\\' && !precedingBackslash
		keyLen++
	}
	for valueStart < len(line) {
		c := line[valueStart]
		if !isSpace(c) {
			if hasSep || (c != '=' && c != ':') {
				break
			}
			hasSep = true
		}
		valueStart++
	}
	if key, err = unescape(line[:keyLen]); err != nil {
		return "", "", err
	}
	if value, err = unescape(line[valueStart:]); err != nil {
		return "", "", err
	}
	return key, value, nil
}

// errMalformedUnicode quotes nothing of the line: values can be secrets
// (token keys), and the line number is enough to find it.
var errMalformedUnicode = errors.New(`malformed \uXXXX escape`)

func unescape(in []rune) (string, error) {
	out := make([]rune, 0, len(in))
	for i := 0; i < len(in); i++ {
		c := in[i]
		if c != '\\' {
			out = append(out, c)
			continue
		}
		i++
		if i >= len(in) {
			// Unreachable from splitLine (the line reader never leaves an
			// unescaped trailing backslash), but never index past the end.
			break
		}
		switch c = in[i]; c {
		case 't':
			out = append(out, '\t')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 'f':
			out = append(out, '\f')
		case 'u':
			if i+4 >= len(in) { // Java also wants all four digits
				return "", errMalformedUnicode
			}
			v, ok := hex4(in[i+1 : i+5])
			if !ok {
				return "", errMalformedUnicode
			}
			i += 4
			// Java strings are UTF-16: a pair of escaped surrogates is one
			// character.
			if n := len(out); n > 0 && isHighSurrogate(out[n-1]) && isLowSurrogate(v) {
				out[n-1] = utf16.DecodeRune(out[n-1], v)
				continue
			}
			out = append(out, v)
		default:
			out = append(out, c)
		}
	}
	// string([]rune) turns any lone surrogate left in out into U+FFFD.
	return string(out), nil
}

func hex4(digits []rune) (rune, bool) {
	var v rune
	for _, d := range digits {
		switch {
		case d >= '0' && d <= '9':
			v = v<<4 | (d - '0')
		case d >= 'a' && d <= 'f':
			v = v<<4 | (d - 'a' + 10)
		case d >= 'A' && d <= 'F':
			v = v<<4 | (d - 'A' + 10)
		default:
			return 0, false
		}
	}
	return v, true
}

func isHighSurrogate(r rune) bool { return r >= 0xd800 && r < 0xdc00 }

func isLowSurrogate(r rune) bool { return r >= 0xdc00 && r < 0xe000 }
