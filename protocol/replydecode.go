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
	a := new(lockReplyAlloc)
	r := &a.r
	s, ok := openReply(data)
	for first := true; ok; {
		name, more, err := s.nextReplyName(&first, &r.ResponseBase, replyNames)
		if err != nil {
			return nil, false
		}
		if !more {
			break
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
			err = s.skipValue() // "success", and whatever a server adds
		}
		if err != nil {
			return nil, false
		}
	}
	if !ok || !s.atEnd() {
		return nil, false
	}
	return r, true
}

// openReply starts scanning a response object; ok is false if data does
// not open one.
func openReply(data []byte) (s jsonScanner, ok bool) {
	s = jsonScanner{data: data}
	ok = !s.atEnd() && data[s.pos] == '{' && s.beginObject() == nil
	return s, ok
}

// nextReplyName reads the envelope's properties into rb and returns the
// name of the next other property (more false at the object's end), whose
// value the caller reads; first is true until the first property is read. A name that folds to one of known without
// equalling it is an error: encoding/json would match it, case-blind.
func (s *jsonScanner) nextReplyName(first *bool, rb *ResponseBase, known []string) (name []byte, more bool, err error) {
	for {
		name, more, err = s.nextName(*first)
		*first = false
		if err != nil || !more {
			return nil, false, err
		}
		if folds(name, known) {
			return nil, false, errReplyFallback
		}
		handled, err := s.readResponseBase(name, rb)
		if err != nil {
			return nil, false, err
		}
		if !handled {
			return name, true, nil
		}
	}
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
	r := new(LockNotificationResponse)
	s, ok := openReply(data)
	for first := true; ok; {
		_, more, err := s.nextReplyName(&first, &r.ResponseBase, replyNames[:4])
		if err != nil {
			return nil, false
		}
		if !more {
			break
		}
		if s.skipValue() != nil { // "success", and whatever a client adds
			return nil, false
		}
	}
	if !ok || !s.atEnd() {
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
