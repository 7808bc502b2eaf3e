package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"nacos-lockd/bench/load"
	"nacos-lockd/bench/peers"
	"nacos-lockd/interop/procs"
)

// serverCPUUsage is the --server-cpu flag's help, for suite and ab: both
// plan their pinning with peers.PlanPinning.
const serverCPUUsage = "the servers' CPU when pinned (-1: the one that takes the interrupts of the disk holding the servers' data, found from /proc/interrupts, else the first)"

// runSuite is `make bench`: it starts nacos-lockd and every peer on
// loopback, runs each workload point against every target back to back
// (so the ratios of one point are measured within a minute of each
// other), and prints a table of ratios nacos-lockd / peer.
func runSuite(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("nacos-lock-bench suite", flag.ContinueOnError)
	fs.SetOutput(stderr)
	quick := fs.Bool("quick", false, "short runs (3 s), fewer points, W3 at 100k only: a check that everything works (flags given explicitly win)")
	targetsFlag := fs.String("targets", "nacos-lockd,nacos-lockd-3,nacoslock,etcd-mutex,etcd-v3lock,redis-fsync-always,redis-fsync-off,zookeeper,grpc-noop,h2grpc-noop,raft-noop,nacos-lockd-java,nacos-3.1",
		"targets to run (nacos-lockd-3: three nacos-lockd nodes as one cluster, clients spread over them, CPU and RSS of all three); peers that cannot be installed are skipped with a message")
	javaModule := fs.String("java-module", "interop/java/versions/diff", "nacos-lockd-java, nacos-3.1: the interop/java module whose client BenchGen1Main runs with (nacos-client 3.1.0)")
	nacosPeer := fs.String("nacos-peer", "interop/nacos-peer", "nacos-3.1: the real Nacos 3.1.0 server module (built on demand)")
	workloads := fs.String("workloads", "w1,w2,w3,w4,w5", "workloads")
	duration := fs.Duration("duration", 10*time.Second, "measured time per point")
	warmup := fs.Duration("warmup", 2*time.Second, "warm-up per point")
	jitWarmup := fs.Duration("jit-warmup", time.Minute, "before the first round, each JVM (the zookeeper and nacos-3.1 servers, and the Java targets' load program) runs W1 and W2 at 16 clients for this long each (after a point's warm-up), not measured, so that it is measured compiled (0: none)")
	lockd := fs.String("lockd", "bin/nacos-lockd", "nacos-lockd binary")
	etcdModule := fs.String("etcd-module", "bench/etcd", "the bench/etcd module (built on demand)")
	out := fs.String("out", "bench/results", "directory for results.json, table.md and chart.png")
	w3Locks := fs.String("w3-locks", "100000,1000000", "W3 lock counts")
	w1Clients := fs.String("w1-clients", "1,16,64,256", "W1 client counts")
	w2Clients := fs.String("w2-clients", "2,16,64", "W2 client counts")
	rounds := fs.Int("rounds", 1, "repeat every W1/W2 point this many times (targets interleaved); ratios use the median")
	pin := fs.Bool("pin", true, "with 2 or more CPUs: every server on one CPU (see --server-cpu), this process and its client processes on the others (false: all share every core)")
	serverCPU := fs.Int("server-cpu", -1, serverCPUUsage)
	ratesFlag := fs.String("rates", "1500,500", "W1 c=64 open-loop points, pairs/s in total, comma-separated (\"\": none); W5's bar is grpc-noop's at the one nearest W5's round trips (500 pairs/s: 1000 round trips/s, W5's 1000 renews/s)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if *quick {
		// Shorter defaults; flags given explicitly still win.
		given := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
		for name, v := range map[string]string{"duration": "3s", "warmup": "1s", "w3-locks": "100000", "w1-clients": "1,64", "w2-clients": "16", "jit-warmup": "20s"} {
			if !given[name] {
				_ = fs.Set(name, v)
			}
		}
	}
	rates, err := parseRates(*ratesFlag)
	if err != nil {
		return err
	}
	plan, err := peers.PlanPinning(*pin, *serverCPU, os.TempDir())
	if err != nil {
		return err
	}
	if err := peers.PinSelf(plan.Client); err != nil {
		return fmt.Errorf("pin the load generator: %w", err)
	}
	targets := strings.Split(*targetsFlag, ",")
	wl := map[string]bool{}
	for _, w := range strings.Split(*workloads, ",") {
		wl[w] = true
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	work, err := os.MkdirTemp("", "nacos-lock-bench-suite-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	self, err := os.Executable()
	if err != nil {
		return err
	}
	lockdBin, err := filepath.Abs(*lockd)
	if err != nil {
		return err
	}
	s := &suite{stdout: stdout, stderr: stderr, work: work, self: self, lockd: lockdBin, duration: *duration, warmup: *warmup,
		javaModule: *javaModule, nacosPeer: *nacosPeer, pin: plan}
	defer s.stopAll()
	defer s.stopJava()

	fmt.Fprintf(stderr, "== %s\n", plan)
	fmt.Fprintf(stderr, "== starting servers in %s\n", work)
	for _, t := range targets {
		if err := s.start(ctx, t, *etcdModule); err != nil {
			s.skip(t, err)
		}
	}
	// Quiet: below 15% busy for 3 s in a row, waiting at most 2 minutes.
	waited, quiet, err := awaitQuiet(ctx, load.ReadProcStat, plan.Server, 0.15, 3, time.Second, 2*time.Minute)
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case err != nil:
		fmt.Fprintf(stderr, "-- servers' CPU load not read (%v): measuring at once\n", err)
	case quiet:
		fmt.Fprintf(stderr, "== servers' CPU quiet %s after the last server started\n", waited.Round(time.Second))
	default:
		fmt.Fprintf(stderr, "-- servers' CPU still busy %s after the last server started: measuring anyway\n", waited.Round(time.Second))
	}
	if *jitWarmup > 0 {
		if err := s.warmJITs(ctx, jitWarmSteps(targets, wl), *jitWarmup); err != nil {
			return err
		}
	}
	var reps []load.Report
	// runPoint runs one point against every target that can run it.
	runPoint := func(w string, c int, rate float64, round int, first bool) error {
		for _, t := range runOrder(targets, round) {
			if s.skipped[t] != "" {
				continue
			}
			if ok, why := supports(t, w); !ok {
				if first {
					fmt.Fprintf(stderr, "-- %s %s: not applicable (%s)\n", t, w, why)
				}
				continue
			}
			if rate > 0 && isJavaTarget(t) {
				continue // BenchGen1Main has no open-loop mode
			}
			rep, err := s.point(ctx, t, w, c, rate)
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if err != nil {
				fmt.Fprintf(stderr, "-- %s %s c=%d failed: %v\n", t, w, c, err)
				continue
			}
			rep.Round = round + 1
			reps = append(reps, rep)
		}
		return nil
	}
	if wl["w1"] || wl["w2"] {
		for round := range *rounds {
			for _, w := range []string{"w1", "w2"} {
				if !wl[w] {
					continue
				}
				cs := *w1Clients
				if w == "w2" {
					cs = *w2Clients
				}
				counts, err := parseCounts(cs, cs)
				if err != nil {
					return err
				}
				for _, c := range counts {
					if err := runPoint(w, c, 0, round, round == 0 && c == counts[0]); err != nil {
						return err
					}
				}
				if w != "w1" {
					continue
				}
				for _, rate := range rates {
					if err := runPoint(w, 64, rate, round, false); err != nil {
						return err
					}
				}
			}
		}
	}
	s.stopAll() // W3-W5 run nacos-lockd alone, each on a fresh server
	// The work directory goes when the suite ends; a target that answered
	// with errors keeps its servers' logs, which say why (a leader change,
	// a stalled sync), where the next reader of the table can find them.
	if kept, err := keepErrorLogs(work, filepath.Join(*out, "logs"), reps); err != nil {
		fmt.Fprintf(stderr, "-- keeping the logs of targets with errors: %v\n", err)
	} else if len(kept) > 0 {
		fmt.Fprintf(stderr, "== logs of targets with errors kept in %s: %s\n", filepath.Join(*out, "logs"), strings.Join(kept, ", "))
	}
	var floor *syncFloor
	if wl["w1"] && slices.Contains(targets, "nacos-lockd") && slices.Contains(targets, "grpc-noop") {
		floor = s.syncFloor(ctx)
	}
	if slices.Contains(targets, "nacos-lockd") && s.skipped["nacos-lockd"] == "" {
		for _, w := range []string{"w3", "w4", "w5"} {
			if !wl[w] {
				continue
			}
			port, err := peers.FreePort()
			if err != nil {
				return err
			}
			o := options{target: "nacos", server: fmt.Sprintf("127.0.0.1:%d", port), workload: w, clients: 64,
				duration: s.duration, warmup: s.warmup, lease: 30000, spawn: lockdBin, churnLease: 5000,
				renewEvery: 10 * time.Second, w1Clients: 16, serverCPUs: plan.Server}
			switch w {
			case "w3":
				o.locks = *w3Locks
				o.clients = 256
			case "w4":
				o.locks = "100000"
				if *quick {
					o.locks = "20000"
				}
			case "w5":
				o.locks = "10000"
				o.duration = max(s.duration, 10*time.Second) // one renew period at least
			}
			fmt.Fprintf(stderr, "== nacos-lockd %s\n", w)
			rs, err := runOne(ctx, o, stderr)
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if err != nil {
				fmt.Fprintf(stderr, "-- nacos-lockd %s failed: %v\n", w, err)
			}
			reps = append(reps, rs...)
		}
	}
	s.stopAll()

	res := suiteResults{Machine: machineLine(), Pinning: plan.String(), Pin: &plan, Rounds: *rounds,
		Targets: targets, Skipped: s.skipped, Reports: reps, SyncFloor: floor}
	table, err := res.table()
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout)
	fmt.Fprint(stdout, table)
	if err := os.WriteFile(filepath.Join(*out, "table.md"), []byte(table), 0o644); err != nil {
		return err
	}
	b, _ := json.MarshalIndent(res, "", "  ")
	if err := os.WriteFile(filepath.Join(*out, "results.json"), b, 0o644); err != nil {
		return err
	}
	var w1 []load.Report
	for _, r := range reps {
		if r.Workload == "w1" && r.Clients == 64 && r.RatePerSec == 0 {
			w1 = append(w1, r)
		}
	}
	if len(w1) > 0 {
		if err := load.PlotReports(filepath.Join(*out, "chart.png"), w1); err != nil {
			fmt.Fprintln(stderr, "chart:", err)
		}
	}
	fmt.Fprintf(stdout, "\nresults: %s (table.md, results.json, chart.png)\n", *out)
	return nil
}

