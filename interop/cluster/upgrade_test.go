package cluster

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"nacos-lockd/gateway/admin/adminapi"
	"nacos-lockd/interop/client"
	"nacos-lockd/protocol"
)

// oldBuild is a build a rolling upgrade starts from.
type oldBuild struct {
	ref string // a tag, or a commit
	// commit is the commit a tag names: a clone that brought the history
	// but not the tags (git clone --no-tags) still has it.
	commit string
	level  int // the cluster level it reads; 1 (the baseline) does not advertise
}

var (
	// baseline is the release the version gate counts a member that does
	// not advertise as (statemachine.LevelBaseline): the oldest build a
	// rolling upgrade may start from. It predates CLAIM's LeaseAtNow flag,
	// so a new leader that used it while such a member is in the cluster
	// would make that member refuse the entry and diverge.
	baseline = oldBuild{ref: "v0.15.0", commit: "46782b54bdb5e98e11846d769a3e6651dc109ea6", level: 1}
	// lastLevel2 is the last build that reads level 2: it answers claims
	// from a read, with level 2's rules for an owner that moves to another
	// connection meanwhile (statemachine.LevelOwnerMoves changed them).
	lastLevel2 = oldBuild{ref: "3913a2280042ee3e4fab7c11cadc30a9c3731f10", level: 2}
)

// buildRelease builds nacos-lockd as it was at a tag or commit of this
// repository, from `git archive` into a temp dir (Go's build cache shares
// what has not changed). A missing one fails the test: a shallow clone
// would otherwise pass without testing the upgrade.
func buildRelease(t *testing.T, old oldBuild) string {
	t.Helper()
	tag := old.ref
	root, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Fatalf("find the repository (the upgrade test builds %s from its tag): %v", tag, err)
	}
	repo := strings.TrimSpace(string(root))
	commit, err := exec.Command("git", "-C", repo, "rev-parse", "--verify", "--quiet", tag+"^{commit}").Output()
	if err != nil && old.commit != "" {
		commit, err = exec.Command("git", "-C", repo, "rev-parse", "--verify", "--quiet", old.commit+"^{commit}").Output()
		if err == nil {
			t.Logf("tag %s is missing; building its commit %s", tag, old.commit)
		}
	}
	if err != nil {
		t.Fatalf("%s is missing from %s: the upgrade test builds the old build from it; fetch it (git fetch --tags, or a clone that is not shallow)", tag, repo)
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	if err := os.Mkdir(src, 0o755); err != nil {
		t.Fatal(err)
	}
	archive := exec.Command("sh", "-c", `git -C "$1" archive "$2" | tar -x -C "$3"`, "sh", repo, strings.TrimSpace(string(commit)), src)
	if out, err := archive.CombinedOutput(); err != nil {
		t.Fatalf("git archive %s: %v\n%s", tag, err, out)
	}
	bin := filepath.Join(dir, "nacos-lockd-"+tag)
	build := exec.Command("go", "build", "-trimpath", "-ldflags",
		fmt.Sprintf("-X main.version=%s -X main.commit=%s", tag, strings.TrimSpace(string(commit))), "-o", bin, "./cmd/nacos-lockd")
	build.Dir = src
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v\n%s", tag, err, out)
	}
	return bin
}

// TestRollingUpgradeFromBaseline runs a 3-node cluster of the baseline
// release and upgrades it member by member to this build on the same data
// dirs, with lock traffic (acquire/release, contended hand-offs claimed
// from every node, force releases, locks left held and queued) in every
// phase and a load running across the restarts. It shows:
//   - while any old member is in the cluster, every new node stays at the
//     baseline level and never answers a claim from a read (which would
//     write a CLAIM with LeaseAtNow, which the old members refuse), both
//     under an old leader with new followers and under a new leader with
//     an old follower;
//   - nothing diverges: after each phase every replica's table is the
//     same at the same applied index;
//   - once the last member runs this build the leader raises the level,
//     every replica applies it, and claims are answered from reads;
//   - an old build cannot join the cluster once the level has risen.
func TestRollingUpgradeFromBaseline(t *testing.T) { rollingUpgrade(t, baseline) }

// TestRollingUpgradeFromLevel2 is the same from the last build that reads
// level 2: that build raises its cluster to level 2 and answers claims
// from reads; while any member runs it the cluster stays at level 2 and
// every replica applies level 2's rules (the tables stay identical), and
// once the last member runs this build the level goes to 3.
func TestRollingUpgradeFromLevel2(t *testing.T) { rollingUpgrade(t, lastLevel2) }

