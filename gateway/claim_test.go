package gateway

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"

	"nacos-lockd/interop/client"
	"nacos-lockd/protocol"
	"nacos-lockd/replica"
	"nacos-lockd/statemachine"
	"nacos-lockd/statemachine/lockview"
	"nacos-lockd/storage"
)

// startNodeServer serves the gateway over a real one-replica Raft node
// (window: RaftConfig.CoalesceWindow; negative turns batching off).
func startNodeServer(t *testing.T, window time.Duration) (string, *Server, *replica.Node) {
	t.Helper()
	return startNodeServerOn(t, window, nil)
}

// startNodeServerOn is startNodeServer with the gateway serving wrap(node)
// (nil: the node itself).
func startNodeServerOn(t *testing.T, window time.Duration, wrap func(*replica.Node) Table) (string, *Server, *replica.Node) {
	t.Helper()
	addr, srv, node, _ := serveNode(t, window, wrap)
	return addr, srv, node
}

// serveNode is startNodeServerOn that also returns stop, which ends Serve
// (the gateway's graceful shutdown) and returns its error, the node still
// open. Cleanup calls it too.
func serveNode(t *testing.T, window time.Duration, wrap func(*replica.Node) Table) (string, *Server, *replica.Node, func() error) {
	t.Helper()
	return serveNodeWith(t, window, wrap, nil)
}

