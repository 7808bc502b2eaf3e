package protocol

import (
	"errors"
	"strconv"
	"strings"
)

// lockReplyAlloc is a decoded LockOperationResponse with its lock result:
// one allocation for both.
type lockReplyAlloc struct {
	r  LockOperationResponse
	lr LockResult
}

var (
	replyNames       = []string{"resultCode", "errorCode", "message", "requestId", "result", "lockResult"} // the envelope's four first
	lockResultNames  = []string{"success", "reentrantCount", "waitPosition", "errorMessage", "fencingToken"}
	errReplyFallback = errors.New("decode through encoding/json")
)

// decodeLockOperationResponse decodes the reply to every lock call a
// client makes without reflection. It is a fast path only: ok is false
// for every body it does not decode exactly as encoding/json would (a
// syntax or type error, a property name that differs from a known one
// only in case, which encoding/json folds), and the caller then decodes
// through encoding/json, so errors and odd input keep that behaviour.
// FuzzLockReplyDecoder holds the two to the same result.
func decodeLockOperationResponse(data []byte) (m *LockOperationResponse, ok bool) {
	s := jsonScanner{data: data}
	if s.atEnd() || data[s.pos] != '{' || s.beginObject() != nil {
		return nil, false
	}
	a := new(lockReplyAlloc)
	r := &a.r
	for first := true; ; first = false {
		name, more, err := s.nextName(first)
		if err != nil {
			return nil, false
		}
		if !more {
			break
		}
		if handled, err := s.readResponseBase(name, &r.ResponseBase); handled {
			if err != nil {
				return nil, false
			}
			continue
		}
		switch string(name) {
		case "result":
			var v, set bool
			if v, set, err = s.boolOrNull(); set {
				r.Result = v
			}
		case "lockResult":
			if s.peek() == 'n' {
				err = s.literal("null")
				r.LockResult = nil
				break
			}
			// A later lockResult replaces an earlier one whole, as
			// LockResult.UnmarshalJSON does.
			a.lr = LockResult{WaitPosition: NoWaitPosition}
			if err = s.readLockResult(&a.lr); err == nil {
				r.LockResult = &a.lr
			}
		default:
			if folds(name, replyNames) {
				return nil, false
			}
			err = s.skipValue() // "success", and whatever a server adds
		}
		if err != nil {
			return nil, false
		}
	}
	if !s.atEnd() {
		return nil, false
	}
	return r, true
}

// readResponseBase reads the value of the envelope property name into rb,
// if it is one.
func (s *jsonScanner) readResponseBase(name []byte, rb *ResponseBase) (handled bool, err error) {
	switch string(name) {
	case "resultCode":
		return true, s.readInt(&rb.ResultCode)
	case "errorCode":
		return true, s.readInt(&rb.ErrorCode)
	case "message":
		return true, s.readString(&rb.Message)
	case "requestId":
		return true, s.readString(&rb.RequestID)
	}
	return false, nil
}

// decodeLockNotificationResponse decodes a client's answer to a pushed
// notification, one per hand-off, as decodeLockOperationResponse does:
// a fast path only (ok false: decode through encoding/json), held to
// encoding/json by FuzzNotificationReplyDecoder.
func decodeLockNotificationResponse(data []byte) (m *LockNotificationResponse, ok bool) {
	s := jsonScanner{data: data}
	if s.atEnd() || data[s.pos] != '{' || s.beginObject() != nil {
		return nil, false
	}
	r := new(LockNotificationResponse)
	for first := true; ; first = false {
		name, more, err := s.nextName(first)
		if err != nil {
			return nil, false
		}
		if !more {
			break
		}
		handled, err := s.readResponseBase(name, &r.ResponseBase)
		switch {
		case handled:
		case folds(name, replyNames[:4]):
			return nil, false
		default:
			err = s.skipValue() // "success", and whatever a client adds
		}
		if err != nil {
			return nil, false
		}
	}
	if !s.atEnd() {
		return nil, false
	}
	return r, true
}

// readLockResult reads a lockResult object into lr.
func (s *jsonScanner) readLockResult(lr *LockResult) error {
	if s.peek() != '{' {
		return errReplyFallback
	}
	if err := s.beginObject(); err != nil {
		return err
	}
	for first := true; ; first = false {
		name, more, err := s.nextName(first)
		if err != nil {
			return err
		}
		if !more {
			return nil
		}
		switch string(name) {
		case "success":
			var v, set bool
			if v, set, err = s.boolOrNull(); set {
				lr.Success = v
			}
		case "reentrantCount":
			err = s.readInt(&lr.ReentrantCount)
		case "waitPosition":
			err = s.readInt(&lr.WaitPosition)
		case "errorMessage":
			err = s.readString(&lr.ErrorMessage)
		case "fencingToken":
			err = s.readUint64(&lr.FencingToken)
		default:
			if folds(name, lockResultNames) {
				return errReplyFallback
			}
			err = s.skipValue() // "waiting", derived
		}
		if err != nil {
			return err
		}
	}
}

// folds reports whether name differs from one of known only in case, as
// encoding/json folds it (bytes.EqualFold).
func folds(name []byte, known []string) bool {
	for _, k := range known {
		if string(name) != k && strings.EqualFold(string(name), k) {
			return true
		}
	}
	return false
}

// readInt reads an integer into an int field; null leaves it as it is.
func (s *jsonScanner) readInt(v *int) error {
	n, set, err := s.int64OrNull()
	if err != nil || !set {
		return err
	}
	if int64(int(n)) != n {
		return errReplyFallback // out of int's range on this platform
	}
	*v = int(n)
	return nil
}

// readUint64 reads a non-negative integer into a uint64 field; null leaves
// it as it is.
func (s *jsonScanner) readUint64(v *uint64) error {
	if s.peek() == 'n' {
		return s.literal("null")
	}
	text, integer, err := s.number()
	if err != nil {
		return err
	}
	n, perr := strconv.ParseUint(string(text), 10, 64)
	if !integer || perr != nil {
		return errReplyFallback
	}
	*v = n
	return nil
}

// readString reads a string into a string field; null leaves it as it is.
func (s *jsonScanner) readString(v *string) error {
	b, set, err := s.stringOrNull()
	if set {
		*v = string(b)
	}
	return err
}
