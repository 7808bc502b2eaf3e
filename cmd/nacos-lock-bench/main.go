// Command nacos-lock-bench drives load against a lock service, one
// connection per client, and reports ops/s, latency percentiles and the
// server's CPU and RSS. Against nacos-lockd it speaks the real Nacos gRPC
// protocol.
//
//	nacos-lock-bench --server 127.0.0.1:8848 --workload w1 --clients 64 --duration 10s [--rate 1500] [--json] [--plot out.png]
//	nacos-lock-bench --server 127.0.0.1:8848,127.0.0.1:8858,127.0.0.1:8868 --workload w1 --clients 64  # a running cluster: clients spread over its nodes
//	nacos-lock-bench suite [--quick] [--targets ...] [--pin=false] [--rates 1500]   # make bench: nacos-lockd beside its peers, a table of ratios
//	nacos-lock-bench ab --b other/nacos-lockd [--rate 1500]                         # make bench-ab: before/after, alternating
//	nacos-lock-bench smoke                                                          # make bench-smoke: W1 and W2, correctness counters only
//
// Workloads:
//
//	w1  uncontended: each client acquires and releases its own key (one op = the pair)
//	w2  contended: every client blocks on ONE key (wait queue, push hand-off); one op = a
//	    grant; FIFO violations are counted from fencing tokens (see load.FIFOViolations)
//	w3  many locks: hold --locks locks at once; memory per lock, snapshot size and time,
//	    restart-to-ready (the last two only with --spawn)
//	w4  lease churn: --locks locks with --lease-ms leases, never released; expiry lateness
//	    and the reaper's CPU
//	w5  renew load: --locks held locks renewed every --renew-every; CPU cost and effect on
//	    W1 latency
//
// Targets (--target): nacos (default), nacoslock (nacos-lockd through
// the nacoslock package, as an application uses it), redis, zk,
// grpc-noop (a no-op unary server, see `serve-noop`), raft-noop
// (in-process dragonboat with a no-op state machine; in w2 a FIFO lock
// that is one entry per hand-off). etcd's clients live in the bench/etcd
// module. The suite adds nacos-lockd-3: three nacos-lockd nodes it starts
// as one cluster, driven like nacos with several --server addresses.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"nacos-lockd/bench/load"
	"nacos-lockd/bench/peers"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := dispatch(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "nacos-lock-bench:", err)
		os.Exit(1)
	}
}

func dispatch(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 {
		switch args[0] {
		case "suite":
			return runSuite(ctx, args[1:], stdout, stderr)
		case "smoke":
			return runSmoke(ctx, args[1:], stdout, stderr)
		case "ab":
			return runAB(ctx, args[1:], stdout, stderr)
		case "serve-noop":
			return serveNoop(ctx, args[1:], stderr)
		case "sync-floor":
			return runSyncFloor(ctx, args[1:], stdout, stderr)
		case "table":
			return runTable(args[1:], stdout, stderr)
		case "handoff-trace":
			return runHandoffTrace(ctx, args[1:], stdout, stderr)
		}
	}
	return run(ctx, args, stdout, stderr)
}

type options struct {
	target     string
	server     string // nacos: main port address (the SDK port is +1000), or several comma-separated (a cluster); others: their client address
	workload   string
	clients    int
	duration   time.Duration
	warmup     time.Duration
	lease      int64 // ms
	json       bool
	plot       string
	pids       []int  // server processes for CPU/RSS (none: found from the listening ports)
	spawn      string // nacos-lockd binary to start on --server's port
	locks      string // w3/w4/w5 lock counts, comma-separated
	churnLease int64  // w4 lease, ms
	renewEvery time.Duration
	w1Clients  int // w5: clients of the W1 run beside the renewals
	quiet      bool
	rate       float64      // w1: open loop at this many pairs/s in total (0: closed loop)
	serverCPUs peers.CPUSet // servers this run starts (--spawn, raft-noop): pinned here from their start
	// serverCores are the CPUs the measured server has to itself (ab and
	// suite pin it there and the load generator elsewhere): the report
	// gives their whole busy time per op beside the process's own CPU.
	serverCores peers.CPUSet
	clientCPUs  peers.CPUSet // this process (the load generator), every thread
	self        string       // this binary, for the raft-noop child (default: os.Executable)
}

