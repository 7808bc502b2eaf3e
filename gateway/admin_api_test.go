package gateway

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"nacos-lockd/gateway/admin"
	"nacos-lockd/gateway/auth/authtest"
	"nacos-lockd/internal/syncbuf"
	"nacos-lockd/interop/client"
	"nacos-lockd/protocol"
	"nacos-lockd/replica"
	"nacos-lockd/replica/replicatest"
)

// What cmd/nacos-lockd passes to admin.New and Serve; every table
// implements all of Table.
var (
	_ Table             = (*replica.Node)(nil)
	_ Table             = (*replicatest.Local)(nil)
	_ admin.Locks       = (*replica.Node)(nil)
	_ admin.Locks       = (*replicatest.Local)(nil)
	_ admin.Connections = (*Server)(nil)
)

// oneNode is a single-member cluster that always has a leader.
type oneNode struct{}

func (oneNode) ReplicaID() uint64        { return 1 }
func (oneNode) LeaderID() (uint64, bool) { return 1, true }
func (oneNode) Membership(context.Context) (map[uint64]string, error) {
	return map[uint64]string{1: "127.0.0.1:7848"}, nil
}
func (oneNode) AddReplica(context.Context, uint64, string) error { return nil }
func (oneNode) RemoveReplica(context.Context, uint64) error      { return nil }

type adminEnv struct {
	ts        *testServer
	base      string
	adminTok  string
	appTok    string
	logs      *syncbuf.Buffer
	reg       *prometheus.Registry
	forceRels prometheus.Collector
}

// startAdminEnv runs the gateway on a local table with auth on, and the
// admin API over it on a real HTTP listener, wired as cmd/nacos-lockd
// wires them.
func startAdminEnv(t *testing.T) *adminEnv {
	t.Helper()
	a, adminTok, appTok := authtest.FastAuth(t)
	env := &adminEnv{logs: &syncbuf.Buffer{}, reg: prometheus.NewRegistry(), adminTok: adminTok, appTok: appTok}
	log := zerolog.New(env.logs).Level(zerolog.DebugLevel)
	env.ts = startServerLog(t, Config{NodeID: "1", Auth: a}, log)
	api := admin.New(admin.Config{
		Ready: func() bool { return true }, Auth: a,
		Locks: env.ts.table, Connections: env.ts.srv, Registerer: env.reg,
	}, oneNode{}, log)
	hs := httptest.NewServer(api.Handler())
	t.Cleanup(hs.Close)
	env.base = hs.URL
	return env
}

func (e *adminEnv) get(t *testing.T, method, path, token string, out any) int {
	t.Helper()
	req, err := http.NewRequest(method, e.base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if out != nil {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			t.Fatalf("%s %s: %d: %v", method, path, resp.StatusCode, err)
		}
	}
	return resp.StatusCode
}

// escapeKey is how clients put a key in the path: one segment.
func escapeKey(k string) string {
	e := url.PathEscape(k)
	if e == "." || e == ".." {
		e = strings.ReplaceAll(e, ".", "%2E")
	}
	return e
}

