package nacoslock_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"nacos-lockd/nacoslock"
)

// helperEnv makes the test binary a lock holder process (runHolder) that
// the tests can kill: NACOSLOCK_HOLDER=<server>,<key>.
const helperEnv = "NACOSLOCK_HOLDER"

// runHolder takes the lock with a long lease, prints "locked <token>" and
// holds it until killed.
func runHolder() int {
	server, k, _ := strings.Cut(os.Getenv(helperEnv), ",")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := nacoslock.Dial(ctx, []string{server})
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	m := cl.Mutex(k, nacoslock.WithLease(time.Minute))
	if err := m.Lock(ctx); err != nil {
		fmt.Println("error", err)
		return 1
	}
	fmt.Println("locked", m.FencingToken())
	select {}
}

// startHolder runs runHolder in a child process and returns it with the
// token it was granted.
func startHolder(t *testing.T, server, k string) (*exec.Cmd, uint64) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+server+","+k)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("holder process: %v", err)
	}
	tok, err := strconv.ParseUint(strings.TrimPrefix(strings.TrimSpace(line), "locked "), 10, 64)
	if err != nil {
		t.Fatalf("holder process said %q", line)
	}
	return cmd, tok
}

// TestHolderCrashHandsOff: a holder process killed with SIGKILL while a
// waiter is queued: the server cleans up its connection and hands the
// lock to the waiter, long before the holder's one-minute lease would
// have ended, with a higher fencing token.
func TestHolderCrashHandsOff(t *testing.T) {
	k := key(t)
	holder, tok := startHolder(t, sharedServer, k)
	w := dial(t, []string{sharedServer}).Mutex(k)
	// Far less than the holder's lease: only the cleanup can hand it over
	// in time.
	ctx := ctxFor(t, 20*time.Second)
	got := make(chan error, 1)
	go func() { got <- w.Lock(ctx) }()
	waitQueued(t, sharedServer, nacoslock.NonReentrant, k, 1)
	if err := holder.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("waiter after the holder crashed: %v", err)
	}
	if w.FencingToken() <= tok {
		t.Fatalf("waiter's token %d, crashed holder's %d", w.FencingToken(), tok)
	}
	if err := w.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestSessionSurvivesServerRestart: the only server is killed and started
// again on the same data. The client reconnects by itself, the watchdog
// renews from the new connection (the lock moves to it), Lost stays open,
// and a waiter queued before the crash is served after it.
func TestSessionSurvivesServerRestart(t *testing.T) {
	n := node(t, nil)
	servers := []string{n.HTTPAddr()}
	k := "restart"
	ctx := ctxFor(t, 60*time.Second)
	m := dial(t, servers).Mutex(k, nacoslock.WithLease(20*time.Second))
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	before, _ := adminLock(t, n.HTTPAddr(), nacoslock.NonReentrant, k)
	w := dial(t, servers).Mutex(k)
	got := make(chan error, 1)
	go func() { got <- w.Lock(ctx) }()
	waitQueued(t, n.HTTPAddr(), nacoslock.NonReentrant, k, 1)

	n.Kill()
	n.StartReady()
	var after lockView
	waitFor(t, 30*time.Second, "the lock to move to the holder's new connection", func() bool {
		after, _ = adminLock(t, n.HTTPAddr(), nacoslock.NonReentrant, k)
		return after.ConnectionID != "" && after.ConnectionID != before.ConnectionID
	})
	if after.Owner != m.Owner() || after.FencingToken != m.FencingToken() || closed(m.Lost()) {
		t.Fatalf("after the restart: %+v, lost %v (%v); want owner %s token %d", after, closed(m.Lost()), m.Err(), m.Owner(), m.FencingToken())
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatalf("unlock after the restart: %v", err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("waiter queued before the restart: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("waiter queued before the restart never got the lock")
	}
	if w.FencingToken() <= before.FencingToken {
		t.Fatalf("waiter token %d not above %d", w.FencingToken(), before.FencingToken)
	}
	if err := w.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if errors.Is(m.Err(), nacoslock.ErrLost) {
		t.Fatalf("holder reports a loss after a clean unlock: %v", m.Err())
	}
}
