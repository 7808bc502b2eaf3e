package protocol

import (
	"bytes"
	"maps"
	"math/rand/v2"
	"strings"
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

// The hand-written request encoder must write exactly what the reflective
// one writes, for every shape of request a client sends without params.
func TestFastLockRequestMatchesJSON(t *testing.T) {
	strs := []string{"", "k", "lock-1", `quote " and \ back`, "tab\tnew\nline", "ü 键 🔒", "\u2028 sep", "<html>&", "bad utf8 \xff", "ctl \x01"}
	ints := []int64{-1, 0, 30000, -9223372036854775808, 9223372036854775807}
	rng := rand.New(rand.NewPCG(20261202, 13))
	pick := func() string { return strs[rng.IntN(len(strs))] }
	ptr := func() *int64 {
		if rng.IntN(3) == 0 {
			return nil
		}
		v := ints[rng.IntN(len(ints))]
		return &v
	}
	sptr := func() *string {
		if rng.IntN(3) == 0 {
			return nil
		}
		v := pick()
		return &v
	}
	for i := range 3000 {
		r := &LockOperationRequest{LockOperationEnum: []LockOp{"", OpAcquire, OpRelease, LockOp(pick())}[rng.IntN(4)]}
		r.RequestID = pick()
		r.Headers = randomHeaders(rng, pick)
		if rng.IntN(5) > 0 {
			r.LockInstance = &LockInstance{Key: sptr(), ExpiredTime: ptr(), LockType: sptr(), Owner: pick(), WaitTimeMs: ptr(), WaiterRetry: rng.IntN(2) == 0}
		}
		want, err := marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		got, err := appendLockOperationRequest(nil, r)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("request %d:\n got %s\nwant %s", i, got, want)
		}
		hs := map[string]string{"Content-Type": pick()}
		p, err := EncodeWith(r, "10.0.0.1", hs)
		if err != nil || !bytes.Equal(p.GetBody().GetValue(), want) {
			t.Fatalf("EncodeWith request %d: %v %s", i, err, p.GetBody().GetValue())
		}
		md := p.GetMetadata()
		if md.GetType() != "LockOperationRequest" || md.GetClientIp() != "10.0.0.1" || !maps.Equal(md.GetHeaders(), hs) {
			t.Fatalf("EncodeWith request %d: metadata %v", i, md)
		}
		hs["Content-Type"] = "changed" // the payload's headers are a copy
		if md.GetHeaders()["Content-Type"] == "changed" {
			t.Fatalf("EncodeWith request %d shares the caller's headers map", i)
		}
	}
}

func TestFastLockNotificationMatchesJSON(t *testing.T) {
	strs := []string{"", "k", "AVAILABLE", "NACOS_LOCK", `quote " and \ back`, "tab\tnew\nline", "ü 键 🔒", "\u2028 sep", "<html>&", "bad utf8 \xff", "ctl \x01"}
	rng := rand.New(rand.NewPCG(20261202, 17))
	pick := func() string { return strs[rng.IntN(len(strs))] }
	for i := range 3000 {
		r := &LockNotificationRequest{LockKey: pick(), LockType: pick(), Owner: pick(), NotificationType: pick()}
		r.RequestID = pick()
		r.Headers = randomHeaders(rng, pick)
		want, err := marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		got, err := appendLockNotificationRequest(nil, r)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("notification %d:\n got %s\nwant %s", i, got, want)
		}
		p, err := Encode(r)
		if err != nil || !bytes.Equal(p.GetBody().GetValue(), want) || p.GetMetadata().GetType() != "LockNotificationRequest" {
			t.Fatalf("Encode notification %d: %v %v", i, err, p)
		}
		back, err := Decode(p)
		if err != nil {
			t.Fatalf("decode notification %d: %v", i, err)
		}
		if n, ok := back.(*LockNotificationRequest); !ok || n.LockKey != strings.ToValidUTF8(r.LockKey, "\ufffd") || n.Owner != strings.ToValidUTF8(r.Owner, "\ufffd") {
			t.Fatalf("notification %d decodes to %#v", i, back)
		}
	}
}

// randomHeaders is a request's headers map: nil, empty, or a few entries.
func randomHeaders(rng *rand.Rand, pick func() string) map[string]string {
	switch rng.IntN(3) {
	case 0:
		return nil
	case 1:
		return map[string]string{}
	}
	h := map[string]string{}
	for range 1 + rng.IntN(4) {
		h[pick()] = pick()
	}
	return h
}

// A request whose lock instance carries params goes through encoding/json,
// which checks and compacts them.
func TestLockRequestWithParamsEncodes(t *testing.T) {
	key := "k"
	r := &LockOperationRequest{LockInstance: &LockInstance{Key: &key, Params: []byte(`{ "a" : 1 }`)}, LockOperationEnum: OpAcquire}
	p, err := EncodeWith(r, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"headers":{},"lockInstance":{"key":"k","params":{"a":1}},"lockOperationEnum":"ACQUIRE","module":"lock"}`; string(p.GetBody().GetValue()) != want {
		t.Fatalf("got %s\nwant %s", p.GetBody().GetValue(), want)
	}
	r.LockInstance.Params = []byte(`[1]`)
	if _, err := EncodeWith(r, "", nil); err == nil {
		t.Fatal("params that are not an object were encoded")
	}
}
