package main

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// These tests run the real server and the real CLI as processes.

var bins = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "nacos-lockctl-test")
	if err != nil {
		return "", err
	}
	for _, pkg := range []string{"nacos-lockd/cmd/nacos-lockd", "nacos-lockd/cmd/nacos-lockctl"} {
		out, err := exec.Command("go", "build", "-o", dir+"/", pkg).CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
		}
	}
	return dir, nil
})

func TestMain(m *testing.M) {
	code := m.Run()
	if dir, err := bins(); err == nil {
		os.RemoveAll(dir)
	}
	os.Exit(code)
}

func startServer(t *testing.T) string {
	t.Helper()
	dir, err := bins()
	if err != nil {
		t.Fatal(err)
	}
	var port int
	for range 200 {
		p := 21000 + rand.IntN(40000)
		ok := true
		for _, q := range []int{p - 1000, p, p + 1000} {
			l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", q))
			if err != nil {
				ok = false
				break
			}
			l.Close()
		}
		if ok {
			port = p
			break
		}
	}
	logPath := filepath.Join(t.TempDir(), "server.log")
	logFile, _ := os.Create(logPath)
	cmd := exec.Command(filepath.Join(dir, "nacos-lockd"), "--port", fmt.Sprint(port), "--data-dir", t.TempDir())
	cmd.Stderr = logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	deadline := time.Now().Add(60 * time.Second)
	for {
		b, _ := os.ReadFile(logPath)
		if bytes.Contains(b, []byte(`"message":"nacos-lockd ready"`)) {
			return fmt.Sprintf("127.0.0.1:%d", port)
		}
		if time.Now().After(deadline) {
			t.Fatalf("server not ready:\n%s", b)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func ctlCmd(ctx context.Context, server string, args ...string) *exec.Cmd {
	dir, _ := bins()
	return exec.CommandContext(ctx, filepath.Join(dir, "nacos-lockctl"), append([]string{"--server", server}, args...)...)
}

func TestTryUnlockRenew(t *testing.T) {
	server := startServer(t)
	ctx := context.Background()
	// Owner-bound locks outlive the CLI's connection only until it closes:
	// the server releases a closed connection's locks. So hold one in the
	// background and probe it with try.
	holder := ctlCmd(ctx, server, "lock", "door", "--owner", "keeper", "--lease", "5000")
	var holderOut syncBuffer
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

// syncBuffer is a bytes.Buffer safe to read while a process writes it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
