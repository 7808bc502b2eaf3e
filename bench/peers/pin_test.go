package peers

import (
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestCPUSetString(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string
	}{{"0", "0"}, {"1-3", "1-3"}, {"3,1,2,5", "1-3,5"}, {"0,2,4-5", "0,2,4-5"}, {"", ""}} {
		s, err := ParseCPUSet(tc.in)
		if err != nil {
			t.Fatalf("ParseCPUSet(%q): %v", tc.in, err)
		}
		if got := s.String(); got != tc.want {
			t.Errorf("ParseCPUSet(%q).String() = %q, want %q", tc.in, got, tc.want)
		}
	}
	for _, bad := range []string{"a", "3-1", "-1", "1,,2"} {
		if _, err := ParseCPUSet(bad); err == nil {
			t.Errorf("ParseCPUSet(%q) accepted", bad)
		}
	}
}

func TestPlanPinning(t *testing.T) {
	p, err := PlanPinning(false, -1, t.TempDir())
	if err != nil || p.Pinned() {
		t.Fatalf("PlanPinning(false) = %+v, %v", p, err)
	}
	p, err = PlanPinning(true, -1, "")
	if err != nil {
		t.Fatal(err)
	}
	if runtime.NumCPU() < 2 {
		if p.Pinned() {
			t.Fatalf("one CPU, yet pinned: %+v", p)
		}
		return
	}
	if len(p.Server) != 1 || len(p.Client) < 1 || p.Server[0] >= p.Client[0] || p.Disk != nil {
		t.Fatalf("plan %+v: without a data directory, want the first allowed CPU for servers, the rest for the generator", p)
	}
	all := append(slices.Clone(p.Server), p.Client...)
	// A data directory: the servers' CPU is one of the allowed, whichever
	// takes the disk's interrupts, and the generator has all the others.
	p, err = PlanPinning(true, -1, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	got := append(slices.Clone(p.Server), p.Client...)
	slices.Sort(got)
	if len(p.Server) != 1 || slices.Contains(p.Client, p.Server[0]) || !slices.Equal(got, all) {
		t.Fatalf("plan %+v: want one allowed CPU for the servers and the rest (%s) for the generator", p, all)
	}
	if p.Disk != nil && (p.Disk.CPU != p.Server[0] || p.Disk.Device == "" || !strings.Contains(p.String(), p.Disk.Device)) {
		t.Fatalf("plan %+v (%s): the disk's CPU and name disagree with the plan", p, p)
	}
	// An explicit CPU wins; one the process may not use is an error.
	last := all[len(all)-1]
	if p, err = PlanPinning(true, last, t.TempDir()); err != nil || !slices.Equal(p.Server, CPUSet{last}) || slices.Contains(p.Client, last) || p.Disk != nil {
		t.Fatalf("PlanPinning(server CPU %d) = %+v, %v", last, p, err)
	}
	if _, err = PlanPinning(true, 4096, ""); err == nil {
		t.Fatal("a server CPU outside the affinity mask was accepted")
	}
}

// The helper process: a Go program (so several threads) that only waits.
func TestPinHelperProcess(t *testing.T) {
	if os.Getenv("NACOS_BENCH_PIN_HELPER") != "1" {
		t.Skip("helper process")
	}
	time.Sleep(30 * time.Second)
	os.Exit(0)
}

func twoCPUs(t *testing.T) Pinning {
	t.Helper()
	p, err := PlanPinning(true, -1, "")
	if err != nil {
		t.Fatal(err)
	}
	if !p.Pinned() {
		t.Skip("needs 2 or more CPUs")
	}
	return p
}

func TestStartCmdPinsEveryThreadOfTheChild(t *testing.T) {
	p := twoCPUs(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestPinHelperProcess$")
	cmd.Env = append(os.Environ(), "NACOS_BENCH_PIN_HELPER=1")
	if err := StartCmd(cmd, p.Server); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	// The first instruction already ran there; wait for the Go runtime's
	// threads to exist, then check each of them.
	time.Sleep(300 * time.Millisecond)
	got, err := AllowedCPUs(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if got != p.Server.String() {
		t.Fatalf("child Cpus_allowed_list %s, want %s", got, p.Server)
	}
	n, _ := tasks(cmd.Process.Pid)
	if len(n) < 2 {
		t.Logf("child has %d thread(s) only", len(n))
	}
	if err := CheckAffinity(cmd.Process.Pid, p.Server); err != nil {
		t.Fatal(err)
	}
	// The fork left this process's own threads alone.
	var u unix.CPUSet
	if err := unix.SchedGetaffinity(0, &u); err != nil {
		t.Fatal(err)
	}
	if u.Count() < 2 {
		t.Fatalf("this thread's affinity shrank to %d CPU(s)", u.Count())
	}
}

func TestStartOnPinsAServer(t *testing.T) {
	p := twoCPUs(t)
	proc, err := StartOn(p.Server, "sleeper", t.TempDir(), "sleep", "30")
	if err != nil {
		t.Fatal(err)
	}
	defer proc.Stop(5 * time.Second)
	if err := CheckAffinity(proc.PID(), p.Server); err != nil {
		t.Fatal(err)
	}
}

func TestPinSelf(t *testing.T) {
	p := twoCPUs(t)
	var before unix.CPUSet
	if err := unix.SchedGetaffinity(0, &before); err != nil {
		t.Fatal(err)
	}
	defer func() {
		// Give the test process its CPUs back, every thread.
		var all CPUSet
		for c := 0; len(all) < before.Count(); c++ {
			if before.IsSet(c) {
				all = append(all, c)
			}
		}
		if err := PinSelf(all); err != nil {
			t.Error(err)
		}
	}()
	if err := PinSelf(p.Client); err != nil {
		t.Fatal(err)
	}
	if err := CheckAffinity(os.Getpid(), p.Client); err != nil {
		t.Fatal(err)
	}
	// A child started plainly inherits the generator's CPUs.
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	if got, _ := AllowedCPUs(cmd.Process.Pid); got != p.Client.String() {
		t.Fatalf("plain child on %s, want %s", got, p.Client)
	}
}
