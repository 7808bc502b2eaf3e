package gateway

import (
	"context"
	"net"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/types/known/anypb"

	"nacos-lockd/interop/client"
	"nacos-lockd/protocol"
	"nacos-lockd/protocol/pb"
	"nacos-lockd/replica/replicatest"
	"nacos-lockd/statemachine"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

type testServer struct {
	addr  string
	table *replicatest.Local
	srv   *Server
	stop  func() // graceful shutdown; waits for Serve to return
}

func startServer(t *testing.T, cfg Config) *testServer {
	t.Helper()
	return startServerLog(t, cfg, zerolog.Nop())
}

// testTransport is the transport the tests serve on unless one names its
// own: $NACOS_LOCKD_TEST_TRANSPORT (make test-go runs the whole package
// again on grpc, the transport that is not the default), else the default.
func testTransport() string { return os.Getenv("NACOS_LOCKD_TEST_TRANSPORT") }

func startServerLog(t *testing.T, cfg Config, log zerolog.Logger) *testServer {
	t.Helper()
	if cfg.Transport == "" {
		cfg.Transport = testTransport()
	}
	if cfg.Metrics == nil {
		cfg.Metrics = prometheus.NewRegistry() // exercised by every test
	}
	cfg.ListenAddr = "127.0.0.1:0"
	if cfg.ScanInterval == 0 {
		cfg.ScanInterval = 20 * time.Millisecond
	}
	srv, err := New(cfg, log)
	if err != nil {
		t.Fatalf("new gateway: %v", err)
	}
	table := replicatest.NewLocal(srv.Notify)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, lis, table) }()
	ts := &testServer{addr: lis.Addr().String(), table: table, srv: srv}
	var stopped bool
	ts.stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	}
	t.Cleanup(ts.stop)
	return ts
}

func dial(t *testing.T, ts *testServer, opt ...client.Option) *client.Client {
	t.Helper()
	ctx, cancel := client.Timeout(5 * time.Second)
	defer cancel()
	c, err := client.Dial(ctx, ts.addr, opt...)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func lockCall(t *testing.T, c *client.Client, op protocol.LockOp, li protocol.LockInstance) *protocol.LockOperationResponse {
	t.Helper()
	ctx, cancel := client.Timeout(5 * time.Second)
	defer cancel()
	r, err := c.Lock(ctx, op, li)
	if err != nil {
		t.Fatalf("%s: %v", op, err)
	}
	return r
}

func request(t *testing.T, c *client.Client, m protocol.Message) protocol.Message {
	t.Helper()
	ctx, cancel := client.Timeout(5 * time.Second)
	defer cancel()
	r, err := c.Request(ctx, m)
	if err != nil {
		t.Fatalf("request %s: %v", m.TypeName(), err)
	}
	return r
}

var (
	gen1 = func(key string, lease int64) protocol.LockInstance {
		return client.Instance(key, "NACOS_LOCK", "", client.Ms(lease), nil)
	}
	gen2 = func(key, typ, owner string, lease, wait int64) protocol.LockInstance {
		li := client.Instance(key, typ, owner, client.Ms(lease), client.Ms(wait))
		return li
	}
)

func TestHandshake(t *testing.T) {
	ts := startServer(t, Config{NodeID: "7"})
	c := dial(t, ts)
	if !regexp.MustCompile(`^\d{13}_127\.0\.0\.1_\d+_7$`).MatchString(c.ConnectionID()) {
		t.Fatalf("connection id %q does not follow <epochMillis>_<ip>_<port>_<node>", c.ConnectionID())
	}
	if got := c.Abilities(); len(got) != 1 || !got["lock"] {
		t.Fatalf("ability table %v, want exactly lock:true", got)
	}
	if r, ok := request(t, c, &protocol.HealthCheckRequest{}).(*protocol.HealthCheckResponse); !ok || r.ResultCode != 200 {
		t.Fatalf("health check: %#v", r)
	}
}

func TestUnregisteredConnectionGets301(t *testing.T) {
	ts := startServer(t, Config{})
	c := dial(t, ts, client.WithoutSetup())
	for _, m := range []protocol.Message{
		&protocol.HealthCheckRequest{},
		&protocol.LockOperationRequest{LockInstance: ptr(gen1("k", 1000)), LockOperationEnum: protocol.OpAcquire},
	} {
		r, ok := request(t, c, m).(*protocol.ErrorResponse)
		if !ok || r.ResultCode != 500 || r.ErrorCode != 301 || r.Message != "Connection is unregistered." {
			t.Fatalf("%s on unregistered connection: %#v", m.TypeName(), r)
		}
	}
	if ts.table.Stats().Locks != 0 {
		t.Fatal("an unregistered connection changed the lock table")
	}
}

func ptr[T any](v T) *T { return &v }

func raw(typ, body string) *pb.Payload {
	return &pb.Payload{Metadata: &pb.Metadata{Type: typ}, Body: &anypb.Any{Value: []byte(body)}}
}

func TestErrorResponses(t *testing.T) {
	ts := startServer(t, Config{})
	c := dial(t, ts)
	tests := []struct {
		name    string
		payload *pb.Payload
		code    int
	}{
		{"unknown type", raw("NoSuchRequest", `{}`), 302},
		{"response type sent as a request", raw("HealthCheckResponse", `{"resultCode":200}`), 302},
		{"unparseable body", raw("HealthCheckRequest", `{not json`), 502},
		{"array body", raw("HealthCheckRequest", `[1,2]`), 502},
		{"no metadata", &pb.Payload{}, 502},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := client.Timeout(5 * time.Second)
			defer cancel()
			m, err := c.RequestRaw(ctx, tt.payload)
			if err != nil {
				t.Fatalf("request: %v", err)
			}
			r, ok := m.(*protocol.ErrorResponse)
			if !ok || r.ErrorCode != tt.code || r.ResultCode == 200 || r.Message == "" {
				t.Fatalf("got %#v, want ErrorResponse %d", m, tt.code)
			}
		})
	}
}

