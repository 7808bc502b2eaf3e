//go:build chaos

package chaos

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// runConfig is one run. Everything can be overridden from the environment
// (see README.md): CHAOS_SEED, CHAOS_DURATION, CHAOS_NODES, CHAOS_CLIENTS,
// CHAOS_WORKERS, CHAOS_NEMESES, CHAOS_OUT, CHAOS_BINARY, CHAOS_NET,
// CHAOS_LOG_LEVEL, CHAOS_CHECK_TIMEOUT.
type runConfig struct {
	name     string
	seed     uint64
	duration time.Duration // of the fault schedule
	nodes    int
	single   bool // one node without a cluster.conf: the single-node engine
	clients  int  // processes
	workers  int  // per process
}

// dateSeed rotates the CI seed daily: the same day replays the same schedule.
func dateSeed() uint64 {
	s, _ := strconv.ParseUint(time.Now().UTC().Format("20060102"), 10, 64)
	return s
}

func configFromEnv(t *testing.T, rc runConfig) runConfig {
	t.Helper()
	if v := os.Getenv("CHAOS_SEED"); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("CHAOS_SEED=%q: %v", v, err)
		}
		rc.seed = s
	}
	if v := os.Getenv("CHAOS_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("CHAOS_DURATION=%q: %v", v, err)
		}
		rc.duration = d
	}
	for env, p := range map[string]*int{"CHAOS_NODES": &rc.nodes, "CHAOS_CLIENTS": &rc.clients, "CHAOS_WORKERS": &rc.workers} {
		if v := os.Getenv(env); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				t.Fatalf("%s=%q: want a positive number", env, v)
			}
			*p = n
		}
	}
	return rc
}

// TestChaosCI is the CI run: 3 nodes, a 3-minute randomized schedule of
// every fault, seed rotated daily. `make chaos-ci`.
func TestChaosCI(t *testing.T) {
	runChaos(t, configFromEnv(t, runConfig{name: "ci", seed: dateSeed(), duration: 3 * time.Minute, nodes: 3, clients: 3, workers: 3}))
}

// TestChaosCISingleNode is the CI run of a single node, which runs the
// single-node engine instead of Raft: a 1-minute schedule of the faults
// one node can take (kills, restarts, pauses, clocks, disks, clients).
// `make chaos-ci`.
func TestChaosCISingleNode(t *testing.T) {
	rc := configFromEnv(t, runConfig{name: "ci-single", seed: dateSeed(), duration: time.Minute, clients: 3, workers: 3})
	rc.nodes, rc.single = 1, true
	runChaos(t, rc)
}

// TestChaos is the long run, `make chaos DURATION=30m`: the schedule on 3
// nodes, then on 5 (CHAOS_NODES picks one). It needs CHAOS_DURATION.
func TestChaos(t *testing.T) {
	if os.Getenv("CHAOS_DURATION") == "" {
		t.Skip("set CHAOS_DURATION (make chaos DURATION=30m)")
	}
	sizes := []int{3, 5}
	if os.Getenv("CHAOS_NODES") != "" {
		sizes = []int{0} // configFromEnv sets it
	}
	seed := uint64(time.Now().UnixNano() % 1e9)
	for _, n := range sizes {
		rc := configFromEnv(t, runConfig{name: "long", seed: seed, nodes: n, clients: 3, workers: 3})
		t.Run(fmt.Sprintf("%d-nodes", rc.nodes), func(t *testing.T) { runChaos(t, rc) })
	}
}

func runChaos(t *testing.T, rc runConfig) {
	out := os.Getenv("CHAOS_OUT")
	if out == "" {
		out = filepath.Join(os.TempDir(), "nacos-chaos")
	}
	out = filepath.Join(out, fmt.Sprintf("%s-%dn-seed%d-%s", rc.name, rc.nodes, rc.seed, time.Now().UTC().Format("20060102T150405")))
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Logf("chaos run %q: seed %d (replay: CHAOS_SEED=%d), %d nodes, schedule %v, output in %s", rc.name, rc.seed, rc.seed, rc.nodes, rc.duration, out)
	_ = os.WriteFile(filepath.Join(out, "run.txt"), []byte(fmt.Sprintf("seed=%d\nnodes=%d\nduration=%v\nclients=%d\nworkers=%d\nnemeses=%s\n",
		rc.seed, rc.nodes, rc.duration, rc.clients, rc.workers, os.Getenv("CHAOS_NEMESES"))), 0o644)

	c := newCluster(t, out, rc.nodes, rc.single)
	t.Logf("cluster up: %s; test hooks %v", c.net.describe(), c.hooksOK)
	reg, err := startRegister(filepath.Join(out, "register.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer reg.close()
	var addrs []string
	for _, n := range c.nodes[:rc.nodes] {
		addrs = append(addrs, n.grpcAddr())
	}
	const maxLease = 2500 * time.Millisecond
	base := clientConfig{
		Nodes: addrs, Register: reg.URL, Seed: rc.seed, Workers: rc.workers,
		Locks: []lockSpec{
			{Kind: "NON_REENTRANT", Key: "nr-0"}, {Kind: "NON_REENTRANT", Key: "nr-1"},
			{Kind: "REENTRANT", Key: "re-0"}, {Kind: "NACOS_LOCK", Key: "g-0"},
		},
		LeaseMs: [2]int64{500, maxLease.Milliseconds()}, WaitMs: [2]int64{1000, 4000}, StallPct: 3,
	}
	cs := newClientSet(t, out, base, rc.clients)
	var mainAddrs []string
	for _, n := range c.nodes[:rc.nodes] {
		mainAddrs = append(mainAddrs, n.address())
	}
	jc := startJavaClient(t, out, mainAddrs, 100, 2, rc.seed)
	nem, err := newNemesis(t, c, cs, rc.seed, maxLease, filepath.Join(out, "nemesis.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("faults available: %s", strings.Join(nem.available(), ", "))
	started := time.Now()
	sleep(context.Background(), 3*time.Second) // some load before the first fault
	ctx, cancel := context.WithDeadline(context.Background(), started.Add(rc.duration))
	nem.run(ctx)
	cancel()
	t.Logf("schedule over after %v; healed, letting the clients run on a healthy cluster", time.Since(started).Round(time.Second))
	sleep(context.Background(), 5*time.Second)
	cs.stop()
	jc.stop()
	nem.log.Close()

	rep := report{Seed: rc.seed, Nodes: rc.nodes, Duration: rc.duration.String()}
	cctx, ccancel := context.WithTimeout(context.Background(), 60*time.Second)
	verdict, digests, err := c.compareReplicas(cctx)
	ccancel()
	rep.Replicas = verdict
	if err != nil {
		rep.Violations = append(rep.Violations, "replicas: "+err.Error())
	}
	t.Logf("replicas: %s %+v", verdict, digests)

	// porcupine's budget, shared by the locks: a long run's histories take
	// longer, and an undecided lock proves nothing.
	timeout := 5 * time.Minute
	if rc.duration > 10*time.Minute {
		timeout = 3 * rc.duration
	}
	if v := os.Getenv("CHAOS_CHECK_TIMEOUT"); v != "" {
		if d, err := time.ParseDuration(v); err == nil {
			timeout = d
		}
	}
	rep, err = checkRun(out, rep, reg.snapshot(), timeout)
	if err != nil {
		t.Fatal(err)
	}
	logReport(t, rep)
	if len(rep.Violations) > 0 {
		t.Errorf("%d violation(s); seed %d; history, logs and visualisations in %s", len(rep.Violations), rc.seed, out)
	}
}
