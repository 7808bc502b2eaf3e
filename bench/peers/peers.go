package peers

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"nacos-lockd/internal/netports"
	"nacos-lockd/settings"
)

// Proc is a started server process.
type Proc struct {
	Name string
	Dir  string // its working and data directory
	Log  string // combined stdout and stderr
	CPUs CPUSet // the CPUs it was started on (empty: unpinned)
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// PID is the server's process id.
func (p *Proc) PID() int { return p.cmd.Process.Pid }

// Start runs bin with args, output to dir/<name>.log.
func Start(name, dir, bin string, args ...string) (*Proc, error) {
	return StartOn(nil, name, dir, bin, args...)
}

// StartOn is Start with the process pinned to cpus from its start (see
// StartCmd); empty cpus: unpinned. Every server helper below takes cpus
// the same way.
func StartOn(cpus CPUSet, name, dir, bin string, args ...string) (*Proc, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	logPath := filepath.Join(dir, name+".log")
	lf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	// A relative path with a slash would be resolved against dir, the
	// server's own working directory, not against ours.
	if strings.ContainsRune(bin, filepath.Separator) && !filepath.IsAbs(bin) {
		if abs, err := filepath.Abs(bin); err == nil {
			bin = abs
		}
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = lf, lf
	// Own process group, so a Ctrl-C of the bench reaches it only through
	// Stop, and Stop can end the whole group (the JVM's helpers too).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := StartCmd(cmd, cpus); err != nil {
		lf.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &Proc{Name: name, Dir: dir, Log: logPath, CPUs: cpus, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		lf.Close()
		close(p.done)
	}()
	return p, nil
}

// Exited reports whether the process has ended.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Pause stops the process group (SIGSTOP) until Resume: an idle server
// that shares the pinned core with the one being measured still runs its
// timers (Raft ticks and heartbeats, a JVM's housekeeping), and that CPU
// and those wake-ups would land on the measured one's figures.
func (p *Proc) Pause() {
	if !p.Exited() {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGSTOP)
	}
}

// Resume continues a paused process group (SIGCONT; harmless if running).
func (p *Proc) Resume() {
	if !p.Exited() {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGCONT)
	}
}

// Stop sends SIGTERM to the process group and waits up to grace, then
// kills it. It returns how long the process took to exit.
func (p *Proc) Stop(grace time.Duration) time.Duration {
	start := time.Now()
	if p.Exited() {
		return 0
	}
	p.Resume() // a paused process would not see the SIGTERM
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.done:
	case <-t.C:
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
	return time.Since(start)
}

