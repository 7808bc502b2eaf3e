package main

import (
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"nacos-lockd/bench/load"
	"nacos-lockd/internal/syncbuf"
	"nacos-lockd/interop/procs"
)

func TestJavaTableRatiosAreOursOverNacos(t *testing.T) {
	reps := []load.Report{
		{Target: "nacos-lockd-java", Workload: "w1", Clients: 16, Ops: 100, OpsPerSec: 600, P50Ms: 20, P99Ms: 40, ServerCPUPerOp: 100,
			Extra: map[string]float64{"clientCpuCores": 0.5}},
		{Target: "nacos-3.1", Workload: "w1", Clients: 16, Ops: 100, OpsPerSec: 300, P50Ms: 50, P99Ms: 60, ServerCPUPerOp: 300, Errors: 2,
			Extra: map[string]float64{"clientCpuCores": 0.955}},
		{Target: "nacos-lockd-java", Workload: "w2", Clients: 2, Ops: 10, OpsPerSec: 100, P50Ms: 5, P99Ms: 9, ServerCPUPerOp: 50},
		// Points of the main table never leak into this one.
		{Target: "nacos-lockd", Workload: "w1", Clients: 16, Ops: 100, OpsPerSec: 9999, P50Ms: 1, P99Ms: 2},
	}
	got := javaTable(reps, map[string]string{})
	for _, want := range []string{
		"| W1 c=16 | 600 | 300 | 2.00x | 20.0 | 50.0 | 2.50x | 1.50x | 3.00x | 0.50, 0.95 | 0, 2 |",
		// A report without the client's CPU (an older driver) says so.
		"| W2 c=2 | 100 | n/a | n/a | 5 | n/a | n/a | n/a | n/a | n/a, n/a | 0, 0 |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("table lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "9999") {
		t.Errorf("a Go-client point leaked into the Java table:\n%s", got)
	}
	// Nacos alone (--targets nacos-3.1) still gets its rows.
	only := javaTable([]load.Report{{Target: "nacos-3.1", Workload: "w1", Clients: 1, Ops: 5, OpsPerSec: 50, P50Ms: 12, P99Ms: 20}}, nil)
	if want := "| W1 c=1 | n/a | 50.0 | n/a | n/a | 12.0 |"; !strings.Contains(only, want) {
		t.Errorf("Nacos-only table lacks %q:\n%s", want, only)
	}
	if s := javaTable(nil, map[string]string{"nacos-3.1": "no java"}); !strings.Contains(s, "skipped (no java)") {
		t.Errorf("skipped run: %q", s)
	}
}

func TestJavaTargetsRunW1AndW2Only(t *testing.T) {
	for _, tc := range []struct {
		target, workload string
		want             bool
	}{
		{"nacos-3.1", "w1", true}, {"nacos-3.1", "w2", true}, {"nacos-3.1", "w3", false},
		{"nacos-lockd-java", "w5", false}, {"nacos", "w5", true}, {"grpc-noop", "w2", false},
	} {
		if got, _ := supports(tc.target, tc.workload); got != tc.want {
			t.Errorf("supports(%s, %s) = %v, want %v", tc.target, tc.workload, got, tc.want)
		}
	}
}