func (o *options) flags(fs *flag.FlagSet) {
	fs.StringVar(&o.target, "target", "nacos", "nacos, nacoslock (nacos-lockd through the Go package), redis, zk, grpc-noop or raft-noop")
	fs.StringVar(&o.server, "server", "127.0.0.1:8848", "nacos: server main port address (SDK port is +1000), or a cluster's, comma-separated like a Nacos serverAddr (clients spread over them round-robin; w1 and w2); other targets: their client address")
	fs.StringVar(&o.workload, "workload", "w1", "w1, w2, w3, w4 or w5")
	fs.IntVar(&o.clients, "clients", 16, "concurrent clients, one connection each")
	fs.DurationVar(&o.duration, "duration", 10*time.Second, "measured time")
	fs.DurationVar(&o.warmup, "warmup", 2*time.Second, "unmeasured time before")
	fs.Int64Var(&o.lease, "lease", 30000, "lease in ms for each acquire")
	fs.BoolVar(&o.json, "json", false, "print the report as JSON")
	fs.StringVar(&o.plot, "plot", "", "write a latency/throughput chart (PNG) to this file")
	fs.Func("pid", "server process id(s) for CPU/RSS, comma-separated: CPU and RSS are summed over them (default: found from the listening port(s))", pidsFlag(&o.pids))
	fs.StringVar(&o.spawn, "spawn", "", "start this nacos-lockd binary on --server's port with a fresh data dir (w3 needs it for snapshot and restart figures)")
	fs.StringVar(&o.locks, "locks", "", "w3: locks held at once (default 100000,1000000); w4: leases (default 100000); w5: held locks (default 10000)")
	fs.Int64Var(&o.churnLease, "churn-lease", 5000, "w4: lease in ms")
	fs.DurationVar(&o.renewEvery, "renew-every", 10*time.Second, "w5: renew period of each held lock (the Java watchdog's)")
	fs.IntVar(&o.w1Clients, "w1-clients", 16, "w5: clients of the W1 run measured with and without the renewals")
	fs.BoolVar(&o.quiet, "quiet", false, "no progress lines")
	fs.Float64Var(&o.rate, "rate", 0, "w1: open loop, this many pairs/s in total spread evenly over the clients; latency from each pair's scheduled start (0: closed loop)")
	fs.Func("server-cpus", "pin the servers this run starts (--spawn, raft-noop as a child process) to these CPUs from their start, e.g. 0", cpuFlag(&o.serverCPUs))
	fs.Func("client-cpus", "pin this process (the load generator, every thread) to these CPUs, e.g. 1-3", cpuFlag(&o.clientCPUs))
}

func pidsFlag(dst *[]int) func(string) error {
	return func(v string) error {
		*dst = nil
		for _, f := range strings.Split(v, ",") {
			pid, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || pid <= 0 {
				return fmt.Errorf("want process ids, comma-separated, not %q", v)
			}
			*dst = append(*dst, pid)
		}
		return nil
	}
}

func cpuFlag(dst *peers.CPUSet) func(string) error {
	return func(v string) error {
		s, err := peers.ParseCPUSet(v)
		*dst = s
		return err
	}
}

// checkRate rejects --rate where open loop is not defined.
func checkRate(rate float64, workload string) error {
	switch {
	case rate < 0:
		return errors.New("--rate must not be negative")
	case rate > 0 && workload != "w1":
		return fmt.Errorf("--rate is for w1 (a contended queue has no schedule of its own), not %s", workload)
	}
	return nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("nacos-lock-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	o.flags(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if o.clients < 1 {
		return errors.New("--clients must be at least 1")
	}
	if ok, why := supports(o.target, o.workload); !ok {
		return fmt.Errorf("%s cannot run %s: %s", o.target, o.workload, why)
	}
	if err := checkRate(o.rate, o.workload); err != nil {
		return err
	}
	if err := peers.PinSelf(o.clientCPUs); err != nil {
		return fmt.Errorf("--client-cpus: %w", err)
	}
	var progress io.Writer = stderr
	if o.quiet {
		progress = nil
	}
	reps, err := runOne(ctx, o, progress)
	if err != nil {
		return err
	}
	if o.plot != "" {
		if err := load.PlotReports(o.plot, reps); err != nil {
			return fmt.Errorf("plot: %w", err)
		}
	}
	if o.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if len(reps) == 1 {
			return enc.Encode(reps[0])
		}
		return enc.Encode(reps)
	}
	for _, r := range reps {
		printReport(stdout, r)
	}
	return nil
}