func TestLockValidation(t *testing.T) {
	ts := startServer(t, Config{MaxKeyLength: 64, MaxOwnerLength: 16})
	c := dial(t, ts)
	tests := []struct {
		name string
		body string // raw JSON body of a LockOperationRequest
		want string
	}{
		{"missing lockInstance", `{"lockOperationEnum":"ACQUIRE"}`, "LockInstance cannot be null"},
		{"null lockInstance with a bad op", `{"lockInstance":null,"lockOperationEnum":"NOPE"}`, "LockInstance cannot be null"},
		{"missing key", `{"lockInstance":{"lockType":"NACOS_LOCK","expiredTime":1000},"lockOperationEnum":"ACQUIRE"}`, "Lock key cannot be null or empty"},
		{"empty key", `{"lockInstance":{"key":"","lockType":"NACOS_LOCK","expiredTime":1000},"lockOperationEnum":"ACQUIRE"}`, "Lock key cannot be null or empty"},
		{"key over the limit", `{"lockInstance":{"key":"` + strings.Repeat("k", 65) + `","lockType":"NACOS_LOCK","expiredTime":1000},"lockOperationEnum":"ACQUIRE"}`, "Lock key is 65 bytes, longer than the limit of 64 bytes"},
		{"owner over the limit", `{"lockInstance":{"key":"k","owner":"` + strings.Repeat("o", 17) + `","lockType":"REENTRANT","expiredTime":1000},"lockOperationEnum":"ACQUIRE"}`, "Lock owner is 17 bytes, longer than the limit of 16 bytes"},
		{"missing type", `{"lockInstance":{"key":"k","expiredTime":1000},"lockOperationEnum":"ACQUIRE"}`, "Invalid lock type: null, expected REENTRANT, NON_REENTRANT or NACOS_LOCK"},
		{"unknown type", `{"lockInstance":{"key":"k","lockType":"FAIR","expiredTime":1000},"lockOperationEnum":"ACQUIRE"}`, "Invalid lock type: FAIR, expected REENTRANT, NON_REENTRANT or NACOS_LOCK"},
		{"type is checked before expiredTime", `{"lockInstance":{"key":"k","lockType":"x","expiredTime":0},"lockOperationEnum":"ACQUIRE"}`, "Invalid lock type: x, expected REENTRANT, NON_REENTRANT or NACOS_LOCK"},
		{"acquire with zero lease", `{"lockInstance":{"key":"k","lockType":"NACOS_LOCK","expiredTime":0},"lockOperationEnum":"ACQUIRE"}`, "Lock expiredTime must be non-zero for ACQUIRE"},
		{"acquire without lease", `{"lockInstance":{"key":"k","lockType":"NACOS_LOCK"},"lockOperationEnum":"ACQUIRE"}`, "Lock expiredTime is required for ACQUIRE"},
		{"renew with zero lease", `{"lockInstance":{"key":"k","lockType":"REENTRANT","owner":"o","expiredTime":0},"lockOperationEnum":"RENEW"}`, "Lock expiredTime must be non-zero for RENEW"},
		{"missing op", `{"lockInstance":{"key":"k","lockType":"NACOS_LOCK","expiredTime":1000}}`, "There is no Handler of such operations!"},
		{"unknown op", `{"lockInstance":{"key":"k","lockType":"NACOS_LOCK","expiredTime":1000},"lockOperationEnum":"STEAL"}`, "There is no Handler of such operations!"},
		{"internal op EXPIRE", `{"lockInstance":{"key":"k","lockType":"NACOS_LOCK","expiredTime":1000},"lockOperationEnum":"EXPIRE"}`, "There is no Handler of such operations!"},
		{"internal op CLEANUP_CONNECTION", `{"lockInstance":{"key":"k","lockType":"NACOS_LOCK","expiredTime":1000},"lockOperationEnum":"CLEANUP_CONNECTION"}`, "There is no Handler of such operations!"},
		{"body not JSON", `lock it please`, "Invalid LockOperationRequest body: "},
		{"JSON array body", `[{"lockOperationEnum":"ACQUIRE"}]`, "Invalid LockOperationRequest body: "},
		{"lease of the wrong type", `{"lockInstance":{"key":"k","lockType":"NACOS_LOCK","expiredTime":"soon"},"lockOperationEnum":"ACQUIRE"}`, "Invalid LockOperationRequest body: "},
		{"lease beyond int64", `{"lockInstance":{"key":"k","lockType":"NACOS_LOCK","expiredTime":1e30},"lockOperationEnum":"ACQUIRE"}`, "Invalid LockOperationRequest body: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := client.Timeout(5 * time.Second)
			defer cancel()
			m, err := c.RequestRaw(ctx, raw("LockOperationRequest", tt.body))
			if err != nil {
				t.Fatalf("request: %v", err)
			}
			r, ok := m.(*protocol.LockOperationResponse)
			if !ok {
				t.Fatalf("got %T %#v, want LockOperationResponse", m, m)
			}
			if r.ResultCode != 500 || r.ErrorCode != 0 || r.Result || !strings.HasPrefix(r.Message, tt.want) {
				t.Fatalf("got %d/%d result=%v %q, want 500/0 false %q", r.ResultCode, r.ErrorCode, r.Result, r.Message, tt.want)
			}
			if r.LockResult == nil || r.LockResult.Success {
				t.Fatalf("lockResult %+v", r.LockResult)
			}
		})
	}
	t.Run("a 5 MB key", func(t *testing.T) {
		// Generous: 5 MB through JSON under the race detector on a busy box.
		ctx, cancel := client.Timeout(60 * time.Second)
		defer cancel()
		r, err := c.Lock(ctx, protocol.OpAcquire, gen1(strings.Repeat("x", 5<<20), 1000))
		if err != nil {
			t.Fatal(err)
		}
		if r.ResultCode != 500 || !strings.Contains(r.Message, "5242880 bytes") {
			t.Fatalf("got %d %q", r.ResultCode, r.Message)
		}
	})
	if st := ts.table.Stats(); st.Locks != 0 || st.Applied != 0 {
		t.Fatalf("rejected requests reached the table: %+v", st)
	}
	// The connection is still usable after all that.
	if r := lockCall(t, c, protocol.OpAcquire, gen1("k", 1000)); !r.Result {
		t.Fatalf("acquire after bad input: %+v", r)
	}
}

