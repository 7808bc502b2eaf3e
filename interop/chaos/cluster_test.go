//go:build chaos

package chaos

import (
	"archive/zip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"nacos-lockd/interop/procs"
)

// cluster is a set of real nacos-lockd processes, plus one spare node for
// membership changes.
type cluster struct {
	t       *testing.T
	out     string // logs (kept)
	data    string // data dirs (removed)
	net     network
	bin     string
	hooksOK bool // the binary has --test-hooks (built with -tags testhooks)
	props   string
	nodes   []*node
	initial int
	// single: one node started without a cluster.conf, so it runs the
	// single-node engine (no Raft); the faults that need peers are left out.
	single bool

	mu sync.Mutex // node lifecycle
}

type node struct {
	i       int
	ip      string
	port    int
	dataDir string
	hooks   map[string]string
	hookF   string
	cmd     *exec.Cmd
	exited  chan struct{}
	logPath string
	starts  int
	paused  bool
	member  bool
	// wiped: the node lost its data once, so it must only ever start with
	// --join (a no-op once it has joined): started without it, it would
	// bootstrap an empty log under a replica id that once had one.
	wiped bool
}

func (n *node) grpcAddr() string { return fmt.Sprintf("%s:%d", n.ip, n.port+1000) }
func (n *node) httpAddr() string { return fmt.Sprintf("%s:%d", n.ip, n.port) }
func (n *node) address() string  { return fmt.Sprintf("%s:%d", n.ip, n.port) }

func (n *node) running() bool {
	if n.cmd == nil {
		return false
	}
	select {
	case <-n.exited:
		return false
	default:
		return true
	}
}

// chaosProps are the server settings for the runs: short scans and grace
// periods so that faults play out within seconds, and frequent snapshots
// so that log compaction and catch-up by snapshot happen too.
var chaosProps = map[string]string{
	"nacos.lock.expire.scan.interval":  "200",
	"nacos.lock.node_grace_ms":         "3000",
	"nacos.lock.raft.snapshot_entries": "500",
}

