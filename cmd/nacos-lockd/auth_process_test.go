package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"nacos-lockd/interop/client"
	"nacos-lockd/interop/procs"
	"nacos-lockd/protocol"
)

func runBinary(t *testing.T, stdin string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(procs.Binary(t, "nacos-lockd"), args...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func TestAuthEndToEnd(t *testing.T) {
	dir := t.TempDir()
	users := filepath.Join(dir, "users.json")
	if out, err := runBinary(t, "s3cret-admin\n", "user", "add", "--users-file", users, "--admin", "root"); err != nil {
		t.Fatalf("user add: %v\n%s", err, out)
	}
	if out, err := runBinary(t, "app-password\n", "user", "add", "app", "--users-file", users); err != nil {
		t.Fatalf("user add: %v\n%s", err, out)
	}
	if out, err := runBinary(t, "", "user", "grant", "app", "jobs-*", "w", "--users-file", users); err != nil {
		t.Fatalf("user grant: %v\n%s", err, out)
	}
	if out, err := runBinary(t, "", "user", "list", "--users-file", users); err != nil || !strings.Contains(out, "w:jobs-*") || !strings.Contains(out, "root") {
		t.Fatalf("user list: %v\n%s", err, out)
	}
	if out, err := runBinary(t, "short\n", "user", "passwd", "app", "--users-file", users); err == nil {
		t.Fatalf("short password accepted:\n%s", out)
	}

	props := filepath.Join(dir, "application.properties")
	key := base64.StdEncoding.EncodeToString([]byte("an HS256 secret of at least 32 bytes"))
	write := func(content string) {
		if err := os.WriteFile(props, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// A weak key is refused at start.
	write(fmt.Sprintf("nacos.core.auth.enabled=true\nnacos.core.auth.plugin.nacos.token.secret.key=%s\nnacos.lock.auth.users_file=%s\n",
		base64.StdEncoding.EncodeToString([]byte("short")), users))
	port := freeMainPort(t)
	if out, err := runBinary(t, "", "--port", fmt.Sprint(port), "--data-dir", filepath.Join(dir, "weak"), "--config", props); err == nil || !strings.Contains(out, "at least 32 are required") {
		t.Fatalf("weak key: %v\n%s", err, out)
	}

	write(fmt.Sprintf("nacos.core.auth.enabled=true\nnacos.core.auth.plugin.nacos.token.secret.key=%s\nnacos.lock.auth.users_file=%s\n", key, users))
	startProcess(t, port, filepath.Join(dir, "data"), "--config", props)
	login := func(user, pw string) (int, string) {
		resp, err := http.Post(fmt.Sprintf("http://127.0.0.1:%d/nacos/v3/auth/user/login?username=%s", port, url.QueryEscape(user)),
			"application/x-www-form-urlencoded", strings.NewReader("password="+url.QueryEscape(pw)))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out struct {
			AccessToken string `json:"accessToken"`
		}
		var buf bytes.Buffer
		_, _ = buf.ReadFrom(resp.Body)
		_ = json.Unmarshal(buf.Bytes(), &out)
		return resp.StatusCode, out.AccessToken
	}
	if code, _ := login("app", "wrong"); code != 403 {
		t.Fatalf("wrong password: %d", code)
	}
	code, token := login("app", "app-password")
	if code != 200 || token == "" {
		t.Fatalf("login: %d", code)
	}
	ctx, cancel := client.Timeout(10 * time.Second)
	defer cancel()
	anon, err := client.Dial(ctx, fmt.Sprintf("127.0.0.1:%d", port+1000))
	if err != nil {
		t.Fatal(err)
	}
	defer anon.Close()
	r, err := anon.Lock(ctx, protocol.OpAcquire, client.Instance("jobs-1", "NACOS_LOCK", "", client.Ms(1000), nil))
	if err != nil || r.ErrorCode != 403 {
		t.Fatalf("no token: %+v %v", r, err)
	}
	app, err := client.Dial(ctx, fmt.Sprintf("127.0.0.1:%d", port+1000), client.WithHeaders(map[string]string{"accessToken": token}))
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close()
	if r, err := app.Lock(ctx, protocol.OpAcquire, client.Instance("jobs-1", "NACOS_LOCK", "", client.Ms(1000), nil)); err != nil || !r.Result {
		t.Fatalf("with token: %+v %v", r, err)
	}
	if r, err := app.Lock(ctx, protocol.OpAcquire, client.Instance("payroll", "NACOS_LOCK", "", client.Ms(1000), nil)); err != nil || r.ErrorCode != 403 || r.Message != "authorization failed!" {
		t.Fatalf("without permission: %+v %v", r, err)
	}
	// The admin API wants an admin.
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/v1/cluster/members?accessToken=%s", port, token))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 403 {
		t.Fatalf("admin API with a non-admin token: %d", resp.StatusCode)
	}
}
