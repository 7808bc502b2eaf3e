// Package authtest gives tests an Authenticator that is cheap to use.
package authtest

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"golang.org/x/crypto/bcrypt"

	"nacos-lockd/gateway/auth"
)

// FastAuth is auth on with cheap credentials: users "admin" (global
// admin) and "app" (rw on everything), passwords "<name>-password",
// written with bcrypt's minimum cost so logins are fast, and a token for
// each signed directly. bcrypt at its default cost takes seconds under the
// race detector.
func FastAuth(t testing.TB) (a *auth.Authenticator, adminTok, appTok string) {
	t.Helper()
	type user struct {
		Username    string            `json:"username"`
		Password    string            `json:"password"`
		GlobalAdmin bool              `json:"globalAdmin,omitempty"`
		Permissions []auth.Permission `json:"permissions,omitempty"`
	}
	var users []user
	for _, u := range []struct {
		name  string
		admin bool
	}{{"admin", true}, {"app", false}} {
		h, err := bcrypt.GenerateFromPassword([]byte(u.name+"-password"), bcrypt.MinCost)
		if err != nil {
			t.Fatal(err)
		}
		users = append(users, user{Username: u.name, Password: string(h), GlobalAdmin: u.admin, Permissions: []auth.Permission{{Resource: "*", Action: "rw"}}})
	}
	path := filepath.Join(t.TempDir(), "users.json")
	b, _ := json.Marshal(map[string]any{"users": users})
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	store, err := auth.OpenStore(path, auth.WithPasswordCost(bcrypt.MinCost))
	if err != nil {
		t.Fatal(err)
	}
	key := []byte("0123456789abcdef0123456789abcdef")
	if a, err = auth.New(auth.Config{Enabled: true, SecretKey: base64.StdEncoding.EncodeToString(key)}, store); err != nil {
		t.Fatal(err)
	}
	sign := func(sub string) string {
		s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": sub, "exp": time.Now().Add(time.Hour).Unix()}).SignedString(key)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	return a, sign("admin"), sign("app")
}
