package main

import (
	"math"
	"slices"
	"strings"
	"testing"

	"nacos-lockd/bench/load"
	"nacos-lockd/bench/peers"
)

func syntheticRun() ([]load.Report, []string) {
	rep := func(t, w string, c int, rate, ops, p50, cpu, rss float64) load.Report {
		return load.Report{Target: t, Workload: w, Clients: c, RatePerSec: rate, Ops: 1000, OpsPerSec: ops, P50Ms: p50, P99Ms: 2 * p50,
			ServerCPUPerOp: cpu, ServerRSSMiB: rss, FIFOViolations: -1}
	}
	reps := []load.Report{
		rep("nacos-lockd", "w1", 64, 0, 20000, 3, 100, 50),
		rep("grpc-noop", "w1", 64, 0, 22000, 2, 80, 20),
		rep("raft-noop", "w1", 64, 0, 30000, 2, 60, 90),
		rep("zookeeper", "w1", 64, 0, 15000, 4, 150, 300),
		rep("etcd-mutex", "w1", 64, 0, 5000, 12, 400, 60),
		rep("etcd-v3lock", "w1", 64, 0, 6000, 10, 300, 60),
		// Open loop at 1500 pairs/s: never mixed into the rows above.
		rep("nacos-lockd", "w1", 64, 1500, 1498, 0.6, 130, 51),
		rep("grpc-noop", "w1", 64, 1500, 1500, 0.3, 100, 21),
		rep("zookeeper", "w1", 64, 1500, 1499, 1.1, 200, 301),
		rep("nacos-lockd", "w1", 1, 0, 1100, 0.9, 120, 50),
		rep("grpc-noop", "w1", 1, 0, 4000, 0.25, 90, 20),
		rep("raft-noop", "w1", 1, 0, 2000, 0.5, 70, 90),
		rep("zookeeper", "w1", 1, 0, 1000, 1, 180, 300),
		rep("nacos-lockd", "w2", 16, 0, 9000, 1, 110, 50),
		rep("zookeeper", "w2", 16, 0, 4000, 3, 250, 300),
		rep("etcd-mutex", "w2", 16, 0, 2000, 8, 500, 60),
		rep("etcd-v3lock", "w2", 16, 0, 1000, 15, 600, 60),
		{Target: "nacos-lockd", Workload: "w3", Clients: 256, Ops: 1000000, OpsPerSec: 50000, FIFOViolations: -1,
			Extra: map[string]float64{"locks": 1e6, "rssHeldMiB": 900, "restartToReadySeconds": 6}},
		{Target: "nacos-lockd", Workload: "w5", Clients: 100, Ops: 10000, OpsPerSec: 1000, FIFOViolations: -1,
			Extra: map[string]float64{"cpuUsPerRenew": 60, "w1P50MsAlone": 1, "w1P99MsAlone": 1, "w1PairsPerSecAlone": 1}},
	}
	reps[13].FIFOViolations, reps[13].FIFOChecked = 0, 500
	return reps, []string{"nacos-lockd", "grpc-noop", "raft-noop", "zookeeper", "etcd-mutex", "etcd-v3lock"}
}

func wantLines(t *testing.T, got string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(got, w) {
			t.Errorf("table lacks %q", w)
		}
	}
	if t.Failed() {
		t.Logf("table:\n%s", got)
	}
}

