package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"nacos-lockd/bench/load"
	"nacos-lockd/bench/peers"
	"nacos-lockd/interop/client"
	"nacos-lockd/protocol"
)

// The "same Java client" targets. A real Nacos lock can only be reached
// through the Java client, so both sides of this comparison are driven by
// one Java program (interop/java's BenchGen1Main, the unmodified
// nacos-client 3.1.0 Gen 1 LockService, one connection per client):
//
//	nacos-lockd-java  a fresh nacos-lockd
//	nacos-3.1         a real Nacos 3.1.0 server (interop/nacos-peer)
//
// Their ratio is the like-for-like answer to "how does nacos-lockd compare
// with the Nacos lock module"; the Go-client figures of the main table are
// not comparable with them (the JVM client costs its own CPU on this
// shared machine).

// isJavaTarget: the target is driven by BenchGen1Main, not by this tool.
func isJavaTarget(t string) bool { return t == "nacos-lockd-java" || t == "nacos-3.1" }

// probeLock takes and releases a Gen 1 lock over the Nacos protocol: the
// peer is ready once its lock module answers.
func probeLock(ctx context.Context, sdkAddr string) error {
	cl, err := client.Dial(ctx, sdkAddr)
	if err != nil {
		return err
	}
	defer cl.Close()
	li := client.Instance("bench-probe", "NACOS_LOCK", "bench-probe", client.Ms(5000), nil)
	for _, op := range []protocol.LockOp{protocol.OpAcquire, protocol.OpRelease} {
		r, err := cl.Lock(ctx, op, li)
		if err != nil {
			return err
		}
		if r.ResultCode != 200 || !r.Result {
			return fmt.Errorf("probe %s: code %d %s", op, r.ResultCode, r.Message)
		}
	}
	return nil
}

// javaPoint runs BenchGen1Main for one point. The server's CPU is taken
// over the whole JVM run (warm-up included) and divided by the measured
// seconds' share, so CPU per op is an estimate; the throughput and latency
// are the program's own, over the measured window only.
func (s *suite) javaPoint(ctx context.Context, t, w string, c int, d time.Duration) (load.Report, error) {
	warm := s.pointWarmup(t) // the client's JIT and Nacos's need longer than Go
	pctx, cancel := context.WithTimeout(ctx, warm+d+3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(pctx, "java", "-Xmx512m", "-XX:+UseSerialGC", "-DJM.LOG.PATH="+filepath.Join(s.work, "java-client-logs"),
		"-cp", s.javaCP, "nacoslockd.interop.support.BenchGen1Main", t, s.addrs[t], w, strconv.Itoa(c),
		strconv.FormatInt(warm.Milliseconds(), 10), strconv.FormatInt(d.Milliseconds(), 10), "30000")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	pids := s.pids(t)
	cpu0, t0 := load.CPUSeconds(pids), time.Now()
	// The JVM client is load generator: on its CPUs.
	err := peers.StartCmd(cmd, s.pin.Client)
	if err == nil {
		err = cmd.Wait()
	}
	if err != nil {
		return load.Report{}, fmt.Errorf("BenchGen1Main: %w\n%s", err, peers.LastLines(errOut.String(), 10))
	}
	cpu := load.CPUSeconds(pids) - cpu0
	wall := time.Since(t0).Seconds()
	var rep load.Report
	found := false
	sc := bufio.NewScanner(&out)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if line, ok := strings.CutPrefix(sc.Text(), "BENCH-REPORT "); ok {
			if err := json.Unmarshal([]byte(line), &rep); err != nil {
				return load.Report{}, fmt.Errorf("BenchGen1Main report: %w", err)
			}
			found = true
		}
	}
	if !found {
		return load.Report{}, fmt.Errorf("BenchGen1Main printed no report\n%s", peers.LastLines(errOut.String(), 10))
	}
	rep.ServerPIDs = pids
	rep.ServerCPU = cpu / wall
	rep.ServerRSSMiB = load.RSSMiB(pids)
	if rep.Ops > 0 {
		// The whole run's CPU over the ops it would have done at the
		// measured rate: warm-up and connection set-up count against us.
		rep.ServerCPUPerOp = cpu * 1e6 / (rep.OpsPerSec * wall)
	}
	return rep, nil
}

