package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"nacos-lockd/bench/load"
	"nacos-lockd/bench/peers"
	"nacos-lockd/internal/syncbuf"
	"nacos-lockd/interop/procs"
)

func TestMain(m *testing.M) {
	code := m.Run()
	procs.Cleanup() // the nacos-lockd binary TestSuiteClusterTarget built
	os.Exit(code)
}

// TestSuiteClusterTarget: the suite's nacos-lockd-3 target starts three
// real nacos-lockd processes as one cluster (pinned to the servers' CPU
// when the machine has two or more; this test process stays unpinned),
// with an agreed leader listed first; a W1 point and a W2 point run
// against it through the nacos client with no errors (W2: no FIFO
// violation), their clients spread over all three nodes, CPU and RSS
// taken over the three processes; stopAll stops every node.
func TestSuiteClusterTarget(t *testing.T) {
	bin := procs.Binary(t, "nacos-lockd")
	plan, err := peers.PlanPinning(true, -1, "")
	if err != nil {
		t.Fatal(err)
	}
	stderr := &syncbuf.Buffer{}
	s := &suite{stdout: stderr, stderr: stderr, work: t.TempDir(), lockd: bin,
		duration: 1500 * time.Millisecond, warmup: 500 * time.Millisecond,
		pin:          peers.Pinning{Server: plan.Server},
		clusterPorts: procs.FreePorts(t, 3)} // NACOS_LOCKD_TEST_PORTS applies
	defer s.stopAll()
	defer func() {
		if t.Failed() {
			t.Logf("suite output:\n%s", stderr)
			for _, p := range s.procs[clusterTarget] {
				t.Logf("---- %s\n%s", p.Log, p.Tail(30))
			}
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	started := time.Now()
	if err := s.start(ctx, clusterTarget, ""); err != nil {
		t.Fatalf("start %s: %v", clusterTarget, err)
	}
	t.Logf("cluster ready in %v", time.Since(started).Round(time.Millisecond))
	nodes := s.procs[clusterTarget]
	pids := s.pids(clusterTarget)
	if len(nodes) != 3 {
		t.Fatalf("%d processes started, want 3", len(nodes))
	}
	for _, p := range nodes {
		if p.Exited() {
			t.Fatalf("%s exited", p.Name)
		}
		if len(plan.Server) > 0 {
			if err := peers.CheckAffinity(p.PID(), plan.Server); err != nil {
				t.Errorf("%s: %v", p.Name, err)
			}
		}
	}
	addrs := serverList(s.addrs[clusterTarget])
	wantPorts := slices.Clone(s.clusterPorts)
	var gotPorts []int
	for _, a := range addrs {
		var p int
		if _, err := fmt.Sscanf(a, "127.0.0.1:%d", &p); err != nil {
			t.Fatalf("address %q: %v", a, err)
		}
		gotPorts = append(gotPorts, p)
	}
	slices.Sort(wantPorts)
	slices.Sort(gotPorts)
	if !slices.Equal(gotPorts, wantPorts) {
		t.Fatalf("addresses %v, want the ports %v", addrs, s.clusterPorts)
	}
	if lead := s.leaders[clusterTarget]; lead == "" || addrs[0] != lead {
		t.Errorf("leader %q, addresses %v: want the leader listed first", lead, addrs)
	}

	requests := func() []float64 {
		var out []float64
		for _, a := range addrs {
			v, err := peers.Metric("http://"+a+"/metrics", "nacoslockd_lock_requests_total", "*")
			if err != nil {
				v = 0 // no request yet: the series does not exist
			}
			out = append(out, v)
		}
		return out
	}
	before := requests()
	for _, pt := range []struct {
		w string
		c int
	}{{"w1", 6}, {"w2", 3}} {
		rep, err := s.point(ctx, clusterTarget, pt.w, pt.c, 0)
		if err != nil {
			t.Fatalf("%s c=%d: %v", pt.w, pt.c, err)
		}
		if rep.Target != clusterTarget || rep.Ops == 0 || rep.Errors != 0 {
			t.Errorf("%s c=%d: target %s, %d ops, %d errors %v", pt.w, pt.c, rep.Target, rep.Ops, rep.Errors, rep.ErrorLog)
		}
		if !slices.Equal(rep.ServerPIDs, pids) || rep.ServerCPUPerOp <= 0 || rep.ServerRSSMiB <= 0 {
			t.Errorf("%s c=%d: server pids %v (want %v), %.0f µs CPU per op, RSS %.1f MiB",
				pt.w, pt.c, rep.ServerPIDs, pids, rep.ServerCPUPerOp, rep.ServerRSSMiB)
		}
		if single := load.RSSMiB(pids[:1]); rep.ServerRSSMiB < 2*single {
			t.Errorf("%s c=%d: RSS %.1f MiB is not the three nodes' (one alone: %.1f MiB)", pt.w, pt.c, rep.ServerRSSMiB, single)
		}
		if pt.w == "w2" && (rep.FIFOViolations != 0 || rep.FIFOChecked == 0) {
			t.Errorf("w2: %d FIFO violations of %d checked", rep.FIFOViolations, rep.FIFOChecked)
		}
		if !slices.ContainsFunc(rep.Notes, func(n string) bool { return strings.HasPrefix(n, "3-node cluster ") }) {
			t.Errorf("%s: notes %q do not say the clients were spread over the cluster", pt.w, rep.Notes)
		}
		after := requests()
		for i := range addrs {
			if after[i] <= before[i] {
				t.Errorf("%s c=%d: node %s served no lock request (%v -> %v)", pt.w, pt.c, addrs[i], before[i], after[i])
			}
		}
		before = after
	}

	// The next point's target pauses the cluster only once it is idle, so
	// the cleanups of the connections the last point closed have committed
	// by then: paused in the middle of them, the cluster woke with their
	// deadlines past and each failed once, saying so in its log.
	if _, err := s.point(ctx, clusterTarget, "w1", 64, 0); err != nil { // many connections to clean up
		t.Fatalf("w1 c=64: %v", err)
	}
	s.only(ctx, "grpc-noop")    // not started here: only the cluster's pause matters
	time.Sleep(3 * time.Second) // past a cleanup's 2.5 s deadline
	s.only(ctx, clusterTarget)
	time.Sleep(time.Second) // a cleanup that was paused fails and says so
	for _, p := range nodes {
		if n := strings.Count(p.Tail(1<<20), "connection cleanup not committed"); n > 0 {
			t.Errorf("%s: %d cleanups waited out the pause and failed their deadline", p.Name, n)
		}
	}

	stopStart := time.Now()
	s.stopAll()
	t.Logf("stopAll took %v", time.Since(stopStart).Round(time.Millisecond))
	for _, p := range nodes {
		if !p.Exited() {
			t.Errorf("%s still running after stopAll", p.Name)
		}
	}
	if len(s.procs) != 0 {
		t.Errorf("stopAll left %v", s.procs)
	}
}

func TestClusterTargetRunsW1AndW2Only(t *testing.T) {
	for w, want := range map[string]bool{"w1": true, "w2": true, "w3": false, "w4": false, "w5": false} {
		if got, _ := supports(clusterTarget, w); got != want {
			t.Errorf("supports(%s, %s) = %v, want %v", clusterTarget, w, got, want)
		}
	}
}

func TestServerListAndPIDs(t *testing.T) {
	if got := serverList(" 127.0.0.1:8848, 127.0.0.1:8849,,127.0.0.1:8850 "); !slices.Equal(got, []string{"127.0.0.1:8848", "127.0.0.1:8849", "127.0.0.1:8850"}) {
		t.Errorf("serverList = %q", got)
	}
	if got := serverList("127.0.0.1:8848"); len(got) != 1 {
		t.Errorf("serverList of one = %q", got)
	}
	var pids []int
	if err := pidsFlag(&pids)("12, 34"); err != nil || !slices.Equal(pids, []int{12, 34}) {
		t.Errorf("--pid 12,34: %v, %v", pids, err)
	}
	for _, bad := range []string{"", "x", "0", "12,,34"} {
		if pidsFlag(&pids)(bad) == nil {
			t.Errorf("--pid %q accepted", bad)
		}
	}
}