func TestRatioTablePinned(t *testing.T) {
	reps, targets := syntheticRun()
	pin := peers.Pinning{Server: peers.CPUSet{0}, Client: peers.CPUSet{1, 2, 3}}
	got := ratioTable(reps, targets, map[string]string{}, tableMeta{machine: "test box", rounds: 1, pin: pin})
	wantLines(t, got,
		"Pinning: servers pinned to CPU 0, load generator (this process and its client processes) to CPU 1-3.",
		"raft-noop runs as a child process on the servers' CPU",
		// Closed-loop rows keep their ratios and gain CPU and RSS: the
		// peer's own figure and ours / peer.
		"| W1 c=64 | pairs/s | 20000 | 0.91x | 0.67x | 1.33x | 4.00x | 3.33x |",
		"| W1 c=64 | p50 ms (ratio peer/ours) | 3 | 0.67x |",
		"| W1 c=64 | server CPU µs/op (peer's, ours/peer) | 100 | 80.0 (1.25x) | 60.0 (1.67x) | 150 (0.67x) | 400 (0.25x) | 300 (0.33x) |",
		"| W1 c=64 | server RSS MiB (peer's, ours/peer) | 50.0 | 20.0 (2.50x) | 90.0 (0.56x) | 300 (0.17x) |",
		"| W2 c=16 | server CPU µs/op (peer's, ours/peer) | 110 | n/a | n/a | 250 (0.44x) |",
		// The fixed-rate section.
		"W1 c=64 at 1500 pairs/s (open loop",
		"| nacos-lockd | 130 | - | 0.6 | 1.2 | 1498 | 51.0 | 0 |",
		"| grpc-noop | 100 | 1.30x | 0.3 | 0.6 | 1500 | 21.0 | 0 |",
		"| zookeeper | 200 | 0.65x | 1.1 | 2.2 | 1499 | 301 | 0 |",
		"| raft-noop | n/a | n/a |",
		// Issue 13's checklist.
		"Targets (issue 13):",
		"- W1 c=64 server CPU per pair <= 1.25x grpc-noop's (closed loop): MET (1.25x: 100 vs 80.0 µs per pair)",
		"- W1 c=64 server CPU per pair <= 1.25x grpc-noop's at 1500 pairs/s: NOT MET (1.30x: 130 vs 100 µs per pair)",
		"- W1 c=64 pairs/s >= 0.85x grpc-noop's, pinned: MET (0.91x)",
		"- W1 c=64 server CPU per pair <= ZooKeeper's at 1500 pairs/s: MET (0.65x",
		"- W1 c=64 pairs/s >= 1.2x ZooKeeper's, unpinned: not measured in this run (pinned)",
		"- W1 c=64 pairs/s >= 3x the faster etcd's, unpinned: not measured in this run (pinned)",
		"- W1 c=1 p50 <= raft-noop p50 + grpc-noop p50 + 0.1 ms: NOT MET (0.900 ms against 0.500 + 0.250 + 0.1 = 0.850 ms)",
		"- W1 c=1 pairs/s >= ZooKeeper's: MET (1.10x)",
		"- W2 c=16 hand-offs/s >= 2x ZooKeeper's: MET (2.25x; a hand-off every 111 µs, 2x ZooKeeper's would be one every 125 µs; one raft-noop proposal and one grpc-noop round trip at c=1 take 250 + 125 = 375 µs)",
		"- W2 c=16 hand-offs/s >= 6x the faster etcd's: NOT MET (4.50x)",
		"- W2 c=16 p50 grant latency <= 0.5x ZooKeeper's: MET (0.33x)",
		"- W2 FIFO violations 0: MET (0 of 500)",
		"- W3 1M held locks in < 1 GiB RSS: MET (900 MiB)",
		"- W3 restart to ready < 5 s with 1M locks: NOT MET (6.00 s)",
		"- W5 server CPU per renew <= 1.3x grpc-noop's per round trip: MET (60.0 µs per renew against 1.3 x 50.0 = 65.0 µs; grpc-noop 100 µs per pair / 2, W1 c=64 at 1500 pairs/s (3000 round trips/s; W5 renewed 1000 times a second))",
	)
	if strings.Contains(got, "issue 9") {
		t.Errorf("the issue 9 checklist is still there:\n%s", got)
	}
	// The open-loop figures stay out of the closed-loop rows.
	if strings.Contains(got, "| W1 c=64 | pairs/s | 1498") {
		t.Errorf("an open-loop point leaked into the closed-loop rows:\n%s", got)
	}
}

func TestRatioTableUnpinned(t *testing.T) {
	reps, targets := syntheticRun()
	got := ratioTable(reps, targets, map[string]string{"etcd-v3lock": "no etcd"}, tableMeta{machine: "test box", rounds: 1})
	wantLines(t, got,
		"Pinning: unpinned (servers and load generator share every core).",
		"raft-noop runs inside the bench process",
		"- W1 c=64 pairs/s >= 0.85x grpc-noop's, pinned: not measured in this run (unpinned)",
		"- W1 c=64 pairs/s >= 1.2x ZooKeeper's, unpinned: MET (1.33x)",
		"- W1 c=64 pairs/s >= 3x the faster etcd's, unpinned: MET (",
		"| etcd-v3lock | skipped |",
		"- etcd-v3lock: no etcd",
	)
	// Without W3 at 1M, W5 or a fixed rate, those lines say so.
	var closed []load.Report
	for _, r := range reps {
		if r.RatePerSec == 0 && r.Workload != "w3" && r.Workload != "w5" {
			closed = append(closed, r)
		}
	}
	got = ratioTable(closed, targets, nil, tableMeta{machine: "test box"})
	wantLines(t, got,
		"- W1 c=64 server CPU per pair <= 1.25x grpc-noop's at a fixed rate: not measured in this run (no --rates point)",
		"- W1 c=64 server CPU per pair <= ZooKeeper's at a fixed rate: not measured in this run (no --rates point)",
		"- W3 1M held locks in < 1 GiB RSS; restart to ready < 5 s: not measured in this run (no 1M-lock W3)",
		"- W5 server CPU per renew <= 1.3x grpc-noop's per round trip: not measured in this run (no W5)",
	)
	if strings.Contains(got, "pairs/s (open loop") {
		t.Errorf("a fixed-rate section without fixed-rate points:\n%s", got)
	}
}