type suite struct {
	stdout, stderr    io.Writer
	work, self, lockd string
	duration, warmup  time.Duration
	procs             map[string][]*peers.Proc // a target's server processes (nacos-lockd-3: its three nodes)
	addrs             map[string]string        // nacos-lockd-3: the nodes' main ports, comma-separated, leader first
	leaders           map[string]string        // nacos-lockd-3: the node that led once all were ready
	clusterPorts      []int                    // nacos-lockd-3's main ports (nil: free ones; tests pick their own)
	skipped           map[string]string
	etcdBin           string
	javaModule        string // see java.go
	nacosPeer         string
	javaCP            string      // built on first use
	java              *javaDriver // the Java targets' load program, started on first use (java.go)
	pin               peers.Pinning
	running           string // the target only left running; settled before it is paused
}

// syncFloor measures what one synced log write costs this machine at
// least: synced writes back to back, in a child process on the servers'
// CPU with nothing else running. Paced writes cost more each (the CPU
// idles and wakes between them), but a server shares those wake-ups with
// its requests, so only the back-to-back figure is a floor under it. Nil
// when it could not be measured.
func (s *suite) syncFloor(ctx context.Context) *syncFloor {
	fmt.Fprintf(s.stderr, "== sync floor: synced writes back to back on the servers' CPU\n")
	var buf bytes.Buffer
	cmd := exec.CommandContext(ctx, s.self, "sync-floor", "--json", "--dir", s.work, "--duration", max(s.duration, 3*time.Second).String())
	cmd.Stdout, cmd.Stderr = &buf, s.stderr
	if err := peers.StartCmd(cmd, s.pin.Server); err != nil {
		fmt.Fprintf(s.stderr, "-- sync floor: %v\n", err)
		return nil
	}
	if err := cmd.Wait(); err != nil {
		fmt.Fprintf(s.stderr, "-- sync floor: %v\n", err)
		return nil
	}
	var f syncFloor
	if err := json.Unmarshal(buf.Bytes(), &f); err != nil {
		fmt.Fprintf(s.stderr, "-- sync floor: %v\n", err)
		return nil
	}
	return &f
}

