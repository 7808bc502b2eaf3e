package load

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
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

// coreSample is when it was taken and how long cpus had been idle then
// (idle and iowait, in ticks); ok is false when cpus is empty or
// /proc/stat cannot be read.
type coreSample struct {
	at   time.Time
	idle uint64
	ok   bool
}

func sampleCores(cpus []int) coreSample {
	if len(cpus) == 0 {
		return coreSample{}
	}
	stat, err := ReadProcStat()
	at := time.Now()
	if err != nil {
		return coreSample{}
	}
	busy, total, err := CPUTimes(stat, cpus)
	return coreSample{at: at, idle: total - busy, ok: err == nil}
}

// coreBusySeconds is how long the n CPUs sampled were busy between a and
// b: the wall time on each less its idle time. The kernel measures idle
// time exactly on a tickless CPU, while /proc/stat's busy fields are
// samples taken at the tick, which a bursty load can bias: an empty gRPC
// server at 1500 W1 pairs/s read 124 µs of busy ticks per pair against
// its process's own 245.
func coreBusySeconds(a, b coreSample, n int) (float64, bool) {
	if !a.ok || !b.ok || b.idle < a.idle {
		return 0, false
	}
	busy := b.at.Sub(a.at).Seconds()*float64(n) - float64(b.idle-a.idle)/userHZ
	return max(busy, 0), true
}