// javaTable is the like-for-like comparison with the Nacos lock module:
// the same Java program against nacos-lockd and a real Nacos 3.1.0.
func javaTable(reps []load.Report, skipped map[string]string) string {
	var b strings.Builder
	var points []string
	for _, w := range []string{"w1", "w2"} {
		var cs []int
		for _, r := range reps {
			if isJavaTarget(r.Target) && r.Workload == w && !slices.Contains(cs, r.Clients) {
				cs = append(cs, r.Clients)
			}
		}
		slices.Sort(cs)
		for _, c := range cs {
			points = append(points, fmt.Sprintf("%s/%d", w, c))
		}
	}
	if len(points) == 0 {
		if why := skipped["nacos-lockd-java"] + skipped["nacos-3.1"]; why != "" {
			fmt.Fprintf(&b, "\nSame Java client against nacos-lockd and a real Nacos 3.1.0: skipped (%s).\n", why)
		}
		return b.String()
	}
	b.WriteString("\nSame Java client (the unmodified nacos-client 3.1.0 Gen 1 LockService in interop/java's BenchGen1Main, one connection per client) against nacos-lockd and a real Nacos 3.1.0 (interop/nacos-peer); Gen 1 has no wait queue, so W2 waiters retry every millisecond on both. Ratios nacos-lockd / Nacos; latency ratios Nacos / nacos-lockd, so above 1 means nacos-lockd is better.\n\n")
	b.WriteString("| workload | ops/s nacos-lockd | ops/s Nacos 3.1 | ratio | p50 ms nacos-lockd | p50 ms Nacos 3.1 | ratio | p99 ratio | server CPU µs/op ratio (Nacos / ours) | errors (ours, Nacos) |\n|---|---|---|---|---|---|---|---|---|---|\n")
	for _, pt := range points {
		w, cs, _ := strings.Cut(pt, "/")
		c, _ := strconv.Atoi(cs)
		get := func(t string, f func(load.Report) float64) (float64, bool) { return pick(reps, t, w, c, f) }
		ops := func(r load.Report) float64 { return r.OpsPerSec }
		p50 := func(r load.Report) float64 { return r.P50Ms }
		p99 := func(r load.Report) float64 { return r.P99Ms }
		cpu := func(r load.Report) float64 { return r.ServerCPUPerOp }
		errs := func(t string) int64 {
			var n int64
			for _, r := range reps {
				if r.Target == t && r.Workload == w && r.Clients == c {
					n += r.Errors
				}
			}
			return n
		}
		// ratio is num's figure over den's, round by round (pairedRatio).
		ratio := func(num, den string, f func(load.Report) float64) string {
			r, ok := pairedRatio(reps, num, den, w, c, 0, f)
			if !ok {
				return "n/a"
			}
			return fmt.Sprintf("%.2fx", r)
		}
		const ours, theirs = "nacos-lockd-java", "nacos-3.1"
		oo, ok1 := get(ours, ops)
		on, ok2 := get(theirs, ops)
		lo, ok3 := get(ours, p50)
		ln, ok4 := get(theirs, p50)
		fig := func(v float64, ok bool) string {
			if !ok {
				return "n/a"
			}
			return fmtSig(v)
		}
		fmt.Fprintf(&b, "| %s c=%d | %s | %s | %s | %s | %s | %s | %s | %s | %d, %d |\n", strings.ToUpper(w), c, fig(oo, ok1), fig(on, ok2),
			ratio(ours, theirs, ops), fig(lo, ok3), fig(ln, ok4), ratio(theirs, ours, p50), ratio(theirs, ours, p99), ratio(theirs, ours, cpu),
			errs(ours), errs(theirs))
	}
	if why := skipped["nacos-3.1"]; why != "" {
		fmt.Fprintf(&b, "\nNacos 3.1.0 skipped: %s\n", why)
	}
	return b.String()
}