func (s *suite) skip(t string, err error) {
	if s.skipped == nil {
		s.skipped = map[string]string{}
	}
	msg := strings.SplitN(err.Error(), "\n", 2)[0]
	s.skipped[t] = msg
	fmt.Fprintf(s.stderr, "-- skipping %s: %v\n", t, err)
}

func (s *suite) started(t, addr string, ps ...*peers.Proc) {
	if s.procs == nil {
		s.procs = map[string][]*peers.Proc{}
		s.addrs = map[string]string{}
	}
	if s.skipped == nil {
		s.skipped = map[string]string{}
	}
	s.procs[t], s.addrs[t] = slices.DeleteFunc(ps, func(p *peers.Proc) bool { return p == nil }), addr
	var where []string
	for _, p := range s.procs[t] {
		if len(p.CPUs) == 0 {
			continue
		}
		w := fmt.Sprintf("pid %d, CPU %s", p.PID(), p.CPUs)
		if err := peers.CheckAffinity(p.PID(), p.CPUs); err != nil {
			w += ": pinning NOT confirmed: " + err.Error()
		}
		where = append(where, w)
	}
	line := ""
	if len(where) > 0 {
		line = " (" + strings.Join(where, "; ") + ")"
	}
	fmt.Fprintf(s.stderr, "   %s on %s%s\n", t, addr, line)
}

