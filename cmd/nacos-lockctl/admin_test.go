package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rs/zerolog"

	"nacos-lockd/gateway"
	"nacos-lockd/gateway/admin"
	"nacos-lockd/gateway/admin/adminapi"
	"nacos-lockd/gateway/auth"
	"nacos-lockd/gateway/auth/authtest"
	"nacos-lockd/internal/syncbuf"
	"nacos-lockd/interop/client"
	"nacos-lockd/protocol"
	"nacos-lockd/replica"
	"nacos-lockd/storage"
)

// node is a real nacos-lockd node in the test process: Raft
// (dragonboat) over badger, the gateway and the admin API on real ports,
// wired as cmd/nacos-lockd wires them. The CLI binary runs against it.
type node struct {
	server string // main port: the admin API
	grpc   string
	logs   *syncbuf.Buffer
	reg    *prometheus.Registry
	auth   *auth.Authenticator
}

func freeMainPort(t *testing.T) int {
	t.Helper()
	for range 200 {
		p := 21000 + rand.IntN(40000)
		ok := true
		for _, q := range []int{p, p + 1000} {
			l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", q))
			if err != nil {
				ok = false
				break
			}
			l.Close()
		}
		if ok {
			return p
		}
	}
	t.Fatal("no free ports")
	return 0
}

func startNode(t *testing.T, withAuth bool) *node {
	t.Helper()
	dir := t.TempDir()
	n := &node{logs: &syncbuf.Buffer{}, reg: prometheus.NewRegistry()}
	log := zerolog.New(n.logs).Level(zerolog.InfoLevel)
	if withAuth {
		n.auth, _, _ = authtest.FastAuth(t)
	}
	port := freeMainPort(t)
	n.server, n.grpc = fmt.Sprintf("127.0.0.1:%d", port), fmt.Sprintf("127.0.0.1:%d", port+1000)
	db, err := storage.Open(storage.Config{Dir: filepath.Join(dir, "locks")})
	if err != nil {
		t.Fatal(err)
	}
	gw, err := gateway.New(gateway.Config{ListenAddr: n.grpc, MainPort: port, NodeID: "1", Metrics: n.reg, Auth: n.auth}, log)
	if err != nil {
		t.Fatal(err)
	}
	raft, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	raftAddr := raft.Addr().String()
	raft.Close()
	sm, err := replica.Start(replica.RaftConfig{NodeHostDir: filepath.Join(dir, "raft"), RaftAddress: raftAddr, Metrics: n.reg}, db, gw.Notify, log)
	if err != nil {
		db.Close()
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 2)
	t.Cleanup(func() {
		cancel()
		<-served
		<-served
		sm.Close()
		db.Close()
		if t.Failed() {
			t.Logf("server log:\n%s", n.logs.String())
		}
	})
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	defer wcancel()
	if err := sm.WaitReady(wctx); err != nil {
		served <- nil
		served <- nil
		t.Fatal(err)
	}
	grpcLis, err := net.Listen("tcp", n.grpc)
	if err != nil {
		served <- nil
		served <- nil
		t.Fatal(err)
	}
	httpLis, err := net.Listen("tcp", n.server)
	if err != nil {
		grpcLis.Close()
		served <- nil
		served <- nil
		t.Fatal(err)
	}
	api := admin.New(admin.Config{
		Ready: func() bool { return true }, Auth: n.auth, Metrics: promhttp.HandlerFor(n.reg, promhttp.HandlerOpts{}),
		Locks: sm, Connections: gw, Registerer: n.reg,
	}, sm, log)
	go func() { served <- api.Serve(ctx, httpLis) }()
	go func() { served <- gw.Serve(ctx, grpcLis, sm) }()
	return n
}

