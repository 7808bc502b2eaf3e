package cluster

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"nacos-lockd/compat"
	"nacos-lockd/interop/client"
	"nacos-lockd/interop/procs"
	"nacos-lockd/protocol"
)

// Log lines of cmd/nacos-lockd/names.go.
const (
	msgNameUnresolved = "cluster member's name does not resolve yet"
	msgNameResolved   = "cluster member's name resolves"
)

// checkNamedMembers asks node i for the membership and checks that it
// lists every address of conf by name, under the replica id the name
// (not an IP) gives.
func checkNamedMembers(t *testing.T, httpAddr string, addrs []string) {
	t.Helper()
	ms, err := procs.Members(httpAddr, 12*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]uint64{}
	for _, m := range ms {
		got[m.Address] = m.ReplicaID
	}
	for _, a := range addrs {
		m, err := compat.ParseMember(a)
		if err != nil {
			t.Fatal(err)
		}
		if id, ok := got[a]; !ok || id != m.ReplicaID() {
			t.Fatalf("members %+v: want %s with replica id %d (from its name)", ms, a, m.ReplicaID())
		}
	}
	if len(ms) != len(addrs) {
		t.Fatalf("members %+v, want %v", ms, addrs)
	}
}

// heldHere reads the node's own replica (stale=true: no leader involved)
// and reports whether key is held as a NON_REENTRANT lock there.
func heldHere(t *testing.T, httpAddr, key string) bool {
	t.Helper()
	resp, err := http.Get("http://" + httpAddr + "/v1/locks/NON_REENTRANT/" + key + "?stale=true")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Key string `json:"key"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode == http.StatusOK && out.Key == key
}

func acquire(t *testing.T, cl *client.Client, key string) {
	t.Helper()
	if r := mustCall(t, cl, protocol.OpAcquire, nonReentrant(key, "names:1", 600000, -1)); !r.Result {
		t.Fatalf("acquire %s refused: %+v", key, r.LockResult)
	}
}

// Three processes whose cluster.conf lists them as localhost:PORT and who
// are not told --ip: each finds itself as the member with its port whose
// name resolves to an address of this machine, and the cluster works
// under the names' replica ids, also after a restart. Then a fourth is
// added by name the way README's scaling runs: nacos-lockctl cluster add,
// then the new node starts with --join.
func TestClusterOfLocalhostNames(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "cluster.conf")
	var nodes []*procs.Node
	var addrs []string
	for i, port := range procs.FreePorts(t, 4) {
		addrs = append(addrs, fmt.Sprintf("localhost:%d", port))
		nodes = append(nodes, procs.New(t, port, filepath.Join(dir, fmt.Sprintf("node%d", i)), "--cluster-conf", conf))
	}
	if err := os.WriteFile(conf, []byte(strings.Join(addrs[:3], "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes[:3] {
		n.Start()
	}
	for _, n := range nodes[:3] {
		n.WaitReady(90 * time.Second)
	}
	checkNamedMembers(t, nodes[0].HTTPAddr(), addrs[:3])
	cl := dial(t, nodes[0].GRPCAddr())
	acquire(t, cl, "by-name")
	nodes[2].Term(30 * time.Second)
	nodes[2].StartReady()
	waitHeld(t, nodes[2].HTTPAddr(), "by-name")
	checkNamedMembers(t, nodes[2].HTTPAddr(), addrs[:3])

	// Scaling up: the StatefulSet's new cluster.conf lists the fourth too.
	if err := os.WriteFile(conf, []byte(strings.Join(addrs, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(procs.Binary(t, "nacos-lockctl"), "--server", nodes[1].HTTPAddr(), "cluster", "add", addrs[3]).CombinedOutput()
	if err != nil {
		t.Fatalf("cluster add %s: %v\n%s", addrs[3], err, out)
	}
	nodes[3].StartReady("--join")
	waitHeld(t, nodes[3].HTTPAddr(), "by-name")
	ms, err := procs.Members(nodes[0].HTTPAddr(), 12*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 4 || !slices.ContainsFunc(ms, func(m procs.Member) bool { return m.Address == addrs[3] }) {
		t.Fatalf("members after adding %s: %+v", addrs[3], ms)
	}
	// --join does nothing to a node with data (README: the chart then
	// gives it to every pod): a first member and the joined one restart
	// with it under their ids, and the membership stays as it was.
	ids := func(ms []procs.Member) map[string]uint64 {
		out := map[string]uint64{}
		for _, m := range ms {
			out[m.Address] = m.ReplicaID
		}
		return out
	}
	for _, i := range []int{0, 3} {
		nodes[i].Term(30 * time.Second)
		nodes[i].StartReady("--join")
	}
	after, err := procs.Members(nodes[0].HTTPAddr(), 12*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(ids(after), ids(ms)) {
		t.Fatalf("members after restarts with --join %+v, want %+v", after, ms)
	}
}

func waitHeld(t *testing.T, httpAddr, key string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !heldHere(t, httpAddr, key) {
		if time.Now().After(deadline) {
			t.Fatalf("%s not held on %s's replica within 30s", key, httpAddr)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// nameHosts is a hosts file that the nodes see as their /etc/hosts, each
// in a private mount namespace (unshare -m, a bind mount), so the test can
// make names appear and move without touching the machine's /etc/hosts.
type nameHosts struct {
	t    *testing.T
	path string
}

// set rewrites the file in place: the bind mounts hold its inode, so it
// must not be replaced by a new file.
func (h nameHosts) set(names map[string]string) {
	h.t.Helper()
	var b strings.Builder
	b.WriteString("127.0.0.1 localhost\n")
	for name, ip := range names {
		fmt.Fprintf(&b, "%s %s\n", ip, name)
	}
	if err := os.WriteFile(h.path, []byte(b.String()), 0o644); err != nil {
		h.t.Fatal(err)
	}
}

// wrap is the command line that runs a node with the hosts file (and a
// resolv.conf whose name server refuses at once, so that a name missing
// from the file fails fast instead of waiting on this machine's DNS) as
// its own.
func (h nameHosts) wrap(resolv string) []string {
	return []string{"unshare", "--mount", "--propagation", "private", "--", "sh", "-c",
		`mount --bind "$1" /etc/hosts && mount --bind "$2" /etc/resolv.conf && shift 2 && exec "$@"`, "sh", h.path, resolv}
}

// Members listed by DNS name in a StatefulSet's way: a member whose name
// does not resolve yet when the others start (they serve with a quorum and
// say so in the log), that then appears, and that later comes back at
// another IP under the same name and replica id, which the others reach
// only by resolving the name again.
func TestClusterNamesResolveLateAndMove(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: each node runs in a private mount namespace with its own /etc/hosts")
	}
	if out, err := exec.Command("unshare", "--mount", "true").CombinedOutput(); err != nil {
		t.Fatalf("unshare --mount (util-linux) failed as root: %v %s", err, out)
	}
	dir := t.TempDir()
	hosts := nameHosts{t, filepath.Join(dir, "hosts")}
	resolv := filepath.Join(dir, "resolv.conf")
	if err := os.WriteFile(resolv, []byte("nameserver 127.0.0.1\noptions timeout:1 attempts:1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ports := procs.FreePorts(t, 3)
	names := []string{"n0.lockd.test", "n1.lockd.test", "n2.lockd.test"}
	var addrs []string
	for i, name := range names {
		addrs = append(addrs, fmt.Sprintf("%s:%d", name, ports[i]))
	}
	conf := filepath.Join(dir, "cluster.conf")
	if err := os.WriteFile(conf, []byte("# a StatefulSet's members\n"+strings.Join(addrs, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// n0 is told its name, n1 its IP (found as the member resolving to
	// it), n2 its name.
	self := []string{"n0.lockd.test", "127.0.0.22", "n2.lockd.test"}
	var nodes []*procs.Node
	for i := range names {
		n := procs.New(t, ports[i], filepath.Join(dir, fmt.Sprintf("node%d", i)), "--cluster-conf", conf, "--ip", self[i])
		n.Wrap = hosts.wrap(resolv)
		nodes = append(nodes, n)
	}
	ips := map[string]string{names[0]: "127.0.0.21", names[1]: "127.0.0.22"}
	hosts.set(ips) // n2 does not resolve yet
	nodes[0].Start()
	nodes[1].Start()
	nodes[0].WaitReady(90 * time.Second)
	nodes[1].WaitReady(90 * time.Second)
	for _, n := range nodes[:2] {
		if !n.Logged(msgNameUnresolved) || !n.Logged(addrs[2]) {
			t.Fatalf("node %d did not say that %s does not resolve:\n%s", n.Port, addrs[2], procs.Tail(n.LogPath, 30))
		}
	}
	cl := dial(t, nodes[0].GRPCAddr())
	acquire(t, cl, "before-n2")

	// n2's pod is scheduled: its name appears, it starts and catches up.
	ips[names[2]] = "127.0.0.23"
	hosts.set(ips)
	nodes[2].StartReady()
	waitHeld(t, nodes[2].HTTPAddr(), "before-n2")
	checkNamedMembers(t, nodes[0].HTTPAddr(), addrs)
	for _, n := range nodes[:2] {
		for !n.Logged(`"127.0.0.23"`) {
			time.Sleep(50 * time.Millisecond) // the watch logs within its 5 s period
		}
		if !n.Logged(msgNameResolved) {
			t.Fatalf("node %d did not log %q", n.Port, msgNameResolved)
		}
	}

	// n2 comes back elsewhere: same name, same data, new IP. It listens on
	// 127.0.0.24 only, so it hears from the others only if they resolve
	// its name again; its replica sees a lock taken after its return only
	// through them.
	nodes[2].Kill()
	ips[names[2]] = "127.0.0.24"
	hosts.set(ips)
	nodes[2].StartReady()
	if !nodes[2].Logged(`"addrs":["127.0.0.24"]`) {
		t.Fatalf("n2 does not listen at its new address:\n%s", procs.Tail(nodes[2].LogPath, 30))
	}
	acquire(t, cl, "after-move")
	waitHeld(t, nodes[2].HTTPAddr(), "after-move")
	checkNamedMembers(t, nodes[2].HTTPAddr(), addrs)
}

func dial(t *testing.T, addr string) *client.Client {
	t.Helper()
	ctx, cancel := client.Timeout(10 * time.Second)
	defer cancel()
	cl, err := client.Dial(ctx, addr)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { _ = cl.Close() })
	return cl
}