// pids is every server process of target t.
func (s *suite) pids(t string) []int {
	var out []int
	for _, p := range s.procs[t] {
		out = append(out, p.PID())
	}
	return out
}

// only resumes t's servers and pauses every other target's for the point
// about to run (peers.Proc.Pause: they all share the servers' core). Each
// point's warm-up follows, so a resumed server has settled before it is
// measured. The target that ran the point before is paused only once it
// has gone idle (settle).
func (s *suite) only(ctx context.Context, t string) {
	if prev := s.running; prev != "" && prev != t {
		s.settle(ctx, prev)
	}
	s.running = t
	for name, ps := range s.procs {
		for _, p := range ps {
			if name == t {
				p.Resume()
			} else {
				p.Pause()
			}
		}
	}
}

// settle waits until target t's servers have gone idle: together below
// 20% of a core for three 100 ms intervals in a row, at most 10 s. A
// point's clients disconnect as it ends, and the servers answer that with
// work of their own (nacos-lockd proposes a CLEANUP_CONNECTION for every
// connection). Paused in the middle of it, nacos-lockd-3 resumed at its
// next point a minute or two later with every cleanup's 2.5 s deadline
// long past: each failed once ("connection cleanup not committed;
// retrying") and committed on the retry. Stopping the three nodes as a
// W1 c=256 point ended and continuing them 5 s later did the same to 227
// cleanups; a two-round suite run had 466 such warnings before this wait
// and none with it.
func (s *suite) settle(ctx context.Context, t string) {
	pids := s.pids(t)
	if len(pids) == 0 {
		return
	}
	waited, idle, err := awaitIdle(ctx, func() float64 { return load.CPUSeconds(pids) }, 0.2, 3, 100*time.Millisecond, 10*time.Second)
	if err == nil && !idle {
		fmt.Fprintf(s.stderr, "-- %s still busy %s after its point: paused anyway\n", t, waited.Round(100*time.Millisecond))
	}
}

// stopAll stops every target's servers, the nodes of a cluster at once.
func (s *suite) stopAll() {
	for t, ps := range s.procs {
		done := make(chan struct{}, len(ps))
		for _, p := range ps {
			go func() {
				p.Stop(20 * time.Second)
				done <- struct{}{}
			}()
		}
		for range ps {
			<-done
		}
		delete(s.procs, t)
	}
}