func TestAdminLockAPIOnARunningGateway(t *testing.T) {
	env := startAdminEnv(t)
	withToken := client.WithHeaders(map[string]string{"accessToken": env.appTok})
	holder := dial(t, env.ts, withToken)
	waiter := dial(t, env.ts, withToken, client.WithClientVersion("Nacos-Go-Client:v2.3.2"))
	keys := []string{"orders/2024/1", "with space", "键/🔒 ü", "a//b", "..", "/lead/"}
	tokens := map[string]uint64{}
	before := time.Now().UnixMilli()
	for _, k := range keys {
		r := lockCall(t, holder, protocol.OpAcquire, gen2(k, "REENTRANT", "owner-h", 60000, -1))
		if !r.Result {
			t.Fatalf("acquire %q: %+v", k, r.LockResult)
		}
		tokens[k] = r.LockResult.FencingToken
	}
	lockCall(t, holder, protocol.OpAcquire, gen2("with space", "REENTRANT", "owner-h", 60000, -1)) // count 2
	if r := lockCall(t, waiter, protocol.OpAcquire, gen2("with space", "REENTRANT", "owner-w", 60000, 30000)); r.LockResult.WaitPosition != 0 {
		t.Fatalf("waiter not queued: %+v", r.LockResult)
	}
	after := time.Now().UnixMilli()

	// Without an admin token nothing is shown.
	for _, tok := range []string{"", env.appTok} {
		if code := env.get(t, "GET", "/v1/locks", tok, nil); code != 403 {
			t.Fatalf("list with token %.8q: %d", tok, code)
		}
		if code := env.get(t, "POST", "/v1/locks/REENTRANT/"+escapeKey("with space")+"/force-release", tok, nil); code != 403 {
			t.Fatalf("force release with token %.8q: %d", tok, code)
		}
	}

	var listed []string
	for cursor, pages := "", 0; ; pages++ {
		var list struct {
			Locks      []admin.Lock `json:"locks"`
			NextCursor string       `json:"nextCursor"`
		}
		if code := env.get(t, "GET", "/v1/locks?type=REENTRANT&limit=4&cursor="+url.QueryEscape(cursor), env.adminTok, &list); code != 200 {
			t.Fatalf("list: %d", code)
		}
		for _, l := range list.Locks {
			listed = append(listed, l.Key)
		}
		if cursor = list.NextCursor; cursor == "" || pages > 10 {
			break
		}
	}
	if strings.Join(listed, "|") != "..|/lead/|a//b|orders/2024/1|with space|键/🔒 ü" {
		t.Fatalf("listed %q", listed)
	}

	for _, k := range keys {
		var l admin.Lock
		if code := env.get(t, "GET", "/v1/locks/REENTRANT/"+escapeKey(k), env.adminTok, &l); code != 200 {
			t.Fatalf("get %q: %d", k, code)
		}
		if l.Key != k || l.Owner != "owner-h" || l.ConnectionID != holder.ConnectionID() || l.ClientIP != "127.0.0.1" || l.Node != "1" ||
			l.FencingToken != tokens[k] || l.AcquiredAtMs < before || l.AcquiredAtMs > after || l.LeaseEndMs < l.AcquiredAtMs+60000 ||
			l.TimeLeftMs <= 0 || l.TimeLeftMs > 60000 {
			t.Fatalf("lock %q: %+v", k, l)
		}
	}
	var l admin.Lock
	env.get(t, "GET", "/v1/locks/REENTRANT?key="+url.QueryEscape("with space"), env.adminTok, &l)
	if l.ReentrantCount != 2 || len(l.Waiters) != 1 || l.Waiters[0].Owner != "owner-w" || l.Waiters[0].ConnectionID != waiter.ConnectionID() ||
		l.Waiters[0].DeadlineMs < before+30000 || l.Waiters[0].TimeLeftMs <= 0 {
		t.Fatalf("lock with a waiter: %+v", l)
	}

	var conns struct {
		Connections []admin.Connection `json:"connections"`
	}
	if code := env.get(t, "GET", "/v1/connections", env.adminTok, &conns); code != 200 || len(conns.Connections) != 2 {
		t.Fatalf("connections: %d %+v", code, conns)
	}
	c0, c1 := conns.Connections[0], conns.Connections[1]
	if c0.ID != holder.ConnectionID() || c1.ID != waiter.ConnectionID() || c1.ClientVersion != "Nacos-Go-Client:v2.3.2" ||
		c0.AppName != "nacos-lockd-go" || c0.ClientIP != "127.0.0.1" || !strings.HasPrefix(c0.Remote, "127.0.0.1:") ||
		time.Since(c0.Since) > time.Minute || c1.Since.Before(c0.Since) {
		t.Fatalf("connections %+v", conns.Connections)
	}

	// Force release: the count-2 holder loses it at once, the waiter is
	// pushed the grant and claims it under a new token.
	var rel struct {
		Released bool        `json:"released"`
		By       string      `json:"by"`
		Previous admin.Lock  `json:"previous"`
		Current  *admin.Lock `json:"current"`
	}
	if code := env.get(t, "POST", "/v1/locks/REENTRANT/"+escapeKey("with space")+"/force-release", env.adminTok, &rel); code != 200 {
		t.Fatalf("force release: %d", code)
	}
	if !rel.Released || rel.By != "admin" || rel.Previous.Owner != "owner-h" || rel.Previous.ReentrantCount != 2 ||
		rel.Current == nil || rel.Current.Owner != "owner-w" || !rel.Current.Unclaimed || rel.Current.FencingToken <= tokens["with space"] {
		t.Fatalf("force release reply: %+v", rel)
	}
	ctx, cancel := client.Timeout(5 * time.Second)
	defer cancel()
	if n, err := client.WaitPush[*protocol.LockNotificationRequest](ctx, waiter); err != nil || n.LockKey != "with space" || n.Owner != "owner-w" {
		t.Fatalf("waiter push: %+v %v", n, err)
	}
	claim := gen2("with space", "REENTRANT", "owner-w", 60000, 30000)
	claim.WaiterRetry = true
	if r := lockCall(t, waiter, protocol.OpAcquire, claim); !r.Result || r.LockResult.FencingToken != rel.Current.FencingToken {
		t.Fatalf("claim: %+v", r.LockResult)
	}
	if r := lockCall(t, holder, protocol.OpRelease, gen2("with space", "REENTRANT", "owner-h", 0, -1)); r.Result {
		t.Fatal("the force-released holder could still release")
	}

	// Audited: warn, by the admin user, lock hashed, holder identified.
	var audit map[string]any
	for _, line := range strings.Split(env.logs.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["audit"] == "force_release" {
			audit = m
		}
	}
	if audit == nil || audit["level"] != "warn" || audit["by"] != "admin" || audit["lock_type"] != "REENTRANT" ||
		audit["prev_conn_id"] != holder.ConnectionID() || audit["prev_client_ip"] != "127.0.0.1" ||
		audit["prev_token"] != float64(tokens["with space"]) || audit["prev_count"] != float64(2) || audit["message"] != "lock force-released" {
		t.Fatalf("audit line: %v", audit)
	}
	if strings.Contains(audit["key_hash"].(string), "space") {
		t.Fatal("raw key in the audit line")
	}
	if got := counterValue(t, env.reg, "nacoslockd_admin_force_releases_total", "released"); got != 1 {
		t.Fatalf("force releases counted: %v", got)
	}
	if code := env.get(t, "POST", "/v1/locks/REENTRANT/nothing-here/force-release", env.adminTok, nil); code != 404 {
		t.Fatalf("release of a free lock: %d", code)
	}
	if got := counterValue(t, env.reg, "nacoslockd_admin_force_releases_total", "not_held"); got != 1 {
		t.Fatalf("not-held releases counted: %v", got)
	}
}

func counterValue(t *testing.T, reg *prometheus.Registry, name, result string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			if mf.GetName() == name && len(m.GetLabel()) == 1 && m.GetLabel()[0].GetValue() == result {
				return m.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("no %s{result=%q}", name, result)
	return 0
}