// runOne runs o.workload against o.target and returns its report(s) (w3
// gives one per lock count).
func runOne(ctx context.Context, o options, progress io.Writer) ([]load.Report, error) {
	spec := load.Spec{Target: o.target, Workload: o.workload, Clients: o.clients, Warmup: o.warmup, Duration: o.duration, Rate: o.rate,
		ServerCPUs: o.serverCores, Progress: progress}
	switch o.target {
	case "raft-noop":
		if len(o.serverCPUs) > 0 {
			rep, err := raftNoopChild(ctx, o, progress)
			return []load.Report{rep}, err
		}
		dir, err := os.MkdirTemp("", "raft-noop-")
		if err != nil {
			return nil, err
		}
		port, err := peers.FreePort()
		if err != nil {
			return nil, err
		}
		r, err := startRaftNoop(ctx, dir, port)
		if err != nil {
			return nil, fmt.Errorf("start in-process dragonboat: %w", err)
		}
		defer r.close()
		spec.PIDs = load.Self()
		rep, err := w12(ctx, o, spec, r.dialer())
		rep.Notes = append(rep.Notes, "in-process: CPU and RSS are the bench process's, clients included")
		return []load.Report{rep}, err
	case "redis", "redis-fsync-always", "redis-fsync-off":
		spec.PIDs = pidsOf(o.pids, o.server)
		rep, err := w12(ctx, o, spec, dialRedis(o.server, time.Duration(o.lease)*time.Millisecond))
		return []load.Report{rep}, err
	case "zk", "zookeeper":
		spec.PIDs = pidsOf(o.pids, o.server)
		rep, err := w12(ctx, o, spec, dialZK(o.server))
		return []load.Report{rep}, err
	case "grpc-noop":
		spec.PIDs = pidsOf(o.pids, o.server)
		rep, err := w12(ctx, o, spec, dialNoop(o.server, o.lease))
		return []load.Report{rep}, err
	case "nacoslock":
		srv, err := nacosServer(ctx, o)
		if err != nil {
			return nil, err
		}
		defer srv.close()
		spec.PIDs = []int{srv.pid()}
		rep, err := w12(ctx, o, spec, dialPkg(o.server, o.lease))
		return []load.Report{rep}, err
	case "nacos", "nacos-lockd":
	default:
		return nil, fmt.Errorf("unknown target %q (etcd runs from bench/etcd)", o.target)
	}
	spec.Target = "nacos-lockd"
	if addrs := serverList(o.server); len(addrs) > 1 {
		rep, err := nacosCluster(ctx, o, spec, addrs)
		return []load.Report{rep}, err
	}
	if o.workload == "w3" {
		return w3(ctx, o, spec)
	}
	srv, err := nacosServer(ctx, o)
	if err != nil {
		return nil, err
	}
	defer srv.close()
	spec.PIDs = []int{srv.pid()}
	// Entries per op, and the log's synced writes per op (a record may
	// hold several entries; a build before the count has none).
	spec.Counters = map[string]func() (float64, error){
		"raftEntries": func() (float64, error) { return peers.Metric(srv.metrics, "nacoslockd_raft_applied_index", "") },
		"logSyncs":    func() (float64, error) { return peers.Metric(srv.metrics, "nacoslockd_raft_log_syncs_total", "") },
	}
	switch o.workload {
	case "w1", "w2":
		rep, err := w12(ctx, o, spec, dialNacos(srv.grpcAddr, o.lease))
		return []load.Report{rep}, err
	case "w4":
		rep, err := w4(ctx, o, spec, srv)
		return []load.Report{rep}, err
	case "w5":
		rep, err := w5(ctx, o, spec, srv)
		return []load.Report{rep}, err
	}
	return nil, fmt.Errorf("unknown workload %q", o.workload)
}

func w12(ctx context.Context, o options, spec load.Spec, dial load.Dialer) (load.Report, error) {
	ls, err := load.DialAll(ctx, o.clients, dial)
	if err != nil {
		return load.Report{}, err
	}
	defer load.CloseAll(ls)
	switch o.workload {
	case "w1":
		return load.W1(ctx, spec, ls), ctx.Err()
	case "w2":
		return load.W2(ctx, spec, ls, 0), ctx.Err()
	}
	return load.Report{}, fmt.Errorf("%s cannot run %s", o.target, o.workload)
}

func pidsOf(pids []int, addr string) []int {
	if len(pids) > 0 {
		return pids
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil
	}
	p, _ := strconv.Atoi(port)
	if found := load.PIDListening(p); found != 0 {
		return []int{found}
	}
	return nil
}

// nacosSrv is the nacos-lockd under test: external (--server) or started
// by the bench (--spawn), which can then be restarted.
type nacosSrv struct {
	mainPort int
	grpcAddr string
	metrics  string
	proc     *peers.Proc // nil when external
	bin, dir string
	cpus     peers.CPUSet // spawned: pinned there
	extPID   int
	keep     bool // external: leave alone
}