func (s *suite) start(ctx context.Context, t, etcdModule string) error {
	sctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	dir := filepath.Join(s.work, t)
	port, err := peers.FreePort()
	if err != nil {
		return err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	switch t {
	case "nacos-lockd", "nacoslock":
		p, _, err := peers.NacosLockd(sctx, s.pin.Server, s.lockd, dir, port)
		if err != nil {
			return err
		}
		s.started(t, addr, p)
	case clusterTarget:
		ports := s.clusterPorts
		if ports == nil {
			if ports, err = peers.FreePorts(3); err != nil {
				return err
			}
		}
		c, err := peers.NacosLockdCluster(sctx, s.pin.Server, s.lockd, dir, ports)
		if err != nil {
			return err
		}
		// Leader first: client 0 (all of c=1) is on the leader, the
		// others spread round-robin over the three.
		addrs := c.Addrs()
		lead := addrs[c.Leader]
		addrs = slices.Concat(addrs[c.Leader:], addrs[:c.Leader])
		s.started(t, strings.Join(addrs, ","), c.Procs...)
		if s.leaders == nil {
			s.leaders = map[string]string{}
		}
		s.leaders[t] = lead
		fmt.Fprintf(s.stderr, "   %s: leader %s\n", t, lead)
	case "etcd-mutex", "etcd-v3lock":
		if s.etcdBin == "" {
			mod, err := filepath.Abs(etcdModule)
			if err != nil {
				return err
			}
			fmt.Fprintf(s.stderr, "   building etcd from %s (first time: a minute or two)\n", etcdModule)
			bin := filepath.Join(mod, "bin", "etcd-peer")
			if err := peers.BuildEtcd(sctx, mod, bin, s.work); err != nil {
				return err
			}
			s.etcdBin = bin
		}
		// One etcd per target, so each starts from an empty store.
		p, err := peers.Etcd(sctx, s.pin.Server, s.etcdBin, dir, port)
		if err != nil {
			return err
		}
		s.started(t, addr, p)
	case "redis-fsync-always", "redis-fsync-off":
		p, err := peers.Redis(sctx, s.pin.Server, dir, port, t == "redis-fsync-always")
		if err != nil {
			return err
		}
		s.started(t, addr, p)
	case "zookeeper":
		p, err := peers.ZooKeeper(sctx, s.pin.Server, dir, port)
		if err != nil {
			return err
		}
		s.started(t, addr, p)
	case "grpc-noop", "h2grpc-noop":
		args := []string{"serve-noop", "--addr", addr}
		if t == "h2grpc-noop" {
			args = append(args, "--transport", "h2grpc")
		}
		p, err := peers.StartOn(s.pin.Server, t, dir, s.self, args...)
		if err != nil {
			return err
		}
		if err := p.WaitTCP(sctx, addr); err != nil {
			return err
		}
		s.started(t, addr, p)
	case "raft-noop":
		where := "in-process"
		if s.pin.Pinned() {
			where = fmt.Sprintf("a child process per point, CPU %s (its callers in-process)", s.pin.Server)
		}
		s.started(t, where, nil)
		delete(s.procs, t)
	case "nacos-lockd-java", "nacos-3.1":
		if s.javaCP == "" {
			fmt.Fprintf(s.stderr, "   compiling the Java load program (%s)\n", s.javaModule)
			cp, err := procs.JavaTestClasspath(sctx, s.javaModule, s.work)
			if err != nil {
				return err
			}
			s.javaCP = cp
		}
		if t == "nacos-lockd-java" {
			p, _, err := peers.NacosLockd(sctx, s.pin.Server, s.lockd, dir, port)
			if err != nil {
				return err
			}
			s.started(t, addr, p)
			return nil
		}
		fmt.Fprintf(s.stderr, "   starting a real Nacos 3.1.0 (%s; first time: Maven fetches it)\n", s.nacosPeer)
		p, err := peers.NacosPeer(sctx, s.pin.Server, s.nacosPeer, dir, port, probeLock)
		// Its four ports were free when chosen, but a JVM takes seconds
		// to bind them, and any client's outgoing connection may take one
		// of them meanwhile (the same ephemeral range): try other ports.
		for try := 1; err != nil && try < 3 && errors.Is(err, peers.ErrPortTaken); try++ {
			if port, err = peers.FreePort(); err != nil {
				return err
			}
			addr = fmt.Sprintf("127.0.0.1:%d", port)
			fmt.Fprintf(s.stderr, "   Nacos 3.1.0 found a port taken; again on %d\n", port)
			p, err = peers.NacosPeer(sctx, s.pin.Server, s.nacosPeer, fmt.Sprintf("%s-%d", dir, try), port, probeLock)
		}
		if err != nil {
			return err
		}
		s.started(t, addr, p)
	default:
		return fmt.Errorf("unknown target %q", t)
	}
	return nil
}

// point runs one workload point against one target (rate > 0: open loop).
func (s *suite) point(ctx context.Context, t, w string, c int, rate float64) (load.Report, error) {
	return s.pointFor(ctx, t, w, c, rate, s.duration)
}

// pointFor is point measured for d.
func (s *suite) pointFor(ctx context.Context, t, w string, c int, rate float64, d time.Duration) (load.Report, error) {
	s.only(ctx, t)
	if isJavaTarget(t) {
		return s.javaPoint(ctx, t, w, c, d)
	}
	pctx, cancel := context.WithTimeout(ctx, s.pointWarmup(t)+d+2*time.Minute)
	defer cancel()
	if strings.HasPrefix(t, "etcd-") {
		var out bytes.Buffer
		cmd := exec.CommandContext(pctx, s.etcdBin, "bench", "--target", t, "--server", s.addrs[t], "--workload", w,
			"--clients", strconv.Itoa(c), "--duration", d.String(), "--warmup", s.pointWarmup(t).String(), "--json",
			"--pid", strconv.Itoa(s.pids(t)[0]))
		if rate > 0 {
			cmd.Args = append(cmd.Args, "--rate", strconv.FormatFloat(rate, 'g', -1, 64))
		}
		cmd.Stdout, cmd.Stderr = &out, s.stderr
		// The etcd client process is load generator: on its CPUs.
		if err := peers.StartCmd(cmd, s.pin.Client); err != nil {
			return load.Report{}, err
		}
		if err := cmd.Wait(); err != nil {
			return load.Report{}, err
		}
		var rep load.Report
		if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
			return load.Report{}, fmt.Errorf("etcd-peer report: %w", err)
		}
		return rep, nil
	}
	o := options{target: t, server: s.addrs[t], workload: w, clients: c, duration: d, warmup: s.pointWarmup(t), lease: 30000,
		rate: rate, serverCPUs: s.pin.Server, serverCores: s.pin.Server, self: s.self}
	switch t {
	case "nacos-lockd", clusterTarget:
		o.target = "nacos"
		// addrs holds the main port(s)
	case "zookeeper":
		o.target = "zk"
	case "h2grpc-noop":
		o.target = "grpc-noop" // the same client; the server is nacos-lockd's transport
	}
	o.pids = s.pids(t)
	rs, err := runOne(pctx, o, s.stderr)
	if err != nil {
		return load.Report{}, err
	}
	rs[0].Target = t
	if lead := s.leaders[t]; lead != "" {
		rs[0].Notes = append(rs[0].Notes, fmt.Sprintf("leader when the cluster started: %s (listed first)", lead))
	}
	return rs[0], nil
}

