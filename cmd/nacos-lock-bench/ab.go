package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"nacos-lockd/bench/load"
	"nacos-lockd/bench/peers"
)

// runAB compares two nacos-lockd binaries (before and after a change) on
// one workload point: both servers run side by side and the runs
// alternate A B B A ..., so both see the same machine noise. It prints
// every round and the median ratio B/A. Pinned like the suite: both
// servers on the server CPU, the load generator on the others.
func runAB(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("nacos-lock-bench ab", flag.ContinueOnError)
	fs.SetOutput(stderr)
	a := fs.String("a", "bin/nacos-lockd", "baseline nacos-lockd binary")
	b := fs.String("b", "", "changed nacos-lockd binary")
	workload := fs.String("workload", "w1", "w1 or w2")
	clients := fs.String("clients", "64", "client counts, comma-separated")
	rounds := fs.Int("rounds", 4, "rounds; each runs A and B once, order alternating")
	duration := fs.Duration("duration", 5*time.Second, "measured time per run")
	warmup := fs.Duration("warmup", time.Second, "warm-up per run")
	extra := fs.String("server-args", "", "extra nacos-lockd flags for both, space-separated")
	// One binary with a flag on and off (e.g. --b-args "--transport h2").
	aArgs := fs.String("a-args", "", "extra nacos-lockd flags for A only, space-separated (after --server-args)")
	bArgs := fs.String("b-args", "", "extra nacos-lockd flags for B only, space-separated (after --server-args)")
	pin := fs.Bool("pin", true, "with 2 or more CPUs: both servers on one CPU (see --server-cpu), this process on the others (false: all share every core)")
	serverCPU := fs.Int("server-cpu", -1, serverCPUUsage)
	rate := fs.Float64("rate", 0, "w1: open loop at this many pairs/s in total (0: closed loop)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if *b == "" {
		return errors.New("ab: --b is required")
	}
	counts, err := parseCounts(*clients, *clients)
	if err != nil {
		return err
	}
	if err := checkRate(*rate, *workload); err != nil {
		return err
	}
	plan, err := peers.PlanPinning(*pin, *serverCPU, os.TempDir())
	if err != nil {
		return err
	}
	if err := peers.PinSelf(plan.Client); err != nil {
		return fmt.Errorf("pin the load generator: %w", err)
	}
	mode := "closed loop"
	if *rate > 0 {
		mode = fmt.Sprintf("open loop at %g ops/s", *rate)
	}
	fmt.Fprintf(stdout, "ab: %s; %s\n", plan, mode)
	if *aArgs != "" || *bArgs != "" {
		fmt.Fprintf(stdout, "ab: A %s %s | B %s %s\n", *a, *aArgs, *b, *bArgs)
	}
	work, err := os.MkdirTemp("", "nacos-lock-bench-ab-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	type side struct {
		name, bin, addr string
		args            []string
		proc            *peers.Proc
	}
	sides := []*side{{name: "A", bin: *a, args: strings.Fields(*aArgs)}, {name: "B", bin: *b, args: strings.Fields(*bArgs)}}
	for _, s := range sides {
		xargs := append(strings.Fields(*extra), s.args...)
		port, err := peers.FreePort()
		if err != nil {
			return err
		}
		s.addr = fmt.Sprintf("127.0.0.1:%d", port)
		s.proc, _, err = peers.NacosLockd(ctx, plan.Server, s.bin, filepath.Join(work, s.name), port, xargs...)
		if err != nil {
			return fmt.Errorf("start %s (%s): %w", s.name, s.bin, err)
		}
		defer s.proc.Stop(20 * time.Second)
		if len(plan.Server) > 0 {
			if err := peers.CheckAffinity(s.proc.PID(), plan.Server); err != nil {
				fmt.Fprintf(stderr, "ab: %s pinning not confirmed: %v\n", s.name, err)
			}
		}
	}
	for _, c := range counts {
		var ops, p50, p99, cpu, core []float64
		for r := range *rounds {
			order := []*side{sides[0], sides[1]}
			if r%2 == 1 {
				order = []*side{sides[1], sides[0]}
			}
			got := map[string]load.Report{}
			for _, s := range order {
				o := options{target: "nacos", server: s.addr, workload: *workload, clients: c, duration: *duration,
					warmup: *warmup, lease: 30000, pids: []int{s.proc.PID()}, rate: *rate, serverCores: plan.Server}
				reps, err := runOne(ctx, o, nil)
				if err != nil {
					return fmt.Errorf("%s c=%d: %w", s.name, c, err)
				}
				got[s.name] = reps[0]
			}
			ra, rb := got["A"], got["B"]
			fmt.Fprintf(stdout, "%s c=%d round %d: A %.0f ops/s p50 %.2f ms p99 %.2f ms %.0f µs/op | B %.0f ops/s p50 %.2f ms p99 %.2f ms %.0f µs/op | B/A ops %.2f\n",
				*workload, c, r+1, ra.OpsPerSec, ra.P50Ms, ra.P99Ms, ra.ServerCPUPerOp, rb.OpsPerSec, rb.P50Ms, rb.P99Ms, rb.ServerCPUPerOp, rb.OpsPerSec/ra.OpsPerSec)
			if ra.Errors+rb.Errors > 0 || (*workload == "w2" && (ra.FIFOViolations != 0 || rb.FIFOViolations != 0)) {
				fmt.Fprintf(stdout, "  errors A %d B %d, FIFO violations A %d B %d\n", ra.Errors, rb.Errors, ra.FIFOViolations, rb.FIFOViolations)
				for _, e := range ra.ErrorLog {
					fmt.Fprintf(stdout, "    A: %s\n", e)
				}
				for _, e := range rb.ErrorLog {
					fmt.Fprintf(stdout, "    B: %s\n", e)
				}
			}
			ops = append(ops, rb.OpsPerSec/ra.OpsPerSec)
			p50 = append(p50, rb.P50Ms/ra.P50Ms)
			p99 = append(p99, rb.P99Ms/ra.P99Ms)
			cpu = append(cpu, rb.ServerCPUPerOp/ra.ServerCPUPerOp)
			if ra.ServerCoreUsPerOp > 0 && rb.ServerCoreUsPerOp > 0 {
				fmt.Fprintf(stdout, "  server's CPU busy per op: A %.0f µs, B %.0f µs\n", ra.ServerCoreUsPerOp, rb.ServerCoreUsPerOp)
				core = append(core, rb.ServerCoreUsPerOp/ra.ServerCoreUsPerOp)
			}
		}
		fmt.Fprintf(stdout, "%s c=%d median of %d rounds, B/A: ops/s %.2fx  p50 %.2fx  p99 %.2fx  server CPU per op %.2fx",
			*workload, c, *rounds, median(ops), median(p50), median(p99), median(cpu))
		if len(core) == len(ops) {
			// The pinned core's busy time counts what the kernel does for
			// the server outside its process (a kernel worker finishing an
			// asynchronous write): a change can lower the process's CPU by
			// moving work there (gateway/DESIGN.md, io_uring).
			fmt.Fprintf(stdout, "  server's CPU busy per op %.2fx", median(core))
		}
		fmt.Fprintln(stdout)
	}
	return nil
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
