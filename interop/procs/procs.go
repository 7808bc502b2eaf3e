// Package procs runs real nacos-lockd processes for tests: it builds the
// binaries once per test process, finds free port triples (Raft, main,
// SDK gRPC), starts nodes and waits for their ready line, and stops,
// kills, pauses or restarts them. Tests talk to the nodes over the
// network only.
package procs

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"nacos-lockd/internal/netports"
)

// ReadyLine is what a node logs, once, when it serves.
const ReadyLine = `"message":"nacos-lockd ready"`

var (
	buildMu  sync.Mutex
	buildDir string
	built    = map[string]string{}
)

// Binary builds the named command of this module (e.g. "nacos-lockd",
// "nacos-lockctl") once per test process and returns its path.
func Binary(tb testing.TB, name string) string {
	tb.Helper()
	path, err := BuildBinary(name)
	if err != nil {
		tb.Fatal(err)
	}
	return path
}

// BuildBinary is Binary for callers without a testing.TB (TestMain).
func BuildBinary(name string) (string, error) {
	buildMu.Lock()
	defer buildMu.Unlock()
	if path, ok := built[name]; ok {
		return path, nil
	}
	if buildDir == "" {
		dir, err := os.MkdirTemp("", "nacos-lockd-test-bin")
		if err != nil {
			return "", err
		}
		buildDir = dir
	}
	path := filepath.Join(buildDir, name)
	out, err := exec.Command("go", "build", "-o", path, "nacos-lockd/cmd/"+name).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build %s: %v\n%s", name, err, out)
	}
	built[name] = path
	return path, nil
}

// Cleanup removes the built binaries; call it from TestMain after m.Run.
func Cleanup() {
	buildMu.Lock()
	defer buildMu.Unlock()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
}

// FreePorts returns n main ports P with P-1000, P and P+1000 free and no
// two triples overlapping. NACOS_LOCKD_TEST_PORTS=lo-hi draws the main
// ports from lo..hi instead of 21000 up to below the kernel's ephemeral
// range, for machines shared by several people running tests side by side.
// Below that range because a node restarted on its ports (upgrade and
// restart tests) found them taken by some outgoing connection's local port
// in between, once in a while, when they were drawn from inside it.
func FreePorts(tb testing.TB, n int) []int {
	tb.Helper()
	out, err := PickPorts(n)
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

// PickPorts is FreePorts for callers without a testing.TB (TestMain).
func PickPorts(n int) ([]int, error) {
	lo, hi := 21000, belowEphemeral()
	if r := os.Getenv("NACOS_LOCKD_TEST_PORTS"); r != "" {
		if _, err := fmt.Sscanf(r, "%d-%d", &lo, &hi); err != nil || lo < 1001 || hi > 64535 || hi < lo {
			return nil, fmt.Errorf("NACOS_LOCKD_TEST_PORTS=%q: want lo-hi within 1001-64535", r)
		}
	}
	used := map[int]bool{}
	var out []int
	for tries := 0; len(out) < n && tries < 2000; tries++ {
		p := lo + rand.IntN(hi-lo+1)
		triple := []int{p - 1000, p, p + 1000}
		ok := true
		for _, q := range triple {
			if used[q] || !free(q) {
				ok = false
				break
			}
		}
		if ok {
			for _, q := range triple {
				used[q] = true
			}
			out = append(out, p)
		}
	}
	if len(out) < n {
		return nil, fmt.Errorf("not enough free ports in %d-%d", lo, hi)
	}
	return out, nil
}

// belowEphemeral is the highest main port whose triple stays below the
// kernel's ephemeral port range (Linux's ip_local_port_range; 32768 when
// it cannot be read), so no outgoing connection is given one of them.
func belowEphemeral() int {
	start := netports.EphemeralStart()
	if start <= 23001 { // too low to leave the tests a range: assume the default
		start = netports.DefaultEphemeralStart
	}
	return start - 1001
}

func free(port int) bool {
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return false
	}
	l.Close()
	return true
}

// Node is one nacos-lockd process (restartable on the same port and data
// dir).
type Node struct {
	tb      testing.TB
	Port    int    // main port; SDK gRPC is Port+1000
	DataDir string // --data-dir
	Args    []string
	LogPath string // stderr of the latest start
	// Bin, if set, is the binary to run instead of this module's
	// nacos-lockd (an older release, in the upgrade test). It may change
	// between starts.
	Bin string
	// Wrap, if set, is a command line the binary and its arguments are
	// appended to (e.g. unshare into a mount namespace); it must exec the
	// binary, so that signals reach the server.
	Wrap []string

	cmd     *exec.Cmd
	exited  chan struct{}
	exitErr error
	paused  bool
	starts  int
}

