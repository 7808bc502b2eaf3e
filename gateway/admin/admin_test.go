package admin

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"nacos-lockd/gateway/auth"
)

// fakeCluster is a map-backed membership with a settable leader.
type fakeCluster struct {
	self, leader uint64
	members      map[uint64]string
	removed      map[uint64]bool
	fail         error
	changeFail   error // what AddReplica and RemoveReplica answer, changing nothing
}

func (f *fakeCluster) ReplicaID() uint64 { return f.self }
func (f *fakeCluster) LeaderID() (uint64, bool) {
	return f.leader, f.leader != 0
}
func (f *fakeCluster) Membership(context.Context) (map[uint64]string, error) {
	out := map[uint64]string{}
	for k, v := range f.members {
		out[k] = v
	}
	return out, f.fail
}
func (f *fakeCluster) AddReplica(_ context.Context, id uint64, addr string) error {
	if f.changeFail != nil {
		return f.changeFail
	}
	if f.removed[id] {
		return errors.New("replica id was removed before")
	}
	f.members[id] = addr
	return f.fail
}
func (f *fakeCluster) RemoveReplica(_ context.Context, id uint64) error {
	if f.changeFail != nil {
		return f.changeFail
	}
	delete(f.members, id)
	f.removed[id] = true
	return f.fail
}

func newTestAPI(t *testing.T) (*fakeCluster, http.Handler, *bool) {
	t.Helper()
	fc := &fakeCluster{self: 1, leader: 1, members: map[uint64]string{1: "127.0.0.1:7848", 2: "127.0.0.1:7850"}, removed: map[uint64]bool{}}
	ready := false
	next := uint64(100)
	api := New(Config{
		Resolve: func(a string) (Member, error) {
			var ip string
			var port int
			if _, err := fmt.Sscanf(strings.Replace(a, ":", " ", 1), "%s %d", &ip, &port); err != nil {
				return Member{}, fmt.Errorf("bad address %q", a)
			}
			return Member{Address: a, RaftAddress: fmt.Sprintf("%s:%d", ip, port-1000)}, nil
		},
		NewReplicaID: func(Member, map[uint64]string) uint64 { next++; return next },
		Describe: func(id uint64, raft string) Member {
			var ip string
			var port int
			fmt.Sscanf(strings.Replace(raft, ":", " ", 1), "%s %d", &ip, &port)
			return Member{ReplicaID: id, Address: fmt.Sprintf("%s:%d", ip, port+1000), RaftAddress: raft}
		},
		Ready:   func() bool { return ready },
		Metrics: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "# metrics\n") }),
	}, fc, zerolog.Nop())
	return fc, api.Handler(), &ready
}

func do(t *testing.T, h http.Handler, method, path, body string) (int, map[string]any) {
	t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	var out map[string]any
	_ = json.Unmarshal(rec.Body.Bytes(), &out)
	return rec.Code, out
}

func TestHealthAndReadiness(t *testing.T) {
	fc, h, ready := newTestAPI(t)
	if code, _ := do(t, h, "GET", "/healthz", ""); code != 200 {
		t.Fatalf("healthz %d", code)
	}
	if code, _ := do(t, h, "GET", "/readyz", ""); code != 503 {
		t.Fatalf("readyz before start: %d", code)
	}
	*ready = true
	if code, _ := do(t, h, "GET", "/readyz", ""); code != 200 {
		t.Fatalf("readyz when ready: %d", code)
	}
	fc.leader = 0
	if code, _ := do(t, h, "GET", "/readyz", ""); code != 503 {
		t.Fatalf("readyz without a leader: %d", code)
	}
	if code, _ := do(t, h, "GET", "/metrics", ""); code != 200 {
		t.Fatalf("metrics %d", code)
	}
}

// fixedMembership is the kind of error a node whose membership cannot
// change answers with (replica.ErrSoleVoterEngine).
type fixedMembership struct{}