func nacosServer(ctx context.Context, o options) (*nacosSrv, error) {
	host, port, err := net.SplitHostPort(o.server)
	if err != nil {
		return nil, fmt.Errorf("--server %q: %w", o.server, err)
	}
	mainPort, err := strconv.Atoi(port)
	if err != nil {
		return nil, fmt.Errorf("--server %q: bad port", o.server)
	}
	s := &nacosSrv{mainPort: mainPort, grpcAddr: net.JoinHostPort(host, strconv.Itoa(mainPort+1000)),
		metrics: fmt.Sprintf("http://%s/metrics", net.JoinHostPort(host, port))}
	if o.spawn == "" {
		if len(o.pids) > 0 {
			s.extPID = o.pids[0]
		}
		if s.extPID == 0 {
			s.extPID = load.PIDListening(mainPort + 1000)
		}
		return s, nil
	}
	dir, err := os.MkdirTemp("", "nacos-lock-bench-")
	if err != nil {
		return nil, err
	}
	s.bin, s.dir, s.cpus = o.spawn, dir, o.serverCPUs
	s.proc, _, err = peers.NacosLockd(ctx, s.cpus, o.spawn, dir, mainPort)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return s, nil
}

func (s *nacosSrv) pid() int {
	if s.proc != nil {
		return s.proc.PID()
	}
	return s.extPID
}

// restart stops the spawned server and starts it on the same data, and
// returns the time from the new process's start to /readyz.
func (s *nacosSrv) restart(ctx context.Context, between func() error) (time.Duration, error) {
	if s.proc == nil {
		return 0, errors.New("not started by the bench")
	}
	s.proc.Stop(30 * time.Second)
	if between != nil {
		if err := between(); err != nil {
			return 0, err
		}
	}
	p, took, err := peers.NacosLockd(ctx, s.cpus, s.bin, s.dir, s.mainPort)
	if err != nil {
		return 0, err
	}
	s.proc = p
	return took, nil
}

func (s *nacosSrv) close() {
	if s.proc != nil {
		s.proc.Stop(30 * time.Second)
		os.RemoveAll(s.dir)
	}
}

func (s *nacosSrv) dataDir() string { return filepath.Join(s.dir, "data") }

func printReport(w io.Writer, r load.Report) {
	fmt.Fprintf(w, "%s %s  clients %d  duration %.1fs\n", r.Target, r.Workload, r.Clients, r.DurationSec)
	if r.RatePerSec > 0 {
		fmt.Fprintf(w, "  open loop at %g ops/s scheduled: achieved %.0f ops/s  (ops %d, errors %d)\n", r.RatePerSec, r.OpsPerSec, r.Ops, r.Errors)
	} else {
		fmt.Fprintf(w, "  ops/s %.0f  (ops %d, errors %d)\n", r.OpsPerSec, r.Ops, r.Errors)
	}
	if r.Ops > 0 {
		fmt.Fprintf(w, "  latency p50 %.3f ms  p99 %.3f ms  p999 %.3f ms\n", r.P50Ms, r.P99Ms, r.P999Ms)
	}
	if r.Workload == "w2" {
		if r.FIFOViolations >= 0 {
			fmt.Fprintf(w, "  FIFO violations %d (of %d grants checked)\n", r.FIFOViolations, r.FIFOChecked)
		} else {
			fmt.Fprintf(w, "  FIFO not checked (no fencing tokens)\n")
		}
	}
	if len(r.ServerPIDs) > 0 {
		fmt.Fprintf(w, "  server pid %v: %.2f cores (%.0f µs CPU per op), RSS %.1f MiB\n", r.ServerPIDs, r.ServerCPU, r.ServerCPUPerOp, r.ServerRSSMiB)
		if r.ServerCoreUsPerOp > 0 {
			fmt.Fprintf(w, "  server's CPUs busy %.0f µs per op (interrupts and kernel workers included)\n", r.ServerCoreUsPerOp)
		}
	}
	for _, k := range sortedKeys(r.Extra) {
		fmt.Fprintf(w, "  %s %s\n", k, fmtFloat(r.Extra[k]))
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "  note: %s\n", n)
	}
	for _, e := range r.ErrorLog {
		fmt.Fprintf(w, "  error: %s\n", e)
	}
}

func fmtFloat(v float64) string {
	s := strconv.FormatFloat(v, 'f', 3, 64)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	if s == "" || s == "-" {
		return "0"
	}
	return s
}
