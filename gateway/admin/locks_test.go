package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"nacos-lockd/gateway/auth/authtest"
	"nacos-lockd/statemachine/lockview"
)

// fakeLocks is a slice-backed lock table with the reader's contract.
type fakeLocks struct {
	mu       sync.Mutex
	locks    []lockview.Lock // kept in (type, key) order
	stale    []bool          // the stale flag of every read
	released []uint64        // tokens force-released
	fail     error
	// releaseErr fails force releases (a proposal that timed out).
	releaseErr error
	// beforeRelease runs before each force release: a grant that
	// happens between the admin's read and its release.
	beforeRelease func(f *fakeLocks)
}

var typeOrder = map[string]int{"NACOS_LOCK": 1, "REENTRANT": 2, "NON_REENTRANT": 3}

func (f *fakeLocks) put(l lockview.Lock) {
	f.locks = append(f.locks, l)
	slices.SortFunc(f.locks, func(a, b lockview.Lock) int {
		if c := typeOrder[a.Type] - typeOrder[b.Type]; c != 0 {
			return c
		}
		return strings.Compare(a.Key, b.Key)
	})
}

func (f *fakeLocks) ListLocks(_ context.Context, q lockview.Query, stale bool) (lockview.Page, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stale = append(f.stale, stale)
	if f.fail != nil {
		return lockview.Page{}, f.fail
	}
	for _, t := range []string{q.Type, q.AfterType} {
		if t != "" && typeOrder[t] == 0 {
			return lockview.Page{}, fmt.Errorf("%w %q", lockview.ErrUnknownType, t)
		}
	}
	var p lockview.Page
	for _, l := range f.locks {
		if (q.Type != "" && l.Type != q.Type) || !strings.HasPrefix(l.Key, q.Prefix) {
			continue
		}
		if q.AfterType != "" {
			if c := typeOrder[l.Type] - typeOrder[q.AfterType]; c < 0 || (c == 0 && l.Key <= q.AfterKey) {
				continue
			}
		}
		if len(p.Locks) == q.Limit {
			p.More = true
			break
		}
		p.Locks = append(p.Locks, l)
	}
	p.Applied = 42
	return p, nil
}

func (f *fakeLocks) GetLock(_ context.Context, typ, key string, stale bool) (lockview.Lock, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stale = append(f.stale, stale)
	if f.fail != nil {
		return lockview.Lock{}, f.fail
	}
	if typeOrder[typ] == 0 {
		return lockview.Lock{}, fmt.Errorf("%w %q", lockview.ErrUnknownType, typ)
	}
	for _, l := range f.locks {
		if l.Type == typ && l.Key == key {
			return l, nil
		}
	}
	return lockview.Lock{}, lockview.ErrNotFound
}

func (f *fakeLocks) ForceRelease(_ context.Context, typ, key string, token uint64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.beforeRelease != nil {
		f.beforeRelease(f)
	}
	if f.releaseErr != nil {
		return f.releaseErr
	}
	for i, l := range f.locks {
		if l.Type != typ || l.Key != key {
			continue
		}
		if token != 0 && l.Token != token {
			return lockview.ErrChanged
		}
		f.released = append(f.released, l.Token)
		if len(l.Waiters) == 0 {
			f.locks = slices.Delete(f.locks, i, i+1)
			return nil
		}
		w := l.Waiters[0]
		f.locks[i] = lockview.Lock{Type: typ, Key: key, Owner: w.Owner, ConnID: w.ConnID, Count: 1, Token: 1000 + l.Token,
			LeaseEndMs: l.LeaseEndMs, Unclaimed: true, Waiters: l.Waiters[1:]}
		return nil
	}
	return lockview.ErrNotFound
}

type fakeConns []Connection

func (f fakeConns) Connections() []Connection { return f }

var testNow = time.UnixMilli(1_800_000_000_000)

// testKeys are keys a path must carry: slashes (leading, trailing,
// doubled), spaces, non-ASCII, dot segments, URL syntax.
var testKeys = []string{"orders/2024/1", "with space", "键/🔒", "a//b", "/lead", "trail/", "..", ".", "a/../b", "q?x=1#f", "100%", "force-release", "x/force-release"}

