package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
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

// javaPoint runs one point in the suite's Java driver. The server's CPU is
// taken over the whole point (warm-up included) and divided by the
// measured seconds' share, so CPU per op is an estimate; the throughput and
// latency are the program's own, over the measured window only.
func (s *suite) javaPoint(ctx context.Context, t, w string, c int, d time.Duration) (load.Report, error) {
	warm := s.pointWarmup(t) // connections are new each point, and Nacos's JIT cools while paused
	pctx, cancel := context.WithTimeout(ctx, warm+d+3*time.Minute)
	defer cancel()
	drv, err := s.javaDriverStarted()
	if err != nil {
		return load.Report{}, err
	}
	pids := s.pids(t)
	cpu0, t0 := load.CPUSeconds(pids), time.Now()
	line, err := drv.run(pctx, fmt.Sprintf("%s %s %s %d %d %d 30000", t, s.addrs[t], w, c, warm.Milliseconds(), d.Milliseconds()))
	if err != nil {
		if drv.exited() || pctx.Err() != nil {
			// Ended or stuck: the next point starts a new one.
			drv.stop()
			s.java = nil
		}
		return load.Report{}, err
	}
	cpu := load.CPUSeconds(pids) - cpu0
	wall := time.Since(t0).Seconds()
	var rep load.Report
	if err := json.Unmarshal([]byte(line), &rep); err != nil {
		return load.Report{}, fmt.Errorf("BenchGen1Main report: %w", err)
	}
	rep.ServerPIDs = pids
	rep.ServerCPU = cpu / wall
	rep.ServerRSSMiB = load.RSSMiB(pids)
	if rep.Ops > 0 {
		// The whole point's CPU over the ops it would have done at the
		// measured rate: warm-up and connection set-up count against us.
		rep.ServerCPUPerOp = cpu * 1e6 / (rep.OpsPerSec * wall)
	}
	return rep, nil
}

// javaDriverStarted returns the suite's Java driver, starting it on the
// load generator's CPUs the first time (and after one was lost).
func (s *suite) javaDriverStarted() (*javaDriver, error) {
	if s.java != nil {
		return s.java, nil
	}
	d, err := startJavaDriver(exec.Command("java", "-Xmx1g", "-XX:+UseSerialGC", "-DJM.LOG.PATH="+filepath.Join(s.work, "java-client-logs"),
		"-cp", s.javaCP, "nacoslockd.interop.support.BenchGen1Main", "serve"), s.pin.Client, filepath.Join(s.work, "java-driver.log"))
	if err != nil {
		return nil, err
	}
	s.java = d
	return d, nil
}

// javaDriver is the one JVM that runs every Java point of a suite
// (BenchGen1Main serve): a point is a line to its standard input, its
// report a line back. Pinned to one core, a JVM compiles its hot paths for
// about a minute of load, its compiler threads taking a third of that core
// meanwhile (W1 c=1 against nacos-lockd: 180-200 pairs/s after 10-20 s of
// load, 458 after 120 s, when the JVM used 0.37 of the core), so a new JVM
// per point measured the client's compiler more than either server. One
// JVM for the suite, warmed with the JVM servers (jitwarm.go), keeps that
// work, and both targets meet the same compiled client.
type javaDriver struct {
	cmd   *exec.Cmd
	in    io.WriteCloser
	lines chan string   // its BENCH- lines; closed when its output ends
	done  chan struct{} // closed when it has exited
	log   string        // its standard error (the client's own logging)
	grace time.Duration // how long stop waits for it to exit by itself
}

// startJavaDriver starts cmd on cpus with its standard error to logPath.
func startJavaDriver(cmd *exec.Cmd, cpus peers.CPUSet, logPath string) (*javaDriver, error) {
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	lf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	d := &javaDriver{cmd: cmd, in: in, lines: make(chan string, 1), done: make(chan struct{}), log: logPath, grace: 10 * time.Second}
	cmd.Stderr = lf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // stop kills what it started too
	if err := peers.StartCmd(cmd, cpus); err != nil {
		lf.Close()
		return nil, fmt.Errorf("start the Java driver: %w", err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "BENCH-") {
				d.lines <- sc.Text()
			}
		}
		close(d.lines)
		_ = cmd.Wait() // after the last read of its output, as exec asks
		lf.Close()
		close(d.done)
	}()
	return d, nil
}

// run has the driver run one point (BenchGen1Main's seven arguments) and
// returns its report's JSON.
func (d *javaDriver) run(ctx context.Context, point string) (string, error) {
	if _, err := io.WriteString(d.in, point+"\n"); err != nil {
		return "", fmt.Errorf("Java driver: %w\n%s", err, d.logTail())
	}
	select {
	case line, ok := <-d.lines:
		if !ok {
			return "", fmt.Errorf("Java driver exited during a point\n%s", d.logTail())
		}
		if rep, ok := strings.CutPrefix(line, "BENCH-REPORT "); ok {
			return rep, nil
		}
		return "", fmt.Errorf("BenchGen1Main: %s", strings.TrimPrefix(line, "BENCH-FAILED "))
	case <-ctx.Done():
		return "", fmt.Errorf("Java driver: no report: %w", ctx.Err())
	}
}

// exited reports whether the driver's process has ended.
func (d *javaDriver) exited() bool {
	select {
	case <-d.done:
		return true
	default:
		return false
	}
}

// stop ends the driver: at the end of its input it exits by itself; one
// that has not within its grace (a point still running) is killed.
func (d *javaDriver) stop() {
	_ = d.in.Close()
	select {
	case <-d.done:
		return
	case <-time.After(d.grace):
	}
	_ = syscall.Kill(-d.cmd.Process.Pid, syscall.SIGKILL) // its group: see startJavaDriver
	go func() {
		for range d.lines { // let the reader reach its Wait
		}
	}()
	<-d.done
}

// stopJava stops the suite's Java driver, if it has one.
func (s *suite) stopJava() {
	if s.java != nil {
		s.java.stop()
		s.java = nil
	}
}

// logTail is the end of the driver's log, for error messages.
func (d *javaDriver) logTail() string {
	b, _ := os.ReadFile(d.log)
	return peers.LastLines(string(b), 10)
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
	b.WriteString("| workload | ops/s nacos-lockd | ops/s Nacos 3.1 | ratio | p50 ms nacos-lockd | p50 ms Nacos 3.1 | ratio | p99 ratio | server CPU µs/op ratio (Nacos / ours) | client JVM's CPU, cores (ours, Nacos) | errors (ours, Nacos) |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
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
		// The load program's own CPU: near 1 (its core), the client
		// set the pace, not the server.
		clientCPU := func(t string) string {
			v, ok := get(t, func(r load.Report) float64 {
				if v, ok := r.Extra["clientCpuCores"]; ok {
					return v
				}
				return -1
			})
			if !ok || v < 0 {
				return "n/a"
			}
			return fmt.Sprintf("%.2f", v)
		}
		fmt.Fprintf(&b, "| %s c=%d | %s | %s | %s | %s | %s | %s | %s | %s | %s, %s | %d, %d |\n", strings.ToUpper(w), c, fig(oo, ok1), fig(on, ok2),
			ratio(ours, theirs, ops), fig(lo, ok3), fig(ln, ok4), ratio(theirs, ours, p50), ratio(theirs, ours, p99), ratio(theirs, ours, cpu),
			clientCPU(ours), clientCPU(theirs), errs(ours), errs(theirs))
	}
	if why := skipped["nacos-3.1"]; why != "" {
		fmt.Fprintf(&b, "\nNacos 3.1.0 skipped: %s\n", why)
	}
	return b.String()
}
