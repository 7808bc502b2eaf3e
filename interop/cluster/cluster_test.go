package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"nacos-lockd/interop/client"
	"nacos-lockd/protocol"
)

var fastProps = map[string]string{
	"nacos.lock.expire.scan.interval":  "200",
	"nacos.lock.node_grace_ms":         "2000",
	"nacos.lock.raft.snapshot_entries": "20",
}

func call(ctx context.Context, c *client.Client, op protocol.LockOp, li protocol.LockInstance) (*protocol.LockOperationResponse, error) {
	r, err := c.Lock(ctx, op, li)
	if err != nil {
		return nil, err
	}
	if r.ResultCode != 200 {
		return r, fmt.Errorf("%s: %d %s", op, r.ResultCode, r.Message)
	}
	return r, nil
}

func mustCall(t *testing.T, c *client.Client, op protocol.LockOp, li protocol.LockInstance) *protocol.LockOperationResponse {
	t.Helper()
	ctx, cancel := client.Timeout(10 * time.Second)
	defer cancel()
	r, err := call(ctx, c, op, li)
	if err != nil {
		t.Fatalf("%s %s: %v", op, *li.Key, err)
	}
	return r
}

func nonReentrant(key, owner string, lease, wait int64) protocol.LockInstance {
	return client.Instance(key, "NON_REENTRANT", owner, client.Ms(lease), client.Ms(wait))
}

func TestLocksThroughEveryNode(t *testing.T) {
	c := newCluster(t, 3, 0, fastProps)
	clients := []*client.Client{c.client(0), c.client(1), c.client(2)}
	gen1 := client.Instance("shared", "NACOS_LOCK", "", client.Ms(60000), nil)
	for i, holder := range clients {
		if r := mustCall(t, holder, protocol.OpAcquire, gen1); !r.Result {
			t.Fatalf("node %d: acquire refused: %+v", i, r.LockResult)
		}
		for j, other := range clients {
			if j != i {
				if r := mustCall(t, other, protocol.OpAcquire, gen1); r.Result {
					t.Fatalf("node %d granted a lock node %d holds", j, i)
				}
			}
		}
		if r := mustCall(t, holder, protocol.OpRelease, gen1); !r.Result {
			t.Fatalf("node %d: release refused: %+v", i, r.LockResult)
		}
	}

	// A waiter connected to one node is pushed when a holder on another
	// node releases.
	leader := c.leader()
	holderNode, waiterNode := (leader+1)%3, (leader+2)%3
	holder, waiter := clients[holderNode], clients[waiterNode]
	mustCall(t, holder, protocol.OpAcquire, nonReentrant("job", "h:1", 60000, -1))
	if r := mustCall(t, waiter, protocol.OpAcquire, nonReentrant("job", "w:1", 60000, 60000)); r.LockResult.WaitPosition != 0 {
		t.Fatalf("waiter not queued: %+v", r.LockResult)
	}
	mustCall(t, holder, protocol.OpRelease, nonReentrant("job", "h:1", 0, -1))
	ctx, cancel := client.Timeout(5 * time.Second)
	defer cancel()
	n, err := client.WaitPush[*protocol.LockNotificationRequest](ctx, waiter)
	if err != nil || n.Owner != "w:1" {
		t.Fatalf("push to the waiter on node %d: %+v %v", waiterNode, n, err)
	}
	li := nonReentrant("job", "w:1", 60000, 60000)
	li.WaiterRetry = true
	if r := mustCall(t, waiter, protocol.OpAcquire, li); !r.Result || r.LockResult.ReentrantCount != 1 {
		t.Fatalf("claim: %+v", r.LockResult)
	}
	for i, cl := range clients {
		if i == waiterNode {
			continue
		}
		select {
		case m := <-cl.Pushes():
			t.Fatalf("node %d's client got a push meant for another node's client: %#v", i, m)
		default:
		}
	}
}