func rollingUpgrade(t *testing.T, from oldBuild) {
	old := buildRelease(t, from)
	c := newStoppedCluster(t, 3, 1, fastProps)
	for _, nd := range c.nodes {
		nd.Bin = old
	}
	c.startAll(3)
	if from.level > 1 {
		// The old build's own gate raises its cluster first.
		for i, nd := range c.nodes[:3] {
			waitFor(t, fmt.Sprintf("old node %d at cluster level %d", i, from.level), func() bool {
				return clusterVersion(t, nd).ClusterLevel == from.level
			})
		}
	}
	isNew := []bool{false, false, false}
	leader := c.leader()
	f1, f2 := (leader+1)%3, (leader+2)%3

	load := startLoad(t, c)
	phase := func(name string) {
		t.Helper()
		load.pause()
		defer load.resume()
		c.leader() // settled
		clients := []*client.Client{c.client(0), c.client(1), c.client(2)}
		defer func() {
			for _, cl := range clients {
				_ = cl.Close() // after the comparison: their locks are in it
			}
		}()
		contended(t, clients, name)
		forceRelease(t, c, clients[0], name)
		mixed := !isNew[0] || !isNew[1] || !isNew[2]
		for i, nd := range c.nodes[:3] {
			if !isNew[i] {
				code, v := getVersion(t, nd)
				if from.level == 1 && code != http.StatusNotFound {
					t.Fatalf("%s: old node %d answers GET /v1/cluster/version with %d", name, i, code)
				}
				if from.level > 1 && (code != http.StatusOK || v.Reads.Level != from.level) {
					t.Fatalf("%s: old node %d answers GET /v1/cluster/version with %d, reads level %d", name, i, code, v.Reads.Level)
				}
				continue
			}
			if mixed {
				if v := clusterVersion(t, nd); v.ClusterLevel != from.level {
					t.Fatalf("%s: new node %d at cluster level %d while an old build is a member", name, i, v.ClusterLevel)
				}
				if n := readClaims(t, nd); from.level < 2 && n != 0 {
					t.Fatalf("%s: new node %d answered %v claims from a read while an old build is a member", name, i, n)
				}
			}
		}
		sameTables(t, c, name)
		t.Logf("%s: leader node %d, tables identical", name, c.leader())
	}

	phase("all old")

	// Old leader, new followers.
	upgrade(t, c, f1, isNew)
	phase("old leader, one new follower")
	upgrade(t, c, f2, isNew)
	phase("old leader, two new followers")

	// The old leader stops (handing leadership to a new node) and comes
	// back still old: a new leader with an old member. Raft does not
	// promise the old member stays a follower: on a loaded machine it can
	// time out before the new leader's first heartbeat reaches it and win
	// the next term (seen in CI). Then it goes round again, so that the
	// phase below always runs under a new leader.
	for attempt := 1; ; attempt++ {
		c.term(leader)
		if l := c.leader(); !isNew[l] {
			t.Fatalf("leader is node %d, an old build, while the old leader is stopped", l)
		}
		c.start(leader)
		l := c.leader()
		if isNew[l] {
			break
		}
		if attempt == 5 {
			t.Fatalf("leader is node %d, an old build, after the old leader restarted %d times", l, attempt)
		}
		t.Logf("the restarted old node %d won an election again (attempt %d); stopping it once more", l, attempt)
	}
	phase("new leader, one old follower")

	upgrade(t, c, leader, isNew)
	// The leader's gate sees every member advertise the new level and
	// proposes it; every replica applies it.
	for i, nd := range c.nodes[:3] {
		waitFor(t, fmt.Sprintf("node %d at cluster level %d", i, adminapi.BuildLevel), func() bool {
			return clusterVersion(t, nd).ClusterLevel == adminapi.BuildLevel
		})
		// Applied from the entry, or installed with a snapshot that
		// carries it (a member that lagged behind the leader's log: "lock
		// table recovered from snapshot", with the new cluster_level).
		if !nd.Logged("cluster level raised") && !nd.Logged(fmt.Sprintf(`"cluster_level":%d,`, adminapi.BuildLevel)) {
			t.Fatalf("node %d is at level %d without logging how it got there", i, adminapi.BuildLevel)
		}
	}
	load.stop() // the last phase's claims are the ones counted
	before := [3]float64{}
	for i, nd := range c.nodes[:3] {
		before[i] = readClaims(t, nd)
	}
	phase("all new")
	var claimed float64
	for i, nd := range c.nodes[:3] {
		claimed += readClaims(t, nd) - before[i]
	}
	if claimed == 0 {
		t.Fatal("no claim answered from a read after the level rose")
	}
	t.Logf("all new: %v claims answered from a read", claimed)

	// An old build cannot join now: the leader's members refuse it before
	// Raft knows it, and the membership stays as it is.
	spare := c.spare(3)
	spare.Bin = old
	c.writeConf(4)
	spare.Start("--join")
	waitFor(t, "the join of an old build refused", func() bool {
		for _, nd := range c.nodes[:3] {
			if nd.Logged("join refused") {
				return true
			}
		}
		return false
	})
	spare.Kill()
	if ms, err := c.members(0); err != nil || len(ms) != 3 {
		t.Fatalf("membership after a refused join: %v %v", ms, err)
	}
}