func TestGen1AcquireRefuseRelease(t *testing.T) {
	ts := startServer(t, Config{})
	a, b := dial(t, ts), dial(t, ts)
	r := lockCall(t, a, protocol.OpAcquire, gen1("order", 60000))
	if r.ResultCode != 200 || !r.Result || r.LockResult == nil || !r.LockResult.Success ||
		r.LockResult.ReentrantCount != 1 || r.LockResult.WaitPosition != -1 || r.LockResult.FencingToken == 0 {
		t.Fatalf("acquire: %+v %+v", r, r.LockResult)
	}
	r = lockCall(t, b, protocol.OpAcquire, gen1("order", 60000))
	if r.ResultCode != 200 || r.Result || r.LockResult.ErrorMessage != "Lock is held by another owner" {
		t.Fatalf("second acquire: %+v %+v", r, r.LockResult)
	}
	// Gen 1 locks belong to the connection: another connection cannot release.
	r = lockCall(t, b, protocol.OpRelease, gen1("order", -1))
	if r.ResultCode != 200 || r.Result || r.LockResult.ErrorMessage != "Unlock failed: not held by this owner" {
		t.Fatalf("release by another connection: %+v %+v", r, r.LockResult)
	}
	if r := lockCall(t, a, protocol.OpRelease, gen1("order", -1)); !r.Result || r.LockResult.ReentrantCount != 0 {
		t.Fatalf("release: %+v", r)
	}
	if r := lockCall(t, b, protocol.OpRelease, gen1("order", -1)); r.Result || r.LockResult.ErrorMessage != "Lock does not exist or already expired" {
		t.Fatalf("release of a free lock: %+v", r.LockResult)
	}
	if r := lockCall(t, b, protocol.OpAcquire, gen1("order", 60000)); !r.Result {
		t.Fatalf("re-acquire: %+v", r)
	}
}