func newLockAPI(t testing.TB, cfg Config) (*fakeLocks, http.Handler, *bytes.Buffer, *prometheus.Registry) {
	t.Helper()
	f := &fakeLocks{}
	for i, k := range testKeys {
		f.put(lockview.Lock{Type: "REENTRANT", Key: k, Owner: "owner-" + k, ConnID: fmt.Sprintf("1700000000000_10.0.0.%d_5000%d_3", i, i),
			Count: 1, Token: uint64(10 + i), AcquiredAtMs: testNow.UnixMilli() - 5000, LeaseEndMs: testNow.UnixMilli() + 25000})
	}
	f.put(lockview.Lock{Type: "NACOS_LOCK", Key: "orders/2024/1", Owner: "c", ConnID: "imported-conn", Count: 1, Token: 1,
		LeaseEndMs: testNow.UnixMilli() - 10})
	f.put(lockview.Lock{Type: "NON_REENTRANT", Key: "job", Owner: "h", ConnID: "1700000000000_::1_6000_2", Count: 1, Token: 5,
		AcquiredAtMs: testNow.UnixMilli() - 1000, LeaseEndMs: testNow.UnixMilli() + 9000,
		Waiters: []lockview.Waiter{{Owner: "w1", ConnID: "1700000000001_10.1.1.1_7000_1", DeadlineMs: testNow.UnixMilli() + 3000}, {Owner: "w2", ConnID: "x", DeadlineMs: testNow.UnixMilli() + 60000}}})
	var logs bytes.Buffer
	reg := prometheus.NewRegistry()
	if cfg.Describe == nil {
		cfg.Describe = func(id uint64, raft string) Member { return Member{ReplicaID: id, RaftAddress: raft} }
	}
	cfg.Locks, cfg.Registerer = f, reg
	if cfg.Connections == nil {
		cfg.Connections = fakeConns{{ID: "c1", Remote: "10.0.0.1:5000", ClientIP: "10.0.0.1", ClientVersion: "Nacos-Java-Client:v3.1.1", AppName: "billing", Since: testNow}}
	}
	fc := &fakeCluster{self: 3, leader: 3, members: map[uint64]string{3: "127.0.0.1:7848"}, removed: map[uint64]bool{}}
	api := New(cfg, fc, zerolog.New(&logs).Level(zerolog.DebugLevel))
	api.now = func() time.Time { return testNow }
	return f, api.Handler(), &logs, reg
}

// pathKey escapes a key as one path segment, as clients must.
func pathKey(k string) string {
	e := url.PathEscape(k)
	if e == "." || e == ".." {
		e = strings.ReplaceAll(e, ".", "%2E")
	}
	return e
}