func TestParseRates(t *testing.T) {
	if r, err := parseRates("1500, 3000"); err != nil || len(r) != 2 || r[0] != 1500 || r[1] != 3000 {
		t.Errorf("parseRates = %v, %v", r, err)
	}
	if r, err := parseRates(""); err != nil || len(r) != 0 {
		t.Errorf(`parseRates("") = %v, %v`, r, err)
	}
	for _, bad := range []string{"x", "-5", "0"} {
		if _, err := parseRates(bad); err == nil {
			t.Errorf("parseRates(%q) accepted", bad)
		}
	}
}

func TestRateIsForW1Only(t *testing.T) {
	if err := checkRate(1500, "w1"); err != nil {
		t.Error(err)
	}
	if err := checkRate(0, "w2"); err != nil {
		t.Error(err)
	}
	if checkRate(1500, "w2") == nil || checkRate(-1, "w1") == nil {
		t.Error("--rate accepted for w2 or below 0")
	}
}

// TestPkgTable: the package's rows set nacoslock beside etcd-mutex at the
// points both ran, and the section is left out when either was skipped.
func TestPkgTable(t *testing.T) {
	reps, _ := syntheticRun()
	rep := func(w string, c int, ops, p50, cpu float64) load.Report {
		return load.Report{Target: "nacoslock", Workload: w, Clients: c, Ops: 1000, OpsPerSec: ops, P50Ms: p50, P99Ms: 2 * p50, ServerCPUPerOp: cpu, FIFOViolations: -1}
	}
	reps = append(reps, rep("w1", 64, 15000, 4, 120), rep("w2", 16, 8000, 2, 100), rep("w1", 1, 900, 1, 130))
	got := pkgTable(reps, map[string]string{})
	wantLines(t, got,
		"| W1 c=64 | 15000 | 3.00x | 0.33x | 0.33x | 0.30x |",
		"| W2 c=16 | 8000 | 4.00x | 0.25x | 0.25x | 0.20x |")
	if strings.Contains(got, "W1 c=1 ") {
		t.Errorf("a point etcd-mutex did not run is in the table:\n%s", got)
	}
	if s := pkgTable(reps, map[string]string{"etcd-mutex": "not installed"}); s != "" {
		t.Errorf("section with etcd-mutex skipped:\n%s", s)
	}
}