func TestLeaseRules(t *testing.T) {
	ts := startServer(t, Config{DefaultLease: 7 * time.Second, MaxLease: 20 * time.Second})
	c := dial(t, ts)
	for _, tt := range []struct {
		key  string
		sent int64
		want int64
	}{
		{"default", -1, 7000},
		{"very negative", -1 << 62, 7000},
		{"explicit", 1500, 1500},
		{"one ms", 1, 1},
		{"capped", 1 << 62, 20000},
	} {
		before := time.Now().UnixMilli()
		if r := lockCall(t, c, protocol.OpAcquire, gen1(tt.key, tt.sent)); !r.Result {
			t.Fatalf("%s: acquire refused", tt.key)
		}
		after := time.Now().UnixMilli()
		end := ts.table.Lock(statemachine.KindNacosLock, tt.key).LeaseEndMs
		if tt.want > 1 && (end < before+tt.want || end > after+tt.want) {
			t.Fatalf("%s: lease end %d, want %d..%d", tt.key, end, before+tt.want, after+tt.want)
		}
	}
}

func TestRenewAnswersWithResultOnly(t *testing.T) {
	ts := startServer(t, Config{})
	c := dial(t, ts)
	lockCall(t, c, protocol.OpAcquire, gen2("k", "REENTRANT", "me:1", -1, -1))
	r := lockCall(t, c, protocol.OpRenew, gen2("k", "REENTRANT", "me:1", -1, -1))
	if r.ResultCode != 200 || !r.Result || r.LockResult != nil {
		t.Fatalf("renew: %+v", r)
	}
	r = lockCall(t, c, protocol.OpRenew, gen2("k", "REENTRANT", "other:1", -1, -1))
	if r.ResultCode != 200 || r.Result || r.LockResult != nil {
		t.Fatalf("renew by another owner: %+v", r)
	}
}

