package auth

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"golang.org/x/crypto/bcrypt"
)

func TestMatch(t *testing.T) {
	for _, tt := range []struct {
		pattern, key string
		want         bool
	}{
		{"*", "anything", true},
		{"*", "", true},
		{"orders-*", "orders-42", true},
		{"orders-*", "orders-", true},
		{"orders-*", "order-42", false},
		{"*-2024", "invoice-2024", true},
		{"a*b*c", "axxbyyc", true},
		{"a*b*c", "axxbyy", false},
		{"exact", "exact", true},
		{"exact", "exactly", false},
		{strings.Repeat("*a", 30) + "b", strings.Repeat("a", 60), false}, // no exponential blow-up
	} {
		if got := match(tt.pattern, tt.key); got != tt.want {
			t.Errorf("match(%q, %q) = %v", tt.pattern, tt.key, got)
		}
	}
}

func TestCan(t *testing.T) {
	admin := User{Username: "root", GlobalAdmin: true}
	billing := User{Username: "billing", Permissions: []Permission{{"invoice-*", "rw"}, {"report", "r"}}}
	if !admin.Can("w", "anything") || !billing.Can("w", "invoice-1") || billing.Can("w", "report") || !billing.Can("r", "report") || billing.Can("w", "orders-1") {
		t.Fatal("permission rules")
	}
}

func newStore(t *testing.T) *Store {
	t.Helper()
	s, err := OpenStore(filepath.Join(t.TempDir(), "sub", "users.json"), WithPasswordCost(bcrypt.MinCost)) // hashes stay bcrypt; only the work factor drops
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestStore(t *testing.T) {
	s := newStore(t)
	if len(s.List()) != 0 {
		t.Fatal("missing file is not an empty store")
	}
	if err := s.Add("alice", "short", false); err != ErrBadPassword {
		t.Fatalf("short password: %v", err)
	}
	if err := s.Add("alice", "correct horse", true); err != nil {
		t.Fatal(err)
	}
	if err := s.Add("alice", "another one", false); err == nil {
		t.Fatal("duplicate user accepted")
	}
	if err := s.Add("bob", "battery staple", false); err != nil {
		t.Fatal(err)
	}
	if err := s.Grant("bob", "jobs-*", "w"); err != nil {
		t.Fatal(err)
	}
	if err := s.Grant("bob", "jobs-*", "x"); err == nil {
		t.Fatal("bad action accepted")
	}
	if err := s.SetPassword("nobody", "whatever123"); err == nil {
		t.Fatal("password set for a missing user")
	}
	st, _ := os.Stat(s.Path())
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("users file mode %v", st.Mode())
	}
	b, _ := os.ReadFile(s.Path())
	if strings.Contains(string(b), "correct horse") || !strings.Contains(string(b), "$2a$") {
		t.Fatalf("file does not hold bcrypt hashes only:\n%s", b)
	}
	// Another process (the CLI) edits the file; a server's store sees it.
	other, err := OpenStore(s.Path())
	if err != nil {
		t.Fatal(err)
	}
	if u, ok := other.Get("bob"); !ok || !u.Can("w", "jobs-7") {
		t.Fatalf("reopened: %+v", u)
	}
	if err := s.Remove("bob"); err != nil {
		t.Fatal(err)
	}
	other.checked.Store(0)
	if err := other.Refresh(); err != nil {
		t.Fatal(err)
	}
	if _, ok := other.Get("bob"); ok {
		t.Fatal("removed user still visible after refresh")
	}
	for _, bad := range []string{`{"users":[{"username":""}]}`, `{"users":[{"username":"a"},{"username":"a"}]}`,
		`{"users":[{"username":"a","permissions":[{"resource":"*","action":"x"}]}]}`, `not json`} {
		if err := os.WriteFile(s.Path(), []byte(bad), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := OpenStore(s.Path()); err == nil {
			t.Errorf("users file %q accepted", bad)
		}
	}
}

var testKey = base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))

