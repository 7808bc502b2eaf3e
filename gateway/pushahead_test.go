package gateway

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"nacos-lockd/interop/client"
	"nacos-lockd/protocol"
	"nacos-lockd/replica"
	"nacos-lockd/statemachine"
	"nacos-lockd/statemachine/lockview"
)

// gatedReleases holds every RELEASE until the test lets it through, as a
// slow commit would: what the push ahead overlaps.
type gatedReleases struct {
	*replica.Node
	gate chan struct{}
}

func (g gatedReleases) Propose(ctx context.Context, cmd statemachine.Command) (statemachine.Result, error) {
	if cmd.Op == statemachine.OpRelease {
		select {
		case <-g.gate:
		case <-ctx.Done():
			return statemachine.Result{}, ctx.Err()
		}
	}
	return g.Node.Propose(ctx, cmd)
}

type lockAnswer struct {
	r   *protocol.LockOperationResponse
	err error
}

func lockAsync(c *client.Client, op protocol.LockOp, li protocol.LockInstance) <-chan lockAnswer {
	out := make(chan lockAnswer, 1)
	go func() {
		ctx, cancel := client.Timeout(10 * time.Second)
		defer cancel()
		r, err := c.Lock(ctx, op, li)
		out <- lockAnswer{r, err}
	}()
	return out
}

func pushes(srv *Server, typ, result string) float64 {
	return testutil.ToFloat64(srv.m.pushes.WithLabelValues(typ, result))
}

// noPush fails if c gets a push within d.
func noPush(t *testing.T, c *client.Client, d time.Duration, why string) {
	t.Helper()
	ctx, cancel := client.Timeout(d)
	defer cancel()
	if p, err := client.WaitPush[*protocol.LockNotificationRequest](ctx, c); err == nil {
		t.Fatalf("%s: a push came: %+v", why, p)
	}
}

// pushedAheadOfRelease sets up a hand-off on the server at addr, whose
// releases do not commit until the test lets them: "h:1" holds "job",
// "w:7" waits at the head of its queue, and h:1's release is sent. It
// returns once the waiter has the AVAILABLE push sent ahead of the commit.
func pushedAheadOfRelease(t *testing.T, addr string) (waiter *client.Client, released <-chan lockAnswer, push *protocol.LockNotificationRequest) {
	t.Helper()
	ts := &testServer{addr: addr}
	holder := dial(t, ts)
	waiter = dial(t, ts)
	if r := lockCall(t, holder, protocol.OpAcquire, gen2("job", "REENTRANT", "h:1", -1, 300000)); !r.Result {
		t.Fatalf("holder acquire: %+v", r.LockResult)
	}
	if r := lockCall(t, waiter, protocol.OpAcquire, gen2("job", "REENTRANT", "w:7", -1, 300000)); r.Result || r.LockResult.WaitPosition != 0 {
		t.Fatalf("waiter acquire: %+v", r.LockResult)
	}
	released = lockAsync(holder, protocol.OpRelease, gen2("job", "REENTRANT", "h:1", 0, -1))
	ctx, cancel := client.Timeout(5 * time.Second)
	defer cancel()
	push, err := client.WaitPush[*protocol.LockNotificationRequest](ctx, waiter)
	if err != nil {
		t.Fatalf("no push while the release commits: %v", err)
	}
	return waiter, released, push
}

// notSoleVoter reads as a node of a larger shard would: never from its
// own replica alone.
type notSoleVoter struct{ gatedReleases }

func (notSoleVoter) LockIfSoleVoter(statemachine.Kind, string) (lockview.Lock, bool) {
	return lockview.Lock{}, false
}

// A release that hands the lock to a waiter on this node pushes to the
// waiter before it commits; the waiter's claim, sent on that push, waits
// for the grant and then gets exactly what the claim gets after a plain
// push (count 1, the grant's token), and the grant is pushed once, not
// twice. On a sole voter served by the h2 transport the claim is answered
// by Notify as the grant applies (answerAtApply), elsewhere by its
// handler; either way the connection carries on as before.
func TestPushAheadOfTheReleaseCommit(t *testing.T) {
	h2 := testTransport() == "" || testTransport() == TransportH2
	for _, tc := range []struct {
		name    string
		wrap    func(n *replica.Node, gate chan struct{}) Table
		atApply bool
	}{
		{"sole voter", func(n *replica.Node, gate chan struct{}) Table { return gatedReleases{n, gate} }, h2},
		{"not a sole voter", func(n *replica.Node, gate chan struct{}) Table { return notSoleVoter{gatedReleases{n, gate}} }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gate := make(chan struct{})
			addr, srv, node := startNodeServerOn(t, 0, func(n *replica.Node) Table { return tc.wrap(n, gate) })
			testPushAheadOfTheReleaseCommit(t, addr, srv, node, gate)
			written := testutil.ToFloat64(srv.m.claimsAtApply)
			if want := map[bool]float64{true: 1, false: 0}[tc.atApply]; written != want {
				t.Fatalf("claims written at apply: %v, want %v", written, want)
			}
			if got := testutil.ToFloat64(srv.m.readClaims.WithLabelValues("answered")); got != 1 {
				t.Fatalf("claims answered from a read: %v, want 1", got)
			}
		})
	}
}

