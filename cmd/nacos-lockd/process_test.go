package main

import (
	"bufio"
	"context"
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

	"nacos-lockd/interop/client"
	"nacos-lockd/protocol"
)

// These tests run the real binary as a separate process.

var buildOnce = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "nacos-lockd-bin")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "nacos-lockd")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return bin, nil
})

func TestMain(m *testing.M) {
	code := m.Run()
	if bin, err := buildOnce(); err == nil {
		os.RemoveAll(filepath.Dir(bin))
	}
	os.Exit(code)
}

// freeMainPort finds P with P-1000, P and P+1000 free.
func freeMainPort(t *testing.T) int {
	t.Helper()
	for range 200 {
		p := 20000 + rand.IntN(40000)
		free := true
		for _, q := range []int{p - 1000, p, p + 1000} {
			l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", q))
			if err != nil {
				free = false
				break
			}
			l.Close()
		}
		if free {
			return p
		}
	}
	t.Fatal("no free port triple")
	return 0
}

type proc struct {
	cmd     *exec.Cmd
	log     *os.File
	exited  chan struct{} // closed when the process has exited
	exitErr error         // valid after exited is closed
}

func startProcess(t *testing.T, port int, dataDir string, extra ...string) *proc {
	t.Helper()
	bin, err := buildOnce()
	if err != nil {
		t.Fatal(err)
	}
	logFile, err := os.CreateTemp(t.TempDir(), "server-*.log")
	if err != nil {
		t.Fatal(err)
	}
	args := append([]string{"--port", fmt.Sprint(port), "--data-dir", dataDir}, extra...)
	cmd := exec.Command(bin, args...)
	cmd.Stderr = logFile
	if err := cmd.Start(); err != nil {
		t.Fatalf("start: %v", err)
	}
	p := &proc{cmd: cmd, log: logFile, exited: make(chan struct{})}
	go func() {
		p.exitErr = cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.exited
		if t.Failed() {
			b, _ := os.ReadFile(logFile.Name())
			t.Logf("server log:\n%s", b)
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for !p.logged(`"message":"nacos-lockd ready"`) {
		select {
		case <-p.exited:
			b, _ := os.ReadFile(logFile.Name())
			t.Fatalf("server exited before ready (%v):\n%s", p.exitErr, b)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("server not ready in 60s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	return p
}

func (p *proc) logged(s string) bool {
	f, err := os.Open(p.log.Name())
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

func connect(t *testing.T, port int) *client.Client {
	t.Helper()
	ctx, cancel := client.Timeout(10 * time.Second)
	defer cancel()
	c, err := client.Dial(ctx, fmt.Sprintf("127.0.0.1:%d", port+1000))
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func call(t *testing.T, c *client.Client, op protocol.LockOp, li protocol.LockInstance) *protocol.LockOperationResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := c.Lock(ctx, op, li)
	if err != nil {
		t.Fatalf("%s: %v", op, err)
	}
	if r.ResultCode != 200 {
		t.Fatalf("%s: %d %s", op, r.ResultCode, r.Message)
	}
	return r
}

func TestHeldLockSurvivesKill9(t *testing.T) {
	port, dir := freeMainPort(t), t.TempDir()
	p := startProcess(t, port, dir)
	a := connect(t, port)
	gen1 := client.Instance("survivor", "NACOS_LOCK", "", client.Ms(600000), nil)
	first := call(t, a, protocol.OpAcquire, gen1)
	if !first.Result {
		t.Fatalf("acquire: %+v", first.LockResult)
	}
	re := client.Instance("counted", "REENTRANT", "owner:1", client.Ms(600000), client.Ms(-1))
	call(t, a, protocol.OpAcquire, re)
	if r := call(t, a, protocol.OpAcquire, re); r.LockResult.ReentrantCount != 2 {
		t.Fatalf("re-entry: %+v", r.LockResult)
	}

	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-p.exited
	_ = a.Close()

	startProcess(t, port, dir)
	b := connect(t, port)
	if r := call(t, b, protocol.OpAcquire, gen1); r.Result {
		t.Fatal("the lock taken before kill -9 was granted to another connection after restart")
	}
	// The reentrant count survived too; the owner can still work with it.
	if r := call(t, b, protocol.OpRelease, re); !r.Result || r.LockResult.ReentrantCount != 1 {
		t.Fatalf("release after restart: %+v", r.LockResult)
	}
	if r := call(t, b, protocol.OpRelease, re); !r.Result || r.LockResult.ReentrantCount != 0 {
		t.Fatalf("final release after restart: %+v", r.LockResult)
	}
	// Fencing tokens keep increasing across the restart.
	next := call(t, b, protocol.OpAcquire, client.Instance("fresh", "NACOS_LOCK", "", client.Ms(1000), nil))
	if next.LockResult.FencingToken <= first.LockResult.FencingToken {
		t.Fatalf("token after restart %d, before %d", next.LockResult.FencingToken, first.LockResult.FencingToken)
	}
}

func TestSIGTERMExitsCleanly(t *testing.T) {
	port := freeMainPort(t)
	p := startProcess(t, port, t.TempDir())
	c := connect(t, port)
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := client.Timeout(10 * time.Second)
	defer cancel()
	if _, err := client.WaitPush[*protocol.ConnectResetRequest](ctx, c); err != nil {
		t.Fatalf("client got no ConnectResetRequest: %v", err)
	}
	select {
	case <-p.exited:
		if p.exitErr != nil {
			t.Fatalf("exit: %v", p.exitErr)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("server did not exit after SIGTERM")
	}
	if !p.logged(`"message":"nacos-lockd stopped"`) {
		t.Fatal("no stop line in the log")
	}
}
