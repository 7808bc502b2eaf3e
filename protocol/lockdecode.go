package protocol

import "fmt"

// lockRequestAlloc is a decoded LockOperationRequest together with its lock
// instance and the values the instance's pointer fields point to: one
// allocation instead of one per field. None of it is shared with anything
// else, so the interior pointers behave like separate allocations.
type lockRequestAlloc struct {
	req                     LockOperationRequest
	inst                    LockInstance
	key, lockType           string
	expiredTime, waitTimeMs int64
}

// decodeLockOperationRequest decodes a LockOperationRequest body without
// reflection: every lock call carries one.
//
// It gives what encoding/json gives (unmarshalObject into the struct, then
// LockInstance.UnmarshalJSON and emptyMapsToNil) with one deliberate
// difference: property names match only when they are spelt exactly, as
// Jackson matches them on the Java side; "Key" or "LOCKINSTANCE" is an
// unknown property and ignored. encoding/json folds case. Everything else,
// down to duplicate properties, is encoding/json's behaviour
// (FuzzLockOperationRequestDecoder holds it to that):
//   - the last duplicate wins, except that null leaves a non-pointer string
//     (requestId, lockOperationEnum, owner) as it was, and a second
//     "headers" object is merged into the first;
//   - null makes a pointer field and headers nil;
//   - integers are int64 literals only: no fraction, no exponent, no
//     strings;
//   - params is checked and compacted by readParams, and only its last
//     occurrence counts.
func decodeLockOperationRequest(data []byte) (*LockOperationRequest, error) {
	s := jsonScanner{data: data}
	if !s.atEnd() && data[s.pos] != '{' {
		return nil, errNotObject // as unmarshalObject; Java fails on null too
	}
	a := new(lockRequestAlloc)
	r := &a.req
	if err := s.beginObject(); err != nil {
		return nil, err
	}
	for first := true; ; first = false {
		name, ok, err := s.nextName(first)
		if err != nil {
			return nil, err
		}
		if !ok {
			break
		}
		// prop names the property in errors: name may point into s.buf,
		// which reading the value can overwrite.
		var prop string
		switch string(name) {
		case "headers":
			prop = "headers"
			err = s.readHeaders(&r.Headers)
		case "requestId":
			prop = "requestId"
			var b []byte
			if b, ok, err = s.stringOrNull(); ok {
				r.RequestID = string(b)
			}
		case "lockInstance":
			prop = "lockInstance"
			if s.peek() == 'n' {
				err = s.literal("null")
				r.LockInstance = nil
				break
			}
			if err = a.readLockInstance(&s); err == nil {
				r.LockInstance = &a.inst
			}
		case "lockOperationEnum":
			prop = "lockOperationEnum"
			var b []byte
			if b, ok, err = s.stringOrNull(); ok {
				r.LockOperationEnum = internLockOp(b)
			}
		default:
			prop = "unknown property"
			err = s.skipValue() // "module", and whatever a client adds
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", prop, err)
		}
	}
	if !s.atEnd() {
		return nil, s.syntaxError("after top-level value")
	}
	if len(r.Headers) == 0 {
		r.Headers = nil // as emptyMapsToNil
	}
	return r, nil
}

// readLockInstance reads a lockInstance object into a.inst, replacing what
// an earlier lockInstance property put there, as LockInstance.UnmarshalJSON
// does.
func (a *lockRequestAlloc) readLockInstance(s *jsonScanner) error {
	if s.peek() != '{' {
		return s.typeError("an object")
	}
	if err := s.beginObject(); err != nil {
		return err
	}
	li := &a.inst
	*li = LockInstance{}
	var (
		params            []byte // the last "params", raw
		waitMs, waitAlias int64
		hasWait, hasAlias bool
	)
	for first := true; ; first = false {
		name, ok, err := s.nextName(first)
		if err != nil {
			return err
		}
		if !ok {
			break
		}
		var b []byte
		var prop string // see decodeLockOperationRequest
		switch string(name) {
		case "key":
			prop = "key"
			if b, ok, err = s.stringOrNull(); ok {
				a.key = string(b)
				li.Key = &a.key
			} else {
				li.Key = nil
			}
		case "expiredTime":
			prop = "expiredTime"
			if a.expiredTime, ok, err = s.int64OrNull(); ok {
				li.ExpiredTime = &a.expiredTime
			} else {
				li.ExpiredTime = nil
			}
		case "lockType":
			prop = "lockType"
			if b, ok, err = s.stringOrNull(); ok {
				a.lockType = internLockType(b)
				li.LockType = &a.lockType
			} else {
				li.LockType = nil
			}
		case "params":
			prop = "params"
			// Opaque: only its syntax matters here, readParams judges the
			// last one.
			s.skipSpace()
			start := s.pos
			if err = s.skipValue(); err == nil {
				params = s.data[start:s.pos]
			}
		case "owner":
			prop = "owner"
			if b, ok, err = s.stringOrNull(); ok {
				li.Owner = string(b)
			}
		case "waitTimeMs":
			prop = "waitTimeMs"
			waitMs, hasWait, err = s.int64OrNull()
		case "waitTime":
			prop = "waitTime"
			waitAlias, hasAlias, err = s.int64OrNull()
		case "waiterRetry":
			prop = "waiterRetry"
			li.WaiterRetry, _, err = s.boolOrNull()
		default:
			prop = "unknown property"
			err = s.skipValue()
		}
		if err != nil {
			return fmt.Errorf("%s: %w", prop, err)
		}
	}
	p, err := readParams(params)
	if err != nil {
		return err
	}
	li.Params = p
	switch {
	case hasWait:
		a.waitTimeMs = waitMs
		li.WaitTimeMs = &a.waitTimeMs
	case hasAlias:
		a.waitTimeMs = waitAlias
		li.WaitTimeMs = &a.waitTimeMs
	}
	return nil
}