// upgrade stops node i and starts it again on the same data dir with this
// build.
func upgrade(t *testing.T, c *cluster, i int, isNew []bool) {
	t.Helper()
	c.term(i)
	c.nodes[i].Bin = ""
	c.start(i)
	isNew[i] = true
	t.Logf("node %d upgraded", i)
}

// contended hands a lock from a holder on each node to a waiter on each
// other node, the waiter claiming the pushed grant as 3.3 clients do (a
// retry from the connection it was pushed to: the claim a node may answer
// from a read), and leaves a lock held with a waiter queued, for the table
// comparison.
func contended(t *testing.T, clients []*client.Client, name string) {
	t.Helper()
	key := func(s string) string { return fmt.Sprintf("%s/%s", strings.ReplaceAll(name, " ", "-"), s) }
	for h := range 3 {
		w := (h + 1) % 3
		k := key(fmt.Sprintf("handoff-%d", h))
		holder, waiter := fmt.Sprintf("h%d", h), fmt.Sprintf("w%d", w)
		mustCall(t, clients[h], protocol.OpAcquire, nonReentrant(k, holder, 60000, -1))
		if r := mustCall(t, clients[w], protocol.OpAcquire, nonReentrant(k, waiter, 60000, 60000)); r.LockResult.WaitPosition != 0 {
			t.Fatalf("%s: waiter not queued: %+v", k, r.LockResult)
		}
		mustCall(t, clients[h], protocol.OpRelease, nonReentrant(k, holder, 0, -1))
		ctx, cancel := client.Timeout(10 * time.Second)
		n, err := client.WaitPush[*protocol.LockNotificationRequest](ctx, clients[w])
		cancel()
		if err != nil || n.Owner != waiter {
			t.Fatalf("%s: push to the waiter: %+v %v", k, n, err)
		}
		li := nonReentrant(k, waiter, 60000, 60000)
		li.WaiterRetry = true
		if r := mustCall(t, clients[w], protocol.OpAcquire, li); !r.Result || r.LockResult.ReentrantCount != 1 {
			t.Fatalf("%s: claim: %+v", k, r.LockResult)
		}
		// Released by its new holder, or kept for the comparison.
		if h != 2 {
			mustCall(t, clients[w], protocol.OpRelease, nonReentrant(k, waiter, 0, -1))
		}
	}
	// Held on one node, queued on another: both stay in the table.
	k := key("kept")
	mustCall(t, clients[0], protocol.OpAcquire, client.Instance(k, "REENTRANT", "keeper", client.Ms(600000), nil))
	mustCall(t, clients[0], protocol.OpAcquire, client.Instance(k, "REENTRANT", "keeper", client.Ms(600000), nil))
	if r := mustCall(t, clients[1], protocol.OpAcquire, client.Instance(k, "REENTRANT", "queued", client.Ms(600000), client.Ms(600000))); r.LockResult.WaitPosition != 0 {
		t.Fatalf("%s: not queued: %+v", k, r.LockResult)
	}
}

// forceRelease takes a lock through one node and force-releases it through
// the admin API of each other node in turn: the baseline already has
// FORCE_RELEASE, so the gate leaves it on.
func forceRelease(t *testing.T, c *cluster, cl *client.Client, name string) {
	t.Helper()
	for via := 1; via < 3; via++ {
		k := fmt.Sprintf("%s/forced-%d", strings.ReplaceAll(name, " ", "-"), via)
		mustCall(t, cl, protocol.OpAcquire, nonReentrant(k, "victim", 600000, -1))
		resp, err := http.Post(fmt.Sprintf("http://%s/v1/locks/NON_REENTRANT/%s/force-release", c.nodes[via].httpAddr(), k), "application/json", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: force release through node %d: %s", name, via, resp.Status)
		}
		if r := mustCall(t, cl, protocol.OpRelease, nonReentrant(k, "victim", 0, -1)); r.Result {
			t.Fatalf("%s: the force-released holder could still release", k)
		}
	}
}

type versionView struct {
	Build        string `json:"build"`
	ClusterLevel int    `json:"clusterLevel"`
	Reads        struct {
		Level int `json:"level"`
	} `json:"reads"`
}

// getVersion asks a node for GET /v1/cluster/version: the status, and
// the answer when it is 200.
func getVersion(t *testing.T, nd *node) (int, versionView) {
	t.Helper()
	resp, err := http.Get("http://" + nd.httpAddr() + "/v1/cluster/version")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v versionView
	if resp.StatusCode == http.StatusOK {
		if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
			t.Fatalf("GET /v1/cluster/version on %s: %v", nd.httpAddr(), err)
		}
	}
	return resp.StatusCode, v
}

