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

// runSuite is `make bench`: it starts nacos-lockd and every peer on
// loopback, runs each workload point against every target back to back
// (so the ratios of one point are measured within a minute of each
// other), and prints a table of ratios nacos-lockd / peer.
func runSuite(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("nacos-lock-bench suite", flag.ContinueOnError)
	fs.SetOutput(stderr)
	quick := fs.Bool("quick", false, "short runs (3 s), fewer points, W3 at 100k only: a check that everything works")
	targetsFlag := fs.String("targets", "nacos-lockd,etcd-mutex,etcd-v3lock,redis-fsync-always,redis-fsync-off,zookeeper,grpc-noop,raft-noop,nacos-lockd-java,nacos-3.1",
		"targets to run; peers that cannot be installed are skipped with a message")
	javaModule := fs.String("java-module", "interop/java/versions/diff", "nacos-lockd-java, nacos-3.1: the interop/java module whose client BenchGen1Main runs with (nacos-client 3.1.0)")
	nacosPeer := fs.String("nacos-peer", "interop/nacos-peer", "nacos-3.1: the real Nacos 3.1.0 server module (built on demand)")
	workloads := fs.String("workloads", "w1,w2,w3,w4,w5", "workloads")
	duration := fs.Duration("duration", 10*time.Second, "measured time per point")
	warmup := fs.Duration("warmup", 2*time.Second, "warm-up per point")
	lockd := fs.String("lockd", "bin/nacos-lockd", "nacos-lockd binary")
	etcdModule := fs.String("etcd-module", "bench/etcd", "the bench/etcd module (built on demand)")
	out := fs.String("out", "bench/results", "directory for results.json, table.md and chart.png")
	w3Locks := fs.String("w3-locks", "100000,1000000", "W3 lock counts")
	w1Clients := fs.String("w1-clients", "1,16,64,256", "W1 client counts")
	w2Clients := fs.String("w2-clients", "2,16,64", "W2 client counts")
	rounds := fs.Int("rounds", 1, "repeat every W1/W2 point this many times (targets interleaved); ratios use the median")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if *quick {
		*duration, *warmup = 3*time.Second, time.Second
		*w3Locks = "100000"
		*w1Clients, *w2Clients = "1,64", "16"
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
		javaModule: *javaModule, nacosPeer: *nacosPeer}
	defer s.stopAll()

	fmt.Fprintf(stderr, "== starting servers in %s\n", work)
	for _, t := range targets {
		if err := s.start(ctx, t, *etcdModule); err != nil {
			s.skip(t, err)
		}
	}
	var reps []load.Report
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
					for _, t := range targets {
						if s.skipped[t] != "" {
							continue
						}
						if ok, why := supports(t, w); !ok {
							if round == 0 && c == counts[0] {
								fmt.Fprintf(stderr, "-- %s %s: not applicable (%s)\n", t, w, why)
							}
							continue
						}
						rep, err := s.point(ctx, t, w, c)
						if ctx.Err() != nil {
							return ctx.Err()
						}
						if err != nil {
							fmt.Fprintf(stderr, "-- %s %s c=%d failed: %v\n", t, w, c, err)
							continue
						}
						reps = append(reps, rep)
					}
				}
			}
		}
	}
	s.stopAll() // W3-W5 run nacos-lockd alone, each on a fresh server
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
				renewEvery: 10 * time.Second, w1Clients: 16}
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

	machine := machineLine()
	table := ratioTable(reps, targets, s.skipped, machine, *rounds)
	fmt.Fprintln(stdout)
	fmt.Fprint(stdout, table)
	if err := os.WriteFile(filepath.Join(*out, "table.md"), []byte(table), 0o644); err != nil {
		return err
	}
	b, _ := json.MarshalIndent(struct {
		Machine string            `json:"machine"`
		Skipped map[string]string `json:"skipped"`
		Reports []load.Report     `json:"reports"`
	}{machine, s.skipped, reps}, "", "  ")
	if err := os.WriteFile(filepath.Join(*out, "results.json"), b, 0o644); err != nil {
		return err
	}
	var w1 []load.Report
	for _, r := range reps {
		if r.Workload == "w1" && r.Clients == 64 {
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
	procs             map[string]*peers.Proc
	addrs             map[string]string
	skipped           map[string]string
	etcdBin           string
	javaModule        string // see java.go
	nacosPeer         string
	javaCP            string // built on first use
}

func (s *suite) skip(t string, err error) {
	if s.skipped == nil {
		s.skipped = map[string]string{}
	}
	msg := strings.SplitN(err.Error(), "\n", 2)[0]
	s.skipped[t] = msg
	fmt.Fprintf(s.stderr, "-- skipping %s: %v\n", t, err)
}

func (s *suite) started(t, addr string, p *peers.Proc) {
	if s.procs == nil {
		s.procs = map[string]*peers.Proc{}
		s.addrs = map[string]string{}
	}
	if s.skipped == nil {
		s.skipped = map[string]string{}
	}
	s.procs[t], s.addrs[t] = p, addr
	fmt.Fprintf(s.stderr, "   %s on %s\n", t, addr)
}

func (s *suite) stopAll() {
	for t, p := range s.procs {
		p.Stop(20 * time.Second)
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
	case "nacos-lockd":
		p, _, err := peers.NacosLockd(sctx, nil, s.lockd, dir, port)
		if err != nil {
			return err
		}
		s.started(t, addr, p)
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
		p, err := peers.Etcd(sctx, nil, s.etcdBin, dir, port)
		if err != nil {
			return err
		}
		s.started(t, addr, p)
	case "redis-fsync-always", "redis-fsync-off":
		p, err := peers.Redis(sctx, nil, dir, port, t == "redis-fsync-always")
		if err != nil {
			return err
		}
		s.started(t, addr, p)
	case "zookeeper":
		p, err := peers.ZooKeeper(sctx, nil, dir, port)
		if err != nil {
			return err
		}
		s.started(t, addr, p)
	case "grpc-noop":
		p, err := peers.Start("grpc-noop", dir, s.self, "serve-noop", "--addr", addr)
		if err != nil {
			return err
		}
		if err := p.WaitTCP(sctx, addr); err != nil {
			return err
		}
		s.started(t, addr, p)
	case "raft-noop":
		s.started(t, "in-process", nil)
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
			p, _, err := peers.NacosLockd(sctx, nil, s.lockd, dir, port)
			if err != nil {
				return err
			}
			s.started(t, addr, p)
			return nil
		}
		fmt.Fprintf(s.stderr, "   starting a real Nacos 3.1.0 (%s; first time: Maven fetches it)\n", s.nacosPeer)
		p, err := peers.NacosPeer(sctx, nil, s.nacosPeer, dir, port, probeLock)
		if err != nil {
			return err
		}
		s.started(t, addr, p)
	default:
		return fmt.Errorf("unknown target %q", t)
	}
	return nil
}

