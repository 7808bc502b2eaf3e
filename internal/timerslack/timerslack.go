// Package timerslack sets how late the kernel may wake the threads of
// this process from a timed sleep (Linux's timer slack), for every thread.
//
// Why a lock server cares: while a Go process is busy, the runtime's
// monitor thread (sysmon) sleeps 20 µs at a time, and it stays at that
// pace as long as it keeps finding a thread blocked in a system call to
// take the processor from, which nacos-lockd's log sync gives it on every
// Raft entry. The kernel's default slack (50 µs) lets each such sleep end
// anywhere in 20-70 µs, so the monitor woke ~6,000 times a second under
// W2 c=16, and on the virtual machines this project measures on a timed
// sleep and wake-up costs ~24 µs of CPU: a fifth of the server's CPU went
// to waking the monitor. With 500 µs of slack the kernel folds those
// wake-ups into others (the monitor's switches fell ~6x), and the server
// spent 0.78-0.81x the CPU per lock operation, pinned, against the build
// before it (W1 c=1, W1 c=64 at 1500 pairs/s, W2 c=2, 16 and 64; W2 did
// 1.09-1.10x the hand-offs/s), and 0.94x in W1 c=64 closed loop (0.98x
// the pairs/s: the monitor now takes a processor back from a thread
// blocked in the log's sync later, so less work overlaps it). 200 µs
// saved less, 1 ms no more. On a later machine type (AMD EPYC, December
// 2026) 2 ms measured no worse than 500 µs anywhere and better in most
// (ab, pinned, B/A medians): W2 c=16 1.07x and 1.08x the hand-offs/s at 0.93x and 0.95x
// CPU per hand-off (8 and 12 rounds), W1 c=64 1.01x and 1.08x the pairs/s
// at 0.97x and 0.92x CPU, W1 c=1 1.05x and 1.00x at 0.93x and 0.96x, W1 at
// 1500 pairs/s 1.00x and 0.99x CPU, and three nodes on one core at W1 c=64
// 1.07x at 0.91x (4 rounds); 1 ms had measured level there. Only the p99 at
// 1500 pairs/s moved both ways (1.19x, then 0.86x). So the default is 2
// ms. The price is that every timer of the process may fire up to the
// slack late: Raft ticks (10 ms on a single node, 5 ms in a cluster with
// the default election timeout; an idle node's wake-ups fell from 346 to
// 256 a second), request deadlines, the renew window; none of them is
// that precise.
//
// A thread's slack is inherited by the threads it creates and kept across
// execve, but Go has started its threads before main runs. So Ensure sets
// the calling thread's slack and executes the program again on that thread
// (the same process id, arguments and environment), once.
package timerslack

import (
	"errors"
	"time"
)

// reexecMark is set in the environment of the re-executed program, so
// that it never executes itself twice.
const reexecMark = "NACOS_LOCKD_TIMER_SLACK_REEXEC"

// ErrNotKept is Ensure's error when the slack it set before executing the
// program again is not the one the program runs with.
var ErrNotKept = errors.New("timer slack not kept across exec")

// Ensure makes every thread of this process run with timer slack d; 0
// leaves the process as it was started, and so does any d on a system
// other than Linux. If the process does not run with
// d yet, Ensure executes the program again and does not return, unless
// that fails: then it returns the error and the process goes on with the
// slack it had. It must be called before the program has anything to lose
// by starting again (open files are closed on exec, listeners dropped).
func Ensure(d time.Duration) error {
	if d <= 0 {
		return nil
	}
	return ensure(d)
}

// Current reports the calling thread's timer slack.
func Current() (time.Duration, error) { return current() }

// OfThreads reports the timer slack of every thread of process pid (0:
// this one), for checking that Ensure reached them all.
func OfThreads(pid int) ([]time.Duration, error) { return ofThreads(pid) }