func clusterVersion(t *testing.T, nd *node) versionView {
	t.Helper()
	code, v := getVersion(t, nd)
	if code != http.StatusOK {
		t.Fatalf("GET /v1/cluster/version on %s: %d", nd.httpAddr(), code)
	}
	return v
}

// readClaims is the node's count of claims answered from a read.
func readClaims(t *testing.T, nd *node) float64 {
	t.Helper()
	resp, err := http.Get("http://" + nd.httpAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), `nacoslockd_lock_read_claims_total{result="answered"} `); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatal(err)
			}
			return f
		}
	}
	return 0 // no claim counted yet: the series has no sample
}

// sameTables waits until the three replicas have applied the same index
// and compares their tables there (a stale read is the local replica's).
// Figures derived at the read (time left) are left out.
func sameTables(t *testing.T, c *cluster, name string) {
	t.Helper()
	var tables [3][]map[string]any
	var applied [3]float64
	waitFor(t, name+": every replica at one applied index", func() bool {
		for i := range 3 {
			tables[i], applied[i] = localTable(t, c.nodes[i])
		}
		return applied[0] == applied[1] && applied[1] == applied[2]
	})
	for i := 1; i < 3; i++ {
		if !reflect.DeepEqual(tables[0], tables[i]) {
			t.Fatalf("%s: node %d's table differs from node 0's at applied index %v:\n%v\n%v", name, i, applied[0], tables[0], tables[i])
		}
	}
	if len(tables[0]) == 0 {
		t.Fatalf("%s: empty tables compared", name)
	}
}

func localTable(t *testing.T, nd *node) ([]map[string]any, float64) {
	t.Helper()
	resp, err := http.Get("http://" + nd.httpAddr() + "/v1/locks?stale=true&limit=1000")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Locks        []map[string]any `json:"locks"`
		AppliedIndex float64          `json:"appliedIndex"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/locks on %s: %s %v", nd.httpAddr(), resp.Status, err)
	}
	for _, l := range out.Locks {
		delete(l, "timeLeftMs")
		ws, _ := l["waiters"].([]any)
		for _, w := range ws {
			delete(w.(map[string]any), "timeLeftMs")
		}
	}
	return out.Locks, out.AppliedIndex
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); !cond(); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 60 s", what)
		}
	}
}

// load runs acquire/release pairs with hand-offs through every node while
// nodes restart; a call that fails (its node is down) redials.
type load struct {
	mu      sync.Mutex
	paused  bool
	cond    *sync.Cond
	done    chan struct{}
	wg      sync.WaitGroup
	stopped bool
}

func startLoad(t *testing.T, c *cluster) *load {
	l := &load{done: make(chan struct{})}
	l.cond = sync.NewCond(&l.mu)
	addrs := []string{c.nodes[0].grpcAddr(), c.nodes[1].grpcAddr(), c.nodes[2].grpcAddr()}
	for w := range 4 {
		l.wg.Go(func() {
			var cl *client.Client
			defer func() {
				if cl != nil {
					_ = cl.Close()
				}
			}()
			owner := fmt.Sprintf("load-%d", w)
			for i := 0; ; i++ {
				if !l.wait() {
					return
				}
				if cl == nil {
					ctx, cancel := client.Timeout(2 * time.Second)
					var err error
					cl, err = client.Dial(ctx, addrs[(w+i)%3])
					cancel()
					if err != nil {
						cl = nil
						time.Sleep(100 * time.Millisecond)
						continue
					}
				}
				// Two workers share each key, so some acquires queue and
				// are handed the lock by the other's release.
				k := fmt.Sprintf("load/%d", (w/2)*10+i%10)
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
				_, err := call(ctx, cl, protocol.OpAcquire, nonReentrant(k, owner, 5000, 200))
				if err == nil {
					_, err = call(ctx, cl, protocol.OpRelease, nonReentrant(k, owner, 0, -1))
				}
				cancel()
				if err != nil {
					_ = cl.Close()
					cl = nil
				}
			}
		})
	}
	t.Cleanup(l.stop)
	return l
}

// wait blocks while the load is paused; false once it is stopped.
func (l *load) wait() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for l.paused && !l.stopped {
		l.cond.Wait()
	}
	return !l.stopped
}

func (l *load) pause() {
	l.mu.Lock()
	l.paused = true
	l.mu.Unlock()
}

func (l *load) resume() {
	l.mu.Lock()
	l.paused = false
	l.mu.Unlock()
	l.cond.Broadcast()
}

func (l *load) stop() {
	l.mu.Lock()
	already := l.stopped
	l.stopped = true
	l.mu.Unlock()
	l.cond.Broadcast()
	if !already {
		l.wg.Wait()
	}
}