// TestRatioTableClusterTarget: nacos-lockd-3 gets a column of the main
// table, its own FIFO and errors line, and issue 13 item 8 is judged
// from its W1 c=64 pairs/s against the single node's of the same run;
// without either of the two the line says it was not measured.
func TestRatioTableClusterTarget(t *testing.T) {
	reps, targets := syntheticRun()
	targets = append(targets, clusterTarget)
	cluster := func(w string, c int, ops float64, errs int64) load.Report {
		return load.Report{Target: clusterTarget, Workload: w, Clients: c, Ops: 1000, OpsPerSec: ops, P50Ms: 5, P99Ms: 10,
			ServerCPUPerOp: 250, ServerRSSMiB: 150, Errors: errs, FIFOViolations: -1}
	}
	w2 := cluster("w2", 16, 3000, 0)
	w2.FIFOViolations, w2.FIFOChecked = 0, 300
	met := append(slices.Clone(reps), cluster("w1", 64, 17000, 0), w2)
	got := ratioTable(met, targets, map[string]string{}, tableMeta{machine: "test box", rounds: 1})
	wantLines(t, got,
		"| workload | metric | nacos-lockd | / grpc-noop | / raft-noop | / zookeeper | / etcd-mutex | / etcd-v3lock | / nacos-lockd-3 |",
		"| W1 c=64 | pairs/s | 20000 | 0.91x | 0.67x | 1.33x | 4.00x | 3.33x | 1.18x |",
		"| W1 c=64 | server CPU µs/op (peer's, ours/peer) | 100 | 80.0 (1.25x) | 60.0 (1.67x) | 150 (0.67x) | 400 (0.25x) | 300 (0.33x) | 250 (0.40x) |",
		"nacos-lockd-3 (three nodes, one cluster, clients spread over them; server CPU and RSS summed over the three) W2 FIFO violations: 0 of 300 grants checked; errors across the run: 0.",
		"- 3-node W1 c=64 pairs/s >= 0.8x the single node's: MET (0.85x: 17000 vs 20000 pairs/s)",
	)
	notMet := append(slices.Clone(reps), cluster("w1", 64, 15000, 2))
	got = ratioTable(notMet, targets, map[string]string{}, tableMeta{machine: "test box", rounds: 1})
	wantLines(t, got,
		"- 3-node W1 c=64 pairs/s >= 0.8x the single node's: NOT MET (0.75x: 15000 vs 20000 pairs/s)",
		"errors across the run: 2.",
	)
	// Not measured: the cluster did not run, or the single node did not.
	got = ratioTable(reps, targets, map[string]string{clusterTarget: "no cluster"}, tableMeta{machine: "test box", rounds: 1})
	wantLines(t, got, "- 3-node W1 c=64 pairs/s >= 0.8x the single node's: not measured in this run\n", "- nacos-lockd-3: no cluster")
	if strings.Contains(got, "nacos-lockd-3 (three nodes") {
		t.Errorf("a cluster line without cluster reports:\n%s", got)
	}
	var noSingle []load.Report
	for _, r := range met {
		if r.Target != "nacos-lockd" {
			noSingle = append(noSingle, r)
		}
	}
	got = ratioTable(noSingle, targets, map[string]string{}, tableMeta{machine: "test box", rounds: 1})
	wantLines(t, got, "- 3-node W1 c=64 pairs/s >= 0.8x the single node's: not measured in this run\n")
}

// With h2grpc-noop measured, each W1 c=64 point splits nacos-lockd's CPU
// into its own wire and the rest, with raw dragonboat beside it; without
// it, no such note.
func TestRatioTableWireNote(t *testing.T) {
	reps, targets := syntheticRun()
	pin := peers.Pinning{Server: peers.CPUSet{0}, Client: peers.CPUSet{1}}
	if got := ratioTable(reps, targets, map[string]string{}, tableMeta{machine: "test box", rounds: 1, pin: pin}); strings.Contains(got, "The wire under nacos-lockd") {
		t.Fatalf("a wire note without h2grpc-noop:\n%s", got)
	}
	reps = append(reps,
		load.Report{Target: "h2grpc-noop", Workload: "w1", Clients: 64, Ops: 1000, OpsPerSec: 25000, P50Ms: 1.5, ServerCPUPerOp: 48, FIFOViolations: -1},
		load.Report{Target: "h2grpc-noop", Workload: "w1", Clients: 64, RatePerSec: 1500, Ops: 1000, OpsPerSec: 1500, P50Ms: 0.3, ServerCPUPerOp: 70, FIFOViolations: -1})
	targets = append(targets, "h2grpc-noop")
	got := ratioTable(reps, targets, map[string]string{}, tableMeta{machine: "test box", rounds: 1, pin: pin})
	wantLines(t, got,
		"h2grpc-noop = the same empty handler on nacos-lockd's own transport",
		"h2grpc-noop (its own transport, empty handler) costs 48.0 µs per pair at W1 c=64 closed loop, 0.60x grpc-noop's 80.0; nacos-lockd's 100 µs is that plus 52.0 µs of gateway, replica (Raft, or the single-node engine) and log syncs (raw dragonboat with a no-op state machine and its callers: 60.0 µs per pair, so the two floors together are 1.35x grpc-noop's).",
		// At the fixed rate raft-noop has no point: the note says what it can.
		"costs 70.0 µs per pair here, 0.70x grpc-noop's 100; nacos-lockd's 130 µs is that plus 60.0 µs of gateway, replica (Raft, or the single-node engine) and log syncs.",
	)
}