// serverBinary returns the server binary: CHAOS_BINARY, or a fresh build
// with the test hooks (-tags testhooks; a release build has none).
func serverBinary(t *testing.T) string {
	t.Helper()
	if b := os.Getenv("CHAOS_BINARY"); b != "" {
		return b
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "nacos-lockd")
	out, err := exec.Command("go", "build", "-tags", "testhooks", "-o", bin, "nacos-lockd/cmd/nacos-lockd").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func newCluster(t *testing.T, out string, nodes int, single bool) *cluster {
	t.Helper()
	if single && nodes != 1 {
		t.Fatalf("a single-node run has one node, not %d", nodes)
	}
	c := &cluster{t: t, out: out, data: t.TempDir(), bin: serverBinary(t), initial: nodes, single: single}
	help, _ := exec.Command(c.bin, "--help").CombinedOutput()
	c.hooksOK = strings.Contains(string(help), "test-hooks")
	if !c.hooksOK && os.Getenv("CHAOS_REQUIRE_HOOKS") != "" {
		t.Fatalf("%s has no --test-hooks (build it with -tags testhooks): clock, disk and leader-transfer faults need it", c.bin)
	}
	c.net = newNetwork(t, nodes+1)
	t.Cleanup(c.net.close)
	var p strings.Builder
	keys := make([]string, 0, len(chaosProps))
	for k := range chaosProps {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&p, "%s=%s\n", k, chaosProps[k])
	}
	c.props = filepath.Join(out, "application.properties")
	if err := os.WriteFile(c.props, []byte(p.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	for i := range nodes + 1 {
		ip, port := c.net.addr(i)
		c.nodes = append(c.nodes, &node{i: i, ip: ip, port: port, dataDir: filepath.Join(c.data, fmt.Sprintf("node%d", i)),
			hooks: map[string]string{}, hookF: filepath.Join(out, fmt.Sprintf("hooks-node%d.conf", i)), member: i < nodes})
	}
	t.Cleanup(func() {
		for _, n := range c.nodes {
			if n.running() {
				_ = n.cmd.Process.Signal(syscall.SIGCONT)
				_ = n.cmd.Process.Kill()
				<-n.exited
			}
		}
	})
	for i := range nodes {
		c.start(i, false)
	}
	for i := range nodes {
		if err := c.waitReady(i, 90*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// writeConf lists the members, plus extra, in a cluster.conf for one start.
func (c *cluster) writeConf(path string, extra int) error {
	var b strings.Builder
	b.WriteString("# written by interop/chaos\n")
	for _, n := range c.nodes {
		if n.member || n.i == extra {
			fmt.Fprintf(&b, "%s\n", n.address())
		}
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

// start launches node i (it must not be running); join starts it with
// --join (a new member, or a wiped one coming back).
func (c *cluster) start(i int, join bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.nodes[i]
	if n.running() {
		return
	}
	n.starts++
	n.logPath = filepath.Join(c.out, fmt.Sprintf("node%d-start%d.log", i, n.starts))
	logFile, err := os.Create(n.logPath)
	if err != nil {
		c.t.Errorf("node %d log: %v", i, err)
		return
	}
	conf := filepath.Join(c.out, fmt.Sprintf("cluster-node%d-start%d.conf", i, n.starts))
	if err := c.writeConf(conf, i); err != nil {
		c.t.Errorf("cluster.conf: %v", err)
		return
	}
	args := []string{"--port", strconv.Itoa(n.port), "--ip", n.ip, "--data-dir", n.dataDir,
		"--config", c.props, "--log-level", envOr("CHAOS_LOG_LEVEL", "info")}
	if !c.single {
		args = append(args, "--cluster-conf", conf)
	}
	if c.hooksOK {
		if err := c.writeHooks(n); err != nil {
			c.t.Errorf("hooks: %v", err)
		}
		args = append(args, "--test-hooks", n.hookF)
	}
	if join {
		n.wiped = true
	}
	if n.wiped && !c.single {
		args = append(args, "--join")
	}
	cmd := c.net.command(i, c.bin, args...)
	cmd.Stderr = logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		c.t.Errorf("start node %d: %v", i, err)
		return
	}
	n.cmd, n.exited, n.paused = cmd, make(chan struct{}), false
	exited := n.exited
	go func() {
		_ = cmd.Wait()
		logFile.Close()
		close(exited)
	}()
}

func (c *cluster) waitReady(i int, d time.Duration) error {
	n := c.nodes[i]
	deadline := time.Now().Add(d)
	for !procs.LogHas(n.logPath, `"message":"nacos-lockd ready"`) {
		if !n.running() {
			return fmt.Errorf("node %d exited before it was ready (see %s)", i, n.logPath)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("node %d not ready in %v", i, d)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return nil
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func (c *cluster) signal(i int, sig syscall.Signal) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.nodes[i]
	if !n.running() {
		return
	}
	_ = n.cmd.Process.Signal(sig)
	switch sig {
	case syscall.SIGSTOP:
		n.paused = true
	case syscall.SIGCONT:
		n.paused = false
	}
}

// kill sends SIGKILL and waits for the exit.
func (c *cluster) kill(i int) {
	n := c.nodes[i]
	c.signal(i, syscall.SIGKILL)
	if n.cmd != nil {
		<-n.exited
	}
}

// stopAll sends SIGTERM to the nodes at once and waits for them to exit,
// killing any that has not within 30 s.
func (c *cluster) stopAll(nodes []int) {
	for _, i := range nodes {
		c.signal(i, syscall.SIGTERM)
	}
	deadline := time.After(30 * time.Second)
	for _, i := range nodes {
		n := c.nodes[i]
		if n.cmd == nil {
			continue
		}
		select {
		case <-n.exited:
		case <-deadline:
			c.t.Logf("node %d did not stop within 30s of SIGTERM; killing it", i)
			c.kill(i)
		}
	}
}

// setHook changes one line of node i's test-hook file (see
// cmd/nacos-lockd/testhooks.go); an empty value removes it.
func (c *cluster) setHook(i int, key, value string) error {
	if !c.hooksOK {
		return fmt.Errorf("the binary has no --test-hooks")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.nodes[i]
	if value == "" {
		delete(n.hooks, key)
	} else {
		n.hooks[key] = value
	}
	return c.writeHooks(n)
}

func (c *cluster) writeHooks(n *node) error {
	keys := make([]string, 0, len(n.hooks))
	for k := range n.hooks {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%s\n", k, n.hooks[k])
	}
	tmp := n.hookF + ".tmp"
	if err := os.WriteFile(tmp, []byte(b.String()), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, n.hookF)
}

var httpc = &http.Client{Timeout: 2 * time.Second}

type memberView = procs.Member

func (c *cluster) members(i int) ([]memberView, error) {
	return procs.Members(c.nodes[i].httpAddr(), httpc.Timeout)
}

// leader returns the node most live nodes name as leader, or -1.
func (c *cluster) leader() int {
	votes := map[int]int{}
	for _, n := range c.nodes {
		if !n.running() || n.paused {
			continue
		}
		ms, err := c.members(n.i)
		if err != nil {
			continue
		}
		for _, m := range ms {
			if m.Role == "leader" {
				votes[c.index(m.Address)]++
			}
		}
	}
	best, bestVotes := -1, 0
	for i, v := range votes {
		if i >= 0 && v > bestVotes {
			best, bestVotes = i, v
		}
	}
	return best
}

func (c *cluster) index(address string) int {
	for _, n := range c.nodes {
		if n.address() == address {
			return n.i
		}
	}
	return -1
}

// memberIndexes are the nodes in the Raft membership.
func (c *cluster) memberIndexes() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []int
	for _, n := range c.nodes {
		if n.member {
			out = append(out, n.i)
		}
	}
	return out
}

func (c *cluster) adminCall(via int, method, path, body string) error {
	req, err := http.NewRequest(method, "http://"+c.nodes[via].httpAddr()+path, strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	cl := &http.Client{Timeout: 15 * time.Second}
	resp, err := cl.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, strings.TrimSpace(string(b)))
	}
	return nil
}

var appliedRE = regexp.MustCompile(`(?m)^nacoslockd_raft_applied_index ([0-9.e+]+)$`)

func (c *cluster) applied(i int) (uint64, error) {
	resp, err := httpc.Get("http://" + c.nodes[i].httpAddr() + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	m := appliedRE.FindSubmatch(b)
	if m == nil {
		return 0, fmt.Errorf("no applied index in /metrics")
	}
	f, err := strconv.ParseFloat(string(m[1]), 64)
	return uint64(f), err
}

// replicaDigest is one replica's persisted table.
type replicaDigest struct {
	Node    int    `json:"node"`
	Applied uint64 `json:"applied"`
	SHA256  string `json:"sha256"` // of the snapshot's lock entry
	Err     string `json:"err,omitempty"`
}

var exportRE = regexp.MustCompile(`applied index (\d+)`)

// compareReplicas waits for every member to reach the same applied index
// with no new entries, stops them (SIGTERM, see below), exports each
// data dir and compares the snapshot content byte for byte.
func (c *cluster) compareReplicas(ctx context.Context) (string, []replicaDigest, error) {
	members := c.memberIndexes()
	var last map[int]uint64
	stable := 0
	for stable < 3 {
		if ctx.Err() != nil {
			return "", nil, fmt.Errorf("replicas never settled on one applied index: %v", last)
		}
		cur := map[int]uint64{}
		for _, i := range members {
			a, err := c.applied(i)
			if err == nil {
				cur[i] = a
			}
		}
		same := len(cur) == len(members)
		var v uint64
		for _, a := range cur {
			if v == 0 {
				v = a
			}
			same = same && a == v
		}
		if same && fmt.Sprint(cur) == fmt.Sprint(last) {
			stable++
		} else {
			stable = 0
		}
		last = cur
		time.Sleep(500 * time.Millisecond)
	}
	// Stop gracefully: a node writes its table at the applied index on the
	// way out, while kill -9 would leave each at its last flush. Followers
	// first, all at once; the leader last, alone, so no new leader can be
	// elected (and append its term's first entry) on some of them only.
	leader := c.leader()
	var followers []int
	for _, i := range members {
		if i != leader {
			followers = append(followers, i)
		}
	}
	c.stopAll(followers)
	if leader >= 0 {
		c.stopAll([]int{leader})
	}
	var ds []replicaDigest
	for _, i := range members {
		d := replicaDigest{Node: i}
		dir := filepath.Join(c.data, fmt.Sprintf("export-node%d", i))
		out, err := exec.Command(c.bin, "snapshot", "export", "--data-dir", c.nodes[i].dataDir, "--out", dir).CombinedOutput()
		if err != nil {
			d.Err = fmt.Sprintf("export: %v: %s", err, out)
			ds = append(ds, d)
			continue
		}
		if m := exportRE.FindSubmatch(out); m != nil {
			d.Applied, _ = strconv.ParseUint(string(m[1]), 10, 64)
		}
		sum, err := lockEntrySHA(filepath.Join(dir, "nacos_lock.zip"))
		if err != nil {
			d.Err = err.Error()
		}
		d.SHA256 = sum
		ds = append(ds, d)
	}
	verdict := "identical"
	for _, d := range ds {
		switch {
		case d.Err != "":
			return "", ds, fmt.Errorf("node %d: %s", d.Node, d.Err)
		case d.Applied != ds[0].Applied:
			verdict = "not compared: applied indexes differ at the stop"
		case d.SHA256 != ds[0].SHA256 && verdict == "identical":
			verdict = "DIVERGED"
		}
	}
	verdict = fmt.Sprintf("%s (%d replicas at applied index %d)", verdict, len(ds), ds[0].Applied)
	if strings.HasPrefix(verdict, "DIVERGED") {
		return verdict, ds, fmt.Errorf("replicas diverged at the same applied index: %+v", ds)
	}
	return verdict, ds, nil
}

func lockEntrySHA(path string) (string, error) {
	z, err := zip.OpenReader(path)
	if err != nil {
		return "", err
	}
	defer z.Close()
	for _, f := range z.File {
		if f.Name != "lock" {
			continue
		}
		r, err := f.Open()
		if err != nil {
			return "", err
		}
		defer r.Close()
		h := sha256.New()
		if _, err := io.Copy(h, r); err != nil {
			return "", err
		}
		return hex.EncodeToString(h.Sum(nil)), nil
	}
	return "", fmt.Errorf("%s has no lock entry", path)
}
