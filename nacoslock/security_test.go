package nacoslock_test

import (
	"crypto/tls"
	"encoding/base64"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"nacos-lockd/interop/procs"
	"nacos-lockd/interop/testcerts"
	"nacos-lockd/nacoslock"
)

// TestAuthAndTLS: a server with mutual TLS on the SDK port, HTTPS on the
// main port and auth on, issuing tokens that live 2 s. The client logs in
// over HTTPS, holds a lock for several token lifetimes (its renewals need
// fresh tokens), is refused a key its user has no permission for, and
// cannot connect without TLS, with a wrong password or without trusting
// the server's CA.
func TestAuthAndTLS(t *testing.T) {
	dir := t.TempDir()
	certs, err := testcerts.Generate(dir)
	if err != nil {
		t.Fatal(err)
	}
	users := filepath.Join(dir, "users.json")
	lockd := procs.Binary(t, "nacos-lockd")
	for _, c := range [][]string{
		{"app-password\n", "user", "add", "app", "--users-file", users},
		{"", "user", "grant", "app", "jobs-*", "w", "--users-file", users},
	} {
		cmd := exec.Command(lockd, c[1:]...)
		cmd.Stdin = strings.NewReader(c[0])
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%v: %v\n%s", c[1:], err, out)
		}
	}
	n := node(t, map[string]string{
		"nacos.core.auth.enabled":                             "true",
		"nacos.core.auth.plugin.nacos.token.secret.key":       base64.StdEncoding.EncodeToString([]byte("an HS256 secret of at least 32 bytes")),
		"nacos.core.auth.plugin.nacos.token.expire.seconds":   "2",
		"nacos.lock.auth.users_file":                          users,
		"nacos.remote.server.rpc.tls.enableTls":               "true",
		"nacos.remote.server.rpc.tls.certChainFile":           certs.ServerCert,
		"nacos.remote.server.rpc.tls.certPrivateKey":          certs.ServerKey,
		"nacos.remote.server.rpc.tls.trustCollectionCertFile": certs.CAFile,
		"nacos.remote.server.rpc.tls.mutualAuthEnable":        "true",
		"server.ssl.enabled":                                  "true",
		"server.ssl.certificate":                              certs.ServerCert,
		"server.ssl.certificate-private-key":                  certs.ServerKey,
	})
	servers := []string{n.HTTPAddr()}
	good := &tls.Config{RootCAs: certs.CAPool, Certificates: []tls.Certificate{certs.Client}}
	ctx := ctxFor(t, 60*time.Second)

	cl := dial(t, servers, nacoslock.WithTLS(good), nacoslock.WithAuth("app", "app-password"))
	m := cl.Mutex("jobs-1", nacoslock.WithLease(3*time.Second))
	if err := m.Lock(ctx); err != nil {
		t.Fatalf("lock over TLS with a token: %v", err)
	}
	time.Sleep(6 * time.Second) // 3 token lifetimes, 2 leases: lost by then without refreshes
	if closed(m.Lost()) {
		t.Fatalf("lost while the client should refresh its token: %v", m.Err())
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatalf("unlock after the first token expired: %v", err)
	}
	if err := cl.Mutex("payroll").TryLock(ctx); !errors.Is(err, nacoslock.ErrForbidden) {
		t.Fatalf("key without permission: %v, want ErrForbidden", err)
	}

	short := ctxFor(t, 5*time.Second)
	if c, err := nacoslock.Dial(short, servers, nacoslock.WithTLS(good), nacoslock.WithAuth("app", "wrong")); !errors.Is(err, nacoslock.ErrLogin) {
		if c != nil {
			c.Close()
		}
		t.Fatalf("wrong password: %v, want ErrLogin", err)
	}
	if c, err := nacoslock.Dial(short, servers); err == nil {
		c.Close()
		t.Fatal("connected to a TLS port without TLS")
	}
	if c, err := nacoslock.Dial(short, servers, nacoslock.WithTLS(&tls.Config{RootCAs: certs.OtherCA, Certificates: []tls.Certificate{certs.Client}})); err == nil {
		c.Close()
		t.Fatal("connected without trusting the server's CA")
	}
}