func call(t testing.TB, h http.Handler, method, target string, header map[string]string, out any) int {
	t.Helper()
	req := httptest.NewRequest(method, target, nil)
	req.RemoteAddr = "192.0.2.7:41000"
	for k, v := range header {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if out != nil {
		if err := json.Unmarshal(rec.Body.Bytes(), out); err != nil {
			t.Fatalf("%s %s: %d %q: %v", method, target, rec.Code, rec.Body, err)
		}
	}
	return rec.Code
}

type listReply struct {
	Locks        []Lock `json:"locks"`
	NextCursor   string `json:"nextCursor"`
	Consistency  string `json:"consistency"`
	AppliedIndex uint64 `json:"appliedIndex"`
	Error        string `json:"error"`
}

func TestListLocksPagesWithCursors(t *testing.T) {
	f, h, _, _ := newLockAPI(t, Config{})
	var want []string
	for _, l := range f.locks {
		want = append(want, l.Type+" "+l.Key)
	}
	for _, limit := range []int{1, 2, 5, 100} {
		var got []string
		cursor := ""
		for pages := 0; ; pages++ {
			var out listReply
			target := fmt.Sprintf("/v1/locks?limit=%d&cursor=%s", limit, url.QueryEscape(cursor))
			if code := call(t, h, "GET", target, nil, &out); code != 200 || out.Consistency != "linearizable" || out.AppliedIndex != 42 {
				t.Fatalf("%s: %d %+v", target, code, out)
			}
			for _, l := range out.Locks {
				got = append(got, l.Type+" "+l.Key)
			}
			if out.NextCursor == "" {
				break
			}
			if len(out.Locks) != limit || pages > 50 {
				t.Fatalf("a short page with a cursor: %+v", out)
			}
			cursor = out.NextCursor
		}
		if !slices.Equal(got, want) {
			t.Fatalf("limit %d:\n got %q\nwant %q", limit, got, want)
		}
	}
	var out listReply
	call(t, h, "GET", "/v1/locks?type=REENTRANT&prefix="+url.QueryEscape("键/"), nil, &out)
	if len(out.Locks) != 1 || out.Locks[0].Key != "键/🔒" || out.NextCursor != "" {
		t.Fatalf("filtered: %+v", out)
	}
	call(t, h, "GET", "/v1/locks?stale=true&prefix=orders", nil, &out)
	if out.Consistency != "stale" || len(out.Locks) != 2 || !f.stale[len(f.stale)-1] {
		t.Fatalf("stale: %+v %v", out, f.stale)
	}
	for _, bad := range []string{"limit=0", "limit=1001", "limit=x", "cursor=!!", "cursor=" + encodeCursor("", "k")[:3], "stale=maybe", "type=MUTEX"} {
		if code := call(t, h, "GET", "/v1/locks?"+bad, nil, &out); code != 400 || out.Error == "" {
			t.Errorf("%s: %d %+v", bad, code, out)
		}
	}
	f.fail = errors.New("raft unavailable: no leader")
	if code := call(t, h, "GET", "/v1/locks", nil, &out); code != 503 || !strings.Contains(out.Error, "no leader") {
		t.Fatalf("unavailable: %d %+v", code, out)
	}
}

func TestLockFields(t *testing.T) {
	_, h, _, _ := newLockAPI(t, Config{})
	var l Lock
	if code := call(t, h, "GET", "/v1/locks/NON_REENTRANT/job", nil, &l); code != 200 {
		t.Fatalf("get: %d", code)
	}
	want := Lock{Type: "NON_REENTRANT", Key: "job", Owner: "h", ConnectionID: "1700000000000_::1_6000_2", ClientIP: "::1", Node: "2",
		FencingToken: 5, ReentrantCount: 1, AcquiredAtMs: testNow.UnixMilli() - 1000,
		LeaseEndMs: testNow.UnixMilli() + 9000, TimeLeftMs: 9000,
		Waiters: []Waiter{
			{Position: 0, Owner: "w1", ConnectionID: "1700000000001_10.1.1.1_7000_1", ClientIP: "10.1.1.1", DeadlineMs: testNow.UnixMilli() + 3000, TimeLeftMs: 3000},
			{Position: 1, Owner: "w2", ConnectionID: "x", DeadlineMs: testNow.UnixMilli() + 60000, TimeLeftMs: 60000},
		}}
	want.AcquiredAt = time.UnixMilli(want.AcquiredAtMs).UTC().Format(time.RFC3339Nano)
	want.LeaseEnd = time.UnixMilli(want.LeaseEndMs).UTC().Format(time.RFC3339Nano)
	for i := range want.Waiters {
		want.Waiters[i].Deadline = time.UnixMilli(want.Waiters[i].DeadlineMs).UTC().Format(time.RFC3339Nano)
	}
	if fmt.Sprint(l) != fmt.Sprint(want) {
		t.Fatalf("lock:\n got %+v\nwant %+v", l, want)
	}
	// An imported lock: no grant time, a connection id of another shape,
	// a lease already over.
	l = Lock{}
	call(t, h, "GET", "/v1/locks/NACOS_LOCK/orders%2F2024%2F1", nil, &l)
	if l.AcquiredAtMs != 0 || l.AcquiredAt != "" || l.ClientIP != "" || l.Node != "" || l.TimeLeftMs != 0 || l.Waiters == nil {
		t.Fatalf("imported lock: %+v", l)
	}
}

func TestGetLockKeyEncodings(t *testing.T) {
	_, h, _, _ := newLockAPI(t, Config{})
	for _, k := range testKeys {
		for _, target := range []string{
			"/v1/locks/REENTRANT/" + pathKey(k),
			"/v1/locks/REENTRANT?key=" + url.QueryEscape(k),
			"/v1/locks/REENTRANT/?key=" + url.QueryEscape(k),
		} {
			var l Lock
			if code := call(t, h, "GET", target, nil, &l); code != 200 || l.Key != k || l.Owner != "owner-"+k {
				t.Errorf("%s: %d %+v", target, code, l)
			}
		}
	}
	// Slashes inside a key need no escaping where the path stays clean.
	var l Lock
	if code := call(t, h, "GET", "/v1/locks/REENTRANT/orders/2024/1", nil, &l); code != 200 || l.Key != "orders/2024/1" {
		t.Fatalf("raw slashes: %d %+v", code, l)
	}
	var e struct{ Error string }
	for target, want := range map[string]int{
		"/v1/locks/REENTRANT/nope":              404,
		"/v1/locks/REENTRANT":                   400, // no key
		"/v1/locks/REENTRANT/a?key=a":           400, // two keys
		"/v1/locks/MUTEX/a":                     400,
		"/v1/locks/REENTRANT/a?stale=sometimes": 400,
	} {
		if code := call(t, h, "GET", target, nil, &e); code != want || e.Error == "" {
			t.Errorf("%s: %d %q, want %d", target, code, e.Error, want)
		}
	}
}

type releaseReply struct {
	Released bool   `json:"released"`
	Type     string `json:"type"`
	Key      string `json:"key"`
	By       string `json:"by"`
	At       string `json:"at"`
	Previous Lock   `json:"previous"`
	Current  *Lock  `json:"current"`
	Error    string `json:"error"`
}

func forceReleases(t *testing.T, reg *prometheus.Registry, result string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "nacoslockd_admin_force_releases_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if m.GetLabel()[0].GetValue() == result {
				return m.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("no force release series %q", result)
	return 0
}

func TestForceReleaseIsAudited(t *testing.T) {
	f, h, logs, reg := newLockAPI(t, Config{})
	var out releaseReply
	if code := call(t, h, "POST", "/v1/locks/NON_REENTRANT/job/force-release", nil, &out); code != 200 {
		t.Fatalf("force release: %d %+v", code, out)
	}
	if !out.Released || out.By != "192.0.2.7:41000" || out.Previous.Owner != "h" || out.Previous.FencingToken != 5 ||
		out.Current == nil || out.Current.Owner != "w1" || !out.Current.Unclaimed || out.At == "" {
		t.Fatalf("reply: %+v", out)
	}
	if !slices.Equal(f.released, []uint64{5}) {
		t.Fatalf("released tokens %v", f.released)
	}
	// The audit line: warn, who, which lock (hashed), the previous holder.
	var audit map[string]any
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["audit"] == "force_release" {
			audit = m
		}
	}
	if audit == nil || audit["level"] != "warn" || audit["by"] != "192.0.2.7:41000" || audit["by_kind"] != "remote_address" ||
		audit["lock_type"] != "NON_REENTRANT" || audit["key_hash"] != hashOf("job") || audit["prev_conn_id"] != "1700000000000_::1_6000_2" ||
		audit["prev_client_ip"] != "::1" || audit["prev_owner_hash"] != hashOf("h") || audit["prev_token"] != float64(5) || audit["handed_off"] != true {
		t.Fatalf("audit line %v in\n%s", audit, logs)
	}
	if forceReleases(t, reg, "released") != 1 {
		t.Fatal("force release not counted")
	}
	// Every key form, through the path and through ?key=.
	for i, k := range testKeys {
		target := "/v1/locks/REENTRANT/" + pathKey(k) + "/force-release"
		if i%2 == 1 {
			target = "/v1/locks/REENTRANT/force-release?key=" + url.QueryEscape(k)
		}
		if code := call(t, h, "POST", target, nil, &out); code != 200 || out.Key != k || out.Previous.Owner != "owner-"+k || out.Current != nil {
			t.Errorf("%s: %d %+v", target, code, out)
		}
	}
	if got := forceReleases(t, reg, "released"); got != float64(1+len(testKeys)) {
		t.Fatalf("released counted %v", got)
	}
	if code := call(t, h, "POST", "/v1/locks/REENTRANT/with%20space/force-release", nil, &out); code != 404 || forceReleases(t, reg, "not_held") != 1 {
		t.Fatalf("release of a free lock: %d %+v", code, out)
	}
	for target, want := range map[string]int{
		"/v1/locks/REENTRANT/job":                                     404, // not a force release
		"/v1/locks/REENTRANT/force-release":                           400, // no key
		"/v1/locks/NON_REENTRANT/job/force-release?fencingToken=zero": 400,
		"/v1/locks/MUTEX/job/force-release":                           400,
	} {
		if code := call(t, h, "POST", target, nil, &out); code != want {
			t.Errorf("%s: %d, want %d", target, code, want)
		}
	}
	// A release whose outcome is unknown (the proposal timed out) is
	// audited as an attempt.
	f.releaseErr = errors.New("propose FORCE_RELEASE: raft unavailable: timeout")
	if code := call(t, h, "POST", "/v1/locks/NACOS_LOCK/orders%2F2024%2F1/force-release", nil, &out); code != 503 || forceReleases(t, reg, "error") != 1 {
		t.Fatalf("timed-out release: %d %+v", code, out)
	}
	if !strings.Contains(logs.String(), `"prev_token":1,"prev_count":1,"error":"propose FORCE_RELEASE: raft unavailable: timeout","message":"lock force release attempted, outcome unknown"`) {
		t.Fatalf("attempt not audited:\n%s", logs)
	}
	if strings.Contains(strings.Join(warnLines(logs), "\n"), "owner-") {
		t.Fatal("an owner reached the log at warn")
	}
}

