package gateway

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/rs/zerolog"
	"google.golang.org/protobuf/types/known/anypb"

	"nacos-lockd/protocol"
	"nacos-lockd/protocol/pb"
	"nacos-lockd/replica/replicatest"
)

// FuzzLockRequest drives the whole lock path in process: decode, validate,
// build the command, apply it to a real table, encode the reply. Whatever
// the body, the answer is a LockOperationResponse, and a rejected request
// never reaches the table.
func FuzzLockRequest(f *testing.F) {
	for _, seed := range []string{
		`{"lockInstance":{"key":"k","lockType":"NACOS_LOCK","expiredTime":1000},"lockOperationEnum":"ACQUIRE"}`,
		`{"lockInstance":{"key":"k","lockType":"REENTRANT","owner":"o:1","expiredTime":-1,"waitTimeMs":3000,"waiterRetry":true},"lockOperationEnum":"ACQUIRE"}`,
		`{"lockInstance":{"key":"k","lockType":"REENTRANT","owner":"o:1","expiredTime":0},"lockOperationEnum":"RELEASE"}`,
		`{"lockInstance":{"key":"k","lockType":"NON_REENTRANT","owner":"o","expiredTime":-1},"lockOperationEnum":"RENEW"}`,
		`{"lockInstance":{"key":"k","lockType":"NON_REENTRANT","owner":"o","waitTime":5},"lockOperationEnum":"CANCEL_WAIT"}`,
		`{"lockInstance":{"key":"k","lockType":"NACOS_LOCK","params":{"a":[1,{"b":null}]}},"lockOperationEnum":"EXPIRE"}`,
		`[]`, `null`, `{}`, `{"lockInstance":5}`, "\xff\xfe", `{"lockInstance":{"key":"` + "\xc3\x28" + `"}}`,
	} {
		f.Add([]byte(seed))
	}
	srv, err := New(Config{ListenAddr: "127.0.0.1:0", MaxKeyLength: 64}, zerolog.Nop())
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		table := replicatest.NewLocal(nil)
		srv.table = table
		c := srv.newConn(nil)
		c.registered = true
		p := &pb.Payload{Metadata: &pb.Metadata{Type: "LockOperationRequest"}, Body: &anypb.Any{Value: body}}
		reply := srv.handle(context.Background(), c, p)
		r, ok := reply.(*protocol.LockOperationResponse)
		if !ok {
			t.Fatalf("answered %T to a lock request", reply)
		}
		if r.ResultCode != 200 && table.Stats().Applied != 0 {
			t.Fatalf("a rejected request reached the table: %+v", r)
		}
		if r.LockResult != nil && r.Result != r.LockResult.Success {
			t.Fatalf("result and lockResult disagree: %+v %+v", r, r.LockResult)
		}
		out, err := protocol.Encode(r)
		if err != nil {
			t.Fatalf("encode reply: %v", err)
		}
		var v any
		if err := json.Unmarshal(out.Body.Value, &v); err != nil || hasNull(v) {
			t.Fatalf("reply is not null-free JSON: %s (%v)", out.Body.Value, err)
		}
	})
}

func hasNull(v any) bool {
	switch v := v.(type) {
	case nil:
		return true
	case map[string]any:
		for _, x := range v {
			if hasNull(x) {
				return true
			}
		}
	case []any:
		for _, x := range v {
			if hasNull(x) {
				return true
			}
		}
	}
	return false
}
