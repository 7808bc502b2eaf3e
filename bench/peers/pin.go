package peers

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// CPUSet is a list of CPU numbers; empty means "not pinned".
type CPUSet []int

// String is the set in Linux's list format ("0", "1-3,5"), as taskset -c
// and /proc/PID/status Cpus_allowed_list write it.
func (s CPUSet) String() string {
	c := slices.Clone(s)
	slices.Sort(c)
	c = slices.Compact(c)
	var parts []string
	for i := 0; i < len(c); {
		j := i
		for j+1 < len(c) && c[j+1] == c[j]+1 {
			j++
		}
		if j == i {
			parts = append(parts, strconv.Itoa(c[i]))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", c[i], c[j]))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}

// ParseCPUSet reads a list like "0", "1-3,5" ("" gives an empty set).
func ParseCPUSet(s string) (CPUSet, error) {
	var out CPUSet
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	for _, f := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(strings.TrimSpace(f), "-")
		a, err := strconv.Atoi(lo)
		b := a
		if err == nil && isRange {
			b, err = strconv.Atoi(hi)
		}
		if err != nil || a < 0 || b < a {
			return nil, fmt.Errorf("CPU list %q: bad element %q", s, f)
		}
		for c := a; c <= b; c++ {
			out = append(out, c)
		}
	}
	return out, nil
}

func (s CPUSet) unix() *unix.CPUSet {
	var u unix.CPUSet
	for _, c := range s {
		u.Set(c)
	}
	return &u
}

// Pinning says where the servers under test and the load generator run.
// Both empty: unpinned, everything shares every core.
type Pinning struct {
	Server CPUSet `json:"server"` // every server process, from its first instruction
	Client CPUSet `json:"client"` // the bench process and the client processes it starts
	// Disk is set when Server was chosen as the CPU that services the
	// interrupts of the servers' data disk.
	Disk *DiskIRQ `json:"disk,omitempty"`
}

// Pinned reports whether the servers and the load generator have cores of
// their own.
func (p Pinning) Pinned() bool { return len(p.Server) > 0 && len(p.Client) > 0 }

// String is the line the tables print.
func (p Pinning) String() string {
	if !p.Pinned() {
		return "unpinned (servers and load generator share every core)"
	}
	why := ""
	if p.Disk != nil {
		why = fmt.Sprintf(" (it takes the interrupts of %s, which holds their data)", p.Disk.Device)
	}
	return fmt.Sprintf("servers pinned to CPU %s%s, load generator (this process and its client processes) to CPU %s", p.Server, why, p.Client)
}

// PlanPinning splits the CPUs this process may run on: one for the
// servers, the rest for the load generator. The servers get serverCPU if
// it is 0 or more (it must be allowed), else the CPU that services the
// interrupts of the disk holding dataDir, where they keep their data (see
// DiskIRQ), else the first allowed CPU. With enabled false, or fewer than
// two CPUs, it returns the unpinned plan.
func PlanPinning(enabled bool, serverCPU int, dataDir string) (Pinning, error) {
	if !enabled {
		return Pinning{}, nil
	}
	var u unix.CPUSet
	if err := unix.SchedGetaffinity(0, &u); err != nil {
		return Pinning{}, fmt.Errorf("sched_getaffinity: %w", err)
	}
	var all CPUSet
	for c := 0; len(all) < u.Count(); c++ {
		if u.IsSet(c) {
			all = append(all, c)
		}
	}
	if len(all) < 2 {
		return Pinning{}, nil
	}
	p := Pinning{Server: CPUSet{all[0]}}
	switch {
	case serverCPU >= 0:
		if !slices.Contains(all, serverCPU) {
			return Pinning{}, fmt.Errorf("server CPU %d: this process may only run on CPU %s", serverCPU, all)
		}
		p.Server = CPUSet{serverCPU}
	case dataDir != "":
		d, ok, err := diskIRQCPU("/sys", "/proc/interrupts", dataDir, all)
		if err != nil {
			return Pinning{}, fmt.Errorf("the CPU of the data disk's interrupts: %w", err)
		}
		if ok {
			p.Server, p.Disk = CPUSet{d.CPU}, &d
		}
	}
	for _, c := range all {
		if c != p.Server[0] {
			p.Client = append(p.Client, c)
		}
	}
	return p, nil
}

// PinSelf sets the affinity of every thread of this process to cpus (an
// empty set does nothing). Threads started later inherit it: Go starts
// them from a thread that is already pinned. The thread list is read
// again until a pass finds no thread it has not pinned.
func PinSelf(cpus CPUSet) error {
	if len(cpus) == 0 {
		return nil
	}
	set := cpus.unix()
	done := map[int]bool{}
	for range 10 {
		tids, err := tasks(os.Getpid())
		if err != nil {
			return err
		}
		fresh := false
		for _, tid := range tids {
			if done[tid] {
				continue
			}
			fresh = true
			if err := unix.SchedSetaffinity(tid, set); err != nil && !errors.Is(err, unix.ESRCH) {
				return fmt.Errorf("sched_setaffinity thread %d: %w", tid, err)
			}
			done[tid] = true
		}
		if !fresh {
			return nil
		}
	}
	return nil
}

// StartCmd starts cmd with its affinity set to cpus from its first
// instruction, so every thread it ever starts inherits it (an empty set:
// plain cmd.Start). It forks from a locked OS thread whose own affinity is
// set to cpus first; that thread is thrown away afterwards (its goroutine
// ends locked), so no other goroutine ever runs with the changed affinity.
func StartCmd(cmd *exec.Cmd, cpus CPUSet) error {
	if len(cpus) == 0 {
		return cmd.Start()
	}
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		// No UnlockOSThread: the thread ends with this goroutine.
		if err := unix.SchedSetaffinity(0, cpus.unix()); err != nil {
			errc <- fmt.Errorf("sched_setaffinity: %w", err)
			return
		}
		errc <- cmd.Start()
	}()
	return <-errc
}

// CheckAffinity checks that every thread of process pid may run on
// exactly cpus (from /proc/PID/task/*/status Cpus_allowed_list).
func CheckAffinity(pid int, cpus CPUSet) error {
	tids, err := tasks(pid)
	if err != nil {
		return err
	}
	want := cpus.String()
	for _, tid := range tids {
		got, err := allowedList(fmt.Sprintf("/proc/%d/task/%d/status", pid, tid))
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				continue // the thread ended
			}
			return err
		}
		if got != want {
			return fmt.Errorf("pid %d thread %d: Cpus_allowed_list %s, want %s", pid, tid, got, want)
		}
	}
	return nil
}

// AllowedCPUs is a process's Cpus_allowed_list from /proc/PID/status.
func AllowedCPUs(pid int) (string, error) {
	return allowedList(fmt.Sprintf("/proc/%d/status", pid))
}

func allowedList(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "Cpus_allowed_list:"); ok {
			return strings.TrimSpace(v), nil
		}
	}
	return "", fmt.Errorf("%s: no Cpus_allowed_list", path)
}

func tasks(pid int) ([]int, error) {
	ents, err := os.ReadDir(filepath.Join("/proc", strconv.Itoa(pid), "task"))
	if err != nil {
		return nil, err
	}
	var out []int
	for _, e := range ents {
		if tid, err := strconv.Atoi(e.Name()); err == nil {
			out = append(out, tid)
		}
	}
	return out, nil
}
