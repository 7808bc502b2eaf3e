package compat

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// PropertyError reports a property whose value cannot be used. Value is the
// value as written, or the default when the property was not set.
type PropertyError struct {
	Key    string
	Value  string
	Reason string
}

func (e *PropertyError) Error() string {
	return fmt.Sprintf("property %s=%q: %s", e.Key, e.Value, e.Reason)
}

// String returns the value of key exactly as written, or def when key is
// absent.
func (p Properties) String(key, def string) string {
	if v, ok := p[key]; ok {
		return v
	}
	return def
}

// lookup returns the value of key with surrounding whitespace trimmed, and
// whether it is set to something. An empty value counts as unset: Spring's
// converters turn "" into null, so Nacos falls back to its default. We also
// treat whitespace-only as unset, where Spring would fail to parse it.
func (p Properties) lookup(key string) (string, bool) {
	v := strings.TrimSpace(p[key])
	return v, v != ""
}

// Int64 returns the integer value of key, or def when it is absent or
// empty. Like Spring's number conversion (which Nacos uses), it ignores
// surrounding whitespace and reads decimal with an optional sign, or hex
// after "0x", "0X" or "#"; a leading zero does not mean octal.
func (p Properties) Int64(key string, def int64) (int64, error) {
	s, ok := p.lookup(key)
	if !ok {
		return def, nil
	}
	v, err := parseInt64(s)
	if err != nil {
		return 0, &PropertyError{Key: key, Value: p[key], Reason: err.Error()}
	}
	return v, nil
}

// Int is Int64 for values that must fit in an int.
func (p Properties) Int(key string, def int) (int, error) {
	v, err := p.Int64(key, int64(def))
	if err != nil {
		return 0, err
	}
	if v < math.MinInt || v > math.MaxInt {
		return 0, &PropertyError{Key: key, Value: p[key], Reason: errOutOfRange.Error()}
	}
	return int(v), nil
}

var errOutOfRange = errors.New("out of range")

func parseInt64(s string) (int64, error) {
	digits, neg := s, false
	if len(digits) > 0 && (digits[0] == '-' || digits[0] == '+') {
		neg = digits[0] == '-'
		digits = digits[1:]
	}
	base := 10
	for _, prefix := range []string{"0x", "0X", "#"} {
		if strings.HasPrefix(digits, prefix) {
			digits, base = digits[len(prefix):], 16
			break
		}
	}
	// No sign may follow the one we took; ParseUint refuses one.
	u, err := strconv.ParseUint(digits, base, 64)
	switch {
	case errors.Is(err, strconv.ErrRange):
		return 0, errOutOfRange
	case err != nil:
		return 0, errors.New("not an integer")
	case neg && u <= 1<<63:
		return -int64(u), nil // u <= 2^63, so -u fits, MinInt64 included
	case !neg && u <= math.MaxInt64:
		return int64(u), nil
	}
	return 0, errOutOfRange
}