func (fixedMembership) Error() string         { return "membership fixed" }
func (fixedMembership) FixedMembership() bool { return true }

// A membership change that no retry can make is a conflict (409), one that
// failed for now is unavailable (503).
func TestMembershipChangeErrors(t *testing.T) {
	for _, c := range []struct {
		err  error
		want int
	}{
		{fmt.Errorf("add replica 7: %w", fixedMembership{}), 409},
		{errors.New("raft unavailable: timeout"), 503},
	} {
		fc, h, _ := newTestAPI(t)
		fc.changeFail = c.err
		if code, out := do(t, h, "POST", "/v1/cluster/members", `{"address":"127.0.0.1:8852","level":3}`); code != c.want {
			t.Errorf("add with %v: %d %v, want %d", c.err, code, out, c.want)
		}
		if code, out := do(t, h, "DELETE", "/v1/cluster/members/127.0.0.1:8850", ""); code != c.want {
			t.Errorf("remove with %v: %d %v, want %d", c.err, code, out, c.want)
		}
	}
}

func TestMembership(t *testing.T) {
	fc, h, _ := newTestAPI(t)
	code, out := do(t, h, "GET", "/v1/cluster/members", "")
	if code != 200 || len(out["members"].([]any)) != 2 {
		t.Fatalf("list: %d %v", code, out)
	}
	first := out["members"].([]any)[0].(map[string]any)
	if first["address"] != "127.0.0.1:8848" || first["role"] != "leader" || first["self"] != true {
		t.Fatalf("first member %v", first)
	}
	code, out = do(t, h, "POST", "/v1/cluster/members", `{"address":"127.0.0.1:8852"}`)
	if code != 200 || out["replicaId"].(float64) != 101 || fc.members[101] != "127.0.0.1:7852" {
		t.Fatalf("add: %d %v %v", code, out, fc.members)
	}
	// Adding again is idempotent; replacing gives a new id.
	if code, out = do(t, h, "POST", "/v1/cluster/members", `{"address":"127.0.0.1:8852"}`); code != 200 || out["replicaId"].(float64) != 101 {
		t.Fatalf("add again: %d %v", code, out)
	}
	if code, out = do(t, h, "POST", "/v1/cluster/members", `{"address":"127.0.0.1:8852","replace":true}`); code != 200 || out["replicaId"].(float64) != 102 || !fc.removed[101] {
		t.Fatalf("replace: %d %v", code, out)
	}
	if code, _ = do(t, h, "DELETE", "/v1/cluster/members/127.0.0.1:8852", ""); code != 200 || fc.members[102] != "" {
		t.Fatalf("remove: %d %v", code, fc.members)
	}
	if code, _ = do(t, h, "DELETE", "/v1/cluster/members/127.0.0.1:8852", ""); code != 404 {
		t.Fatalf("remove non-member: %d", code)
	}
	for _, body := range []string{`nope`, `{"address":"bad"}`, strings.Repeat("x", 10000)} {
		if code, _ = do(t, h, "POST", "/v1/cluster/members", body); code/100 != 4 {
			t.Fatalf("bad add %q: %d", body[:min(len(body), 20)], code)
		}
	}
	fc.fail = errors.New("no quorum")
	if code, out = do(t, h, "GET", "/v1/cluster/members", ""); code != 503 || !strings.Contains(out["error"].(string), "no quorum") {
		t.Fatalf("unavailable: %d %v", code, out)
	}
}

func TestRuntimeLogLevel(t *testing.T) {
	_, h, _ := newTestAPI(t)
	old := zerolog.GlobalLevel()
	defer zerolog.SetGlobalLevel(old)
	if code, out := do(t, h, "PUT", "/v1/log/level", `{"level":"debug"}`); code != 200 || out["level"] != "debug" || zerolog.GlobalLevel() != zerolog.DebugLevel {
		t.Fatalf("set: %d %v", code, out)
	}
	if code, out := do(t, h, "GET", "/v1/log/level", ""); code != 200 || out["level"] != "debug" {
		t.Fatalf("get: %d %v", code, out)
	}
	if code, _ := do(t, h, "PUT", "/v1/log/level", `{"level":"loud"}`); code != 400 {
		t.Fatalf("bad level: %d", code)
	}
}

