package timerslack

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

func current() (time.Duration, error) {
	ns, err := unix.PrctlRetInt(unix.PR_GET_TIMERSLACK, 0, 0, 0, 0)
	if err != nil {
		return 0, fmt.Errorf("read timer slack: %w", err)
	}
	return time.Duration(ns), nil
}

func ensure(d time.Duration) error {
	// prctl and execve on one thread: the thread that executes the
	// program is the one whose slack the new program starts with.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	now, err := current()
	if err != nil {
		return err
	}
	_, again := os.LookupEnv(reexecMark)
	if again {
		os.Unsetenv(reexecMark)
	}
	if now == d {
		return nil
	}
	if again {
		return fmt.Errorf("%w: want %s, have %s", ErrNotKept, d, now)
	}
	if err := unix.Prctl(unix.PR_SET_TIMERSLACK, uintptr(d.Nanoseconds()), 0, 0, 0); err != nil {
		return fmt.Errorf("set timer slack %s: %w", d, err)
	}
	// /proc/self/exe, not a path: it is this program even if its file
	// has been replaced or removed since it started (an upgrade).
	env := append(os.Environ(), reexecMark+"=1")
	if err := unix.Exec("/proc/self/exe", os.Args, env); err != nil {
		return fmt.Errorf("execute again with timer slack %s: %w", d, err)
	}
	return nil // not reached
}

func ofThreads(pid int) ([]time.Duration, error) {
	proc := "self"
	if pid != 0 {
		proc = strconv.Itoa(pid)
	}
	tasks, err := filepath.Glob(filepath.Join("/proc", proc, "task", "*"))
	if err != nil || len(tasks) == 0 {
		return nil, fmt.Errorf("threads of process %s: %v", proc, err)
	}
	var out []time.Duration
	for _, task := range tasks {
		// By thread id at the top of /proc: the task directories have no
		// timerslack_ns.
		b, err := os.ReadFile(filepath.Join("/proc", filepath.Base(task), "timerslack_ns"))
		if err != nil {
			return nil, fmt.Errorf("timer slack of thread %s: %w", filepath.Base(task), err)
		}
		ns, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("timer slack of thread %s: %w", filepath.Base(task), err)
		}
		out = append(out, time.Duration(ns))
	}
	return out, nil
}