func testPushAheadOfTheReleaseCommit(t *testing.T, addr string, srv *Server, node *replica.Node, gate chan struct{}) {
	waiter, released, p := pushedAheadOfRelease(t, addr)
	if p.Owner != "w:7" || p.LockKey != "job" || p.NotificationType != protocol.NotificationAvailable {
		t.Fatalf("push: %+v", p)
	}
	select {
	case a := <-released:
		t.Fatalf("the release was answered before it committed: %+v %v", a.r, a.err)
	default:
	}
	claim := gen2("job", "REENTRANT", "w:7", -1, 300000)
	claim.WaiterRetry = true
	claimed := lockAsync(waiter, protocol.OpAcquire, claim)
	select {
	case a := <-claimed:
		t.Fatalf("the claim was answered before its grant was made: %+v %v", a.r, a.err)
	case <-time.After(150 * time.Millisecond):
	}
	close(gate)
	if a := <-released; a.err != nil || !a.r.Result {
		t.Fatalf("release: %+v %v", a.r, a.err)
	}
	a := <-claimed
	if a.err != nil {
		t.Fatal(a.err)
	}
	grant, err := node.Lock(statemachine.KindReentrant, "job")
	if err != nil {
		t.Fatal(err)
	}
	if !a.r.Result || a.r.LockResult.ReentrantCount != 1 || a.r.LockResult.FencingToken != grant.Token || grant.Owner != "w:7" {
		t.Fatalf("claim: %+v, table %+v", a.r.LockResult, grant)
	}
	noPush(t, waiter, 200*time.Millisecond, "the grant was announced ahead")
	if sent, plain, missed := pushes(srv, "lock_notification_ahead", "sent"), pushes(srv, "lock_notification", "sent"), pushes(srv, "lock_notification_ahead", "missed"); sent != 1 || plain != 0 || missed != 0 {
		t.Fatalf("pushes: %v ahead, %v after the commit, %v missed; want 1, 0, 0", sent, plain, missed)
	}
	// The connection the claim was answered on serves the next calls.
	if r := lockCall(t, waiter, protocol.OpAcquire, gen2("job", "REENTRANT", "w:7", -1, 300000)); !r.Result || r.LockResult.ReentrantCount != 2 {
		t.Fatalf("re-entry after the claim: %+v", r.LockResult)
	}
	for range 2 {
		if r := lockCall(t, waiter, protocol.OpRelease, gen2("job", "REENTRANT", "w:7", 0, -1)); !r.Result {
			t.Fatalf("release after the claim: %+v", r.LockResult)
		}
	}
	if l, err := node.Lock(statemachine.KindReentrant, "job"); err != nil || l.Owner != "" {
		t.Fatalf("job after the waiter's releases: %+v %v, want free", l, err)
	}
}

// wrongGuess names the last waiter instead of the first, as a stale
// replica could.
type wrongGuess struct {
	*replica.Node
	owner, connID string
}

func (w wrongGuess) NextGrant(kind statemachine.Kind, key, owner string) statemachine.NextGrant {
	next := w.Node.NextGrant(kind, key, owner)
	if next.Found {
		next.Owner, next.ConnID = w.owner, w.connID
	}
	return next
}

