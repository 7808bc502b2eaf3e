package load

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// CPUTimes sums the busy and total ticks of cpus (every CPU if empty) in
// a /proc/stat file's text. Idle and iowait count as not busy; guest time
// is already inside user time, so it is left out of the total.
func CPUTimes(stat string, cpus []int) (busy, total uint64, err error) {
	want := map[string]bool{}
	for _, c := range cpus {
		want["cpu"+strconv.Itoa(c)] = true
	}
	found := 0
	for _, line := range strings.Split(stat, "\n") {
		f := strings.Fields(line)
		if len(f) < 6 || !strings.HasPrefix(f[0], "cpu") {
			continue
		}
		if len(cpus) == 0 && f[0] != "cpu" || len(cpus) > 0 && !want[f[0]] {
			continue
		}
		found++
		for i, v := range f[1:min(len(f), 9)] { // user nice system idle iowait irq softirq steal
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				return 0, 0, fmt.Errorf("/proc/stat %s: %w", f[0], err)
			}
			total += n
			if i != 3 && i != 4 {
				busy += n
			}
		}
	}
	if want := max(len(cpus), 1); found != want {
		return 0, 0, fmt.Errorf("/proc/stat: %d of the %d CPU lines wanted (%v)", found, want, cpus)
	}
	return busy, total, nil
}

// ReadProcStat is the text of /proc/stat.
func ReadProcStat() (string, error) {
	b, err := os.ReadFile("/proc/stat")
	return string(b), err
}

// userHZ is the unit of /proc/stat's times: ticks per second.
const userHZ = 100

// coreBusyTicks is the busy time of cpus from /proc/stat; false when cpus
// is empty or the file cannot be read.
func coreBusyTicks(cpus []int) (uint64, bool) {
	if len(cpus) == 0 {
		return 0, false
	}
	stat, err := ReadProcStat()
	if err != nil {
		return 0, false
	}
	busy, _, err := CPUTimes(stat, cpus)
	return busy, err == nil
}