// TestLeaderKillKeepsMutualExclusion has clients on every node contend
// for a few keys while the leader is killed and restarted, records every
// grant and release, and checks that no two grants ever overlapped.
func TestLeaderKillKeepsMutualExclusion(t *testing.T) {
	c := newCluster(t, 3, 0, fastProps)
	const lease = 3000
	var hist history
	// A long lease held through a node that stays up survives the kill.
	survivor := c.client((c.leader() + 1) % 3)
	mustCall(t, survivor, protocol.OpAcquire, nonReentrant("survivor", "s:1", 600000, -1))

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var afterKill atomic.Int64 // grants completed after the kill
	var killedAt atomic.Int64
	keys := []string{"k1", "k2", "k3"}
	for w := range 6 {
		cl := c.client(w % 3)
		wg.Add(1)
		go func() {
			defer wg.Done()
			owner := fmt.Sprintf("worker-%d", w)
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				key := keys[(w+i)%len(keys)]
				inv := time.Now()
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
				r, err := call(ctx, cl, protocol.OpAcquire, nonReentrant(key, owner, lease, -1))
				cancel()
				if err != nil || !r.Result {
					time.Sleep(20 * time.Millisecond)
					continue
				}
				g := &grant{key: key, owner: owner, token: r.LockResult.FencingToken, invoked: inv, completed: time.Now(), leaseMs: lease}
				if k := killedAt.Load(); k != 0 && g.completed.UnixNano() > k {
					afterKill.Add(1)
				}
				time.Sleep(time.Duration(5+w*3) * time.Millisecond) // the critical section
				g.released = time.Now()
				hist.add(g)
				ctx, cancel = context.WithTimeout(context.Background(), 3*time.Second)
				_, _ = call(ctx, cl, protocol.OpRelease, nonReentrant(key, owner, 0, -1))
				cancel()
			}
		}()
	}
	time.Sleep(2 * time.Second)
	leader := c.leader()
	probe := c.client((leader + 2) % 3)
	killedAt.Store(time.Now().UnixNano())
	c.kill(leader)
	t.Logf("killed leader node %d after %d grants", leader, hist.len())
	// Requests in flight at the kill may wait out their timeout (their
	// outcome is unknown until then); fresh requests must succeed within a
	// few election timeouts (300 ms each).
	var resumed time.Duration
	for i := 0; resumed == 0; i++ {
		if time.Since(time.Unix(0, killedAt.Load())) > 15*time.Second {
			t.Fatal("no fresh request succeeded within 15s of killing the leader")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		r, err := call(ctx, probe, protocol.OpAcquire, nonReentrant(fmt.Sprint("probe-", i), "p:1", 1000, -1))
		cancel()
		if err == nil && r.Result {
			resumed = time.Since(time.Unix(0, killedAt.Load()))
		}
	}
	t.Logf("service resumed %v after the kill", resumed.Round(time.Millisecond))
	if resumed > 5*time.Second {
		t.Fatalf("service took %v to resume", resumed)
	}
	time.Sleep(2 * time.Second)
	c.start(leader)
	time.Sleep(2 * time.Second)
	close(stop)
	wg.Wait()
	if err := hist.check(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d grants checked, %d after the kill", hist.len(), afterKill.Load())
	// The long-lease lock taken before the kill is still held.
	other := c.client((leader + 2) % 3)
	if r := mustCall(t, other, protocol.OpAcquire, nonReentrant("survivor", "x:1", 1000, -1)); r.Result {
		t.Fatal("a lock held before the leader was killed was granted to someone else")
	}
}

func TestWipedFollowerCatchesUpBySnapshot(t *testing.T) {
	c := newCluster(t, 3, 0, fastProps)
	leader := c.leader()
	follower := (leader + 1) % 3
	cl := c.client(leader)
	for i := range 60 { // well past the snapshot interval, so the log is compacted
		mustCall(t, cl, protocol.OpAcquire, nonReentrant(fmt.Sprint("held-", i), "o:1", 600000, -1))
	}
	c.kill(follower)
	if err := os.RemoveAll(c.nodes[follower].DataDir); err != nil {
		t.Fatal(err)
	}
	for i := 60; i < 100; i++ {
		mustCall(t, cl, protocol.OpAcquire, nonReentrant(fmt.Sprint("held-", i), "o:1", 600000, -1))
	}
	// A node whose data is gone rejoins under a new replica id: --join
	// asks the others to replace its old incarnation.
	c.start(follower, "--join")
	deadline := time.Now().Add(30 * time.Second)
	for !logHas(c.nodes[follower].LogPath, "lock table recovered from snapshot") {
		if time.Now().After(deadline) {
			t.Fatal("the wiped follower did not install a snapshot")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if ms, err := c.members(follower); err != nil || len(ms) != 3 {
		t.Fatalf("membership after rejoin: %+v %v", ms, err)
	}
	fc := c.client(follower)
	for _, i := range []int{0, 59, 60, 99} {
		if r := mustCall(t, fc, protocol.OpAcquire, nonReentrant(fmt.Sprint("held-", i), "x:1", 1000, -1)); r.Result {
			t.Fatalf("held-%d granted again through the rejoined follower", i)
		}
	}
}

func TestPausedNodeReleasesItsClientsLocks(t *testing.T) {
	c := newCluster(t, 3, 0, fastProps)
	leader := c.leader()
	paused, other := (leader+1)%3, (leader+2)%3
	holder := c.client(paused)
	first := mustCall(t, holder, protocol.OpAcquire, nonReentrant("grace", "h:1", 600000, -1))
	waiter := c.client(other)
	if r := mustCall(t, waiter, protocol.OpAcquire, nonReentrant("grace", "w:1", 600000, 600000)); r.LockResult.WaitPosition != 0 {
		t.Fatalf("waiter not queued: %+v", r.LockResult)
	}
	c.pause(paused)
	start := time.Now()
	ctx, cancel := client.Timeout(20 * time.Second)
	defer cancel()
	if _, err := client.WaitPush[*protocol.LockNotificationRequest](ctx, waiter); err != nil {
		t.Fatalf("waiter not handed the lock while node %d was stopped: %v", paused, err)
	}
	if waited := time.Since(start); waited < 2*time.Second {
		t.Fatalf("locks released %v after the pause, before the 2s grace", waited)
	}
	li := nonReentrant("grace", "w:1", 600000, 600000)
	li.WaiterRetry = true
	claim := mustCall(t, waiter, protocol.OpAcquire, li)
	if !claim.Result || claim.LockResult.FencingToken <= first.LockResult.FencingToken {
		t.Fatalf("claim: %+v", claim.LockResult)
	}
	c.resume(paused)
	// The old holder comes back: its renew and release are refused, and
	// nobody else gets the lock while the waiter holds it.
	renew := client.Instance("grace", "NON_REENTRANT", "h:1", client.Ms(-1), nil)
	if r := answeredCall(t, holder, protocol.OpRenew, renew); r.Result {
		t.Fatal("the paused node's client renewed a lock that was handed on")
	}
	if r := answeredCall(t, holder, protocol.OpAcquire, nonReentrant("grace", "h:1", 1000, -1)); r.Result {
		t.Fatal("double grant after the paused node came back")
	}
}

// answeredCall is mustCall through a node that has just come back from a
// pause: while it has not caught up with the leader, a command it
// forwards can time out uncommitted (500, "not committed"), which says
// nothing either way. It retries those for up to 20 s; any other answer is
// returned, and any other error fails the test. (Seen in CI: the renew
// sent 500 ms after the resume timed out, its entry lost on the way to a
// leader the node had marked unreachable while it was stopped.)
func answeredCall(t *testing.T, c *client.Client, op protocol.LockOp, li protocol.LockInstance) *protocol.LockOperationResponse {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := client.Timeout(10 * time.Second)
		r, err := call(ctx, c, op, li)
		cancel()
		switch {
		case err == nil:
			return r
		case r != nil && r.ResultCode == 500 && time.Now().Before(deadline):
			t.Logf("%s %s not committed yet (%v), again", op, *li.Key, err)
			time.Sleep(200 * time.Millisecond)
		default:
			t.Fatalf("%s %s: %v", op, *li.Key, err)
		}
	}
}

func TestMembershipChangeAndRollingRestart(t *testing.T) {
	c := newCluster(t, 3, 1, fastProps)
	cl := c.client(0)
	for i := range 40 {
		mustCall(t, cl, protocol.OpAcquire, nonReentrant(fmt.Sprint("kept-", i), "o:1", 600000, -1))
	}
	// Add a fourth node through a follower's admin API, then start it.
	follower := (c.leader() + 1) % 3
	newNode := c.spare(3)
	if out, err := c.lockctl(follower, "cluster", "add", newNode.address()); err != nil || !strings.Contains(out, "added "+newNode.address()) {
		t.Fatalf("nacos-lockctl cluster add: %v\n%s", err, out)
	}
	c.writeConf(4)
	c.start(3, "--join")
	ms, err := c.members(3)
	if err != nil || len(ms) != 4 {
		t.Fatalf("members seen by the new node: %+v %v", ms, err)
	}
	nc := c.client(3)
	if r := mustCall(t, nc, protocol.OpAcquire, nonReentrant("kept-7", "x:1", 1000, -1)); r.Result {
		t.Fatal("the new member granted a held lock")
	}

	// Rolling restart of every node, one at a time: nothing is lost.
	for i := range 4 {
		c.term(i)
		c.start(i)
		c.leader()
	}
	check := c.client(2)
	for i := range 40 {
		if r := mustCall(t, check, protocol.OpAcquire, nonReentrant(fmt.Sprint("kept-", i), "x:1", 1000, -1)); r.Result {
			t.Fatalf("kept-%d lost in the rolling restart", i)
		}
	}

	// Remove the fourth node again.
	if out, err := c.lockctl(0, "cluster", "remove", newNode.address()); err != nil || !strings.Contains(out, "removed "+newNode.address()) {
		t.Fatalf("nacos-lockctl cluster remove: %v\n%s", err, out)
	}
	c.term(3)
	out, err := c.lockctl(0, "--json", "cluster", "list")
	var listed struct {
		Members []memberView `json:"members"`
	}
	if err != nil || json.Unmarshal([]byte(out), &listed) != nil || len(listed.Members) != 3 {
		t.Fatalf("members after remove: %v\n%s", err, out)
	}
	if out, err := c.lockctl(0, "cluster", "remove", newNode.address()); err == nil || !strings.Contains(out, "not a member") {
		t.Fatalf("removing a non-member: %v\n%s", err, out)
	}
	if out, err := c.lockctl(0, "cluster", "list"); err != nil || !strings.Contains(out, "leader") || strings.Count(out, "\n") != 4 {
		t.Fatalf("cluster list table: %v\n%s", err, out)
	}
}

func TestGracefulLeaderShutdownTransfersLeadership(t *testing.T) {
	c := newCluster(t, 3, 0, fastProps)
	leader := c.leader()
	cl := c.client(leader)
	mustCall(t, cl, protocol.OpAcquire, nonReentrant("kept", "o:1", 600000, -1))
	c.term(leader)
	if !logHas(c.nodes[leader].LogPath, "leadership transferred before shutdown") {
		t.Fatal("the leader did not hand over leadership before stopping")
	}
	if _, err := client.WaitPush[*protocol.ConnectResetRequest](context.Background(), cl); err != nil {
		t.Fatalf("client of the stopped leader got no ConnectResetRequest: %v", err)
	}
	next := c.leader()
	if next == leader {
		t.Fatal("stopped node still leads")
	}
	other := c.client(next)
	if r := mustCall(t, other, protocol.OpAcquire, nonReentrant("kept", "x:1", 1000, -1)); r.Result {
		t.Fatal("the stopped leader's client's lock was released by the shutdown")
	}
}