func warnLines(logs *bytes.Buffer) []string {
	var out []string
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, `"level":"warn"`) {
			out = append(out, line)
		}
	}
	return out
}

func TestForceReleaseOfAGrantThatChanged(t *testing.T) {
	f, h, logs, reg := newLockAPI(t, Config{})
	// Named token, held under another: refused, nothing released.
	var out releaseReply
	if code := call(t, h, "POST", "/v1/locks/NON_REENTRANT/job/force-release?fencingToken=4", nil, &out); code != 409 ||
		out.Current == nil || out.Current.FencingToken != 5 || !strings.Contains(out.Error, "fencing token 5, not 4") {
		t.Fatalf("stale token: %d %+v", code, out)
	}
	if len(f.released) != 0 || forceReleases(t, reg, "conflict") != 1 {
		t.Fatalf("released %v", f.released)
	}
	// No token: a grant between the read and the release makes the API
	// read again and release (and audit) the new holder.
	regrants := 0
	f.beforeRelease = func(f *fakeLocks) {
		if regrants < 1 {
			regrants++
			for i := range f.locks {
				if f.locks[i].Key == "job" {
					f.locks[i].Owner, f.locks[i].Token = "newer", 77
				}
			}
		}
	}
	if code := call(t, h, "POST", "/v1/locks/NON_REENTRANT/job/force-release", nil, &out); code != 200 || out.Previous.Owner != "newer" || out.Previous.FencingToken != 77 {
		t.Fatalf("release after a re-grant: %d %+v", code, out)
	}
	if !strings.Contains(logs.String(), `"prev_token":77`) {
		t.Fatalf("audit does not name the holder released:\n%s", logs)
	}
	// A lock that keeps changing hands is given up on.
	f.beforeRelease = func(f *fakeLocks) {
		for i := range f.locks {
			if f.locks[i].Key == "orders/2024/1" {
				f.locks[i].Token++
			}
		}
	}
	if code := call(t, h, "POST", "/v1/locks/REENTRANT/orders%2F2024%2F1/force-release", nil, &out); code != 409 || !strings.Contains(out.Error, "three times") {
		t.Fatalf("churning lock: %d %+v", code, out)
	}
}

