package timerslack

import (
	"fmt"
	"os"
	"runtime"
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