func machineLine() string {
	cpu := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "model name") {
				cpu = strings.TrimSpace(strings.SplitN(l, ":", 2)[1])
				break
			}
		}
	}
	mem := ""
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		f := strings.Fields(strings.SplitN(string(b), "\n", 2)[0])
		if len(f) >= 2 {
			kb, _ := strconv.ParseFloat(f[1], 64)
			mem = fmt.Sprintf(", %.0f GiB RAM", kb/(1<<20))
		}
	}
	load1 := ""
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		load1 = ", load average at the end " + strings.Join(strings.Fields(string(b))[:3], " ")
	}
	return fmt.Sprintf("%d cores (%s)%s, %s/%s, %s%s; client and servers on the same machine, loopback",
		runtime.NumCPU(), cpu, mem, runtime.GOOS, runtime.GOARCH, time.Now().UTC().Format("2006-01-02"), load1)
}

func fmtSig(v float64) string {
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return "n/a"
	case math.Abs(v) >= 100:
		return fmt.Sprintf("%.0f", v)
	case math.Abs(v) >= 10:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.3g", v)
}

// runSmoke is `make bench-smoke` (CI): nacos-lockd alone, W1 and W2 for a
// few seconds each, failing on any error or FIFO violation. It checks
// correctness counters, never speed.
func runSmoke(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("nacos-lock-bench smoke", flag.ContinueOnError)
	fs.SetOutput(stderr)
	lockd := fs.String("lockd", "bin/nacos-lockd", "nacos-lockd binary")
	each := fs.Duration("duration", 7*time.Second, "measured time of each workload")
	if err := fs.Parse(args); err != nil {
		return err
	}
	port, err := peers.FreePort()
	if err != nil {
		return err
	}
	var failures []string
	for _, w := range []struct {
		name    string
		clients int
	}{{"w1", 16}, {"w2", 16}} {
		o := options{target: "nacos", server: fmt.Sprintf("127.0.0.1:%d", port), workload: w.name, clients: w.clients,
			duration: *each, warmup: time.Second, lease: 30000, spawn: *lockd}
		reps, err := runOne(ctx, o, stderr)
		if err != nil {
			return fmt.Errorf("%s: %w", w.name, err)
		}
		r := reps[0]
		printReport(stdout, r)
		switch {
		case r.Ops == 0:
			failures = append(failures, w.name+": no operation completed")
		case r.Errors != 0:
			failures = append(failures, fmt.Sprintf("%s: %d errors (%v)", w.name, r.Errors, r.ErrorLog))
		}
		if w.name == "w2" {
			if r.FIFOViolations != 0 {
				failures = append(failures, fmt.Sprintf("w2: %d FIFO violations", r.FIFOViolations))
			}
			if r.FIFOChecked == 0 {
				failures = append(failures, "w2: no grant could be checked for FIFO order")
			}
		}
	}
	if len(failures) > 0 {
		fmt.Fprintf(stdout, "0 passed, %d failed: %s\n", len(failures), strings.Join(failures, "; "))
		return errors.New(strings.Join(failures, "; "))
	}
	fmt.Fprintln(stdout, "bench-smoke: 2 passed, 0 failed")
	return nil
}

