package protocol

import (
	"slices"
	"strconv"
	"unicode/utf8"
)

// appendLockOperationResponse writes r exactly as its MarshalJSON does
// (field order, omitempty, the derived "waiting" and "success"), without
// reflection: every lock call is answered with one. Strings that need
// escaping go through encoding/json, so the bytes never differ
// (TestFastLockReplyMatchesJSON).
func appendLockOperationResponse(b []byte, r *LockOperationResponse) ([]byte, error) {
	b = append(b, `{"resultCode":`...)
	b = strconv.AppendInt(b, int64(r.ResultCode), 10)
	b = append(b, `,"errorCode":`...)
	b = strconv.AppendInt(b, int64(r.ErrorCode), 10)
	var err error
	if r.Message != "" {
		b = append(b, `,"message":`...)
		if b, err = appendJSONString(b, r.Message); err != nil {
			return nil, err
		}
	}
	if r.RequestID != "" {
		b = append(b, `,"requestId":`...)
		if b, err = appendJSONString(b, r.RequestID); err != nil {
			return nil, err
		}
	}
	b = append(b, `,"result":`...)
	b = strconv.AppendBool(b, r.Result)
	if lr := r.LockResult; lr != nil {
		b = append(b, `,"lockResult":{"success":`...)
		b = strconv.AppendBool(b, lr.Success)
		b = append(b, `,"reentrantCount":`...)
		b = strconv.AppendInt(b, int64(lr.ReentrantCount), 10)
		b = append(b, `,"waitPosition":`...)
		b = strconv.AppendInt(b, int64(lr.WaitPosition), 10)
		if lr.ErrorMessage != "" {
			b = append(b, `,"errorMessage":`...)
			if b, err = appendJSONString(b, lr.ErrorMessage); err != nil {
				return nil, err
			}
		}
		if lr.FencingToken != 0 {
			b = append(b, `,"fencingToken":`...)
			b = strconv.AppendUint(b, lr.FencingToken, 10)
		}
		b = append(b, `,"waiting":`...)
		b = strconv.AppendBool(b, lr.Waiting())
		b = append(b, '}')
	}
	b = append(b, `,"success":`...)
	b = strconv.AppendBool(b, r.OK())
	return append(b, '}'), nil
}

// appendJSONString quotes s as marshal does: plain printable ASCII
// directly, anything else through encoding/json.
func appendJSONString(b []byte, s string) ([]byte, error) {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= utf8.RuneSelf {
			q, err := marshal(s)
			if err != nil {
				return nil, err
			}
			return append(b, q...), nil
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"'), nil
}

// appendLockOperationRequest writes r exactly as its MarshalJSON does (the
// headers object sorted by key and never null, omitempty, the derived
// "module", the lock instance's waiterRetry rule), without reflection:
// every lock call a client makes sends one. A lock instance with params is
// not written here (the caller takes the reflective path): params is raw
// JSON that encoding/json checks and compacts.
// TestFastLockRequestMatchesJSON holds the bytes to encoding/json's.
func appendLockOperationRequest(b []byte, r *LockOperationRequest) ([]byte, error) {
	b, err := appendRequestBase(b, r.RequestBase)
	if err != nil {
		return nil, err
	}
	if li := r.LockInstance; li != nil {
		b = append(b, `,"lockInstance":`...)
		if b, err = appendLockInstance(b, li); err != nil {
			return nil, err
		}
	}
	if r.LockOperationEnum != "" {
		b = append(b, `,"lockOperationEnum":`...)
		if b, err = appendJSONString(b, string(r.LockOperationEnum)); err != nil {
			return nil, err
		}
	}
	b = append(b, `,"module":"`+moduleLock+`"}`...)
	return b, nil
}

// appendRequestBase opens a request's object with its envelope, as
// encoding/json writes the embedded RequestBase after forWire: the headers
// (never null, keys sorted) and a requestId when there is one.
func appendRequestBase(b []byte, rb RequestBase) ([]byte, error) {
	b = append(b, `{"headers":{`...)
	var err error
	if len(rb.Headers) > 0 {
		keys := make([]string, 0, len(rb.Headers))
		for k := range rb.Headers {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			if b, err = appendJSONString(b, k); err != nil {
				return nil, err
			}
			b = append(b, ':')
			if b, err = appendJSONString(b, rb.Headers[k]); err != nil {
				return nil, err
			}
		}
	}
	b = append(b, '}')
	if rb.RequestID != "" {
		b = append(b, `,"requestId":`...)
		if b, err = appendJSONString(b, rb.RequestID); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// appendLockNotificationRequest writes r exactly as its MarshalJSON does:
// the server pushes one to the next waiter at every hand-off, and through
// encoding/json that was 4% of the server's CPU under W2 c=16.
func appendLockNotificationRequest(b []byte, r *LockNotificationRequest) ([]byte, error) {
	b, err := appendRequestBase(b, r.RequestBase)
	if err != nil {
		return nil, err
	}
	for _, f := range [...]struct{ name, v string }{
		{`,"lockKey":`, r.LockKey}, {`,"lockType":`, r.LockType}, {`,"owner":`, r.Owner}, {`,"notificationType":`, r.NotificationType},
	} {
		if f.v == "" {
			continue
		}
		b = append(b, f.name...)
		if b, err = appendJSONString(b, f.v); err != nil {
			return nil, err
		}
	}
	return append(b, `,"module":"`+moduleLock+`"}`...), nil
}

// appendLockInstance writes li as LockInstance.MarshalJSON does, for an
// instance without params.
func appendLockInstance(b []byte, li *LockInstance) ([]byte, error) {
	b = append(b, '{')
	sep := func(b []byte) []byte {
		if b[len(b)-1] != '{' {
			b = append(b, ',')
		}
		return b
	}
	var err error
	if li.Key != nil {
		b = append(sep(b), `"key":`...)
		if b, err = appendJSONString(b, *li.Key); err != nil {
			return nil, err
		}
	}
	if li.ExpiredTime != nil {
		b = append(sep(b), `"expiredTime":`...)
		b = strconv.AppendInt(b, *li.ExpiredTime, 10)
	}
	if li.LockType != nil {
		b = append(sep(b), `"lockType":`...)
		if b, err = appendJSONString(b, *li.LockType); err != nil {
			return nil, err
		}
	}
	if li.Owner != "" {
		b = append(sep(b), `"owner":`...)
		if b, err = appendJSONString(b, li.Owner); err != nil {
			return nil, err
		}
	}
	if li.WaitTimeMs != nil {
		b = append(sep(b), `"waitTimeMs":`...)
		b = strconv.AppendInt(b, *li.WaitTimeMs, 10)
	}
	if li.WaiterRetry || li.WaitTimeMs != nil {
		b = append(sep(b), `"waiterRetry":`...)
		b = strconv.AppendBool(b, li.WaiterRetry)
	}
	return append(b, '}'), nil
}
