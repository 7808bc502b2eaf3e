package load

import "testing"

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
