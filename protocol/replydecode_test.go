package protocol

import (
	"path/filepath"
	"reflect"
	"testing"
)

// The replies a lock call gets, in every shape our server and Nacos send,
// decode on the fast path, to what encoding/json gives.
func TestLockReplyFastPath(t *testing.T) {
	bodies := []string{
		`{"resultCode":200,"errorCode":0,"result":true,"lockResult":{"success":true,"reentrantCount":1,"waitPosition":-1,"fencingToken":18446744073709551615,"waiting":false},"success":true}`,
		`{"resultCode":200,"errorCode":0,"result":false,"lockResult":{"success":false,"reentrantCount":0,"waitPosition":3,"waiting":true},"success":true}`,
		`{"resultCode":500,"errorCode":0,"message":"tryLock error. \u00fc \"q\"","requestId":"42","result":false,"success":false}`,
		`{"resultCode":200,"errorCode":0,"message":null,"requestId":null,"result":true,"success":true}`,
		` { "result" : true , "resultCode" : 200 , "lockResult" : null } `,
		`{"resultCode":200,"lockResult":{"success":true},"lockResult":{"reentrantCount":2}}`,
		`{"resultCode":200,"unknown":[1,{"a":null}],"lockResult":{"extra":"x","waitPosition":0}}`,
	}
	for _, r := range replyShapes() {
		p, err := Encode(r)
		if err != nil {
			t.Fatal(err)
		}
		bodies = append(bodies, string(p.GetBody().GetValue()))
	}
	files, err := filepath.Glob("testdata/*LockOperationResponse*")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		bodies = append(bodies, string(readFile(t, f)))
	}
	for _, b := range bodies {
		got, ok := decodeLockOperationResponse([]byte(b))
		if !ok {
			t.Errorf("body %s: not decoded on the fast path", b)
			continue
		}
		want, err := decodeReflect("LockOperationResponse", []byte(b))
		if err != nil || !reflect.DeepEqual(Message(got), want) {
			t.Errorf("body %s:\n fast %s\n json %s (%v)", b, dump(got), dump(want), err)
		}
	}
}

// What the fast path leaves to encoding/json: names that differ only in
// case (encoding/json folds them, Unicode included), errors, and numbers
// that are not plain integers in range.
func TestLockReplyFallsBack(t *testing.T) {
	for _, b := range []string{
		`{"ResultCode":200}`,
		`{"resultcode":200}`,
		`{"lockResult":{"ſuccess":true}}`, // U+017F folds to s
		`{"lockResult":{"WaitPosition":1}}`,
		`{"resultCode":200.0}`,
		`{"resultCode":"200"}`,
		`{"lockResult":{"fencingToken":-1}}`,
		`{"lockResult":{"fencingToken":18446744073709551616}}`,
		`{"lockResult":[]}`,
		`{"result":1}`,
		`{"resultCode":200}x`,
		`{"resultCode":200`,
		`null`,
		`[]`,
		``,
	} {
		if m, ok := decodeLockOperationResponse([]byte(b)); ok {
			t.Errorf("body %s: decoded on the fast path to %s", b, dump(m))
		}
	}
	// Through Decode, a folded name still counts, as it always has.
	m, err := Decode(payload("LockOperationResponse", []byte(`{"ResultCode":500,"Result":true}`)))
	if r, ok := m.(*LockOperationResponse); err != nil || !ok || r.ResultCode != 500 || !r.Result {
		t.Fatalf("Decode with folded names = %v, %v", m, err)
	}
}

// FuzzLockReplyDecoder holds the fast path to encoding/json: whatever it
// decodes, encoding/json decodes the same way.
func FuzzLockReplyDecoder(f *testing.F) {
	for _, r := range replyShapes() {
		p, err := Encode(r)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(p.GetBody().GetValue())
	}
	for _, b := range []string{`{"resultCode":200,"lockResult":{"success":true},"lockResult":null}`, `{"message":"\ud800x","requestId":"\u00e9"}`,
		`{"errorCode":-9223372036854775808,"lockResult":{"fencingToken":0,"waitPosition":9223372036854775807}}`, `{"RESULT":true,"result":false}`} {
		f.Add([]byte(b))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if got, ok := decodeLockOperationResponse(body); ok {
			checkFastDecode(t, "LockOperationResponse", body, got)
		}
	})
}

// checkFastDecode fails unless encoding/json decodes body as the fast
// path did (got), and Decode takes the fast path's result.
func checkFastDecode(t *testing.T, typ string, body []byte, got Message) {
	t.Helper()
	want, err := decodeReflect(typ, body)
	if err != nil {
		t.Fatalf("body %q: fast path decoded %s, encoding/json failed: %v", body, dump(got), err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("body %q:\n fast %s\n json %s", body, dump(got), dump(want))
	}
	m, err := Decode(payload(typ, body))
	if err != nil || !reflect.DeepEqual(m, got) {
		t.Fatalf("Decode(%q) = %v, %v; want the fast path's %s", body, m, err, dump(got))
	}
}

// FuzzNotificationReplyDecoder holds the notification answer's fast path
// to encoding/json the same way.
func FuzzNotificationReplyDecoder(f *testing.F) {
	for _, r := range []*LockNotificationResponse{
		{ResponseBase: Success()}, {ResponseBase: ResponseBase{ResultCode: 200, RequestID: "17"}},
		{ResponseBase: Failure(CodeFailure, CodeNoRight, `quote " and \ back`)}, {ResponseBase: ResponseBase{Message: "bad utf8 \xff"}},
	} {
		p, err := Encode(r)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(p.GetBody().GetValue())
	}
	for _, b := range []string{`{"resultCode":200,"success":true,"requestId":"3"}`, `{"RequestId":"x"}`, `{"message":null,"errorCode":1e3}`,
		`{"resultCode":500,"errorCode":-9223372036854775808,"extra":{"a":[1,2,{"b":null}]}}`, ` {"requestId":"\ud800x"} `, `{}`, `[]`} {
		f.Add([]byte(b))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if got, ok := decodeLockNotificationResponse(body); ok {
			checkFastDecode(t, "LockNotificationResponse", body, got)
		}
	})
}

// replyShapes are the replies TestFastLockReplyMatchesJSON encodes.
func replyShapes() []*LockOperationResponse {
	var out []*LockOperationResponse
	for _, m := range []string{"", "tryLock error.", `quote " and \ back`, "ü 键 🔒", "bad utf8 \xff"} {
		out = append(out,
			NewLockOperationResponse(Success(), LockResult{Success: true, ReentrantCount: 1, WaitPosition: NoWaitPosition, FencingToken: 123456}),
			NewLockOperationResponse(Success(), LockResult{WaitPosition: 3}),
			NewLockOperationResponse(Failure(CodeFailure, CodeNoRight, m), LockResult{WaitPosition: -7, ErrorMessage: m, ReentrantCount: -1}),
			&LockOperationResponse{ResponseBase: ResponseBase{ResultCode: 200, Message: m, RequestID: m}, Result: false},
		)
	}
	return out
}

// What clients send takes the fast path, not encoding/json.
func TestNotificationReplyTakesTheFastPath(t *testing.T) {
	for _, body := range []string{`{"resultCode":200,"errorCode":0,"requestId":"42","success":true}`, `{"resultCode":500,"errorCode":500,"message":"no waiter","requestId":"7","success":false}`} {
		m, ok := decodeLockNotificationResponse([]byte(body))
		if !ok || m.RequestID == "" || m.ResultCode == 0 {
			t.Fatalf("%s: fast path %v, %+v", body, ok, m)
		}
	}
}
