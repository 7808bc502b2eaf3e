package load

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// CPUSeconds sums user+system CPU seconds of the processes (and their
// reaped children) from /proc; missing processes count 0.
func CPUSeconds(pids []int) float64 {
	total := 0.0
	for _, pid := range pids {
		v, _ := procCPU(pid)
		total += v
	}
	return total
}

// procCPU returns a process's user+system CPU seconds from /proc.
func procCPU(pid int) (float64, bool) {
	if pid == 0 {
		return 0, false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	// Fields after the command name, which may contain spaces.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, false
	}
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / userHZ, true
}

// RSSMiB sums the processes' resident sets.
func RSSMiB(pids []int) float64 {
	total := 0.0
	for _, pid := range pids {
		total += procRSSMiB(pid)
	}
	return total
}

func procRSSMiB(pid int) float64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseFloat(strings.Fields(rest)[0], 64)
			return kb / 1024
		}
	}
	return 0
}

// PIDListening finds the process with a TCP socket listening on port (0
// when none is found).
func PIDListening(port int) int {
	inode := ""
	for _, file := range []string{"/proc/net/tcp6", "/proc/net/tcp"} {
		f, err := os.Open(file)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) < 10 || fields[3] != "0A" { // 0A = LISTEN
				continue
			}
			local := fields[1]
			if j := strings.LastIndexByte(local, ':'); j >= 0 {
				if p, err := strconv.ParseInt(local[j+1:], 16, 32); err == nil && int(p) == port {
					inode = fields[9]
				}
			}
		}
		f.Close()
		if inode != "" {
			break
		}
	}
	if inode == "" {
		return 0
	}
	target := "socket:[" + inode + "]"
	procs, _ := filepath.Glob("/proc/[0-9]*/fd/*")
	for _, fd := range procs {
		if l, err := os.Readlink(fd); err == nil && l == target {
			pid, _ := strconv.Atoi(strings.Split(fd, "/")[2])
			return pid
		}
	}
	return 0
}