// The driver protocol, against a shell program that answers as
// BenchGen1Main serve does: a report, a failure, noise on its output, a
// point it never finishes, and an exit in the middle of a point.
func TestJavaDriverRunsPointsAndSurvivesTheirFailures(t *testing.T) {
	prog := `while read what rest; do
  case "$what" in
    ok) echo "[main] INFO client log"; echo "BENCH-REPORT {\"ops\":7,\"rest\":\"$rest\"}";;
    fail) echo "oops" >&2; echo "BENCH-FAILED IllegalArgumentException: bad point";;
    hang) sleep 30;;
    die) echo "dying" >&2; exit 3;;
  esac
done`
	start := func() *javaDriver {
		d, err := startJavaDriver(exec.Command("sh", "-c", prog), nil, filepath.Join(t.TempDir(), "driver.log"))
		if err != nil {
			t.Fatal(err)
		}
		d.grace = 200 * time.Millisecond
		return d
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	d := start()
	if got, err := d.run(ctx, "ok a b"); err != nil || got != `{"ops":7,"rest":"a b"}` {
		t.Fatalf("report: %q, %v", got, err)
	}
	if _, err := d.run(ctx, "fail"); err == nil || !strings.Contains(err.Error(), "IllegalArgumentException: bad point") {
		t.Fatalf("failed point: %v", err)
	}
	if d.exited() {
		t.Fatal("a failed point ended the driver")
	}
	if got, err := d.run(ctx, "ok again"); err != nil || !strings.Contains(got, `"again"`) {
		t.Fatalf("the point after a failure: %q, %v", got, err)
	}
	if _, err := d.run(ctx, "die"); err == nil || !strings.Contains(err.Error(), "exited") || !strings.Contains(err.Error(), "dying") {
		t.Fatalf("driver gone mid-point: %v", err)
	}
	select {
	case <-d.done:
	case <-ctx.Done():
		t.Fatal("the exited driver was never reaped")
	}
	d.stop() // stopping one already gone returns

	d = start()
	short, cancelShort := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancelShort()
	if _, err := d.run(short, "hang"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("stuck point: %v", err)
	}
	t0 := time.Now()
	d.stop() // kills it after its grace
	if !d.exited() || time.Since(t0) > 5*time.Second {
		t.Fatalf("stuck driver not stopped: exited %v after %s", d.exited(), time.Since(t0))
	}
}

// TestSuiteJavaPointsShareOneWarmDriver: the nacos-lockd-java target's
// points run in the real BenchGen1Main (the unmodified nacos-client 3.1.0,
// compiled by Maven) against a real nacos-lockd, both in the one driver
// JVM, which reports the client's own CPU; a bad point fails alone and the
// driver serves the next; the suite's end stops it.
func TestSuiteJavaPointsShareOneWarmDriver(t *testing.T) {
	for _, tool := range []string{"java", "mvn"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s on PATH (CI installs it): %v", tool, err)
		}
	}
	bin := procs.Binary(t, "nacos-lockd")
	stderr := &syncbuf.Buffer{}
	s := &suite{stdout: stderr, stderr: stderr, work: t.TempDir(), lockd: bin,
		duration: time.Second, warmup: 500 * time.Millisecond, javaModule: "../../interop/java/versions/diff"}
	defer s.stopAll()
	defer func() {
		if t.Failed() {
			t.Logf("suite output:\n%s", stderr)
			if s.java != nil {
				t.Logf("driver log:\n%s", s.java.logTail())
			}
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	const target = "nacos-lockd-java"
	if err := s.start(ctx, target, ""); err != nil {
		t.Fatalf("start %s: %v", target, err)
	}

	var pid int
	for _, w := range []string{"w1", "w2"} {
		rep, err := s.point(ctx, target, w, 2, 0)
		if err != nil {
			t.Fatalf("%s: %v", w, err)
		}
		if rep.Ops == 0 || rep.Errors != 0 || rep.Target != target || rep.Workload != w || rep.Clients != 2 {
			t.Fatalf("%s report: %+v", w, rep)
		}
		if cores := rep.Extra["clientCpuCores"]; cores <= 0 || cores > 2.5 {
			t.Errorf("%s: client CPU %v cores", w, cores)
		}
		if _, ok := rep.Extra["clientJitMs"]; !ok {
			t.Errorf("%s: no client JIT time in %v", w, rep.Extra)
		}
		if rep.ServerCPUPerOp <= 0 {
			t.Errorf("%s: server CPU per op %v", w, rep.ServerCPUPerOp)
		}
		if pid == 0 {
			pid = s.java.cmd.Process.Pid
		} else if got := s.java.cmd.Process.Pid; got != pid {
			t.Errorf("%s ran in JVM %d, the first point in %d", w, got, pid)
		}
	}
	if _, err := s.java.run(ctx, "not a point"); err == nil || !strings.Contains(err.Error(), "want 7 arguments") {
		t.Fatalf("bad point: %v", err)
	}
	if rep, err := s.point(ctx, target, "w1", 1, 0); err != nil || rep.Ops == 0 || s.java.cmd.Process.Pid != pid {
		t.Fatalf("the point after a bad one: %+v, %v", rep, err)
	}
	d := s.java
	s.stopJava()
	if !d.exited() || s.java != nil {
		t.Fatalf("driver still running after stopJava")
	}
}
