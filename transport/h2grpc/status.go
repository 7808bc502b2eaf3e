package h2grpc

import (
	"math"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/codes"
)

func statusField(code codes.Code) hpack.HeaderField {
	return hpack.HeaderField{Name: "grpc-status", Value: strconv.Itoa(int(code))}
}

// maxStatusMessage bounds grpc-message: a handler's error text must not
// make a trailer larger than a client accepts.
const maxStatusMessage = 4 << 10

func messageField(msg string) hpack.HeaderField {
	if len(msg) > maxStatusMessage {
		msg = msg[:maxStatusMessage]
	}
	return hpack.HeaderField{Name: "grpc-message", Value: percentEncode(msg)}
}

// percentEncode is grpc-message's encoding: printable ASCII except '%'
// as is, every other byte as %XX (UTF-8 goes byte by byte).
func percentEncode(s string) string {
	clean := true
	for i := 0; i < len(s); i++ {
		if b := s[i]; b < ' ' || b > '~' || b == '%' {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	const hex = "0123456789ABCDEF"
	var sb strings.Builder
	sb.Grow(len(s) + 16)
	for i := 0; i < len(s); i++ {
		b := s[i]
		if b < ' ' || b > '~' || b == '%' {
			sb.WriteByte('%')
			sb.WriteByte(hex[b>>4])
			sb.WriteByte(hex[b&15])
			continue
		}
		sb.WriteByte(b)
	}
	return sb.String()
}

// parseTimeout reads grpc-timeout: at most 8 digits and a unit (H, M, S,
// m, u, n).
func parseTimeout(v string) (time.Duration, bool) {
	if len(v) < 2 || len(v) > 9 {
		return 0, false
	}
	n, err := strconv.ParseInt(v[:len(v)-1], 10, 64)
	if err != nil || n < 0 {
		return 0, false
	}
	var unit time.Duration
	switch v[len(v)-1] {
	case 'H':
		unit = time.Hour
	case 'M':
		unit = time.Minute
	case 'S':
		unit = time.Second
	case 'm':
		unit = time.Millisecond
	case 'u':
		unit = time.Microsecond
	case 'n':
		unit = time.Nanosecond
	default:
		return 0, false
	}
	if n > math.MaxInt64/int64(unit) {
		// Eight digits of hours overflow a Duration: as grpc-go, take
		// the longest there is rather than a negative one (already past).
		return math.MaxInt64, true
	}
	return time.Duration(n) * unit, true
}