func TestLockRoutesNeedAnAdminToken(t *testing.T) {
	a, adminTok, appTok := authtest.FastAuth(t)
	noLocks := New(Config{Auth: a}, &fakeCluster{self: 1, members: map[uint64]string{}, removed: map[uint64]bool{}}, zerolog.Nop()).Handler()
	if code := call(t, noLocks, "GET", "/v1/locks?accessToken="+adminTok, nil, nil); code != 404 { // only there with Locks
		t.Fatalf("lock routes without Locks: %d", code)
	}
	_, h, logs, _ := newLockAPI(t, Config{Auth: a})
	for _, target := range []string{"/v1/locks", "/v1/locks/NON_REENTRANT/job", "/v1/connections"} {
		for tok, want := range map[string]int{"": 403, appTok: 403, "garbage": 403, adminTok: 200} {
			if code := call(t, h, "GET", target, map[string]string{"Authorization": "Bearer " + tok}, nil); code != want {
				t.Errorf("GET %s with token %.8q: %d, want %d", target, tok, code, want)
			}
		}
	}
	for tok, want := range map[string]int{"": 403, appTok: 403} {
		if code := call(t, h, "POST", "/v1/locks/NON_REENTRANT/job/force-release", map[string]string{"accessToken": tok}, nil); code != want {
			t.Errorf("force release with token %.8q: %d, want %d", tok, code, want)
		}
	}
	var out releaseReply
	if code := call(t, h, "POST", "/v1/locks/NON_REENTRANT/job/force-release?accessToken="+adminTok, nil, &out); code != 200 || out.By != "admin" {
		t.Fatalf("force release as admin: %d %+v", code, out)
	}
	if !strings.Contains(logs.String(), `"by":"admin","by_kind":"user"`) {
		t.Fatalf("audit does not name the admin:\n%s", logs)
	}
}