// Tail returns the last lines of the log, for error messages.
func (p *Proc) Tail(n int) string {
	b, _ := os.ReadFile(p.Log)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// WaitTCP waits until addr accepts connections, the process exits, or ctx
// ends.
func (p *Proc) WaitTCP(ctx context.Context, addr string) error {
	for {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
			return nil
		}
		if p.Exited() {
			return fmt.Errorf("%s exited before listening on %s: %v\n%s", p.Name, addr, p.err, p.Tail(15))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not listening on %s: %w\n%s", p.Name, addr, ctx.Err(), p.Tail(15))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// WaitHTTP waits until GET url answers 200.
func (p *Proc) WaitHTTP(ctx context.Context, url string) error {
	c := &http.Client{Timeout: time.Second}
	for {
		resp, err := c.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if p.Exited() {
			return fmt.Errorf("%s exited before %s answered: %v\n%s", p.Name, url, p.err, p.Tail(15))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %s not ready: %w\n%s", p.Name, url, ctx.Err(), p.Tail(15))
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// FreePort returns a loopback TCP port nobody listens on, with port-1000,
// port+1000 and port+1001 free too (nacos-lockd's Raft and gRPC ports; a
// Nacos server's JRaft, SDK and cluster gRPC ports). All four lie in the
// kernel's ephemeral range: the tests' own servers take ports below it
// (interop/procs), so a bench test running beside them must not pick a
// port-1000 that falls there.
func FreePort() (int, error) {
	lo := netports.EphemeralStart()
	for range 50 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		p := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if p-1000 < lo || p > 64000 {
			continue
		}
		if neighboursFree(p) {
			return p, nil
		}
	}
	return 0, errors.New("no free port triple found")
}

// neighboursFree reports whether the ports a server on port p also binds
// (see FreePort) can be bound now.
func neighboursFree(p int) bool {
	for _, q := range []int{p - 1000, p + 1000, p + 1001} {
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(q)))
		if err != nil {
			return false
		}
		l.Close()
	}
	return true
}

// anyFreePort is a loopback port nothing listens on now.
func anyFreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

var aptUpdate sync.Once

// EnsureDebian installs pkg with apt-get unless check() already finds what
// it provides. Output goes to logDir/apt-<pkg>.log.
func EnsureDebian(pkg string, check func() bool, logDir string) error {
	if check() {
		return nil
	}
	if _, err := exec.LookPath("apt-get"); err != nil {
		return fmt.Errorf("%s is not installed and there is no apt-get", pkg)
	}
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return err
	}
	logPath := filepath.Join(logDir, "apt-"+pkg+".log")
	lf, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer lf.Close()
	run := func(args ...string) error {
		cmd := exec.Command("apt-get", args...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		cmd.Stdout, cmd.Stderr = lf, lf
		return cmd.Run()
	}
	aptUpdate.Do(func() { _ = run("update", "-qq") })
	if err := run("install", "-y", "-qq", "--no-install-recommends", pkg); err != nil {
		return fmt.Errorf("apt-get install %s: %w (see %s)", pkg, err, logPath)
	}
	if !check() {
		return fmt.Errorf("apt-get install %s succeeded but it is still not found", pkg)
	}
	return nil
}

func onPath(bin string) func() bool {
	return func() bool { _, err := exec.LookPath(bin); return err == nil }
}

func exists(path string) func() bool {
	return func() bool { _, err := os.Stat(path); return err == nil }
}

// Redis starts redis-server on port with an append-only file, fsync'd on
// every write (fsync=true: appendfsync always) or left to the OS
// (appendfsync no). RDB snapshots are off in both.
func Redis(ctx context.Context, cpus CPUSet, dir string, port int, fsync bool) (*Proc, error) {
	if err := EnsureDebian("redis-server", onPath("redis-server"), dir); err != nil {
		return nil, err
	}
	policy := "no"
	if fsync {
		policy = "always"
	}
	p, err := StartOn(cpus, "redis", dir, "redis-server", "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--dir", dir, "--save", "", "--appendonly", "yes", "--appendfsync", policy,
		"--daemonize", "no", "--protected-mode", "yes", "--logfile", "")
	if err != nil {
		return nil, err
	}
	if err := p.WaitTCP(ctx, net.JoinHostPort("127.0.0.1", strconv.Itoa(port))); err != nil {
		p.Stop(5 * time.Second)
		return nil, err
	}
	return p, nil
}

const zkJar = "/usr/share/java/zookeeper.jar"

// ZooKeeper starts a standalone ZooKeeper from Debian's package (its
// defaults: forceSync on, so every transaction is fsync'd).
func ZooKeeper(ctx context.Context, cpus CPUSet, dir string, port int) (*Proc, error) {
	if err := EnsureDebian("zookeeper", exists(zkJar), dir); err != nil {
		return nil, err
	}
	java, err := exec.LookPath("java")
	if err != nil {
		return nil, errors.New("zookeeper needs java on PATH")
	}
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		return nil, err
	}
	cfg := filepath.Join(dir, "zoo.cfg")
	conf := fmt.Sprintf("tickTime=2000\ndataDir=%s\nclientPort=%d\nclientPortAddress=127.0.0.1\nmaxClientCnxns=0\nadmin.enableServer=false\n4lw.commands.whitelist=ruok\n", data, port)
	if err := os.WriteFile(cfg, []byte(conf), 0o644); err != nil {
		return nil, err
	}
	log4j := filepath.Join(dir, "log4j.properties")
	_ = os.WriteFile(log4j, []byte("log4j.rootLogger=WARN, C\nlog4j.appender.C=org.apache.log4j.ConsoleAppender\nlog4j.appender.C.layout=org.apache.log4j.PatternLayout\nlog4j.appender.C.layout.ConversionPattern=%d %p %c: %m%n\n"), 0o644)
	p, err := StartOn(cpus, "zookeeper", dir, java, "-Xmx1g", "-Dzookeeper.admin.enableServer=false",
		"-Dlog4j.configuration=file:"+log4j, "-cp", zkJar+":"+dir,
		"org.apache.zookeeper.server.ZooKeeperServerMain", cfg)
	if err != nil {
		return nil, err
	}
	if err := p.WaitTCP(ctx, net.JoinHostPort("127.0.0.1", strconv.Itoa(port))); err != nil {
		p.Stop(5 * time.Second)
		return nil, err
	}
	return p, nil
}

// BuildEtcd builds the bench/etcd module (etcd's server and its lock
// clients) into out, unless out is newer than the module's sources.
func BuildEtcd(ctx context.Context, moduleDir, out string, logDir string) error {
	// bench/load is compiled into the peer too.
	if fresh(out, moduleDir) && fresh(out, filepath.Join(moduleDir, "..", "load")) {
		return nil
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		return errors.New("building etcd needs the go command")
	}
	// -mod=mod: the module replaces nacos-lockd with ../.., whose go.mod
	// moves on; let go add the sums that brings rather than fail.
	cmd := exec.CommandContext(ctx, goBin, "build", "-mod=mod", "-trimpath", "-o", out, ".")
	cmd.Dir = moduleDir
	b, err := cmd.CombinedOutput()
	_ = os.WriteFile(filepath.Join(logDir, "etcd-build.log"), b, 0o644)
	if err != nil {
		return fmt.Errorf("build etcd (bench/etcd): %w\n%s", err, LastLines(string(b), 10))
	}
	return nil
}

func fresh(out, srcDir string) bool {
	st, err := os.Stat(out)
	if err != nil {
		return false
	}
	newer := false
	_ = filepath.WalkDir(srcDir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		if fi, err := d.Info(); err == nil && fi.ModTime().After(st.ModTime()) && path != out {
			newer = true
		}
		return nil
	})
	return !newer
}

// LastLines is the end of a command's output, for error messages.
func LastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Etcd starts a single-node etcd (built by BuildEtcd) serving clients on
// port and peers on a free port of its own. (Not port+1: FreePort checks
// only the Nacos layout's neighbours, and a port next to a free one may be
// some connection's local end; one suite run lost etcd-v3lock that way.)
func Etcd(ctx context.Context, cpus CPUSet, bin, dir string, port int) (*Proc, error) {
	peerPort, err := anyFreePort()
	if err != nil {
		return nil, fmt.Errorf("etcd peer port: %w", err)
	}
	client := fmt.Sprintf("http://127.0.0.1:%d", port)
	peer := fmt.Sprintf("http://127.0.0.1:%d", peerPort)
	p, err := StartOn(cpus, "etcd", dir, bin, "server", "--name", "bench", "--data-dir", filepath.Join(dir, "data"),
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
		"--initial-cluster", "bench="+peer, "--log-level", "warn")
	if err != nil {
		return nil, err
	}
	if err := p.WaitHTTP(ctx, client+"/health"); err != nil {
		p.Stop(5 * time.Second)
		return nil, err
	}
	return p, nil
}

// NacosLockd starts nacos-lockd on main port port with a fresh data dir
// and returns once it is ready (/readyz).
func NacosLockd(ctx context.Context, cpus CPUSet, bin, dir string, port int, extra ...string) (*Proc, time.Duration, error) {
	start := time.Now()
	conf, err := writeBenchProperties(dir)
	if err != nil {
		return nil, 0, err
	}
	args := append([]string{"--port", strconv.Itoa(port), "--config", conf, "--data-dir", filepath.Join(dir, "data"), "--log-level", "warn"}, extra...)
	p, err := StartOn(cpus, "nacos-lockd", dir, bin, args...)
	if err != nil {
		return nil, 0, err
	}
	if err := p.WaitHTTP(ctx, fmt.Sprintf("http://127.0.0.1:%d/readyz", port)); err != nil {
		p.Stop(5 * time.Second)
		return nil, 0, err
	}
	return p, time.Since(start), nil
}

// BenchProperties is the application.properties every nacos-lockd the
// bench starts runs with: the defaults, except that the per-connection
// request limit is lifted to its maximum. The limit is a guard against a
// runaway client, which no peer has, and its default (2000 requests/s)
// is below what one connection drives on a fast machine: W1 c=1 at more
// than 1000 pairs/s was answered "Too many lock requests" and measured
// the limiter instead of the server.
func BenchProperties() string {
	return fmt.Sprintf("# nacos-lock-bench: the defaults, with no per-connection request limit\n%s=%d\n",
		settings.LockMaxRequestsPerSecond.Prop, settings.LockMaxRequestsPerSecond.Max)
}

// writeBenchProperties writes BenchProperties into dir and returns its path.
func writeBenchProperties(dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	path := filepath.Join(dir, "bench.properties")
	if err := os.WriteFile(path, []byte(BenchProperties()), 0o644); err != nil {
		return "", fmt.Errorf("nacos-lockd bench properties: %w", err)
	}
	return path, nil
}

// FreePorts returns n ports as FreePort does, no two of whose triples
// (port-1000, port, port+1000) overlap, for the nodes of one cluster.
func FreePorts(n int) ([]int, error) {
	var out []int
	for tries := 0; len(out) < n; tries++ {
		if tries >= 50*n {
			return nil, errors.New("no free, non-overlapping port triples found")
		}
		p, err := FreePort()
		if err != nil {
			return nil, err
		}
		ok := true
		for _, q := range out {
			if d := p - q; d == 0 || d == 1000 || d == -1000 || d == 2000 || d == -2000 {
				ok = false
			}
		}
		if ok {
			out = append(out, p)
		}
	}
	return out, nil
}

// LockdCluster is a nacos-lockd cluster started by NacosLockdCluster.
type LockdCluster struct {
	Procs  []*Proc
	Ports  []int // each node's main port (Raft on port-1000, SDK gRPC on port+1000)
	Leader int   // index of the node that led once all were ready
}

// Addrs is the nodes' main-port addresses, as cluster.conf lists them and
// a Nacos client's multi-address serverAddr would.
func (c *LockdCluster) Addrs() []string {
	out := make([]string, len(c.Ports))
	for i, p := range c.Ports {
		out[i] = net.JoinHostPort("127.0.0.1", strconv.Itoa(p))
	}
	return out
}

// PIDs is every node's process id.
func (c *LockdCluster) PIDs() []int {
	out := make([]int, len(c.Procs))
	for i, p := range c.Procs {
		out[i] = p.PID()
	}
	return out
}

// Stop stops every node (all at once, each with grace).
func (c *LockdCluster) Stop(grace time.Duration) {
	var wg sync.WaitGroup
	for _, p := range c.Procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.Stop(grace)
		}()
	}
	wg.Wait()
}

