package load

import (
	"context"
	"runtime"
	"testing"
	"time"
)

func TestCPUTimes(t *testing.T) {
	// user nice system idle iowait irq softirq steal guest guest_nice
	stat := "cpu  10 1 5 100 20 1 2 3 7 0\ncpu0 4 0 2 50 10 0 1 1 3 0\ncpu1 6 1 3 50 10 1 1 2 4 0\n"
	busy, total, err := CPUTimes(stat, []int{1})
	if err != nil || busy != 14 || total != 74 {
		t.Fatalf("cpu1: busy %d total %d %v, want 14 of 74 (idle and iowait not busy, guest not counted)", busy, total, err)
	}
	busy, total, err = CPUTimes(stat, nil)
	if err != nil || busy != 22 || total != 142 {
		t.Fatalf("all: busy %d total %d %v, want 22 of 142", busy, total, err)
	}
	if _, _, err := CPUTimes(stat, []int{3}); err == nil {
		t.Fatal("a CPU /proc/stat does not list was read")
	}
}

// spinLocker keeps a CPU busy for a millisecond per call.
type spinLocker struct{}

func spin() {
	for end := time.Now().Add(time.Millisecond); time.Now().Before(end); {
	}
}

func (spinLocker) Acquire(context.Context, string, bool) (Grant, error) { spin(); return Grant{}, nil }
func (spinLocker) Release(context.Context, string) error                { spin(); return nil }
func (spinLocker) Close() error                                         { return nil }

// With ServerCPUs set, a report gives those CPUs' busy time per op; the
// clients here are the busy ones, on whichever CPU, so every CPU is
// listed. Without ServerCPUs there is no such figure.
func TestServerCoreBusyPerOp(t *testing.T) {
	all := make([]int, runtime.NumCPU())
	for i := range all {
		all[i] = i
	}
	spec := Spec{Target: "fake", Workload: "w1", Clients: 1, Warmup: 20 * time.Millisecond, Duration: 400 * time.Millisecond, ServerCPUs: all}
	rep := W1(context.Background(), spec, []Locker{spinLocker{}})
	if rep.Ops == 0 {
		t.Fatal("no pairs")
	}
	// Each pair spins two milliseconds; ticks are 10 ms, so allow a tick
	// either side over the window.
	if min := 2000 - 2*10000/float64(rep.Ops); rep.ServerCoreUsPerOp < min {
		t.Fatalf("CPUs busy %.0f µs per pair, want at least %.0f (the pair spins 2 ms)", rep.ServerCoreUsPerOp, min)
	}
	spec.ServerCPUs = nil
	if rep := W1(context.Background(), spec, []Locker{spinLocker{}}); rep.ServerCoreUsPerOp != 0 {
		t.Fatalf("no ServerCPUs, yet %v µs per op", rep.ServerCoreUsPerOp)
	}
}
