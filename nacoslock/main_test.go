package nacoslock_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"nacos-lockd/interop/procs"
	"nacos-lockd/nacoslock"
)

// sharedServer is one real nacos-lockd that every test which leaves the
// server alone uses (with keys of its own), and the Example functions,
// which cannot start one themselves. Tests that stop, pause or configure
// servers start their own.
var sharedServer string

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		os.Exit(runHolder())
	}
	stop, err := startShared()
	if err != nil {
		fmt.Fprintln(os.Stderr, "start shared nacos-lockd:", err)
		procs.Cleanup()
		os.Exit(1)
	}
	code := m.Run()
	stop()
	procs.Cleanup()
	if code == 0 {
		// Every Client the tests dialled is closed by now: nothing of
		// theirs may still run. (The tests' own admin API calls leave
		// idle keep-alive connections in http.DefaultClient.)
		http.DefaultClient.CloseIdleConnections()
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goroutines left after the tests:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// startShared runs a node outside any test (procs.Node needs a
// testing.TB for its cleanup).
func startShared() (func(), error) {
	bin, err := procs.BuildBinary("nacos-lockd")
	if err != nil {
		return nil, err
	}
	ports, err := procs.PickPorts(1)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "nacoslock-shared")
	if err != nil {
		return nil, err
	}
	logPath := filepath.Join(dir, "node.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "--port", fmt.Sprint(ports[0]), "--data-dir", filepath.Join(dir, "data"))
	cmd.Stderr = logFile
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	stop := func() {
		_ = cmd.Process.Kill()
		<-exited
		logFile.Close()
		os.RemoveAll(dir)
	}
	deadline := time.Now().Add(90 * time.Second)
	for !procs.LogHas(logPath, procs.ReadyLine) {
		select {
		case <-exited:
			tail := procs.Tail(logPath, 30)
			stop()
			return nil, fmt.Errorf("exited before ready:\n%s", tail)
		default:
		}
		if time.Now().After(deadline) {
			tail := procs.Tail(logPath, 30)
			stop()
			return nil, fmt.Errorf("not ready in 90 s:\n%s", tail)
		}
		time.Sleep(50 * time.Millisecond)
	}
	sharedServer = fmt.Sprintf("127.0.0.1:%d", ports[0])
	return stop, nil
}

var keySeq atomic.Uint64

// key is a lock key no other test uses on the shared server.
func key(t *testing.T) string {
	return fmt.Sprintf("%s/%d", t.Name(), keySeq.Add(1))
}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// dial connects a Client for the test and closes it at the end.
func dial(t *testing.T, servers []string, opts ...nacoslock.Option) *nacoslock.Client {
	t.Helper()
	cl, err := nacoslock.Dial(ctxFor(t, 20*time.Second), servers, opts...)
	if err != nil {
		t.Fatalf("dial %v: %v", servers, err)
	}
	t.Cleanup(func() { _ = cl.Close() })
	return cl
}

// node starts a nacos-lockd of the test's own with the given properties.
func node(t *testing.T, props map[string]string, args ...string) *procs.Node {
	t.Helper()
	dir := t.TempDir()
	if len(props) > 0 {
		path := filepath.Join(dir, "application.properties")
		var b strings.Builder
		for k, v := range props {
			fmt.Fprintf(&b, "%s=%s\n", k, v)
		}
		if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
			t.Fatal(err)
		}
		args = append(args, "--config", path)
	}
	n := procs.New(t, procs.FreePorts(t, 1)[0], filepath.Join(dir, "data"), args...)
	n.StartReady()
	return n
}

// lockView is GET /v1/locks/{type}/{key} on the admin API.
type lockView struct {
	Owner          string `json:"owner"`
	ConnectionID   string `json:"connectionId"`
	FencingToken   uint64 `json:"fencingToken"`
	ReentrantCount int    `json:"reentrantCount"`
	Unclaimed      bool   `json:"unclaimed"`
	Waiters        []struct {
		Owner        string `json:"owner"`
		ConnectionID string `json:"connectionId"`
	} `json:"waiters"`
}

// adminLock reads one lock; ok is false when it is free.
func adminLock(t *testing.T, httpAddr string, kind nacoslock.Kind, key string) (lockView, bool) {
	t.Helper()
	v, ok, err := tryAdminLock(httpAddr, kind, key)
	if err != nil {
		t.Fatalf("admin get lock: %v", err)
	}
	return v, ok
}

// tryAdminLock is adminLock for a cluster that may be between leaders
// (a linearizable read then fails).
func tryAdminLock(httpAddr string, kind nacoslock.Kind, key string) (lockView, bool, error) {
	u := fmt.Sprintf("http://%s/v1/locks/%s?key=%s", httpAddr, kind, url.QueryEscape(key))
	resp, err := http.Get(u)
	if err != nil {
		return lockView{}, false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		return lockView{}, false, nil
	}
	var v lockView
	if err := jsonDecode(resp, &v); err != nil {
		return lockView{}, false, err
	}
	return v, true, nil
}

// waitFor polls cond until it holds, failing the test after d.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitQueued waits until the admin API shows n waiters on the lock.
func waitQueued(t *testing.T, httpAddr string, kind nacoslock.Kind, key string, n int) lockView {
	t.Helper()
	var v lockView
	waitFor(t, 20*time.Second, fmt.Sprintf("%d waiters on %s", n, key), func() bool {
		v, _ = adminLock(t, httpAddr, kind, key)
		return len(v.Waiters) == n
	})
	return v
}

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func jsonDecode(resp *http.Response, v any) error {
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}