// readHeaders reads the JSON "headers" property into *h. A null value in
// the object is an empty string, as encoding/json stores it.
func (s *jsonScanner) readHeaders(h *map[string]string) error {
	switch s.peek() {
	case 'n':
		*h = nil
		return s.literal("null")
	case '{':
	default:
		return s.typeError("an object")
	}
	if err := s.beginObject(); err != nil {
		return err
	}
	for first := true; ; first = false {
		name, ok, err := s.nextName(first)
		if err != nil {
			return err
		}
		if !ok {
			return nil
		}
		k := string(name) // before the value reuses s.buf
		v, _, err := s.stringOrNull()
		if err != nil {
			return fmt.Errorf("%q: %w", k, err)
		}
		if *h == nil {
			*h = make(map[string]string)
		}
		(*h)[k] = string(v)
	}
}

// stringOrNull reads a string, unescaped and valid only until the next
// string is read; ok is false for null.
func (s *jsonScanner) stringOrNull() (b []byte, ok bool, err error) {
	switch s.peek() {
	case '"':
		b, err = s.stringBytes()
		return b, err == nil, err
	case 'n':
		return nil, false, s.literal("null")
	}
	return nil, false, s.typeError("a string")
}

// int64OrNull reads an integer that fits an int64; ok is false for null.
// Like encoding/json it refuses 1.0 and 1e3 as well as 1.5.
func (s *jsonScanner) int64OrNull() (n int64, ok bool, err error) {
	switch c := s.peek(); {
	case c == 'n':
		return 0, false, s.literal("null")
	case c != '-' && (c < '0' || c > '9'):
		return 0, false, s.typeError("an integer")
	}
	start := s.pos
	text, integer, err := s.number()
	if err != nil {
		return 0, false, err
	}
	if n, ok = parseInt64(text); !integer || !ok {
		return 0, false, fmt.Errorf("number %.40s is not an int64 (offset %d)", text, start)
	}
	return n, true, nil
}

// parseInt64 parses what number returned for an integer: an optional minus
// and digits without leading zeros. ok is false out of range.
func parseInt64(text []byte) (n int64, ok bool) {
	neg := text[0] == '-'
	digits := text
	limit := uint64(1<<63 - 1)
	if neg {
		digits, limit = text[1:], 1<<63
	}
	var u uint64
	for _, c := range digits {
		d := uint64(c - '0')
		if d > 9 || u > (limit-d)/10 {
			return 0, false
		}
		u = u*10 + d
	}
	if neg {
		return int64(-u), true // -(1<<63) wraps to itself: MinInt64
	}
	return int64(u), true
}

// boolOrNull reads a boolean; ok is false for null, and v is then false, as
// LockInstance.UnmarshalJSON turns a null waiterRetry into false.
func (s *jsonScanner) boolOrNull() (v, ok bool, err error) {
	switch s.peek() {
	case 't':
		return true, true, s.literal("true")
	case 'f':
		return false, true, s.literal("false")
	case 'n':
		return false, false, s.literal("null")
	}
	return false, false, s.typeError("a boolean")
}

// internLockType returns the constant for a lock type clients send, so that
// decoding one allocates nothing.
func internLockType(b []byte) string {
	switch string(b) {
	case LockTypeNacos:
		return LockTypeNacos
	case LockTypeReentrant:
		return LockTypeReentrant
	case LockTypeNonReentrant:
		return LockTypeNonReentrant
	}
	return string(b)
}

// internLockOp is internLockType for operations.
func internLockOp(b []byte) LockOp {
	switch string(b) {
	case string(OpAcquire):
		return OpAcquire
	case string(OpRelease):
		return OpRelease
	case string(OpRenew):
		return OpRenew
	case string(OpCancelWait):
		return OpCancelWait
	case string(OpExpire):
		return OpExpire
	case string(OpCleanupConnection):
		return OpCleanupConnection
	}
	return LockOp(b)
}