// A push ahead to the wrong waiter costs that waiter a claim that finds
// nothing (it stays queued), while the waiter the release did grant gets
// its push after the commit as ever; and the wrong guess leaves nothing
// behind: the second waiter's own grant, later, is pushed.
func TestPushAheadWrongGuess(t *testing.T) {
	guess := &wrongGuess{}
	addr, srv, node := startNodeServerOn(t, 0, func(n *replica.Node) Table { guess.Node = n; return guess })
	ts := &testServer{addr: addr}
	holder, first, second := dial(t, ts), dial(t, ts), dial(t, ts)
	if r := lockCall(t, holder, protocol.OpAcquire, gen2("job", "REENTRANT", "h:1", -1, 300000)); !r.Result {
		t.Fatalf("holder acquire: %+v", r.LockResult)
	}
	for i, c := range []*client.Client{first, second} {
		owner := []string{"w:1", "w:2"}[i]
		if r := lockCall(t, c, protocol.OpAcquire, gen2("job", "REENTRANT", owner, -1, 300000)); r.Result || r.LockResult.WaitPosition != int(i) {
			t.Fatalf("%s acquire: %+v", owner, r.LockResult)
		}
	}
	l, err := node.Lock(statemachine.KindReentrant, "job")
	if err != nil || len(l.Waiters) != 2 {
		t.Fatalf("queue: %+v %v", l, err)
	}
	guess.owner, guess.connID = l.Waiters[1].Owner, l.Waiters[1].ConnID
	if r := lockCall(t, holder, protocol.OpRelease, gen2("job", "REENTRANT", "h:1", 0, -1)); !r.Result {
		t.Fatalf("release: %+v", r.LockResult)
	}
	for _, c := range []*client.Client{first, second} {
		ctx, cancel := client.Timeout(5 * time.Second)
		_, err := client.WaitPush[*protocol.LockNotificationRequest](ctx, c)
		cancel()
		if err != nil {
			t.Fatalf("a waiter got no push: %v", err)
		}
	}
	if missed := pushes(srv, "lock_notification_ahead", "missed"); missed != 1 {
		t.Fatalf("missed pushes ahead: %v, want 1", missed)
	}
	wrong := gen2("job", "REENTRANT", "w:2", -1, 300000)
	wrong.WaiterRetry = true
	if r := lockCall(t, second, protocol.OpAcquire, wrong); r.Result || r.LockResult.WaitPosition != 0 {
		t.Fatalf("the wrongly pushed waiter's claim: %+v, want queued at 0", r.LockResult)
	}
	right := gen2("job", "REENTRANT", "w:1", -1, 300000)
	right.WaiterRetry = true
	if r := lockCall(t, first, protocol.OpAcquire, right); !r.Result || r.LockResult.ReentrantCount != 1 {
		t.Fatalf("the granted waiter's claim: %+v", r.LockResult)
	}
	guess.owner, guess.connID = "nobody", "no-such-connection" // push nothing ahead from here on
	if r := lockCall(t, first, protocol.OpRelease, gen2("job", "REENTRANT", "w:1", 0, -1)); !r.Result {
		t.Fatalf("release by w:1: %+v", r.LockResult)
	}
	ctx, cancel := client.Timeout(5 * time.Second)
	defer cancel()
	if _, err := client.WaitPush[*protocol.LockNotificationRequest](ctx, second); err != nil {
		t.Fatalf("the second waiter's own grant was not pushed: %v", err)
	}
}

// failedReleases answers every RELEASE with an error once the test says
// so, as a release that was not committed (leader lost) is answered.
type failedReleases struct {
	*replica.Node
	gate chan struct{}
}

func (f failedReleases) Propose(ctx context.Context, cmd statemachine.Command) (statemachine.Result, error) {
	if cmd.Op == statemachine.OpRelease {
		<-f.gate
		return statemachine.Result{}, errors.New("not committed")
	}
	return f.Node.Propose(ctx, cmd)
}

// A release pushed ahead that is not committed settles its push: the
// waiter's claim, waiting for the grant, goes on at once and finds the lock
// still held (the waiter stays queued), and the push counts as missed.
func TestPushAheadOfAReleaseNotCommitted(t *testing.T) {
	gate := make(chan struct{})
	addr, srv, _ := startNodeServerOn(t, 0, func(n *replica.Node) Table { return failedReleases{n, gate} })
	waiter, released, _ := pushedAheadOfRelease(t, addr)
	claim := gen2("job", "REENTRANT", "w:7", -1, 300000)
	claim.WaiterRetry = true
	claimed := lockAsync(waiter, protocol.OpAcquire, claim)
	time.Sleep(100 * time.Millisecond)
	close(gate)
	if a := <-released; a.err != nil || a.r.Result {
		t.Fatalf("release not committed: %+v %v, want a failure answer", a.r, a.err)
	}
	select {
	case a := <-claimed:
		if a.err != nil || a.r.Result || a.r.LockResult.WaitPosition != 0 {
			t.Fatalf("claim after a release not committed: %+v %v, want queued at 0", a.r, a.err)
		}
	case <-time.After(srv.cfg.RequestTimeout / 2):
		// Well inside the request timeout: a claim that waited it out
		// would fail only by its own timing out, not because nothing
		// settled the push.
		t.Fatal("the claim still waits for a grant the failed release never made")
	}
	if missed := pushes(srv, "lock_notification_ahead", "missed"); missed != 1 {
		t.Fatalf("missed pushes ahead: %v, want 1", missed)
	}
}