// serveNodeWith is serveNode with the gateway's Config changed by set
// first (nil: the defaults).
func serveNodeWith(t *testing.T, window time.Duration, wrap func(*replica.Node) Table, set func(*Config)) (string, *Server, *replica.Node, func() error) {
	t.Helper()
	cfg := Config{Metrics: prometheus.NewRegistry(), ListenAddr: "127.0.0.1:0", Transport: testTransport()}
	if set != nil {
		set(&cfg)
	}
	srv, err := New(cfg, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	db, err := storage.Open(storage.Config{Dir: filepath.Join(dir, "locks")})
	if err != nil {
		t.Fatal(err)
	}
	raftLis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	raftAddr := raftLis.Addr().String()
	raftLis.Close()
	node, err := replica.Start(replica.RaftConfig{NodeHostDir: filepath.Join(dir, "raft"), RaftAddress: raftAddr,
		CoalesceWindow: window}, db, srv.Notify, zerolog.Nop())
	if err != nil {
		db.Close()
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := node.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	// A single node of this build: what the version gate raises at once
	// (package server), and what claims from a read need.
	if err := node.ProposeLevel(ctx, statemachine.MaxLevel); err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	var table Table = node
	if wrap != nil {
		table = wrap(node)
	}
	go func() { done <- srv.Serve(sctx, lis, table) }()
	var once sync.Once
	var serveErr error
	stopServe := func() error {
		once.Do(func() {
			stop()
			serveErr = <-done
		})
		return serveErr
	}
	t.Cleanup(func() {
		if err := stopServe(); err != nil {
			t.Errorf("serve: %v", err)
		}
		node.Close()
		db.Close()
	})
	return lis.Addr().String(), srv, node, stopServe
}

// handOff queues waiter behind holder on key, releases, and waits for the
// waiter's push.
func handOff(t *testing.T, holder, waiter *client.Client, key, waiterOwner string) {
	t.Helper()
	if r := lockCall(t, holder, protocol.OpAcquire, gen2(key, "REENTRANT", "h:1", -1, 300000)); !r.Result {
		t.Fatalf("holder acquire: %+v", r.LockResult)
	}
	if r := lockCall(t, waiter, protocol.OpAcquire, gen2(key, "REENTRANT", waiterOwner, -1, 300000)); r.Result || r.LockResult.WaitPosition != 0 {
		t.Fatalf("waiter acquire: %+v", r.LockResult)
	}
	if r := lockCall(t, holder, protocol.OpRelease, gen2(key, "REENTRANT", "h:1", 0, -1)); !r.Result {
		t.Fatalf("release: %+v", r.LockResult)
	}
	ctx, cancel := client.Timeout(5 * time.Second)
	defer cancel()
	if _, err := client.WaitPush[*protocol.LockNotificationRequest](ctx, waiter); err != nil {
		t.Fatalf("no push: %v", err)
	}
}

// A claim answered from a read gives exactly what the claiming ACQUIRE
// gives, and its record is committed ahead of what the client sends next:
// a re-entry right after it counts 2, a cancel right after it keeps the
// lock, and the table ends up with the grant claimed.
func TestClaimFromReadIsRecordedBeforeWhatFollows(t *testing.T) {
	addr, srv, node := startNodeServer(t, 0)
	ts := &testServer{addr: addr}
	holder, waiter := dial(t, ts), dial(t, ts)
	handOff(t, holder, waiter, "job", "w:7")
	grant, err := node.Lock(statemachine.KindReentrant, "job")
	if err != nil || !grant.Unclaimed {
		t.Fatalf("before the claim: %+v %v", grant, err)
	}
	claim := gen2("job", "REENTRANT", "w:7", -1, 300000)
	claim.WaiterRetry = true
	r := lockCall(t, waiter, protocol.OpAcquire, claim)
	if !r.Result || r.LockResult.ReentrantCount != 1 || r.LockResult.FencingToken != grant.Token {
		t.Fatalf("claim: %+v, want count 1 and token %d", r.LockResult, grant.Token)
	}
	if got := testutil.ToFloat64(srv.m.readClaims.WithLabelValues("answered")); got != 1 {
		t.Fatalf("claims answered from a read: %v, want 1", got)
	}
	// At once, before anything else: a re-entry, then a cancel.
	if r := lockCall(t, waiter, protocol.OpAcquire, gen2("job", "REENTRANT", "w:7", -1, 300000)); !r.Result || r.LockResult.ReentrantCount != 2 {
		t.Fatalf("re-entry right after the claim: %+v", r.LockResult)
	}
	if r := lockCall(t, waiter, protocol.OpCancelWait, gen2("job", "REENTRANT", "w:7", -1, 300000)); r.ResultCode != 200 {
		t.Fatalf("cancel: %+v", r)
	}
	l, err := node.Lock(statemachine.KindReentrant, "job")
	if err != nil || l.Owner != "w:7" || l.Unclaimed || l.Count != 2 || l.Token != grant.Token {
		t.Fatalf("after claim, re-entry and cancel: %+v %v", l, err)
	}
	for want := 1; want >= 0; want-- {
		if r := lockCall(t, waiter, protocol.OpRelease, gen2("job", "REENTRANT", "w:7", 0, -1)); !r.Result || r.LockResult.ReentrantCount != want {
			t.Fatalf("release to %d: %+v", want, r.LockResult)
		}
	}
	if got := testutil.ToFloat64(srv.m.readClaims.WithLabelValues("record_failed")); got != 0 {
		t.Fatalf("failed records: %v", got)
	}
}

// The owner of an unclaimed grant sends a fresh ACQUIRE from another
// connection (a client that reconnected and re-enters, or asks again). Its
// answer depends on whether the grant's claim was answered on the first
// connection, whose record may be behind it in the log, so the gateway
// proposes it again until the grant is claimed (then it is a re-entry,
// count 2, and the lock moves to the new connection) or gone (then it is
// an ACQUIRE like any other: here a fresh grant with a new token).
func TestAcquireFromAnotherConnectionWaitsForTheGrantsClaim(t *testing.T) {
	addr, srv, node := startNodeServer(t, 0)
	ts := &testServer{addr: addr}
	for _, claimed := range []bool{true, false} {
		key := fmt.Sprintf("job-%v", claimed)
		holder, waiter, moved := dial(t, ts), dial(t, ts), dial(t, ts)
		handOff(t, holder, waiter, key, "w:7")
		grant, err := node.Lock(statemachine.KindReentrant, key)
		if err != nil || !grant.Unclaimed {
			t.Fatalf("before the claim: %+v %v", grant, err)
		}
		pendingBefore := testutil.ToFloat64(srv.m.claimPending.WithLabelValues("acquire"))
		type answer struct {
			r   *protocol.LockOperationResponse
			err error
		}
		done := make(chan answer, 1)
		go func() {
			ctx, cancel := client.Timeout(5 * time.Second)
			defer cancel()
			r, err := moved.Lock(ctx, protocol.OpAcquire, gen2(key, "REENTRANT", "w:7", -1, -1))
			done <- answer{r, err}
		}()
		select {
		case a := <-done:
			t.Fatalf("claimed %v: the ACQUIRE from another connection was answered before the grant was claimed or gone: %+v %v", claimed, a.r, a.err)
		case <-time.After(300 * time.Millisecond):
		}
		if claimed {
			claim := gen2(key, "REENTRANT", "w:7", -1, 300000)
			claim.WaiterRetry = true
			if r := lockCall(t, waiter, protocol.OpAcquire, claim); !r.Result || r.LockResult.ReentrantCount != 1 {
				t.Fatalf("claim: %+v", r.LockResult)
			}
		} else if r := lockCall(t, waiter, protocol.OpCancelWait, gen2(key, "REENTRANT", "w:7", -1, 300000)); r.ResultCode != 200 {
			t.Fatalf("cancel: %+v", r)
		}
		var a answer
		select {
		case a = <-done:
		case <-time.After(5 * time.Second):
			t.Fatalf("claimed %v: the ACQUIRE from another connection never answered", claimed)
		}
		if a.err != nil || !a.r.Result {
			t.Fatalf("claimed %v: %+v %v", claimed, a.r, a.err)
		}
		l, err := node.Lock(statemachine.KindReentrant, key)
		if err != nil || l.Owner != "w:7" || l.Unclaimed || l.ConnID != moved.ConnectionID() {
			t.Fatalf("claimed %v: %+v %v", claimed, l, err)
		}
		if got := testutil.ToFloat64(srv.m.claimPending.WithLabelValues("acquire")) - pendingBefore; got < 2 {
			t.Fatalf("claimed %v: %v proposals counted as claim_pending over 300 ms; want several", claimed, got)
		}
		if claimed && (a.r.LockResult.ReentrantCount != 2 || a.r.LockResult.FencingToken != grant.Token || l.Count != 2) {
			t.Fatalf("re-entry after the claim: %+v, lock %+v; want count 2 and token %d", a.r.LockResult, l, grant.Token)
		}
		if !claimed && (a.r.LockResult.ReentrantCount != 1 || a.r.LockResult.FencingToken <= grant.Token) {
			t.Fatalf("acquire after the grant was given up: %+v; want count 1 and a token above %d", a.r.LockResult, grant.Token)
		}
	}
}

// The owner's CANCEL_WAIT from a third connection, while its grant is
// unclaimed on the waiter's, is not answered until the grant is claimed:
// the claim may already have been answered from a read elsewhere, so
// giving the grant up would take the lock from a client told it holds it.
// Once claimed, the cancel leaves the lock held (the owner holds it; it
// no longer waits).
func TestCancelFromAnotherConnectionWaitsForTheGrantsClaim(t *testing.T) {
	addr, srv, node := startNodeServer(t, 0)
	ts := &testServer{addr: addr}
	holder, waiter, moved := dial(t, ts), dial(t, ts), dial(t, ts)
	handOff(t, holder, waiter, "job", "w:7")
	done := make(chan *protocol.LockOperationResponse, 1)
	go func() {
		ctx, cancel := client.Timeout(5 * time.Second)
		defer cancel()
		r, err := moved.Lock(ctx, protocol.OpCancelWait, gen2("job", "REENTRANT", "w:7", -1, 300000))
		if err != nil {
			r = nil
		}
		done <- r
	}()
	select {
	case r := <-done:
		t.Fatalf("the CANCEL_WAIT from another connection was answered before the grant was claimed: %+v", r)
	case <-time.After(300 * time.Millisecond):
	}
	claim := gen2("job", "REENTRANT", "w:7", -1, 300000)
	claim.WaiterRetry = true
	if r := lockCall(t, waiter, protocol.OpAcquire, claim); !r.Result || r.LockResult.ReentrantCount != 1 {
		t.Fatalf("claim: %+v", r.LockResult)
	}
	var r *protocol.LockOperationResponse
	select {
	case r = <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the CANCEL_WAIT never answered after the claim")
	}
	if r == nil || r.ResultCode != 200 {
		t.Fatalf("cancel after the claim: %+v", r)
	}
	if l, err := node.Lock(statemachine.KindReentrant, "job"); err != nil || l.Owner != "w:7" || l.Unclaimed || l.Count != 1 {
		t.Fatalf("the cancel after the claim gave the lock up: %+v %v", l, err)
	}
	if got := testutil.ToFloat64(srv.m.claimPending.WithLabelValues("cancel_wait")); got < 2 {
		t.Fatalf("%v cancels counted as claim_pending over 300 ms; want several", got)
	}
}

// A command that waits for the owner's grant to be claimed elsewhere waits
// only as long as the request may take: when its deadline passes with the
// grant still unclaimed, it is answered as a write that did not commit
// (it changed nothing), and the grant is left as it was.
func TestCommandWaitingForAClaimEndsAtTheRequestDeadline(t *testing.T) {
	addr, srv, node, _ := serveNodeWith(t, 0, nil, func(c *Config) { c.RequestTimeout = 700 * time.Millisecond })
	ts := &testServer{addr: addr}
	holder, waiter, moved := dial(t, ts), dial(t, ts), dial(t, ts)
	handOff(t, holder, waiter, "job", "w:7")
	grant, err := node.Lock(statemachine.KindReentrant, "job")
	if err != nil || !grant.Unclaimed {
		t.Fatalf("before: %+v %v", grant, err)
	}
	start := time.Now()
	r := lockCall(t, moved, protocol.OpAcquire, gen2("job", "REENTRANT", "w:7", -1, -1))
	if took := time.Since(start); took < 600*time.Millisecond {
		t.Fatalf("answered after %v, before the request's deadline: %+v", took, r)
	}
	if r.ResultCode != 500 || r.Result || r.Message != writeFailure(protocol.OpAcquire) {
		t.Fatalf("an ACQUIRE that timed out waiting for the claim: %+v; want resultCode 500 %q", r, writeFailure(protocol.OpAcquire))
	}
	if l, err := node.Lock(statemachine.KindReentrant, "job"); err != nil || l.Owner != "w:7" || !l.Unclaimed ||
		l.Count != grant.Count || l.Token != grant.Token || l.ConnID != waiter.ConnectionID() {
		t.Fatalf("the timed-out ACQUIRE changed the grant: %+v %v; was %+v", l, err, grant)
	}
	if got := testutil.ToFloat64(srv.m.requests.WithLabelValues("acquire", "unavailable")); got != 1 {
		t.Fatalf("acquires counted unavailable: %v, want 1", got)
	}
	// The grant is still the waiter's to claim.
	claim := gen2("job", "REENTRANT", "w:7", -1, 300000)
	claim.WaiterRetry = true
	if r := lockCall(t, waiter, protocol.OpAcquire, claim); !r.Result || r.LockResult.ReentrantCount != 1 || r.LockResult.FencingToken != grant.Token {
		t.Fatalf("claim after the timed-out ACQUIRE: %+v", r.LockResult)
	}
}

// A claim answered from a read just before a graceful shutdown is recorded
// before the clients are told to move, and one answered after the reset
// (the client claims before it leaves) before shutdown returns: a record
// waits out the coalesce window for company, and would otherwise fail
// when the Raft node closes, taking the lock from a client that was told
// it holds it.
func TestShutdownRecordsClaimsAnsweredFromARead(t *testing.T) {
	addr, srv, node, stop := serveNode(t, time.Second, nil) // the longest window
	ts := &testServer{addr: addr}
	holder, waiter := dial(t, ts), dial(t, ts)
	handOff(t, holder, waiter, "job", "w:7")
	handOff(t, holder, waiter, "later", "w:7")
	claimOf := func(key string) protocol.LockInstance {
		c := gen2(key, "REENTRANT", "w:7", -1, 300000)
		c.WaiterRetry = true
		return c
	}
	if r := lockCall(t, waiter, protocol.OpAcquire, claimOf("job")); !r.Result || r.LockResult.ReentrantCount != 1 {
		t.Fatalf("claim: %+v", r.LockResult)
	}
	if l, err := node.Lock(statemachine.KindReentrant, "job"); err != nil || !l.Unclaimed {
		t.Fatalf("the claim's record is no longer waiting for company, so this test cannot tell: %+v %v", l, err)
	}
	stopped := make(chan error, 1)
	go func() { stopped <- stop() }()
	for _, c := range []*client.Client{holder, waiter} {
		ctx, cancel := client.Timeout(10 * time.Second)
		_, err := client.WaitPush[*protocol.ConnectResetRequest](ctx, c)
		cancel()
		if err != nil {
			t.Fatalf("no ConnectResetRequest: %v", err)
		}
		if c == waiter {
			if r := lockCall(t, waiter, protocol.OpAcquire, claimOf("later")); !r.Result || r.LockResult.ReentrantCount != 1 {
				t.Fatalf("claim after the reset: %+v", r.LockResult)
			}
			if l, err := node.Lock(statemachine.KindReentrant, "later"); err != nil || !l.Unclaimed {
				t.Fatalf("the later claim's record is no longer waiting for company, so this test cannot tell: %+v %v", l, err)
			}
		}
		_ = c.Close() // moved elsewhere
	}
	if err := <-stopped; err != nil {
		t.Fatalf("serve: %v", err)
	}
	for _, key := range []string{"job", "later"} {
		l, err := node.Lock(statemachine.KindReentrant, key)
		if err != nil || l.Owner != "w:7" || l.Unclaimed {
			t.Fatalf("%s after the shutdown: %+v %v, want the grant claimed by w:7", key, l, err)
		}
	}
	if got := testutil.ToFloat64(srv.m.readClaims.WithLabelValues("answered")); got != 2 {
		t.Fatalf("claims answered from a read: %v, want 2", got)
	}
	if got := testutil.ToFloat64(srv.m.readClaims.WithLabelValues("record_failed")); got != 0 {
		t.Fatalf("failed records: %v", got)
	}
}

// afterRead runs then right after each linearizable read (without error),
// as commands committed between a claim's read and its record would.
type afterRead struct {
	*replica.Node
	then func(ctx context.Context, kind statemachine.Kind, key string, l lockview.Lock)
}

func (a afterRead) LockLinearizable(ctx context.Context, kind statemachine.Kind, key string) (lockview.Lock, error) {
	l, err := a.Node.LockLinearizable(ctx, kind, key)
	if err == nil {
		a.then(ctx, kind, key, l)
	}
	return l, err
}

// LockIfSoleVoter reports false, so that every claim reads through
// LockLinearizable, where then runs: then proposes, which a claim answered
// at apply (in Notify) must not wait for.
func (a afterRead) LockIfSoleVoter(statemachine.Kind, string) (lockview.Lock, bool) {
	return lockview.Lock{}, false
}

// clockAfterRead moves the table clock on after each read, as a command
// stamped later by another caller would.
func clockAfterRead(t *testing.T) func(*replica.Node) Table {
	return func(n *replica.Node) Table {
		return afterRead{n, func(ctx context.Context, _ statemachine.Kind, _ string, _ lockview.Lock) {
			r, err := n.Propose(ctx, statemachine.Command{Op: statemachine.OpAcquire, NowMs: time.Now().UnixMilli() + 5000,
				Kind: statemachine.KindNonReentrant, Key: fmt.Sprint("elsewhere-", time.Now().UnixNano()), Owner: "x", ConnID: "x", LeaseMs: 1000})
			if err != nil || !r.Success() {
				t.Errorf("moving the clock: %+v %v", r, err)
			}
		}}
	}
}

// claimAfterHandOff serves the gateway over wrap(node), hands "job" from a
// holder to waiter "w:7", and returns the waiter's claim (waiterRetry,
// waitMs) as answered.
func claimAfterHandOff(t *testing.T, wrap func(*replica.Node) Table, waitMs int64) (*Server, *replica.Node, *client.Client, *protocol.LockOperationResponse) {
	t.Helper()
	addr, srv, node := startNodeServerOn(t, 0, wrap)
	ts := &testServer{addr: addr}
	holder, waiter := dial(t, ts), dial(t, ts)
	handOff(t, holder, waiter, "job", "w:7")
	claim := gen2("job", "REENTRANT", "w:7", waitMs, 300000)
	claim.WaiterRetry = true
	return srv, node, waiter, lockCall(t, waiter, protocol.OpAcquire, claim)
}

// A claim answered from a read holds the lock for its lease from the read,
// even when later commands move the table clock on before its record
// applies: the client was told its lease at the answer.
func TestClaimFromReadLeaseRunsFromTheRead(t *testing.T) {
	srv, node, _, r := claimAfterHandOff(t, clockAfterRead(t), 20000)
	if !r.Result || r.LockResult.ReentrantCount != 1 {
		t.Fatalf("claim: %+v", r.LockResult)
	}
	answered := time.Now().UnixMilli()
	if got := testutil.ToFloat64(srv.m.readClaims.WithLabelValues("answered")); got != 1 {
		t.Fatalf("claims answered from a read: %v, want 1", got)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		l, err := node.Lock(statemachine.KindReentrant, "job")
		if err != nil {
			t.Fatal(err)
		}
		if !l.Found {
			t.Fatalf("the lock is gone: %+v", l)
		}
		if !l.Unclaimed {
			if l.LeaseEndMs > answered+20000 {
				t.Fatalf("the claimed lease ends %d ms after the answer plus the lease: counted from the clock at the record", l.LeaseEndMs-answered-20000)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the claim's record never applied")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// The read answers only the claim of the grant pushed to this connection;
// any other claim, and every claim with batching off, goes through Raft as
// before, with the same answer.
func TestClaimWithoutAPushOrOrderingGoesThroughRaft(t *testing.T) {
	for _, tc := range []struct {
		name   string
		window time.Duration
		other  bool // claim on another connection than the one pushed to
	}{
		{"batching off", -1, false},
		{"claim on another connection", 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr, srv, node := startNodeServer(t, tc.window)
			ts := &testServer{addr: addr}
			holder, waiter, other := dial(t, ts), dial(t, ts), dial(t, ts)
			handOff(t, holder, waiter, "job", "w:7")
			grant, err := node.Lock(statemachine.KindReentrant, "job")
			if err != nil {
				t.Fatal(err)
			}
			via := waiter
			if tc.other {
				via = other
			}
			claim := gen2("job", "REENTRANT", "w:7", -1, 300000)
			claim.WaiterRetry = true
			r := lockCall(t, via, protocol.OpAcquire, claim)
			if !r.Result || r.LockResult.ReentrantCount != 1 || r.LockResult.FencingToken != grant.Token {
				t.Fatalf("claim: %+v", r.LockResult)
			}
			if got := testutil.ToFloat64(srv.m.readClaims.WithLabelValues("answered")); got != 0 {
				t.Fatalf("claims answered from a read: %v, want 0", got)
			}
			if l, err := node.Lock(statemachine.KindReentrant, "job"); err != nil || l.Unclaimed {
				t.Fatalf("after the claim: %+v %v", l, err)
			}
		})
	}
}

// A connection whose client never claims keeps at most maxExpectedClaims
// grants, and a full map makes room instead of refusing the newest.
func TestExpectedClaimsStayBounded(t *testing.T) {
	c := &conn{}
	for i := range maxExpectedClaims + 10 {
		c.expectClaim(statemachine.Notification{Kind: statemachine.KindReentrant, Key: fmt.Sprint("k", i), Owner: "o", Token: uint64(i + 1)})
	}
	if len(c.claims) > maxExpectedClaims {
		t.Fatalf("%d grants remembered", len(c.claims))
	}
	last := maxExpectedClaims + 9
	if tok, ok := c.takeClaim(statemachine.KindReentrant, fmt.Sprint("k", last), "o"); !ok || tok != uint64(last+1) {
		t.Fatalf("the newest grant was not remembered: %d %v", tok, ok)
	}
	if _, ok := c.takeClaim(statemachine.KindReentrant, fmt.Sprint("k", last), "o"); ok {
		t.Fatal("a taken grant is still there")
	}
}

// pushFirst waits until an idle stream writer has taken its push, never
// for the write, never for a busy writer, and never for another push's
// write (which may be stuck on a slow client).
func TestPushFirstWaitsOnlyForAnIdleWriter(t *testing.T) {
	newConn := func() *conn {
		return &conn{registered: true, sendq: make(chan outgoing, 4), done: make(chan struct{})}
	}
	build := func(id string) protocol.Message {
		return &protocol.LockNotificationRequest{LockKey: "k", NotificationType: protocol.NotificationAvailable}
	}
	// writer dequeues like the stream writer, then blocks in a "Send" that
	// never ends.
	writer := func(c *conn, took chan<- struct{}) {
		c.take(<-c.sendq)
		close(took)
		<-c.done
	}

	// Busy writer: the push is queued and pushFirst returns at once.
	c := newConn()
	if err := c.pushFirst(build); err != nil || len(c.sendq) != 1 {
		t.Fatalf("busy writer: %v, %d queued", err, len(c.sendq))
	}

	// Idle writer: pushFirst returns once its push is taken, while the
	// write is still stuck.
	c = newConn()
	c.writerIdle.Store(true)
	took := make(chan struct{})
	go writer(c, took)
	if err := c.pushFirst(build); err != nil {
		t.Fatal(err)
	}
	// Dequeued before pushFirst returned; the writer's own signal (took)
	// follows its dequeue, so it is only waited for, never expected yet.
	if len(c.sendq) != 0 {
		t.Fatal("pushFirst returned before the writer took the push")
	}
	select {
	case <-took:
	case <-time.After(5 * time.Second):
		t.Fatal("the writer never took the push")
	}
	c.release()

	// Two pushes ahead at once: the one the writer took returns, though
	// its write is stuck; the other waits for its own turn, here for the
	// connection's end.
	c = newConn()
	c.writerIdle.Store(true)
	tookKey := make(chan string, 1)
	startWriter := func() {
		o := <-c.sendq
		msg, err := protocol.Decode(o.p)
		if err != nil {
			t.Error(err)
		}
		tookKey <- msg.(*protocol.LockNotificationRequest).LockKey
		c.take(o)
		<-c.done
	}
	returned := make(chan string, 2)
	for _, key := range []string{"a", "b"} {
		go func() {
			if err := c.pushFirst(func(string) protocol.Message {
				return &protocol.LockNotificationRequest{LockKey: key, NotificationType: protocol.NotificationAvailable}
			}); err != nil {
				t.Error(err)
			}
			returned <- key
		}()
	}
	// Both found the writer idle and queued; then it runs.
	waitFor(t, 10*time.Second, func() bool { return len(c.sendq) == 2 }) // a guard, not a measurement
	go startWriter()
	if got, want := <-returned, <-tookKey; got != want {
		t.Fatalf("push %q returned first, but the writer took %q", got, want)
	}
	c.release()
	<-returned
}

// passOnAfterRead lets the grant a claim reads pass on before the claim's
// record applies, as a record delayed past the half lease the read left
// (a leader change can take that long) finds it: right after the read,
// another owner takes the lock at a table clock past the unclaimed
// grant's lease.
func passOnAfterRead(t *testing.T) func(*replica.Node) Table {
	return func(n *replica.Node) Table {
		return afterRead{n, func(ctx context.Context, kind statemachine.Kind, key string, l lockview.Lock) {
			if !l.Unclaimed {
				return
			}
			r, err := n.Propose(ctx, statemachine.Command{Op: statemachine.OpAcquire, NowMs: l.LeaseEndMs + 1,
				Kind: kind, Key: key, Owner: "other", ConnID: "x", LeaseMs: 600000})
			if err != nil || !r.Success() {
				t.Errorf("taking the lock after the grant's lease: %+v %v", r, err)
			}
		}}
	}
}

// A claim answered from a read whose record is refused (the grant had
// passed on when it applied) drops the connection, and what the client
// sent after the claim is not answered from the table without its grant:
// a re-entry gets a failure, not "held by another owner".
func TestClaimWhoseRecordIsRefusedDropsTheConnection(t *testing.T) {
	srv, node, waiter, r := claimAfterHandOff(t, passOnAfterRead(t), -1)
	if !r.Result {
		t.Fatalf("claim answered from the read: %+v", r.LockResult)
	}
	ctx, cancel := client.Timeout(5 * time.Second)
	defer cancel()
	r, err := waiter.Lock(ctx, protocol.OpAcquire, gen2("job", "REENTRANT", "w:7", -1, 300000))
	if err == nil && r.ResultCode == 200 {
		t.Fatalf("re-entry after a refused claim record answered as if the table said so: %+v", r.LockResult)
	}
	if l, err := node.Lock(statemachine.KindReentrant, "job"); err != nil || l.Owner != "other" {
		t.Fatalf("the lock after the refused record: %+v %v", l, err)
	}
	if got := testutil.ToFloat64(srv.m.readClaims.WithLabelValues("record_failed")); got != 1 {
		t.Fatalf("failed records: %v, want 1", got)
	}
	for {
		select {
		case _, ok := <-waiter.Pushes():
			if !ok {
				return // the stream ended: the connection was dropped
			}
		case <-ctx.Done():
			t.Fatal("the connection of a refused claim record was not dropped")
		}
	}
}