func (n *node) client(t *testing.T, token string) *client.Client {
	t.Helper()
	ctx, cancel := client.Timeout(10 * time.Second)
	defer cancel()
	var opts []client.Option
	if token != "" {
		opts = append(opts, client.WithHeaders(map[string]string{"accessToken": token}))
	}
	c, err := client.Dial(ctx, n.grpc, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func lockCall(t *testing.T, c *client.Client, op protocol.LockOp, li protocol.LockInstance) *protocol.LockOperationResponse {
	t.Helper()
	ctx, cancel := client.Timeout(10 * time.Second)
	defer cancel()
	r, err := c.Lock(ctx, op, li)
	if err != nil || r.ResultCode != 200 {
		t.Fatalf("%s %q: %+v %v", op, *li.Key, r, err)
	}
	return r
}

// ctl runs the CLI against the node; env adds to the environment.
func (n *node) ctl(t *testing.T, stdin string, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := ctlCmd(ctx, n.server, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin = strings.NewReader(stdin)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	return o.String(), e.String(), exitOf(err)
}

func (n *node) forceReleases(t *testing.T, result string) float64 {
	t.Helper()
	mfs, err := n.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			if mf.GetName() == "nacoslockd_admin_force_releases_total" && m.GetLabel()[0].GetValue() == result {
				return m.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("no force release series %q", result)
	return 0
}

func TestAdminCommands(t *testing.T) {
	n := startNode(t, false)
	holder, waiter := n.client(t, ""), n.client(t, "")
	held := []struct{ typ, key string }{
		{"REENTRANT", "orders/2024/1"}, {"REENTRANT", "orders/2024/2"}, {"NON_REENTRANT", "with space"},
		{"REENTRANT", "键/🔒"}, {"NON_REENTRANT", ".."}, {"NON_REENTRANT", "a//b"}, {"NACOS_LOCK", "legacy"},
	}
	tokens := map[string]uint64{}
	for _, h := range held {
		owner := "owner-h"
		if h.typ == "NACOS_LOCK" {
			owner = "" // the connection id, as a Gen 1 client
		}
		r := lockCall(t, holder, protocol.OpAcquire, client.Instance(h.key, h.typ, owner, client.Ms(600000), client.Ms(-1)))
		if !r.Result {
			t.Fatalf("acquire %s %q: %+v", h.typ, h.key, r.LockResult)
		}
		tokens[h.key] = r.LockResult.FencingToken
	}
	lockCall(t, holder, protocol.OpAcquire, client.Instance("orders/2024/1", "REENTRANT", "owner-h", client.Ms(600000), client.Ms(-1)))
	if r := lockCall(t, waiter, protocol.OpAcquire, client.Instance("with space", "NON_REENTRANT", "owner-w", client.Ms(600000), client.Ms(300000))); r.LockResult.WaitPosition != 0 {
		t.Fatalf("waiter not queued: %+v", r.LockResult)
	}

	// ls: a table of every held lock, in type then key order.
	out, errOut, code := n.ctl(t, "", nil, "ls")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 1+len(held) || !strings.HasPrefix(lines[0], "TYPE") {
		t.Fatalf("ls: exit %d\n%s%s", code, out, errOut)
	}
	for i, want := range []string{"NACOS_LOCK  legacy", "REENTRANT  orders/2024/1", "REENTRANT  orders/2024/2", "REENTRANT  键/🔒",
		"NON_REENTRANT  ..", "NON_REENTRANT  a//b", `NON_REENTRANT  "with space"`} {
		if f := strings.Fields(want); !strings.HasPrefix(lines[i+1], f[0]) || !strings.Contains(lines[i+1], f[1]) {
			t.Fatalf("ls row %d is %q, want %q\n%s", i+1, lines[i+1], want, out)
		}
	}
	if !strings.Contains(lines[2], "127.0.0.1") || !strings.Contains(lines[2], fmt.Sprint(tokens["orders/2024/1"])) {
		t.Fatalf("ls row lacks client or token: %q", lines[2])
	}

	// --json follows the cursors page by page.
	out, errOut, code = n.ctl(t, "", nil, "--json", "ls", "--page", "2")
	var listed struct {
		Locks []adminapi.Lock `json:"locks"`
		More  bool            `json:"more"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &listed) != nil || len(listed.Locks) != len(held) || listed.More {
		t.Fatalf("ls --json: exit %d\n%s%s", code, out, errOut)
	}
	out, _, _ = n.ctl(t, "", nil, "--json", "ls", "--type", "REENTRANT", "--prefix", "orders/", "--page", "1")
	if json.Unmarshal([]byte(out), &listed) != nil || len(listed.Locks) != 2 || listed.Locks[1].Key != "orders/2024/2" {
		t.Fatalf("filtered: %s", out)
	}
	out, _, code = n.ctl(t, "", nil, "ls", "--limit", "2", "--page", "1")
	if code != 0 || strings.Count(out, "\n") != 4 || !strings.Contains(out, "(first 2 shown") {
		t.Fatalf("ls --limit 2:\n%s", out)
	}

	// get: every field of one lock, its waiters in order.
	out, errOut, code = n.ctl(t, "", nil, "get", "NON_REENTRANT", "with space")
	for _, want := range []string{`key:             "with space"`, "owner:           owner-h", "(client 127.0.0.1, node 1)",
		fmt.Sprintf("fencing token:   %d", tokens["with space"]), "reentrant count: 1", " ago)", " left)", "waiters:         1", "owner-w"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Fatalf("get lacks %q: exit %d\n%s%s", want, code, out, errOut)
		}
	}
	for _, h := range held {
		out, errOut, code = n.ctl(t, "", nil, "--json", "get", h.typ, h.key)
		var l adminapi.Lock
		if code != 0 || json.Unmarshal([]byte(out), &l) != nil || l.Key != h.key || l.Type != h.typ || l.ClientIP != "127.0.0.1" ||
			l.FencingToken != tokens[h.key] || l.AcquiredAtMs == 0 || l.TimeLeftMs <= 0 || l.ConnectionID != holder.ConnectionID() {
			t.Fatalf("get --json %s %q: exit %d\n%s%s", h.typ, h.key, code, out, errOut)
		}
	}
	if _, errOut, code = n.ctl(t, "", nil, "get", "REENTRANT", "nothing"); code != 3 || !strings.Contains(errOut, "404") {
		t.Fatalf("get of a free lock: exit %d %s", code, errOut)
	}
	if _, errOut, code = n.ctl(t, "", nil, "get", "MUTEX", "x"); code != 1 || !strings.Contains(errOut, "400") {
		t.Fatalf("get with a bad type: exit %d %s", code, errOut)
	}

	// force-release: only the named grant; the waiter is handed the lock.
	if _, errOut, code = n.ctl(t, "", nil, "force-release", "NON_REENTRANT", "with space", "--fencing-token", "1"); code != 3 || !strings.Contains(errOut, "409") {
		t.Fatalf("force release of another grant: exit %d %s", code, errOut)
	}
	out, errOut, code = n.ctl(t, "", nil, "force-release", "NON_REENTRANT", "with space")
	if code != 0 || !strings.Contains(out, `force-released NON_REENTRANT "with space": was held by owner-h`) || !strings.Contains(out, "now granted to waiter owner-w") {
		t.Fatalf("force-release: exit %d\n%s%s", code, out, errOut)
	}
	ctx, cancel := client.Timeout(5 * time.Second)
	defer cancel()
	if p, err := client.WaitPush[*protocol.LockNotificationRequest](ctx, waiter); err != nil || p.LockKey != "with space" {
		t.Fatalf("waiter not pushed: %+v %v", p, err)
	}
	if !strings.Contains(n.logs.String(), `"audit":"force_release","by":"127.0.0.1:`) || n.forceReleases(t, "released") != 1 || n.forceReleases(t, "conflict") != 1 {
		t.Fatalf("force release not audited or counted:\n%s", n.logs.String())
	}
	out, _, code = n.ctl(t, "", nil, "--json", "force-release", "NON_REENTRANT", "..")
	var rel struct {
		Released bool           `json:"released"`
		Current  *adminapi.Lock `json:"current"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &rel) != nil || !rel.Released || rel.Current != nil {
		t.Fatalf("force-release --json: %s", out)
	}
	if _, _, code = n.ctl(t, "", nil, "force-release", "NON_REENTRANT", ".."); code != 3 {
		t.Fatalf("second force release: exit %d", code)
	}

	// watch: a refreshed table, as many times as asked or until interrupted.
	out, errOut, code = n.ctl(t, "", nil, "watch", "--interval", "200ms", "--count", "2")
	if code != 0 || strings.Count(out, "held locks") != 2 || strings.Count(out, "TYPE") != 2 {
		t.Fatalf("watch: exit %d\n%s%s", code, out, errOut)
	}
	out, _, code = n.ctl(t, "", nil, "--json", "watch", "--interval", "200ms", "--count", "3", "--type", "REENTRANT")
	frames := strings.Split(strings.TrimSpace(out), "\n")
	var frame struct {
		At    string          `json:"at"`
		Locks []adminapi.Lock `json:"locks"`
	}
	if code != 0 || len(frames) != 3 || json.Unmarshal([]byte(frames[2]), &frame) != nil || len(frame.Locks) != 3 || frame.At == "" {
		t.Fatalf("watch --json: exit %d\n%s", code, out)
	}
	var watchOut syncbuf.Buffer
	w := ctlCmd(context.Background(), n.server, "watch", "--interval", "100ms")
	w.Stdout = &watchOut
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return strings.Count(watchOut.String(), "held locks") >= 2 })
	_ = w.Process.Signal(os.Interrupt)
	if err := w.Wait(); err != nil {
		t.Fatalf("watch after an interrupt: %v\n%s", err, watchOut.String())
	}
}

func TestAdminCommandsWithAuth(t *testing.T) {
	n := startNode(t, true)
	// Without a token: refused, and told what to do.
	if _, errOut, code := n.ctl(t, "", nil, "ls"); code != 1 || !strings.Contains(errOut, "403") || !strings.Contains(errOut, "NACOS_LOCKD_TOKEN") {
		t.Fatalf("ls without a token: exit %d %s", code, errOut)
	}
	tok, errOut, code := n.ctl(t, "admin-password\n", nil, "login", "--username", "admin", "--password-stdin")
	tok = strings.TrimSpace(tok)
	if code != 0 || strings.Count(tok, ".") != 2 || !strings.Contains(errOut, "global admin") {
		t.Fatalf("login: exit %d %q %s", code, tok, errOut)
	}
	if _, errOut, code := n.ctl(t, "", nil, "login", "--username", "admin", "--password", "wrong"); code != 1 || !strings.Contains(errOut, "403") {
		t.Fatalf("login with a wrong password: exit %d %s", code, errOut)
	}
	appTok, _, _ := n.ctl(t, "", nil, "login", "--username", "app", "--password", "app-password")
	appTok = strings.TrimSpace(appTok)
	// Lock commands carry the token too.
	holder := ctlCmd(context.Background(), n.server, "--token", appTok, "lock", "deploy/prod", "--owner", "ci-job-7")
	var holderOut syncbuf.Buffer
	holder.Stdout = &holderOut
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = holder.Process.Kill(); _ = holder.Wait() }()
	waitFor(t, func() bool { return strings.Contains(holderOut.String(), "holding deploy/prod") })

	for name, tc := range map[string]struct {
		env  []string
		args []string
	}{
		"flag":          {nil, []string{"--token", tok, "ls"}},
		"flag last":     {nil, []string{"ls", "--token", tok}},
		"env":           {[]string{"NACOS_LOCKD_TOKEN=" + tok}, []string{"ls"}},
		"lockctl env":   {[]string{"NACOS_LOCKCTL_TOKEN=" + tok}, []string{"ls"}},
		"env login":     {[]string{"NACOS_LOCKCTL_USERNAME=admin", "NACOS_LOCKCTL_PASSWORD=admin-password"}, []string{"ls"}},
		"flag over env": {[]string{"NACOS_LOCKCTL_TOKEN=" + appTok}, []string{"--token", tok, "ls"}},
	} {
		out, errOut, code := n.ctl(t, "", tc.env, tc.args...)
		if code != 0 || !strings.Contains(out, "deploy/prod") || !strings.Contains(out, "ci-job-7") {
			t.Fatalf("ls with the admin token (%s): exit %d\n%s%s", name, code, out, errOut)
		}
	}
	if _, errOut, code := n.ctl(t, "", []string{"NACOS_LOCKCTL_USERNAME=admin", "NACOS_LOCKCTL_PASSWORD=wrong"}, "ls"); code != 1 ||
		!strings.Contains(errOut, `log in as $NACOS_LOCKCTL_USERNAME "admin"`) || !strings.Contains(errOut, "403") {
		t.Fatalf("ls with wrong credentials in the environment: exit %d %s", code, errOut)
	}
	if _, errOut, code := n.ctl(t, "", []string{"NACOS_LOCKCTL_TOKEN=" + appTok}, "ls"); code != 1 || !strings.Contains(errOut, "403") {
		t.Fatalf("ls with a non-admin token from the environment: exit %d %s", code, errOut)
	}
	if _, errOut, code := n.ctl(t, "", nil, "--token", appTok, "get", "NON_REENTRANT", "deploy/prod"); code != 1 || !strings.Contains(errOut, "403") {
		t.Fatalf("get with a non-admin token: exit %d %s", code, errOut)
	}
	if _, errOut, code := n.ctl(t, "", nil, "--token", appTok, "force-release", "NON_REENTRANT", "deploy/prod"); code != 1 || !strings.Contains(errOut, "403") {
		t.Fatalf("force release with a non-admin token: exit %d %s", code, errOut)
	}
	out, errOut, code := n.ctl(t, "", nil, "--token", tok, "force-release", "NON_REENTRANT", "deploy/prod")
	if code != 0 || !strings.Contains(out, "was held by ci-job-7") {
		t.Fatalf("force release as admin: exit %d\n%s%s", code, out, errOut)
	}
	var audit map[string]any
	for _, line := range strings.Split(n.logs.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["audit"] == "force_release" {
			audit = m
		}
	}
	if audit == nil || audit["level"] != "warn" || audit["by"] != "admin" || audit["by_kind"] != "user" || audit["lock_type"] != "NON_REENTRANT" {
		t.Fatalf("audit: %v", audit)
	}
	if n.forceReleases(t, "released") != 1 {
		t.Fatal("force release not counted")
	}
	// The holder learns at its next renew that the lock is gone.
	_ = holder.Process.Signal(os.Interrupt)
	err := holder.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Logf("holder after the force release: %v", err) // it may not have renewed yet
	}
}

func TestFormatting(t *testing.T) {
	for ms, want := range map[int64]string{0: "0ms", 850: "850ms", 12345: "12.3s", 59_999: "60.0s", 60_000: "1m00s", 590_297: "9m50s",
		1_790_304: "29m50s", 3_600_000: "1h00m", 7_530_000: "2h06m", -1500: "-1.5s", 1 << 50: "never"} {
		if got := fmtMs(ms); got != want {
			t.Errorf("fmtMs(%d) = %q, want %q", ms, got, want)
		}
	}
	for in, want := range map[string]string{"a/b": "a/b", "键/🔒": "键/🔒", "with space": `"with space"`, "": `""`, "tab\there": `"tab\there"`, `q"`: `"q\""`} {
		if got := display(in); got != want {
			t.Errorf("display(%q) = %s, want %s", in, got, want)
		}
	}
	for key, want := range map[string]string{"a/b": "/v1/locks/R/a%2Fb", "..": "/v1/locks/R/%2E%2E", ".": "/v1/locks/R/%2E", "with space": "/v1/locks/R/with%20space", "a..b": "/v1/locks/R/a..b"} {
		if got := lockPath("R", key); got != want {
			t.Errorf("lockPath(%q) = %s, want %s", key, got, want)
		}
	}
}