func TestListConnections(t *testing.T) {
	_, h, _, _ := newLockAPI(t, Config{})
	var out struct {
		ReplicaID   uint64       `json:"replicaId"`
		Connections []Connection `json:"connections"`
	}
	if code := call(t, h, "GET", "/v1/connections", nil, &out); code != 200 || out.ReplicaID != 3 || len(out.Connections) != 1 {
		t.Fatalf("connections: %d %+v", code, out)
	}
	if c := out.Connections[0]; c.ID != "c1" || c.Remote != "10.0.0.1:5000" || c.ClientVersion != "Nacos-Java-Client:v3.1.1" || c.AppName != "billing" || !c.Since.Equal(testNow) {
		t.Fatalf("connection %+v", c)
	}
	_, h, _, _ = newLockAPI(t, Config{Connections: fakeConns{}})
	var raw map[string]any
	if call(t, h, "GET", "/v1/connections", nil, &raw); raw["connections"] == nil {
		t.Fatalf("no connections is not an empty list: %v", raw)
	}
}

func TestParseConnID(t *testing.T) {
	for id, want := range map[string][2]string{
		"1700000000000_10.0.0.1_5000_3":  {"10.0.0.1", "3"},
		"1700000000000_::1_5000_12":      {"::1", "12"},
		"1700000000000_10.0.0.1_5000":    {"10.0.0.1", ""},
		"nacos-conn":                     {"", ""},
		"":                               {"", ""},
		"a_b_c_d":                        {"", ""},
		"1700000000000_10.0.0.1_5000_n1": {"", ""},
		// An IPv6 zone may hold '_': the node follows the last one, the
		// port the second-to-last.
		"1700000000000_fe80::1%eth_0_5000_3": {"fe80::1%eth_0", "3"},
		"1_2_3_4_5":                          {"2_3", "5"},
	} {
		if ip, node := parseConnID(id); ip != want[0] || node != want[1] {
			t.Errorf("%q: %q %q, want %v", id, ip, node, want)
		}
	}
}

func TestCursorRoundTrip(t *testing.T) {
	for _, k := range append(testKeys, "", "line\nbreak") {
		typ, key, err := decodeCursor(encodeCursor("REENTRANT", k))
		if err != nil || typ != "REENTRANT" || key != k {
			t.Errorf("%q: %q %q %v", k, typ, key, err)
		}
	}
}

// FuzzLockRoutes sends arbitrary keys, cursors and parameters: the API
// answers with a status, never a panic or a 500.
func FuzzLockRoutes(f *testing.F) {
	_, h, _, _ := newLockAPI(f, Config{})
	f.Add("REENTRANT", "a/b", "limit=2", encodeCursor("REENTRANT", "a"))
	f.Add("MUTEX", "%zz", "stale=1", "!!")
	f.Add("NON_REENTRANT", "job/force-release", "fencingToken=5", "")
	f.Fuzz(func(t *testing.T, typ, key, query, cursor string) {
		for _, target := range []string{
			"/v1/locks?" + query + "&cursor=" + url.QueryEscape(cursor),
			"/v1/locks/" + url.PathEscape(typ) + "/" + pathKey(key) + "?" + query,
		} {
			for _, method := range []string{"GET", "POST"} {
				req, err := http.NewRequest(method, "http://x"+target, nil)
				if err != nil {
					continue
				}
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				if rec.Code >= 500 && rec.Code != 503 {
					t.Fatalf("%s %s: %d %s", method, target, rec.Code, rec.Body)
				}
			}
		}
	})
}
