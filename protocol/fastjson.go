package protocol

import (
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