func TestPushWakesQueuedWaiter(t *testing.T) {
	ts := startServer(t, Config{})
	holder, waiter := dial(t, ts), dial(t, ts)
	if r := lockCall(t, holder, protocol.OpAcquire, gen2("job", "REENTRANT", "h:1", -1, 300000)); !r.Result {
		t.Fatalf("holder acquire: %+v", r)
	}
	r := lockCall(t, waiter, protocol.OpAcquire, gen2("job", "REENTRANT", "w:7", -1, 300000))
	if r.Result || r.LockResult.WaitPosition != 0 || r.LockResult.ErrorMessage != "" {
		t.Fatalf("waiter acquire: %+v", r.LockResult)
	}
	if r := lockCall(t, holder, protocol.OpRelease, gen2("job", "REENTRANT", "h:1", 0, -1)); !r.Result {
		t.Fatalf("release: %+v", r)
	}
	ctx, cancel := client.Timeout(3 * time.Second)
	defer cancel()
	n, err := client.WaitPush[*protocol.LockNotificationRequest](ctx, waiter)
	if err != nil {
		t.Fatalf("no notification: %v", err)
	}
	if n.LockKey != "job" || n.LockType != "REENTRANT" || n.Owner != "w:7" || n.NotificationType != "AVAILABLE" || n.RequestID == "" {
		t.Fatalf("notification %+v", n)
	}
	li := gen2("job", "REENTRANT", "w:7", -1, 300000)
	li.WaiterRetry = true
	r = lockCall(t, waiter, protocol.OpAcquire, li)
	if !r.Result || r.LockResult.ReentrantCount != 1 || r.LockResult.FencingToken == 0 {
		t.Fatalf("claim after push: %+v", r.LockResult)
	}
	select {
	case m := <-holder.Pushes():
		t.Fatalf("the holder got a push: %#v", m)
	default:
	}
}

func TestDisconnectReleasesLocks(t *testing.T) {
	ts := startServer(t, Config{})
	a, b := dial(t, ts), dial(t, ts)
	lockCall(t, a, protocol.OpAcquire, gen2("k", "REENTRANT", "a:1", -1, -1))
	lockCall(t, a, protocol.OpAcquire, gen2("k", "REENTRANT", "a:1", -1, -1))
	r := lockCall(t, b, protocol.OpAcquire, gen2("k", "REENTRANT", "b:1", -1, 60000))
	if r.LockResult.WaitPosition != 0 {
		t.Fatalf("b not queued: %+v", r.LockResult)
	}
	_ = a.Close()
	ctx, cancel := client.Timeout(3 * time.Second)
	defer cancel()
	if _, err := client.WaitPush[*protocol.LockNotificationRequest](ctx, b); err != nil {
		t.Fatalf("b not notified after a disconnected: %v", err)
	}
	if l := ts.table.Lock(statemachine.KindReentrant, "k"); l.Owner != "b:1" {
		t.Fatalf("lock after disconnect: %+v", l)
	}
}

func TestDisconnectGracePeriod(t *testing.T) {
	ts := startServer(t, Config{DisconnectGrace: 400 * time.Millisecond})
	a := dial(t, ts)
	lockCall(t, a, protocol.OpAcquire, gen1("k", -1))
	_ = a.Close()
	time.Sleep(150 * time.Millisecond)
	if l := ts.table.Lock(statemachine.KindNacosLock, "k"); !l.Found {
		t.Fatal("lock released before the grace period ended")
	}
	waitFor(t, 3*time.Second, func() bool { return !ts.table.Lock(statemachine.KindNacosLock, "k").Found })
}

func TestReaperExpiresLeases(t *testing.T) {
	ts := startServer(t, Config{})
	c := dial(t, ts)
	lockCall(t, c, protocol.OpAcquire, gen1("short", 100))
	waitFor(t, 3*time.Second, func() bool { return ts.table.Stats().Locks == 0 })
}