func TestLoginAndVerify(t *testing.T) {
	s := newStore(t)
	if err := s.Add("alice", "correct horse", false); err != nil {
		t.Fatal(err)
	}
	a, err := New(Config{Enabled: true, SecretKey: testKey, TokenTTL: time.Minute}, s)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.Login("alice", "wrong horse"); err != ErrBadCredentials {
		t.Fatalf("wrong password: %v", err)
	}
	if _, _, err := a.Login("mallory", "correct horse"); err != ErrBadCredentials {
		t.Fatalf("unknown user: %v", err)
	}
	tok, u, err := a.Login("alice", "correct horse")
	if err != nil || u.Username != "alice" {
		t.Fatalf("login: %v", err)
	}
	if got, err := a.Verify(tok); err != nil || got.Username != "alice" {
		t.Fatalf("verify: %+v %v", got, err)
	}
	// Expired.
	a.now = func() time.Time { return time.Now().Add(2 * time.Minute) }
	if _, err := a.Verify(tok); err != ErrUnauthorized {
		t.Fatalf("expired token: %v", err)
	}
	a.now = time.Now
	// Signed with another key, unsigned, or garbage.
	other, _ := New(Config{SecretKey: base64.StdEncoding.EncodeToString([]byte("another key of at least 32 bytes!!"))}, s)
	foreign, _, _ := other.Login("alice", "correct horse")
	none, _ := jwt.NewWithClaims(jwt.SigningMethodNone, jwt.MapClaims{"sub": "alice", "exp": time.Now().Add(time.Hour).Unix()}).SignedString(jwt.UnsafeAllowNoneSignatureType)
	noExp, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": "alice"}).SignedString(a.key)
	for name, bad := range map[string]string{"foreign key": foreign, "alg none": none, "no expiry": noExp, "garbage": "abc.def.ghi", "empty": ""} {
		if _, err := a.Verify(bad); err != ErrUnauthorized {
			t.Errorf("%s: %v", name, err)
		}
	}
	// A removed user's token stops working.
	if err := s.Remove("alice"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Verify(tok); err != ErrUnauthorized {
		t.Fatalf("removed user's token: %v", err)
	}
}

func TestWeakKeyRefused(t *testing.T) {
	s := newStore(t)
	for _, key := range []string{"", "not base64!!", base64.StdEncoding.EncodeToString([]byte("too short"))} {
		if _, err := New(Config{Enabled: true, SecretKey: key}, s); err == nil {
			t.Errorf("key %q accepted", key)
		}
	}
}

// The server's stores hash at bcrypt.DefaultCost, and so does the hash an
// Authenticator compares unknown users against; only a store opened
// WithPasswordCost (the tests') differs, and it does both.
func TestPasswordCost(t *testing.T) {
	dflt, err := OpenStore(filepath.Join(t.TempDir(), "users.json"))
	if err != nil {
		t.Fatal(err)
	}
	if dflt.cost != bcrypt.DefaultCost {
		t.Fatalf("default store cost %d, want bcrypt.DefaultCost %d", dflt.cost, bcrypt.DefaultCost)
	}
	if s, _ := OpenStore(filepath.Join(t.TempDir(), "users.json"), WithPasswordCost(0)); s.cost != bcrypt.DefaultCost {
		t.Fatalf("WithPasswordCost(0) gave cost %d, want the default", s.cost)
	}
	s := newStore(t)
	if err := s.Add("alice", "correct horse", false); err != nil {
		t.Fatal(err)
	}
	u, _ := s.Get("alice")
	if c, err := bcrypt.Cost([]byte(u.PasswordHash)); err != nil || c != bcrypt.MinCost {
		t.Fatalf("hash cost %d %v, want bcrypt.MinCost", c, err)
	}
	a, err := New(Config{Enabled: true, SecretKey: testKey}, s)
	if err != nil {
		t.Fatal(err)
	}
	if c, err := bcrypt.Cost(a.dummy); err != nil || c != bcrypt.MinCost {
		t.Fatalf("unknown-user hash cost %d %v, want the store's", c, err)
	}
}
