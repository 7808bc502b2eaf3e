package gateway

import (
	"io"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/codes"

	"nacos-lockd/interop/client"
	"nacos-lockd/protocol"
	"nacos-lockd/statemachine"
)

func TestMetricsAfterScriptedOperations(t *testing.T) {
	reg := prometheus.NewRegistry()
	ts := startServer(t, Config{Metrics: reg})
	a, b := dial(t, ts), dial(t, ts)
	lockCall(t, a, protocol.OpAcquire, gen2("k", "REENTRANT", "a:1", -1, -1))   // granted
	lockCall(t, b, protocol.OpAcquire, gen2("k", "REENTRANT", "b:1", -1, -1))   // refused
	lockCall(t, b, protocol.OpAcquire, gen2("k", "REENTRANT", "b:1", -1, 5000)) // queued
	lockCall(t, a, protocol.OpRenew, gen2("k", "REENTRANT", "a:1", -1, -1))     // renewed
	lockCall(t, b, protocol.OpRelease, gen2("k", "REENTRANT", "b:1", 0, -1))    // not owner
	lockCall(t, a, protocol.OpRelease, gen2("k", "REENTRANT", "a:1", 0, -1))    // released, handed to b
	ctx, cancel := client.Timeout(3 * time.Second)
	defer cancel()
	if _, err := client.WaitPush[*protocol.LockNotificationRequest](ctx, b); err != nil {
		t.Fatal(err)
	}
	claim := gen2("k", "REENTRANT", "b:1", -1, 5000)
	claim.WaiterRetry = true
	lockCall(t, b, protocol.OpAcquire, claim)                                // granted (claim)
	lockCall(t, b, protocol.OpAcquire, gen2("k", "REENTRANT", "b:1", 0, -1)) // invalid: zero lease

	m := ts.srv.m
	for _, tc := range []struct {
		c    prometheus.Collector
		want float64
	}{
		{m.requests.WithLabelValues("acquire", "granted"), 2},
		{m.requests.WithLabelValues("acquire", "refused"), 1},
		{m.requests.WithLabelValues("acquire", "queued"), 1},
		{m.requests.WithLabelValues("renew", "renewed"), 1},
		{m.requests.WithLabelValues("release", "not_owner"), 1},
		{m.requests.WithLabelValues("release", "released"), 1},
		{m.requests.WithLabelValues("invalid", "invalid"), 1},
		// The hand-off is pushed while the release commits, not after.
		{m.pushes.WithLabelValues("lock_notification_ahead", "sent"), 1},
		{m.pushes.WithLabelValues("lock_notification", "sent"), 0},
		{m.pushes.WithLabelValues("lock_notification_ahead", "missed"), 0},
		{m.connections, 2},
		{m.endings.WithLabelValues("release"), 1},
		// The claim is answered from a read, its record rides a later entry.
		{m.readClaims.WithLabelValues("answered"), 1},
		{m.readClaims.WithLabelValues("record_failed"), 0},
	} {
		if got := testutil.ToFloat64(tc.c); got != tc.want {
			t.Errorf("%v: got %v, want %v", tc.c, got, tc.want)
		}
	}
	// Nacos's counters, under the names Nacos dashboards query: success
	// means granted, released or renewed.
	want := "# HELP nacos_monitor " + nacosMonitorHelp + "\n# TYPE nacos_monitor gauge\n" + `
nacos_monitor{module="lock",name="grpcLockSuccess"} 2
nacos_monitor{module="lock",name="grpcLockTotal"} 5
nacos_monitor{module="lock",name="grpcRenewSuccess"} 1
nacos_monitor{module="lock",name="grpcRenewTotal"} 1
nacos_monitor{module="lock",name="grpcUnLockSuccess"} 1
nacos_monitor{module="lock",name="grpcUnLockTotal"} 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "nacos_monitor"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(m.handoff); n != 1 {
		t.Errorf("hand-off histogram has %d series", n)
	}
	if got := histCount(t, reg, "nacoslockd_lock_handoff_seconds"); got != 1 {
		t.Errorf("hand-offs observed: %d, want 1", got)
	}
	if got := histCount(t, reg, "nacoslockd_lock_wait_seconds"); got != 1 {
		t.Errorf("waits observed: %d, want 1", got)
	}
	if got := histCount(t, reg, "nacoslockd_lock_hold_seconds"); got != 1 {
		t.Errorf("holds observed: %d, want 1", got)
	}
	checkLabels(t, reg)
}

func histCount(t *testing.T, reg *prometheus.Registry, name string) uint64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetHistogram().GetSampleCount()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// checkLabels fails on any label value outside the fixed sets: keys,
// owners, connection ids and tokens must never become labels.
func checkLabels(t *testing.T, reg *prometheus.Registry) {
	t.Helper()
	allowed := map[string][]string{
		"op":     append(slices.Clone(opLabels), "ACQUIRE", "RELEASE", "RENEW", "CANCEL_WAIT", "EXPIRE", "CLEANUP_CONNECTION", "CLAIM"),
		"result": append(slices.Clone(resultLabels), "sent", "failed", "missed", "answered", "record_failed"),
		"type":   pushLabels,
		"limit":  limitLabels,
		"cause":  {"release", "expiry"},
		"reason": {"disconnect", "node_down", "unauthenticated", "forbidden"},
		"module": {"lock"},
		"name":   {"grpcLockTotal", "grpcLockSuccess", "grpcUnLockTotal", "grpcUnLockSuccess", "grpcRenewTotal", "grpcRenewSuccess", "aliveLockCount", "lockHandlerRt"},
		"method": callLabels[:],
		"code":   slices.Clone(connErrorLabels),
	}
	for c := codes.OK; c <= maxCode; c++ {
		allowed["code"] = append(allowed["code"], c.String())
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, metric := range mf.GetMetric() {
			for _, lp := range metric.GetLabel() {
				vals, known := allowed[lp.GetName()]
				if !known || !slices.Contains(vals, lp.GetValue()) {
					t.Errorf("%s has label %s=%q outside the fixed sets", mf.GetName(), lp.GetName(), lp.GetValue())
				}
				if strings.Contains(lp.GetValue(), "_127.0.0.1_") {
					t.Errorf("%s carries a connection id", mf.GetName())
				}
			}
		}
	}
}

func TestMetricsTimingsArePruned(t *testing.T) {
	m := newMetrics(prometheus.NewRegistry())
	old, fresh := time.Now().Add(-2*time.Hour), time.Now()
	m.held[waitKey{key: "expired-hold"}] = old
	m.held[waitKey{key: "live-hold"}] = fresh
	m.queued[waitKey{key: "abandoned-wait"}] = old
	m.notified[grantKey{statemachine.KindReentrant, "k", 7}] = old
	m.prune(time.Now(), time.Hour)
	if len(m.held) != 1 || len(m.queued) != 0 || len(m.notified) != 0 {
		t.Fatalf("held %v queued %v notified %v", m.held, m.queued, m.notified)
	}
}

// TestTransportMetricsOnBothTransports: the SDK port's connections and
// calls are counted the same way whichever transport serves it.
func TestTransportMetricsOnBothTransports(t *testing.T) {
	for _, tr := range []string{TransportGRPC, TransportH2} {
		t.Run(tr, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			ts := startServer(t, Config{Metrics: reg, Transport: tr})
			m := ts.srv.m
			a, b := dial(t, ts), dial(t, ts)
			lockCall(t, a, protocol.OpAcquire, gen2("k", "REENTRANT", "a:1", -1, -1))
			lockCall(t, b, protocol.OpAcquire, gen2("k", "REENTRANT", "b:1", -1, -1))
			if got := testutil.ToFloat64(m.transportConns); got != 2 {
				t.Errorf("open transport connections %v, want 2", got)
			}
			if got := testutil.ToFloat64(m.transportAccepted); got != 2 {
				t.Errorf("accepted %v, want 2", got)
			}
			if got := testutil.ToFloat64(m.callsStarted[callStream]); got != 2 {
				t.Errorf("streams started %v, want 2", got)
			}
			// Each client's calls so far: its ServerCheck and the lock call.
			unary := testutil.ToFloat64(m.callsStarted[callUnary])
			if unary < 4 {
				t.Errorf("unary calls started %v, want at least 4", unary)
			}
			if got := testutil.ToFloat64(m.callsHandled[callUnary][codes.OK]); got != unary {
				t.Errorf("unary calls handled OK %v, want all %v", got, unary)
			}
			_ = b.Close()
			waitFor(t, 5*time.Second, func() bool {
				var ended float64
				for c := codes.OK; c <= maxCode; c++ {
					ended += testutil.ToFloat64(m.callsHandled[callStream][c])
				}
				return testutil.ToFloat64(m.transportConns) == 1 && ended == 1
			})
			checkLabels(t, reg)
		})
	}
}

func TestTransportConnectionErrorsCounted(t *testing.T) {
	reg := prometheus.NewRegistry()
	ts := startServer(t, Config{Metrics: reg, Transport: TransportH2})
	nc, err := net.Dial("tcp", ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if _, err := nc.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	_ = nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, _ = io.Copy(io.Discard, nc) // until the server closes
	waitFor(t, 5*time.Second, func() bool {
		return testutil.ToFloat64(ts.srv.m.connErrors.WithLabelValues("PROTOCOL_ERROR")) == 1 &&
			testutil.ToFloat64(ts.srv.m.transportConns) == 0
	})
	checkLabels(t, reg)
}

// BenchmarkMetricsRequest is what a request's metrics cost (an acquire and
// its release): series looked up by index, no label hashing.
func BenchmarkMetricsRequest(b *testing.B) {
	m := newMetrics(prometheus.NewRegistry())
	for i := 0; i < b.N; i++ {
		m.request("acquire", "granted", time.Millisecond, "acquire")
		m.request("release", "released", time.Millisecond, "unlock")
	}
}

// TestHoldEndingsCountedByCause checks the endings series looked up once
// at start: an expiry counts under "expiry", not "release".
func TestHoldEndingsCountedByCause(t *testing.T) {
	m := newMetrics(prometheus.NewRegistry())
	m.expired()
	m.expired()
	if got := testutil.ToFloat64(m.endings.WithLabelValues("expiry")); got != 2 {
		t.Errorf("expiry endings %v, want 2", got)
	}
	if got := testutil.ToFloat64(m.endings.WithLabelValues("release")); got != 0 {
		t.Errorf("release endings %v, want 0", got)
	}
}
