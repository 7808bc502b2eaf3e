package gateway

import (
	"crypto/tls"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"nacos-lockd/interop/client"
	"nacos-lockd/interop/testcerts"
	"nacos-lockd/protocol"
)

func TestConnectionLimits(t *testing.T) {
	ts := startServer(t, Config{MaxConnections: 3, MaxConnectionsPerIP: 2})
	dial(t, ts)
	dial(t, ts)
	// A third connection from the same IP is refused at setup; the client
	// sees its stream end, as the Java client would.
	ctx, cancel := client.Timeout(5 * time.Second)
	defer cancel()
	if c, err := client.Dial(ctx, ts.addr); err == nil {
		c.Close()
		t.Fatal("a connection over the per-IP limit was registered")
	}
	if got := testutil.ToFloat64(ts.srv.m.limits.WithLabelValues("connections_per_ip")); got != 1 {
		t.Fatalf("per-IP rejections %v", got)
	}
	if ts.srv.reg.len() != 2 {
		t.Fatalf("registered %d", ts.srv.reg.len())
	}
}

func TestTotalConnectionLimit(t *testing.T) {
	ts := startServer(t, Config{MaxConnections: 1})
	first := dial(t, ts)
	ctx, cancel := client.Timeout(5 * time.Second)
	defer cancel()
	if c, err := client.Dial(ctx, ts.addr); err == nil {
		c.Close()
		t.Fatal("a connection over the total limit was registered")
	}
	// The limit never affects the admitted client, and a freed slot is reusable.
	if r := lockCall(t, first, protocol.OpAcquire, gen1("k", 1000)); !r.Result {
		t.Fatal("the admitted client was affected")
	}
	_ = first.Close()
	waitFor(t, 3*time.Second, func() bool { return ts.srv.reg.len() == 0 })
	dial(t, ts)
}

func TestRequestRateLimit(t *testing.T) {
	ts := startServer(t, Config{RequestsPerSecond: 5})
	noisy, quiet := dial(t, ts), dial(t, ts)
	limited := 0
	for i := range 20 {
		r := lockCall(t, noisy, protocol.OpAcquire, gen1("k"+string(rune('a'+i)), 1000))
		if r.ResultCode == 500 && r.ErrorCode == 503 {
			limited++
			if !strings.Contains(r.Message, "limit is 5 per second") {
				t.Fatalf("message %q", r.Message)
			}
		}
	}
	if limited == 0 {
		t.Fatal("20 requests at once were not limited to 5 per second")
	}
	if r := lockCall(t, quiet, protocol.OpAcquire, gen1("other", 1000)); !r.Result {
		t.Fatalf("another connection was limited: %+v", r)
	}
}

func TestParamsLimit(t *testing.T) {
	ts := startServer(t, Config{MaxParamsBytes: 32})
	c := dial(t, ts)
	li := gen1("k", 1000)
	li.Params = []byte(`{"note":"` + strings.Repeat("x", 40) + `"}`)
	r := lockCall(t, c, protocol.OpAcquire, li)
	if r.ResultCode != 500 || !strings.Contains(r.Message, "Lock params are 51 bytes, more than the limit of 32 bytes") {
		t.Fatalf("%+v", r)
	}
	li.Params = []byte(`{"note":"ok"}`)
	if r := lockCall(t, c, protocol.OpAcquire, li); !r.Result {
		t.Fatalf("small params: %+v", r)
	}
}

func TestTLS(t *testing.T) {
	certs, err := testcerts.Generate(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Run("server certificate", func(t *testing.T) {
		ts := startServer(t, Config{TLS: &tls.Config{Certificates: []tls.Certificate{certs.Server}, MinVersion: tls.VersionTLS12}})
		c := dial(t, ts, client.WithTLS(&tls.Config{RootCAs: certs.CAPool}))
		if r := lockCall(t, c, protocol.OpAcquire, gen1("k", 1000)); !r.Result {
			t.Fatal("lock over TLS failed")
		}
		ctx, cancel := client.Timeout(3 * time.Second)
		defer cancel()
		if c, err := client.Dial(ctx, ts.addr); err == nil {
			c.Close()
			t.Fatal("plaintext accepted on a TLS port")
		}
		if c, err := client.Dial(ctx, ts.addr, client.WithTLS(&tls.Config{RootCAs: certs.OtherCA})); err == nil {
			c.Close()
			t.Fatal("a client that does not trust our CA connected")
		}
	})
	t.Run("client certificates required", func(t *testing.T) {
		ts := startServer(t, Config{TLS: &tls.Config{
			Certificates: []tls.Certificate{certs.Server}, ClientCAs: certs.CAPool,
			ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12,
		}})
		c := dial(t, ts, client.WithTLS(&tls.Config{RootCAs: certs.CAPool, Certificates: []tls.Certificate{certs.Client}}))
		if r := lockCall(t, c, protocol.OpAcquire, gen1("k", 1000)); !r.Result {
			t.Fatal("lock over mutual TLS failed")
		}
		ctx, cancel := client.Timeout(3 * time.Second)
		defer cancel()
		if c, err := client.Dial(ctx, ts.addr, client.WithTLS(&tls.Config{RootCAs: certs.CAPool})); err == nil {
			c.Close()
			t.Fatal("a client without a certificate connected")
		}
	})
}

func TestTableLimits(t *testing.T) {
	ts := startServer(t, Config{MaxLocks: 2, MaxWaitersPerLock: 1})
	c := dial(t, ts)
	lockCall(t, c, protocol.OpAcquire, gen2("a", "NON_REENTRANT", "o", 60000, -1))
	lockCall(t, c, protocol.OpAcquire, gen2("b", "NON_REENTRANT", "o", 60000, -1))
	r := lockCall(t, c, protocol.OpAcquire, gen2("c", "NON_REENTRANT", "o", 60000, -1))
	if r.ResultCode != 500 || r.ErrorCode != 503 || !strings.Contains(r.Message, "nacos.lock.max_locks") {
		t.Fatalf("lock limit: %+v", r)
	}
	if r := lockCall(t, c, protocol.OpAcquire, gen2("a", "NON_REENTRANT", "w1", 60000, 60000)); r.LockResult.WaitPosition != 0 {
		t.Fatalf("first waiter: %+v", r.LockResult)
	}
	r = lockCall(t, c, protocol.OpAcquire, gen2("a", "NON_REENTRANT", "w2", 60000, 60000))
	if r.ResultCode != 500 || r.ErrorCode != 503 || !strings.Contains(r.Message, "nacos.lock.max_waiters_per_lock") {
		t.Fatalf("waiter limit: %+v", r)
	}
	for _, l := range []string{"locks", "waiters_per_lock"} {
		if got := testutil.ToFloat64(ts.srv.m.limits.WithLabelValues(l)); got != 1 {
			t.Errorf("%s rejections %v", l, got)
		}
	}
}