// New describes a node; Start runs it. args are passed after --port and
// --data-dir.
func New(tb testing.TB, port int, dataDir string, args ...string) *Node {
	n := &Node{tb: tb, Port: port, DataDir: dataDir, Args: args}
	tb.Cleanup(func() {
		if n.Running() {
			if n.paused {
				_ = n.cmd.Process.Signal(syscall.SIGCONT)
			}
			_ = n.cmd.Process.Kill()
			<-n.exited
		}
		if tb.Failed() && n.LogPath != "" {
			tb.Logf("---- %s\n%s", n.LogPath, Tail(n.LogPath, 60))
		}
	})
	return n
}

// Start launches the process and returns without waiting for ready.
func (n *Node) Start(extra ...string) {
	n.tb.Helper()
	bin := n.Bin
	if bin == "" {
		bin = Binary(n.tb, "nacos-lockd")
	}
	n.starts++
	dir := filepath.Dir(n.DataDir)
	n.LogPath = filepath.Join(dir, fmt.Sprintf("%s-start%d.log", filepath.Base(n.DataDir), n.starts))
	logFile, err := os.Create(n.LogPath)
	if err != nil {
		n.tb.Fatal(err)
	}
	args := append([]string{"--port", fmt.Sprint(n.Port), "--data-dir", n.DataDir}, n.Args...)
	argv := append(append(append([]string(nil), n.Wrap...), bin), append(args, extra...)...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stderr = logFile
	if err := cmd.Start(); err != nil {
		n.tb.Fatalf("start node on %d: %v", n.Port, err)
	}
	n.cmd, n.exited, n.paused, n.exitErr = cmd, make(chan struct{}), false, nil
	go func() {
		n.exitErr = cmd.Wait()
		logFile.Close()
		close(n.exited)
	}()
}

// StartReady launches the process and waits for its ready line.
func (n *Node) StartReady(extra ...string) {
	n.tb.Helper()
	n.Start(extra...)
	n.WaitReady(90 * time.Second)
}

// WaitReady waits for the ready line of the latest start.
func (n *Node) WaitReady(d time.Duration) {
	n.tb.Helper()
	deadline := time.Now().Add(d)
	for !n.Logged(ReadyLine) {
		select {
		case <-n.exited:
			n.tb.Fatalf("node %d exited before ready (%v):\n%s", n.Port, n.exitErr, Tail(n.LogPath, 60))
		default:
		}
		if time.Now().After(deadline) {
			n.tb.Fatalf("node %d not ready within %v:\n%s", n.Port, d, Tail(n.LogPath, 60))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Running reports whether the process is alive.
func (n *Node) Running() bool {
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

// Exited is closed when the latest process has exited; ExitErr then says how.
func (n *Node) Exited() <-chan struct{} { return n.exited }

// ExitErr is the latest process's exit error (valid once Exited is closed).
func (n *Node) ExitErr() error { return n.exitErr }

// Kill sends SIGKILL and waits for the exit.
func (n *Node) Kill() {
	if n.paused {
		_ = n.cmd.Process.Signal(syscall.SIGCONT)
	}
	_ = n.cmd.Process.Signal(syscall.SIGKILL)
	<-n.exited
}

// Term sends SIGTERM and waits up to d for the exit, failing the test on
// a timeout or a non-zero exit status.
func (n *Node) Term(d time.Duration) {
	n.tb.Helper()
	_ = n.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-n.exited:
		if code := n.cmd.ProcessState.ExitCode(); code != 0 {
			n.tb.Fatalf("node %d exited with %d after SIGTERM", n.Port, code)
		}
	case <-time.After(d):
		n.tb.Fatalf("node %d did not exit within %v of SIGTERM", n.Port, d)
	}
}

// Pause and Resume send SIGSTOP and SIGCONT.
func (n *Node) Pause() {
	_ = n.cmd.Process.Signal(syscall.SIGSTOP)
	n.paused = true
}

// Resume undoes Pause.
func (n *Node) Resume() {
	_ = n.cmd.Process.Signal(syscall.SIGCONT)
	n.paused = false
}

// Paused reports whether the node is stopped by Pause.
func (n *Node) Paused() bool { return n.paused }

// Pid is the process id of the running node.
func (n *Node) Pid() int { return n.cmd.Process.Pid }

// Signal sends sig to the process.
func (n *Node) Signal(sig os.Signal) error { return n.cmd.Process.Signal(sig) }

// Logged reports whether the latest start's log has a line containing s.
func (n *Node) Logged(s string) bool { return LogHas(n.LogPath, s) }

// GRPCAddr is the SDK port's loopback address; HTTPAddr the main port's.
func (n *Node) GRPCAddr() string { return fmt.Sprintf("127.0.0.1:%d", n.Port+1000) }

// HTTPAddr is the main port's loopback address.
func (n *Node) HTTPAddr() string { return fmt.Sprintf("127.0.0.1:%d", n.Port) }

// LogHas reports whether the file has a line containing s.
func LogHas(path, s string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if strings.Contains(sc.Text(), s) {
			return true
		}
	}
	return false
}

// Tail returns the last n lines of a file.
func Tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
