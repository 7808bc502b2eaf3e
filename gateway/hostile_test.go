package gateway

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/anypb"

	"nacos-lockd/interop/client"
	"nacos-lockd/protocol"
	"nacos-lockd/protocol/pb"
)

// TestHostileInputLeavesNoResidue throws malformed requests and misbehaving
// streams at the server, checks each gets a defined answer, and that the
// server's goroutines and heap come back to where they were.
func TestHostileInputLeavesNoResidue(t *testing.T) {
	ts := startServer(t, Config{SetupTimeout: 300 * time.Millisecond, PushQueue: 2})
	good := dial(t, ts) // a bystander that must be unaffected throughout
	if r := lockCall(t, good, protocol.OpAcquire, gen2("bystander", "REENTRANT", "g:1", 60000, -1)); !r.Result {
		t.Fatal("bystander could not lock")
	}
	settle := func() (int, uint64) {
		var ms runtime.MemStats
		for range 3 {
			runtime.GC()
			time.Sleep(50 * time.Millisecond)
		}
		runtime.ReadMemStats(&ms)
		return runtime.NumGoroutine(), ms.HeapInuse
	}
	g0, h0 := settle()

	c := dial(t, ts)
	deep := strings.Repeat("[", 20000) + strings.Repeat("]", 20000)
	bodies := map[string]string{
		"wrong type for key":         `{"lockInstance":{"key":5,"lockType":"NACOS_LOCK","expiredTime":1},"lockOperationEnum":"ACQUIRE"}`,
		"wrong type for owner":       `{"lockInstance":{"key":"k","owner":{},"lockType":"REENTRANT","expiredTime":1},"lockOperationEnum":"ACQUIRE"}`,
		"wrong type for waitTimeMs":  `{"lockInstance":{"key":"k","lockType":"REENTRANT","expiredTime":1,"waitTimeMs":"long"},"lockOperationEnum":"ACQUIRE"}`,
		"wrong type for waiterRetry": `{"lockInstance":{"key":"k","lockType":"REENTRANT","expiredTime":1,"waiterRetry":"yes"},"lockOperationEnum":"ACQUIRE"}`,
		"wrong type for op":          `{"lockInstance":{"key":"k","lockType":"REENTRANT","expiredTime":1},"lockOperationEnum":7}`,
		"nulls everywhere":           `{"lockInstance":{"key":null,"lockType":null,"expiredTime":null,"owner":null,"params":null},"lockOperationEnum":null}`,
		"huge number":                `{"lockInstance":{"key":"k","lockType":"NACOS_LOCK","expiredTime":99999999999999999999999},"lockOperationEnum":"ACQUIRE"}`,
		"negative wait":              `{"lockInstance":{"key":"k2","lockType":"REENTRANT","owner":"o","expiredTime":100,"waitTimeMs":-99999999},"lockOperationEnum":"ACQUIRE"}`,
		"deep nesting in params":     `{"lockInstance":{"key":"k","lockType":"NACOS_LOCK","expiredTime":1,"params":{"a":` + deep + `}},"lockOperationEnum":"ACQUIRE"}`,
		"invalid UTF-8 in key":       "{\"lockInstance\":{\"key\":\"k\xff\xfe\",\"lockType\":\"NACOS_LOCK\",\"expiredTime\":100},\"lockOperationEnum\":\"ACQUIRE\"}",
		"trailing garbage":           `{"lockOperationEnum":"ACQUIRE"} {"again":1}`,
	}
	for name, body := range bodies {
		ctx, cancel := client.Timeout(5 * time.Second)
		m, err := c.RequestRaw(ctx, raw("LockOperationRequest", body))
		cancel()
		if err != nil {
			t.Fatalf("%s: transport error %v", name, err)
		}
		if _, ok := m.(*protocol.LockOperationResponse); !ok {
			t.Fatalf("%s: answered %T", name, m)
		}
	}

	// Raw streams that misbehave.
	cc, err := grpc.NewClient(ts.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	unary := pb.NewRequestClient(cc)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := unary.Request(ctx, raw("ServerCheckRequest", `{}`)); err != nil {
		t.Fatal(err)
	}
	// A stream that never sends setup is closed after SetupTimeout.
	silent, err := pb.NewBiRequestStreamClient(cc).RequestBiStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := silent.Recv(); err == nil {
		t.Fatal("a silent stream got a message instead of being closed")
	}
	// A stream that starts with something else is closed at once.
	wrong, _ := pb.NewBiRequestStreamClient(cc).RequestBiStream(ctx)
	_ = wrong.Send(raw("HealthCheckRequest", `{}`))
	if _, err := wrong.Recv(); err == nil {
		t.Fatal("a stream starting without setup was accepted")
	}
	// A proper stream, then a second setup on it and a second stream on the
	// same transport: the extra setup is ignored, the extra stream refused.
	st, _ := pb.NewBiRequestStreamClient(cc).RequestBiStream(ctx)
	setup := &pb.Payload{Metadata: &pb.Metadata{Type: "ConnectionSetupRequest"}, Body: &anypb.Any{Value: []byte(`{"clientVersion":"hostile","abilityTable":{"lock":true}}`)}}
	if err := st.Send(setup); err != nil {
		t.Fatal(err)
	}
	if ack, err := st.Recv(); err != nil || ack.GetMetadata().GetType() != "SetupAckRequest" {
		t.Fatalf("setup ack: %v %v", ack, err)
	}
	_ = st.Send(setup)
	second, _ := pb.NewBiRequestStreamClient(cc).RequestBiStream(ctx)
	_ = second.Send(setup)
	if _, err := second.Recv(); err == nil {
		t.Fatal("a second stream on one connection was registered")
	}
	if m, err := unary.Request(ctx, raw("HealthCheckRequest", `{}`)); err != nil || m.GetMetadata().GetType() != "HealthCheckResponse" {
		t.Fatalf("connection unusable after a repeated setup: %v %v", m, err)
	}
	cc.Close()
	_ = c.Close()

	// A waiter that never reads its stream while pushes pile up is dropped,
	// and the bystander never notices.
	lazy := dial(t, ts, client.WithoutAutoReply())
	holder := dial(t, ts)
	for i := range 20 {
		key := "lazy-" + string(rune('a'+i))
		lockCall(t, holder, protocol.OpAcquire, gen2(key, "NON_REENTRANT", "h", -1, -1))
		lockCall(t, lazy, protocol.OpAcquire, gen2(key, "NON_REENTRANT", "l", -1, 60000))
	}
	_ = holder.Close()
	_ = lazy.Close()
	if r := lockCall(t, good, protocol.OpRenew, gen2("bystander", "REENTRANT", "g:1", 60000, -1)); !r.Result {
		t.Fatal("the bystander lost its lock")
	}
	waitFor(t, 5*time.Second, func() bool { return ts.srv.reg.len() == 1 })

	deadline := time.Now().Add(10 * time.Second)
	for {
		g1, h1 := settle()
		if g1 <= g0+2 && h1 <= h0+16<<20 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("residue: goroutines %d -> %d, heap %d -> %d", g0, g1, h0, h1)
		}
	}
}
