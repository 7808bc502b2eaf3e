package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"nacos-lockd/internal/syncbuf"
	"nacos-lockd/interop/procs"
)

// These tests run the real server and the real CLI as processes
// (interop/procs).

func TestMain(m *testing.M) {
	var err error
	if ctlBinary, err = procs.BuildBinary("nacos-lockctl"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	code := m.Run()
	procs.Cleanup()
	os.Exit(code)
}

func startServer(t *testing.T) string {
	t.Helper()
	n := procs.New(t, procs.FreePorts(t, 1)[0], filepath.Join(t.TempDir(), "data"))
	n.StartReady()
	return n.HTTPAddr()
}

func ctlCmd(ctx context.Context, server string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, ctlBinary, append([]string{"--server", server}, args...)...)
}

// ctlBinary is the CLI under test, built once by TestMain.
var ctlBinary string

func TestTryUnlockRenew(t *testing.T) {
	server := startServer(t)
	ctx := context.Background()
	// Owner-bound locks outlive the CLI's connection only until it closes:
	// the server releases a closed connection's locks. So hold one in the
	// background and probe it with try.
	holder := ctlCmd(ctx, server, "lock", "door", "--owner", "keeper", "--lease", "5000")
	var holderOut syncbuf.Buffer
	holder.Stdout = &holderOut
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = holder.Process.Kill(); _ = holder.Wait() }()
	waitFor(t, func() bool { return strings.Contains(holderOut.String(), "holding door") })

	out, err := ctlCmd(ctx, server, "try", "door").CombinedOutput()
	if code := exitOf(err); code != 3 || !strings.Contains(string(out), "not granted: Lock is held by another owner") {
		t.Fatalf("try on a held lock: exit %d\n%s", code, out)
	}
	out, err = ctlCmd(ctx, server, "--json", "try", "free-door").CombinedOutput()
	if err != nil || !strings.Contains(string(out), `"result":true`) {
		t.Fatalf("try on a free lock: %v\n%s", err, out)
	}
	out, err = ctlCmd(ctx, server, "unlock", "door", "--owner", "intruder").CombinedOutput()
	if exitOf(err) != 3 || !strings.Contains(string(out), "not held by this owner") {
		t.Fatalf("unlock by another owner: %v\n%s", err, out)
	}
	out, err = ctlCmd(ctx, server, "renew", "door", "--owner", "keeper").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "renewed") {
		t.Fatalf("renew by the owner: %v\n%s", err, out)
	}
	// Interrupting the holder releases the lock.
	_ = holder.Process.Signal(os.Interrupt)
	_ = holder.Wait()
	out, err = ctlCmd(ctx, server, "try", "door").CombinedOutput()
	if err != nil {
		t.Fatalf("try after the holder stopped: %v\n%s", err, out)
	}
}

func TestHoldRunsCommandsOneAfterTheOther(t *testing.T) {
	server := startServer(t)
	journal := filepath.Join(t.TempDir(), "journal")
	script := fmt.Sprintf(`echo "start $NACOS_LOCK_FENCING_TOKEN $NACOS_LOCK_KEY" >> %s; sleep 0.7; echo end >> %s`, journal, journal)
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := ctlCmd(context.Background(), server, "hold", "deploy", "--lease", "600", "--", "sh", "-c", script).CombinedOutput()
			if err != nil {
				errs[i] = fmt.Errorf("%v: %s", err, out)
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	b, _ := os.ReadFile(journal)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 6 {
		t.Fatalf("journal:\n%s", b)
	}
	var last uint64
	for i := 0; i < 6; i += 2 {
		var token uint64
		var key string
		if _, err := fmt.Sscanf(lines[i], "start %d %s", &token, &key); err != nil || lines[i+1] != "end" || key != "deploy" {
			t.Fatalf("holds overlapped or lost their environment:\n%s", b)
		}
		if token <= last {
			t.Fatalf("fencing tokens did not increase:\n%s", b)
		}
		last = token
	}
	// A held command's exit status comes back.
	_, err := ctlCmd(context.Background(), server, "hold", "deploy", "--", "sh", "-c", "exit 7").CombinedOutput()
	if code := exitOf(err); code != 7 {
		t.Fatalf("exit status %d, want 7", code)
	}
}

func exitOf(err error) int {
	if err == nil {
		return 0
	}
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	return -1
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in time")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestHoldStopsCommandWhenLost: an operator force-releases the lock a
// hold runs under; the next renewal is refused, the command is stopped
// (it would sleep for a minute otherwise) and hold exits 1 saying so.
func TestHoldStopsCommandWhenLost(t *testing.T) {
	server := startServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	hold := ctlCmd(ctx, server, "hold", "job", "--lease", "3000", "--", "sleep", "60")
	var out syncbuf.Buffer
	hold.Stdout, hold.Stderr = &out, &out
	if err := hold.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = hold.Process.Kill(); _ = hold.Wait() }()
	waitFor(t, func() bool { return strings.Contains(out.String(), "holding job") })
	if b, err := ctlCmd(ctx, server, "force-release", "NON_REENTRANT", "job").CombinedOutput(); err != nil {
		t.Fatalf("force-release: %v\n%s", err, b)
	}
	err := hold.Wait()
	if code := exitOf(err); code != 1 || !strings.Contains(out.String(), "lock lost while held") {
		t.Fatalf("hold after the lock was taken away: exit %d (ctx %v)\n%s", code, ctx.Err(), out.String())
	}
}
