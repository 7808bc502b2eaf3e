package protocol

import (
	"bytes"
	"testing"
)

// The hand-written reply encoder must write exactly what the reflective
// one writes, for every shape of reply.
func TestFastLockReplyMatchesJSON(t *testing.T) {
	msgs := []string{"", "tryLock error.", `quote " and \ back`, "tab\tnew\nline", "ü 键 🔒", "\u2028 sep", "<html>&", "bad utf8 \xff", "ctl \x01"}
	var replies []*LockOperationResponse
	for _, m := range msgs {
		replies = append(replies,
			NewLockOperationResponse(Success(), LockResult{Success: true, ReentrantCount: 1, WaitPosition: NoWaitPosition, FencingToken: 123456}),
			NewLockOperationResponse(Success(), LockResult{WaitPosition: 3}),
			NewLockOperationResponse(Failure(CodeFailure, 0, m), LockResult{WaitPosition: NoWaitPosition, ErrorMessage: m}),
			NewLockOperationResponse(Failure(CodeFailure, CodeNoRight, m), LockResult{WaitPosition: -7, ErrorMessage: m, ReentrantCount: -1}),
			&LockOperationResponse{ResponseBase: Success(), Result: true},
			&LockOperationResponse{ResponseBase: ResponseBase{ResultCode: 200, Message: m, RequestID: m}, Result: false},
		)
	}
	for i, r := range replies {
		want, err := marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		got, err := appendLockOperationResponse(nil, r)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("reply %d:\n got %s\nwant %s", i, got, want)
		}
		p, err := Encode(r)
		if err != nil || !bytes.Equal(p.GetBody().GetValue(), want) || p.GetMetadata().GetType() != "LockOperationResponse" {
			t.Errorf("Encode reply %d: %v %s", i, err, p.GetBody().GetValue())
		}
	}
}