func newAuthAPI(t *testing.T) (http.Handler, *auth.Authenticator) {
	t.Helper()
	return newAuthAPIWith(t, Config{})
}

// newAuthAPIWith is newAuthAPI on cfg (its Auth and Describe are set
// here).
func newAuthAPIWith(t *testing.T, cfg Config) (http.Handler, *auth.Authenticator) {
	t.Helper()
	store, err := auth.OpenStore(t.TempDir()+"/users.json", fastHashes)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Add("admin", "admin-password", true); err != nil {
		t.Fatal(err)
	}
	if err := store.Add("app", "app-password", false); err != nil {
		t.Fatal(err)
	}
	a, err := auth.New(auth.Config{Enabled: true, SecretKey: base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef")), TokenTTL: time.Hour}, store)
	if err != nil {
		t.Fatal(err)
	}
	fc := &fakeCluster{self: 1, leader: 1, members: map[uint64]string{1: "127.0.0.1:7848"}, removed: map[uint64]bool{}}
	cfg.Auth = a
	cfg.Describe = func(id uint64, raft string) Member { return Member{ReplicaID: id, RaftAddress: raft} }
	return New(cfg, fc, zerolog.Nop()).Handler(), a
}

func form(t *testing.T, h http.Handler, path, query, body string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest("POST", path+"?"+query, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func TestLoginAsTheJavaClientDoes(t *testing.T) {
	h, a := newAuthAPI(t)
	for _, path := range []string{"/nacos/v3/auth/user/login", "/nacos/v1/auth/users/login"} {
		rec := form(t, h, path, "username=app", "password=app-password")
		var out struct {
			AccessToken string `json:"accessToken"`
			TokenTTL    int64  `json:"tokenTtl"`
			GlobalAdmin bool   `json:"globalAdmin"`
			Username    string `json:"username"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || rec.Code != 200 {
			t.Fatalf("%s: %d %s", path, rec.Code, rec.Body)
		}
		if out.TokenTTL != 3600 || out.GlobalAdmin || out.Username != "app" || rec.Header().Get("Authorization") != "Bearer "+out.AccessToken {
			t.Fatalf("%s: %+v", path, out)
		}
		if u, err := a.Verify(out.AccessToken); err != nil || u.Username != "app" {
			t.Fatalf("issued token does not verify: %v", err)
		}
		if rec := form(t, h, path, "username=app", "password=wrong"); rec.Code != 403 {
			t.Fatalf("%s wrong password: %d", path, rec.Code)
		}
		if rec := form(t, h, path, "username=ghost", "password=app-password"); rec.Code != 403 {
			t.Fatalf("%s unknown user: %d", path, rec.Code)
		}
	}
}

func TestAdminRoutesNeedAnAdminToken(t *testing.T) {
	h, a := newAuthAPI(t)
	adminTok, _, _ := a.Login("admin", "admin-password")
	appTok, _, _ := a.Login("app", "app-password")
	get := func(target string, header map[string]string) int {
		req := httptest.NewRequest("GET", target, nil)
		for k, v := range header {
			req.Header.Set(k, v)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	for _, tt := range []struct {
		target string
		header map[string]string
		want   int
	}{
		{"/v1/cluster/members", nil, 403},
		{"/v1/cluster/members?accessToken=" + appTok, nil, 403},
		{"/v1/cluster/members?accessToken=" + adminTok, nil, 200},
		{"/v1/cluster/members", map[string]string{"Authorization": "Bearer " + adminTok}, 200},
		{"/v1/cluster/members", map[string]string{"accessToken": adminTok}, 200},
		{"/v1/log/level", nil, 403},
		{"/healthz", nil, 200},
	} {
		if got := get(tt.target, tt.header); got != tt.want {
			t.Errorf("%s %v: %d, want %d", tt.target[:min(len(tt.target), 30)], tt.header != nil, got, tt.want)
		}
	}
}

func TestLoginWithAuthOff(t *testing.T) {
	_, h, _ := newTestAPI(t)
	rec := form(t, h, "/nacos/v3/auth/user/login", "username=app", "password=x")
	if rec.Code != 200 || strings.Contains(rec.Body.String(), "accessToken") {
		t.Fatalf("auth off: %d %s", rec.Code, rec.Body)
	}
}

func FuzzLoginForm(f *testing.F) {
	h, _ := newAuthAPIForFuzz(f)
	f.Add("username=app", "password=app-password")
	f.Add("username=%zz", "password=%")
	f.Add("", strings.Repeat("a=b&", 1000))
	f.Fuzz(func(t *testing.T, query, body string) {
		req := httptest.NewRequest("POST", "/nacos/v3/auth/user/login", strings.NewReader(body))
		req.URL.RawQuery = query
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != 200 && rec.Code != 400 && rec.Code != 403 && rec.Code != 413 {
			t.Fatalf("status %d", rec.Code)
		}
		if rec.Code == 200 && !strings.Contains(rec.Body.String(), "accessToken") {
			t.Fatal("200 without a token with auth on")
		}
	})
}

func newAuthAPIForFuzz(f *testing.F) (http.Handler, *auth.Authenticator) {
	store, err := auth.OpenStore(f.TempDir()+"/users.json", fastHashes)
	if err != nil {
		f.Fatal(err)
	}
	if err := store.Add("app", "app-password", false); err != nil {
		f.Fatal(err)
	}
	a, err := auth.New(auth.Config{Enabled: true, SecretKey: base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))}, store)
	if err != nil {
		f.Fatal(err)
	}
	fc := &fakeCluster{self: 1, members: map[uint64]string{}, removed: map[uint64]bool{}}
	return New(Config{Auth: a}, fc, zerolog.Nop()).Handler(), a
}

func TestServerIdentityMayJoin(t *testing.T) {
	store, _ := auth.OpenStore(t.TempDir()+"/users.json", fastHashes)
	a, err := auth.New(auth.Config{Enabled: true, SecretKey: base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))}, store)
	if err != nil {
		t.Fatal(err)
	}
	fc := &fakeCluster{self: 1, leader: 1, members: map[uint64]string{1: "127.0.0.1:7848"}, removed: map[uint64]bool{}}
	h := New(Config{
		Auth: a, Identity: [2]string{"serverIdentity", "cluster-secret"},
		Resolve:      func(addr string) (Member, error) { return Member{Address: addr, RaftAddress: "127.0.0.1:7850"}, nil },
		NewReplicaID: func(Member, map[uint64]string) uint64 { return 9 },
	}, fc, zerolog.Nop()).Handler()
	post := func(header string) int {
		req := httptest.NewRequest("POST", "/v1/cluster/members", strings.NewReader(`{"address":"127.0.0.1:8850"}`))
		if header != "" {
			req.Header.Set("serverIdentity", header)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	if code := post("wrong"); code != 403 {
		t.Fatalf("wrong identity: %d", code)
	}
	if code := post(""); code != 403 {
		t.Fatalf("no identity: %d", code)
	}
	if code := post("cluster-secret"); code != 200 || fc.members[9] == "" {
		t.Fatalf("identity: %d", code)
	}
	// The identity opens only the join route.
	req := httptest.NewRequest("DELETE", "/v1/cluster/members/127.0.0.1:8850", nil)
	req.Header.Set("serverIdentity", "cluster-secret")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != 403 {
		t.Fatalf("identity removed a member: %d", rec.Code)
	}
}