func TestShutdownResetsClients(t *testing.T) {
	ts := startServer(t, Config{AdvertiseIP: "10.0.0.9", MainPort: 8848})
	c := dial(t, ts)
	lockCall(t, c, protocol.OpAcquire, gen1("kept", 600000))
	go ts.stop()
	ctx, cancel := client.Timeout(5 * time.Second)
	defer cancel()
	r, err := client.WaitPush[*protocol.ConnectResetRequest](ctx, c)
	if err != nil {
		t.Fatalf("no ConnectResetRequest: %v", err)
	}
	if r.ServerIP != "10.0.0.9" || r.ServerPort != "8848" || r.RequestID == "" {
		t.Fatalf("reset %+v", r)
	}
	waitFor(t, 5*time.Second, func() bool { return ts.srv.reg.len() == 0 })
	// Shutdown is not the client leaving: the lock stays until its lease ends.
	time.Sleep(100 * time.Millisecond)
	if !ts.table.Lock(statemachine.KindNacosLock, "kept").Found {
		t.Fatal("shutdown released a client's lock")
	}
}

// A reset client keeps its stream until it leaves: ending the streams at once
// races the client's own switch (the 3.0.0 Java client then switches twice,
// losing locks taken through the connection it made first).
func TestShutdownWaitsForResetClientsToLeave(t *testing.T) {
	ts := startServer(t, Config{ShutdownGrace: time.Minute, ResetDrain: 30 * time.Second})
	c := dial(t, ts)
	stopped := make(chan struct{})
	go func() {
		ts.stop()
		close(stopped)
	}()
	ctx, cancel := client.Timeout(5 * time.Second)
	defer cancel()
	if _, err := client.WaitPush[*protocol.ConnectResetRequest](ctx, c); err != nil {
		t.Fatalf("no ConnectResetRequest: %v", err)
	}
	select {
	case <-stopped:
		t.Fatal("the server stopped while the reset client was still connected")
	case <-time.After(300 * time.Millisecond):
	}
	if r, ok := request(t, c, &protocol.HealthCheckRequest{}).(*protocol.HealthCheckResponse); !ok || !r.OK() {
		t.Fatalf("the reset client's connection no longer answers health checks: %+v", r)
	}
	_ = c.Close() // the client has moved elsewhere
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("the server did not stop once the reset client had left")
	}
}

func TestShutdownDrainIsBounded(t *testing.T) {
	ts := startServer(t, Config{ShutdownGrace: time.Minute, ResetDrain: 200 * time.Millisecond})
	dial(t, ts) // never leaves: this server is its only one
	stopped := make(chan struct{})
	go func() {
		ts.stop()
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-time.After(20 * time.Second):
		t.Fatal("shutdown waited past its drain bound for a client that never leaves")
	}
	if n := ts.srv.reg.len(); n != 0 {
		t.Fatalf("%d connections left after shutdown", n)
	}
}

func TestSlowReaderIsDropped(t *testing.T) {
	ts := startServer(t, Config{PushQueue: 1})
	holder := dial(t, ts)
	waiter := dial(t, ts, client.WithoutAutoReply())
	// Fill the waiter's push queue faster than a stream can drain it by
	// handing it many locks at once.
	for i := range 50 {
		key := "k" + string(rune('a'+i%26)) + string(rune('a'+i/26))
		lockCall(t, holder, protocol.OpAcquire, gen2(key, "NON_REENTRANT", "h", -1, -1))
		lockCall(t, waiter, protocol.OpAcquire, gen2(key, "NON_REENTRANT", "w", -1, 60000))
	}
	_ = holder.Close() // cleanup hands all 50 locks to the waiter in one apply
	waitFor(t, 5*time.Second, func() bool { return ts.table.Stats().Held == 0 || ts.srv.reg.len() == 0 })
}

func waitFor(t *testing.T, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in time")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