// NacosLockdCluster starts one nacos-lockd process from bin per main port
// in ports (FreePorts) as one cluster on loopback, all pinned to cpus:
// dir/cluster.conf lists 127.0.0.1:<port> for each, and node i runs with
// its own --port and data dir (dir/node<i>/data), --ip 127.0.0.1 and
// extra. It returns once every node answers /readyz (which needs a
// leader) and every node names the same leader in /v1/cluster/members.
func NacosLockdCluster(ctx context.Context, cpus CPUSet, bin, dir string, ports []int, extra ...string) (*LockdCluster, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	c := &LockdCluster{Ports: slices.Clone(ports), Leader: -1}
	conf := filepath.Join(dir, "cluster.conf")
	if err := os.WriteFile(conf, []byte("# nacos-lock-bench\n"+strings.Join(c.Addrs(), "\n")+"\n"), 0o644); err != nil {
		return nil, err
	}
	props, err := writeBenchProperties(dir)
	if err != nil {
		return nil, err
	}
	for i, port := range ports {
		nd := filepath.Join(dir, fmt.Sprintf("node%d", i))
		args := append([]string{"--port", strconv.Itoa(port), "--ip", "127.0.0.1", "--cluster-conf", conf, "--config", props,
			"--data-dir", filepath.Join(nd, "data"), "--log-level", "warn"}, extra...)
		p, err := StartOn(cpus, fmt.Sprintf("nacos-lockd-%d", i), nd, bin, args...)
		if err != nil {
			c.Stop(5 * time.Second)
			return nil, err
		}
		c.Procs = append(c.Procs, p)
	}
	// A node is ready only once a quorum has elected a leader, so every
	// node is started before any is waited for.
	for i, p := range c.Procs {
		if err := p.WaitHTTP(ctx, fmt.Sprintf("http://127.0.0.1:%d/readyz", ports[i])); err != nil {
			c.Stop(5 * time.Second)
			return nil, err
		}
	}
	for {
		leader, err := c.agreedLeader(ctx)
		if err == nil {
			c.Leader = leader
			return c, nil
		}
		select {
		case <-ctx.Done():
			c.Stop(5 * time.Second)
			return nil, fmt.Errorf("cluster of %d: no agreed leader (last: %v): %w", len(ports), err, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// agreedLeader is the index of the node every node's /v1/cluster/members
// names leader.
func (c *LockdCluster) agreedLeader(ctx context.Context) (int, error) {
	addrs := c.Addrs()
	agreed := -1
	for i, a := range addrs {
		if c.Procs[i].Exited() {
			return -1, fmt.Errorf("%s exited: %v\n%s", c.Procs[i].Name, c.Procs[i].err, c.Procs[i].Tail(15))
		}
		leader, err := memberLeader(ctx, a)
		if err != nil {
			return -1, fmt.Errorf("%s: %w", a, err)
		}
		li := slices.Index(addrs, leader)
		switch {
		case li < 0:
			return -1, fmt.Errorf("%s names leader %q, not a member", a, leader)
		case agreed >= 0 && li != agreed:
			return -1, fmt.Errorf("%s names leader %s, %s names %s", addrs[0], addrs[agreed], a, leader)
		}
		agreed = li
	}
	return agreed, nil
}

// memberLeader asks the node at httpAddr (main port) for the address of
// the member it sees leading.
func memberLeader(ctx context.Context, httpAddr string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 12*time.Second) // the server bounds its ReadIndex at 10 s
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+httpAddr+"/v1/cluster/members", nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var out struct {
		Members []struct {
			Address string `json:"address"`
			Role    string `json:"role"`
		} `json:"members"`
		Error string `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("members: %d %s", resp.StatusCode, out.Error)
	}
	for _, m := range out.Members {
		if m.Role == "leader" {
			return m.Address, nil
		}
	}
	return "", errors.New("no member is leader")
}

// Metric reads one sample from a Prometheus text endpoint: name with the
// exact label set labels ("" for none), summed over matching lines when
// labels is "*".
func Metric(url, name, labels string) (float64, error) {
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	found, sum := false, 0.0
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name) {
			continue
		}
		rest := line[len(name):]
		var lab string
		switch {
		case strings.HasPrefix(rest, "{"):
			end := strings.IndexByte(rest, '}')
			if end < 0 {
				continue
			}
			lab, rest = rest[1:end], rest[end+1:]
		case strings.HasPrefix(rest, " "):
		default:
			continue // a longer name
		}
		if labels != "*" && lab != labels {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
		if err != nil {
			continue
		}
		found = true
		sum += v
	}
	if !found {
		return 0, fmt.Errorf("metric %s{%s} not found at %s", name, labels, url)
	}
	return sum, nil
}

// ErrPortTaken says a server could not bind one of the ports it was given.
var ErrPortTaken = errors.New("a port it was given was taken")

// NacosPeer starts a real Nacos 3.1.0 server (interop/nacos-peer, the
// pig-mesh rebuild from Maven Central; built with Maven on first use) on
// main port port, standalone and auth off, and returns once its lock module
// answers a lock call on the SDK port (port+1000): its JRaft group elects
// itself some seconds after the server says it started.
func NacosPeer(ctx context.Context, cpus CPUSet, peerDir, dir string, port int, probe func(context.Context, string) error) (*Proc, error) {
	peerDir, err := filepath.Abs(peerDir)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(peerDir, "target", "peer.classpath")); err != nil {
		build := exec.CommandContext(ctx, "mvn", "-B", "-q", "-ntp", "-f", filepath.Join(peerDir, "pom.xml"), "package")
		if out, err := build.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("build the Nacos peer (mvn package in %s): %w\n%s", peerDir, err, LastLines(string(out), 15))
		}
	}
	// The JVM's full tiered JIT, as Nacos's own start-up script runs it:
	// run-peer.sh's default, C1 only, starts the differential tests faster
	// but would measure Nacos with code its JIT never finished.
	p, err := StartOn(cpus, "nacos-3.1", dir, "env", "NACOS_PEER_JIT_OPTS=", "bash", filepath.Join(peerDir, "run-peer.sh"),
		strconv.Itoa(port), filepath.Join(dir, "home"))
	if err != nil {
		return nil, err
	}
	sdk := fmt.Sprintf("127.0.0.1:%d", port+1000)
	var last error
	for {
		if p.Exited() {
			if log, _ := os.ReadFile(p.Log); bytes.Contains(log, []byte("Address already in use")) {
				return nil, fmt.Errorf("Nacos peer exited: %w: %v\n%s", ErrPortTaken, p.err, p.Tail(15))
			}
			return nil, fmt.Errorf("Nacos peer exited: %v\n%s", p.err, p.Tail(15))
		}
		pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		last = probe(pctx, sdk)
		cancel()
		if last == nil {
			return p, nil
		}
		select {
		case <-ctx.Done():
			p.Stop(10 * time.Second)
			return nil, fmt.Errorf("Nacos peer answers no lock call on %s (last: %v): %w\n%s", sdk, last, ctx.Err(), p.Tail(15))
		case <-time.After(500 * time.Millisecond):
		}
	}
}
