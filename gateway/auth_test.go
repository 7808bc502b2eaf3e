package gateway

import (
	"encoding/base64"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"
	"golang.org/x/crypto/bcrypt"

	"nacos-lockd/gateway/auth"
	"nacos-lockd/internal/syncbuf"
	"nacos-lockd/interop/client"
	"nacos-lockd/protocol"
)

func TestLockRequestsNeedATokenAndPermission(t *testing.T) {
	store, err := auth.OpenStore(filepath.Join(t.TempDir(), "users.json"), auth.WithPasswordCost(bcrypt.MinCost)) // keep -race runs quick; hashes are still bcrypt
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{"billing", "nobody"} {
		if err := store.Add(u, "password-"+u, false); err != nil {
			t.Fatal(err)
		}
	}
	if err := store.Grant("billing", "invoice-*", "rw"); err != nil {
		t.Fatal(err)
	}
	key := base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))
	a, err := auth.New(auth.Config{Enabled: true, SecretKey: key}, store)
	if err != nil {
		t.Fatal(err)
	}
	var logs syncbuf.Buffer
	ts := startServerLog(t, Config{Auth: a}, zerolog.New(&logs).Level(zerolog.DebugLevel))
	billingToken, _, err := a.Login("billing", "password-billing")
	if err != nil {
		t.Fatal(err)
	}
	nobodyToken, _, _ := a.Login("nobody", "password-nobody")

	expect := func(c *client.Client, key string, code int, msg string) {
		t.Helper()
		r := lockCall(t, c, protocol.OpAcquire, gen1(key, 1000))
		if r.ResultCode != code || (code != 200 && (r.ErrorCode != 403 || r.Message != msg || r.Result)) {
			t.Fatalf("%s: got %d/%d %q result=%v, want %d %q", key, r.ResultCode, r.ErrorCode, r.Message, r.Result, code, msg)
		}
	}
	expect(dial(t, ts), "invoice-1", 500, "user not found or token expired")
	expect(dial(t, ts, client.WithHeaders(map[string]string{"accessToken": "forged.token.value"})), "invoice-1", 500, "user not found or token expired")
	expect(dial(t, ts, client.WithHeaders(map[string]string{"accessToken": nobodyToken})), "invoice-1", 500, "authorization failed!")
	billing := dial(t, ts, client.WithHeaders(map[string]string{"AccessToken": billingToken})) // header names are case-insensitive
	expect(billing, "orders-1", 500, "authorization failed!")
	expect(billing, "invoice-1", 200, "")
	// Identity comes before validation, as in Nacos.
	r := lockCall(t, dial(t, ts), protocol.OpAcquire, gen1("", 0))
	if r.ErrorCode != 403 {
		t.Fatalf("invalid request without a token: %+v", r)
	}

	if got := testutil.ToFloat64(ts.srv.m.authFails.WithLabelValues("unauthenticated")); got != 3 {
		t.Errorf("unauthenticated count %v", got)
	}
	if got := testutil.ToFloat64(ts.srv.m.authFails.WithLabelValues("forbidden")); got != 2 {
		t.Errorf("forbidden count %v", got)
	}
	out := logs.String()
	if !strings.Contains(out, "lock request refused by auth") {
		t.Fatal("refusals are not logged")
	}
	for _, secret := range []string{billingToken, nobodyToken, "forged.token.value"} {
		if strings.Contains(out, secret) {
			t.Fatal("a token reached the log")
		}
	}
}