// Three interleaved rounds in which the machine slowed down and sped up:
// the table's ratios are the medians of the rounds' ratios, its figures
// the medians of the rounds' figures. The ratio of the two medians would
// set round 3's nacos-lockd against round 1's grpc-noop, figures measured
// minutes apart: pairs/s 0.60x instead of 0.80x, p50 0.38x instead of
// 0.75x, CPU 2.50x instead of 1.25x.
func TestRatiosArePairedByRound(t *testing.T) {
	rep := func(tg string, round int, ops, p50, cpu float64) load.Report {
		return load.Report{Target: tg, Workload: "w1", Clients: 64, Round: round, Ops: 1000, OpsPerSec: ops, P50Ms: p50, P99Ms: 2 * p50,
			ServerCPUPerOp: cpu, ServerRSSMiB: 10, FIFOViolations: -1}
	}
	reps := []load.Report{
		rep("nacos-lockd", 1, 8000, 8, 100), rep("grpc-noop", 1, 10000, 6, 80),
		rep("nacos-lockd", 2, 4000, 16, 200), rep("grpc-noop", 2, 5000, 12, 160),
		rep("nacos-lockd", 3, 6000, 20, 300), rep("grpc-noop", 3, 12000, 4, 60),
	}
	pin := peers.Pinning{Server: peers.CPUSet{0}, Client: peers.CPUSet{1}}
	got := ratioTable(reps, []string{"nacos-lockd", "grpc-noop"}, map[string]string{}, tableMeta{machine: "test box", rounds: 3, pin: pin})
	wantLines(t, got,
		"3 interleaved rounds: each ratio is the median of the rounds' ratios",
		// Per round 0.80, 0.80, 0.50.
		"| W1 c=64 | pairs/s | 6000 | 0.80x |",
		// grpc-noop / ours per round 0.75, 0.75, 0.20.
		"| W1 c=64 | p50 ms (ratio peer/ours) | 16.0 | 0.75x |",
		// ours / grpc-noop per round 1.25, 1.25, 5.00.
		"| W1 c=64 | server CPU µs/op (peer's, ours/peer) | 200 | 80.0 (1.25x) |",
		"- W1 c=64 server CPU per pair <= 1.25x grpc-noop's (closed loop): MET (1.25x: 200 vs 80.0 µs per pair)",
		"- W1 c=64 pairs/s >= 0.85x grpc-noop's, pinned: NOT MET (0.80x)",
	)
	// A round that one target missed (its point failed) pairs nothing;
	// the other rounds still do: 0.80 and 0.50, an even count, whose
	// median is the geometric mean of the two, sqrt(0.40) = 0.63; and
	// the same for p50 either way up: peer / ours 0.75 and 0.20 give
	// 0.39, ours / peer 1.33 and 5.00 give 2.58 = 1 / 0.39.
	got = ratioTable(reps[1:], []string{"nacos-lockd", "grpc-noop"}, map[string]string{}, tableMeta{machine: "test box", rounds: 3, pin: pin})
	wantLines(t, got, "| W1 c=64 | pairs/s | 6000 | 0.63x |", "| W1 c=64 | p50 ms (ratio peer/ours) | 20.0 | 0.39x |")
	if r, ok := pairedRatio(reps[1:], "nacos-lockd", "grpc-noop", "w1", 64, 0, mP50); !ok || math.Abs(r-1/0.3873) > 0.01 {
		t.Errorf("ours / peer p50 over two rounds = %.3f, %v; want %.3f, the reciprocal of peer / ours", r, ok, 1/0.3873)
	}
	// Reports without rounds (an older results file) fall back to the
	// ratio of the medians.
	for i := range reps {
		reps[i].Round = 0
	}
	got = ratioTable(reps, []string{"nacos-lockd", "grpc-noop"}, map[string]string{}, tableMeta{machine: "test box", rounds: 3, pin: pin})
	wantLines(t, got, "| W1 c=64 | pairs/s | 6000 | 0.60x |")
}

