package admin

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

func getBody(h http.Handler, target string) (int, []byte) {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", target, nil))
	return rec.Code, rec.Body.Bytes()
}

func TestProfilesAreServedOnlyWhenAskedFor(t *testing.T) {
	off := New(Config{}, &fakeCluster{}, zerolog.Nop()).Handler()
	for _, path := range []string{"/debug/pprof/", "/debug/pprof/heap", "/debug/pprof/profile", "/debug/pprof/trace"} {
		if code, _ := getBody(off, path); code != http.StatusNotFound {
			t.Errorf("profiling off: GET %s answered %d, want 404", path, code)
		}
	}

	on := New(Config{Profiling: true}, &fakeCluster{}, zerolog.Nop()).Handler()
	code, body := getBody(on, "/debug/pprof/")
	if code != http.StatusOK || !bytes.Contains(body, []byte("goroutine")) {
		t.Fatalf("index: %d %.200s", code, body)
	}
	// A named profile in text form, as `curl .../heap?debug=1` reads it.
	code, body = getBody(on, "/debug/pprof/goroutine?debug=1")
	if code != http.StatusOK || !bytes.Contains(body, []byte("TestProfilesAreServedOnlyWhenAskedFor")) {
		t.Fatalf("goroutine profile: %d %.300s", code, body)
	}
	// The binary form `go tool pprof` fetches: gzip-compressed protobuf.
	code, body = getBody(on, "/debug/pprof/allocs")
	if code != http.StatusOK || !bytes.HasPrefix(body, []byte{0x1f, 0x8b}) {
		t.Fatalf("allocs profile: %d, %d bytes starting % x", code, len(body), body[:min(len(body), 4)])
	}
	// An execution trace of a moment.
	code, body = getBody(on, "/debug/pprof/trace?seconds=0.05")
	if code != http.StatusOK || !bytes.HasPrefix(body, []byte("go 1.")) {
		t.Fatalf("trace: %d %.20q", code, body)
	}
}

func TestProfilesNeedAnAdminToken(t *testing.T) {
	h, a := newAuthAPIWith(t, Config{Profiling: true})
	adminTok, _, _ := a.Login("admin", "admin-password")
	appTok, _, _ := a.Login("app", "app-password")
	for _, tt := range []struct {
		target string
		want   int
	}{
		{"/debug/pprof/", http.StatusForbidden},
		{"/debug/pprof/heap?debug=1", http.StatusForbidden},
		{"/debug/pprof/profile?seconds=1", http.StatusForbidden},
		{"/debug/pprof/heap?debug=1&accessToken=" + appTok, http.StatusForbidden},
		{"/debug/pprof/heap?debug=1&accessToken=" + adminTok, http.StatusOK},
		{"/debug/pprof/cmdline?accessToken=" + adminTok, http.StatusOK},
	} {
		code, body := getBody(h, tt.target)
		if code != tt.want {
			t.Errorf("GET %s: %d, want %d", tt.target[:min(len(tt.target), 40)], code, tt.want)
		}
		if code == http.StatusOK && strings.Contains(string(body), `"code"`) {
			t.Errorf("GET %s: an error body with 200: %.100s", tt.target[:min(len(tt.target), 40)], body)
		}
	}
}
