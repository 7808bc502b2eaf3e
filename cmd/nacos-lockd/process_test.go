package main

import (
	"context"
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"

	"nacos-lockd/internal/timerslack"
	"nacos-lockd/interop/client"
	"nacos-lockd/interop/procs"
	"nacos-lockd/protocol"
	"nacos-lockd/settings"
)

// These tests run the real binary as a separate process (interop/procs).

func TestMain(m *testing.M) {
	code := m.Run()
	procs.Cleanup()
	os.Exit(code)
}

// freeMainPort finds P with P-1000, P and P+1000 free.
func freeMainPort(t *testing.T) int { return procs.FreePorts(t, 1)[0] }

// startProcess runs a node on port with dataDir and waits until it serves.
func startProcess(t *testing.T, port int, dataDir string, extra ...string) *procs.Node {
	t.Helper()
	n := procs.New(t, port, dataDir, extra...)
	n.StartReady()
	return n
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

	p.Kill()
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
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := client.Timeout(10 * time.Second)
	defer cancel()
	if _, err := client.WaitPush[*protocol.ConnectResetRequest](ctx, c); err != nil {
		t.Fatalf("client got no ConnectResetRequest: %v", err)
	}
	select {
	case <-p.Exited():
		if p.ExitErr() != nil {
			t.Fatalf("exit: %v", p.ExitErr())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("server did not exit after SIGTERM")
	}
	if !p.Logged(`"message":"nacos-lockd stopped"`) {
		t.Fatal("no stop line in the log")
	}
}

// A shutdown that cannot finish gives way to a second signal. With the
// data directory removed under it, closing storage retries its last flush
// for ever (badger logs each attempt): the first SIGTERM's shutdown hangs
// there, and the second must end the process instead of being swallowed.
func TestSecondSignalEndsAStuckShutdown(t *testing.T) {
	port, dir := freeMainPort(t), t.TempDir()
	p := startProcess(t, port, dir)
	c := connect(t, port)
	for i := range 20 { // something in storage's memtable to flush at close
		li := client.Instance(fmt.Sprintf("flushed-%d", i), "NACOS_LOCK", "", client.Ms(600000), nil)
		call(t, c, protocol.OpAcquire, li)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	stuck := time.Now().Add(30 * time.Second)
	for !p.Logged("error flushing memtable") {
		select {
		case <-p.Exited():
			t.Fatalf("the shutdown was expected to hang on storage's flush, but the process exited: %v", p.ExitErr())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(stuck) {
			t.Fatal("storage never retried its flush: the test no longer reaches a stuck shutdown")
		}
	}
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.Exited():
		if p.ExitErr() == nil {
			t.Fatal("exit status 0 after a shutdown that never finished")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a second SIGTERM did not end a shutdown stuck on storage")
	}
}

// Every thread of a serving node runs with the timer slack asked for, the
// default's when none is, and 0 leaves the one it was started with.
func TestTimerSlackOnEveryThread(t *testing.T) {
	own, err := timerslack.Current()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want int64
	}{
		{nil, settings.DefaultTimerSlack.Nanoseconds()},
		{[]string{"--timer-slack", "1ms"}, 1_000_000},
		{[]string{"--timer-slack", "0"}, own.Nanoseconds()},
	} {
		port := freeMainPort(t)
		p := startProcess(t, port, t.TempDir(), tc.args...)
		// A lock call first, so that the transport, Raft and the log have
		// started their threads.
		call(t, connect(t, port), protocol.OpAcquire, client.Instance("slack", "NON_REENTRANT", "o", client.Ms(30000), nil))
		slacks, err := timerslack.OfThreads(p.Pid())
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range slacks {
			if d.Nanoseconds() != tc.want {
				t.Fatalf("%v: thread slacks %v, want %d each", tc.args, slacks, tc.want)
			}
		}
		p.Term(10 * time.Second)
	}
}