// point runs one workload point against one target.
func (s *suite) point(ctx context.Context, t, w string, c int) (load.Report, error) {
	if isJavaTarget(t) {
		return s.javaPoint(ctx, t, w, c)
	}
	pctx, cancel := context.WithTimeout(ctx, s.warmup+s.duration+2*time.Minute)
	defer cancel()
	if strings.HasPrefix(t, "etcd-") {
		var out bytes.Buffer
		cmd := exec.CommandContext(pctx, s.etcdBin, "bench", "--target", t, "--server", s.addrs[t], "--workload", w,
			"--clients", strconv.Itoa(c), "--duration", s.duration.String(), "--warmup", s.warmup.String(), "--json",
			"--pid", strconv.Itoa(s.procs[t].PID()))
		cmd.Stdout, cmd.Stderr = &out, s.stderr
		if err := cmd.Run(); err != nil {
			return load.Report{}, err
		}
		var rep load.Report
		if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
			return load.Report{}, fmt.Errorf("etcd-peer report: %w", err)
		}
		return rep, nil
	}
	o := options{target: t, server: s.addrs[t], workload: w, clients: c, duration: s.duration, warmup: s.warmup, lease: 30000}
	switch t {
	case "nacos-lockd":
		o.target = "nacos"
		o.pid = s.procs[t].PID()
		// addrs holds the main port
	case "zookeeper":
		o.target = "zk"
	}
	if p := s.procs[t]; p != nil && o.pid == 0 {
		o.pid = p.PID()
	}
	rs, err := runOne(pctx, o, s.stderr)
	if err != nil {
		return load.Report{}, err
	}
	rs[0].Target = t
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

// median of a metric over the reports of one (target, workload, clients)
// point.
func pick(reps []load.Report, t, w string, c int, f func(load.Report) float64) (float64, bool) {
	var v []float64
	for _, r := range reps {
		if r.Target == t && r.Workload == w && r.Clients == c && r.Ops > 0 {
			v = append(v, f(r))
		}
	}
	if len(v) == 0 {
		return 0, false
	}
	slices.Sort(v)
	return v[len(v)/2], true
}