// The Java and Go-package tables divide round by round too.
func TestJavaAndPackageTablesPairRounds(t *testing.T) {
	rep := func(tg string, round int, ops float64) load.Report {
		return load.Report{Target: tg, Workload: "w1", Clients: 16, Round: round, Ops: 1000, OpsPerSec: ops, P50Ms: 1000 / ops, P99Ms: 2000 / ops,
			ServerCPUPerOp: 10, ServerRSSMiB: 10, FIFOViolations: -1}
	}
	// Per round 0.8, 0.8, 0.5; the ratio of the medians would be 0.6
	// (and the package table's p50, ours / etcd's, 1.67x for 1.25x).
	var reps []load.Report
	for _, pair := range [][2]string{{"nacos-lockd-java", "nacos-3.1"}, {"nacoslock", "etcd-mutex"}} {
		reps = append(reps, rep(pair[0], 1, 8000), rep(pair[1], 1, 10000), rep(pair[0], 2, 4000), rep(pair[1], 2, 5000),
			rep(pair[0], 3, 6000), rep(pair[1], 3, 12000))
	}
	wantLines(t, javaTable(reps, map[string]string{}), "| W1 c=16 | 6000 | 10000 | 0.80x | 0.167 | 0.1 | 0.80x |")
	wantLines(t, pkgTable(reps, map[string]string{}), "| W1 c=16 | 6000 | 0.80x | 1.25x | 1.25x | 1.00x |")
}

// W5's bar is grpc-noop's CPU per round trip at the fixed rate whose round
// trips per second come nearest W5's renews (the issue: "for the same RPC
// rate"), not at whichever rate comes first.
func TestW5BarIsGrpcNoopAtTheSameRate(t *testing.T) {
	reps, targets := syntheticRun()
	reps = append(reps,
		load.Report{Target: "nacos-lockd", Workload: "w1", Clients: 64, RatePerSec: 500, Ops: 1000, OpsPerSec: 500, P50Ms: 1, P99Ms: 2,
			ServerCPUPerOp: 300, FIFOViolations: -1},
		load.Report{Target: "grpc-noop", Workload: "w1", Clients: 64, RatePerSec: 500, Ops: 1000, OpsPerSec: 500, P50Ms: 1, P99Ms: 2,
			ServerCPUPerOp: 140, FIFOViolations: -1})
	pin := peers.Pinning{Server: peers.CPUSet{0}, Client: peers.CPUSet{1}}
	got := ratioTable(reps, targets, map[string]string{}, tableMeta{machine: "test box", rounds: 1, pin: pin})
	wantLines(t, got,
		"- W5 server CPU per renew <= 1.3x grpc-noop's per round trip: MET (60.0 µs per renew against 1.3 x 70.0 = 91.0 µs; grpc-noop 140 µs per pair / 2, W1 c=64 at 500 pairs/s (1000 round trips/s; W5 renewed 1000 times a second))",
		"- W1 c=64 server CPU per pair <= 1.25x grpc-noop's at 500 pairs/s: NOT MET",
		"- W1 c=64 server CPU per pair <= 1.25x grpc-noop's at 1500 pairs/s: NOT MET (1.30x")
	for _, c := range []struct{ want, got float64 }{{500, 500}, {300, 500}, {800, 500}, {1200, 1500}, {5000, 1500}} {
		if r := nearestRate([]float64{500, 1500}, c.want); r != c.got {
			t.Errorf("nearest to %v: %v, want %v", c.want, r, c.got)
		}
	}
	if r := nearestRate(nil, 500); r != 0 {
		t.Errorf("no rates: %v", r)
	}
}

// raft-noop's own W2 point, where it ran, stands beside the hand-off
// cycle: the Raft part of a hand-off alone, under the same contention.
func TestHandOffFloorHasRaftNoopW2(t *testing.T) {
	reps, targets := syntheticRun()
	pin := peers.Pinning{Server: peers.CPUSet{0}, Client: peers.CPUSet{1}}
	reps = append(reps, load.Report{Target: "raft-noop", Workload: "w2", Clients: 16, Ops: 1000, OpsPerSec: 12500, P50Ms: 0.5,
		ServerCPUPerOp: 50, FIFOViolations: 0, FIFOChecked: 1000})
	got := ratioTable(reps, targets, map[string]string{}, tableMeta{machine: "test box", rounds: 1, pin: pin})
	wantLines(t, got,
		"in W2, one proposal per hand-off to a state machine that keeps only the holder and a FIFO queue",
		"- W2 c=16 hand-offs/s >= 2x ZooKeeper's: MET (2.25x; a hand-off every 111 µs, 2x ZooKeeper's would be one every 125 µs; one raft-noop proposal and one grpc-noop round trip at c=1 take 250 + 125 = 375 µs; raft-noop's own W2 c=16, no wire, one every 80.0 µs)",
		"| W2 c=16 | hand-offs/s | 9000 |",
	)
	// nacos-lockd's FIFO count is its own: raft-noop's grants are not added.
	wantLines(t, got, "- W2 FIFO violations 0: MET (0 of 500)")
}