// isServerLog reports whether a file name is a process's log (name.log, as
// peers.StartOn writes them), not one of the numbered write-ahead files
// (000123.log) that a Raft log or an LSM keeps beside it.
func isServerLog(name string) bool {
	stem, ok := strings.CutSuffix(name, ".log")
	return ok && strings.Trim(stem, "0123456789") != ""
}

// keepErrorLogs copies the server logs under work/<target> of every target
// with errors in reps to dst/<target>, keeping their paths below the
// target's directory, and returns the targets it kept logs of, in order.
// dst is emptied first, so its logs are always this run's. Nothing else of
// a target's directory is copied: its data can be hundreds of MiB.
func keepErrorLogs(work, dst string, reps []load.Report) ([]string, error) {
	if err := os.RemoveAll(dst); err != nil {
		return nil, fmt.Errorf("remove the last run's logs: %w", err)
	}
	var kept []string
	for _, r := range reps {
		if r.Errors == 0 || slices.Contains(kept, r.Target) {
			continue
		}
		src := filepath.Join(work, r.Target)
		copied := 0
		err := filepath.WalkDir(src, func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || !isServerLog(d.Name()) {
				return err
			}
			rel, err := filepath.Rel(src, path)
			if err != nil {
				return err
			}
			to := filepath.Join(dst, r.Target, rel)
			if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
				return err
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			copied++
			return os.WriteFile(to, b, 0o644)
		})
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return kept, fmt.Errorf("logs of %s: %w", r.Target, err)
		}
		if copied > 0 {
			kept = append(kept, r.Target)
		}
	}
	return kept, nil
}