func ratioTable(reps []load.Report, targets []string, skipped map[string]string, machine string, rounds int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Machine: %s. Ratios are nacos-lockd / peer from one run", machine)
	if rounds > 1 {
		fmt.Fprintf(&b, " (median of %d interleaved rounds)", rounds)
	}
	b.WriteString("; above 1 means nacos-lockd is faster. Ceilings: grpc-noop = two empty gRPC round trips per pair, raft-noop = two raw dragonboat proposals per pair (no-op state machine, in-process).\n\n")
	peersOf := []string{}
	for _, t := range targets {
		if t != "nacos-lockd" && !isJavaTarget(t) {
			peersOf = append(peersOf, t)
		}
	}
	b.WriteString("| workload | metric | nacos-lockd |")
	for _, p := range peersOf {
		fmt.Fprintf(&b, " / %s |", p)
	}
	b.WriteString("\n|---|---|---|")
	for range peersOf {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	points := map[string][]int{}
	for _, r := range reps {
		if (r.Workload == "w1" || r.Workload == "w2") && !slices.Contains(points[r.Workload], r.Clients) {
			points[r.Workload] = append(points[r.Workload], r.Clients)
		}
	}
	ops := func(r load.Report) float64 { return r.OpsPerSec }
	p50 := func(r load.Report) float64 { return r.P50Ms }
	p99 := func(r load.Report) float64 { return r.P99Ms }
	for _, w := range []string{"w1", "w2"} {
		slices.Sort(points[w])
		for _, c := range points[w] {
			unit := "pairs/s"
			if w == "w2" {
				unit = "hand-offs/s"
			}
			row := func(metric string, f func(load.Report) float64, inverse bool) {
				own, ok := pick(reps, "nacos-lockd", w, c, f)
				if !ok {
					return
				}
				fmt.Fprintf(&b, "| %s c=%d | %s | %s |", strings.ToUpper(w), c, metric, fmtSig(own))
				for _, p := range peersOf {
					v, ok := pick(reps, p, w, c, f)
					switch {
					case skipped[p] != "":
						b.WriteString(" skipped |")
					case !ok || v == 0 || own == 0:
						b.WriteString(" n/a |")
					case inverse:
						fmt.Fprintf(&b, " %.2fx |", v/own)
					default:
						fmt.Fprintf(&b, " %.2fx |", own/v)
					}
				}
				b.WriteString("\n")
			}
			row(unit, ops, false)
			row("p50 ms (ratio peer/ours)", p50, true)
			row("p99 ms (ratio peer/ours)", p99, true)
		}
	}
	// FIFO and errors.
	var fifo, checked, errs int64
	for _, r := range reps {
		if r.Target == "nacos-lockd" {
			errs += r.Errors
			if r.Workload == "w2" && r.FIFOViolations >= 0 {
				fifo += r.FIFOViolations
				checked += r.FIFOChecked
			}
		}
	}
	fmt.Fprintf(&b, "\nnacos-lockd W2 FIFO violations: %d of %d grants checked; nacos-lockd errors across the run: %d.\n", fifo, checked, errs)
	b.WriteString("The nacos-lockd column holds its own figure (ops/s or ms); p50/p99 ratios are peer latency / ours, so above 1 means ours is lower. Redis has no wait queue: its W2 clients retry every millisecond.\n")
	b.WriteString(javaTable(reps, skipped))
	// W3-W5.
	var extra []string
	for _, r := range reps {
		if r.Target != "nacos-lockd" || r.Extra == nil {
			continue
		}
		e := r.Extra
		switch r.Workload {
		case "w3":
			extra = append(extra, fmt.Sprintf("| W3 %s locks held | RSS %s MiB (%s B/lock over idle; Go heap %s B/lock); snapshot %s MiB (%s B/lock), export %s s; restart to ready %s s, %s locks after restart; acquire rate %.0f/s | 1M in < 1 GiB RSS; restart < 10 s |",
				fmtSig(e["locks"]), fmtSig(e["rssHeldMiB"]), fmtSig(e["rssBytesPerLock"]), fmtSig(e["heapInuseBytesPerLock"]),
				fmtSig(e["snapshotBytes"]/(1<<20)), fmtSig(e["snapshotBytesPerLock"]), fmtSig(e["snapshotExportSeconds"]),
				fmtSig(e["restartToReadySeconds"]), fmtSig(e["locksHeldAfterRestart"]), r.OpsPerSec))
		case "w4":
			extra = append(extra, fmt.Sprintf("| W4 %s leases of %s ms | expiry lateness p50 %s ms, p99 %s ms, max %s ms; %s expired; after the last acquire the server used %s cores for %s s (%s µs CPU per expiry) | - |",
				fmtSig(e["locks"]), fmtSig(e["leaseMs"]), fmtSig(e["expiryLatenessP50Ms"]), fmtSig(e["expiryLatenessP99Ms"]), fmtSig(e["expiryLatenessMaxMs"]),
				fmtSig(e["expired"]), fmtSig(e["serverCoresAfterAcquires"]), fmtSig(e["reaperTailSeconds"]), fmtSig(e["serverCpuUsPerExpiry"])))
		case "w5":
			extra = append(extra, fmt.Sprintf("| W5 %s locks renewed every %s s | %.0f renews/s cost %s%% of one core (%s µs per renew); W1 c=%s beside it: p50 x%s, p99 x%s, pairs/s x%s of W1 alone | < 5%% of one core |",
				fmtSig(e["heldLocks"]), fmtSig(e["renewEverySeconds"]), r.OpsPerSec, fmtSig(e["renewCostPctOfOneCore"]), fmtSig(e["cpuUsPerRenew"]),
				fmtSig(e["w1Clients"]), fmtSig(e["w1P50MsWithRenews"]/e["w1P50MsAlone"]), fmtSig(e["w1P99MsWithRenews"]/e["w1P99MsAlone"]),
				fmtSig(e["w1PairsPerSecWithRenews"]/e["w1PairsPerSecAlone"])))
		}
	}
	if len(extra) > 0 {
		b.WriteString("\n| nacos-lockd alone | measured | target |\n|---|---|---|\n")
		for _, l := range extra {
			b.WriteString(l + "\n")
		}
	}
	// The targets, checked.
	b.WriteString("\nTargets (issue 9):\n\n")
	check := func(name string, ok, known bool, detail string) {
		switch {
		case !known:
			fmt.Fprintf(&b, "- %s: not measured in this run\n", name)
		case !ok:
			fmt.Fprintf(&b, "- %s: NOT MET (%s)\n", name, detail)
		default:
			fmt.Fprintf(&b, "- %s: MET (%s)\n", name, detail)
		}
	}
	ratio := func(w string, c int, peer string) (float64, bool) {
		own, ok1 := pick(reps, "nacos-lockd", w, c, ops)
		v, ok2 := pick(reps, peer, w, c, ops)
		if !ok1 || !ok2 || v == 0 {
			return math.NaN(), false
		}
		return own / v, true
	}
	bestEtcd := func(w string, c int) (float64, bool) {
		a, oka := ratio(w, c, "etcd-mutex")
		bb, okb := ratio(w, c, "etcd-v3lock")
		switch {
		case oka && okb:
			return math.Min(a, bb), true
		case oka:
			return a, true
		}
		return bb, okb
	}
	r, ok := bestEtcd("w1", 64)
	check("W1 c=64 >= 3x etcd", r >= 3, ok, fmt.Sprintf("%.2fx the faster etcd", r))
	r, ok = ratio("w1", 64, "redis-fsync-always")
	check("W1 c=64 >= 0.7x Redis fsync always", r >= 0.7, ok, fmt.Sprintf("%.2fx", r))
	r, ok = ratio("w1", 64, "grpc-noop")
	check("W1 c=64 >= 0.5x the empty-gRPC pair ceiling", r >= 0.5, ok, fmt.Sprintf("%.2fx", r))
	p, okp := pick(reps, "nacos-lockd", "w1", 1, p50)
	np, _ := pick(reps, "grpc-noop", "w1", 1, p50)
	check("W1 c=1 p50 pair latency <= 1 ms", p <= 1, okp, fmt.Sprintf("%.3f ms; the empty-gRPC pair p50 beside it %.3f ms", p, np))
	r, ok = bestEtcd("w1", 1)
	check("W1 c=1 >= 2x etcd pairs/s", r >= 2, ok, fmt.Sprintf("%.2fx", r))
	r, ok = bestEtcd("w2", 16)
	check("W2 c=16 >= 6x etcd hand-offs/s", r >= 6, ok, fmt.Sprintf("%.2fx", r))
	r, ok = ratio("w2", 16, "zookeeper")
	check("W2 c=16 >= 2x ZooKeeper hand-offs/s", r >= 2, ok, fmt.Sprintf("%.2fx", r))
	check("W2 FIFO violations 0", fifo == 0, checked > 0, fmt.Sprintf("%d of %d", fifo, checked))
	for _, rr := range reps {
		if rr.Target == "nacos-lockd" && rr.Workload == "w3" && rr.Extra["locks"] >= 1e6 {
			check("W3 1M held locks in < 1 GiB RSS", rr.Extra["rssHeldMiB"] < 1024, true, fmt.Sprintf("%.0f MiB", rr.Extra["rssHeldMiB"]))
			if v, ok := rr.Extra["restartToReadySeconds"]; ok {
				check("W3 restart to ready < 10 s with 1M locks", v < 10, true, fmt.Sprintf("%.2f s", v))
			}
		}
		if rr.Target == "nacos-lockd" && rr.Workload == "w5" {
			v := rr.Extra["renewCostPctOfOneCore"]
			check("W5 10k renewing holders < 5% of one core", v < 5, true, fmt.Sprintf("%.1f%%", v))
		}
	}
	if len(skipped) > 0 {
		b.WriteString("\nSkipped:\n\n")
		for _, t := range targets {
			if why := skipped[t]; why != "" {
				fmt.Fprintf(&b, "- %s: %s\n", t, why)
			}
		}
	}
	return b.String()
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
