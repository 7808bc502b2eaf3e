//go:build linux

package timerslack

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// helperSlack, when set, makes the test binary a program that calls
// Ensure with it and prints its process id and every thread's slack.
const helperSlack = "TIMERSLACK_TEST_HELPER"

func TestMain(m *testing.M) {
	if v := os.Getenv(helperSlack); v != "" {
		os.Exit(helper(v))
	}
	os.Exit(m.Run())
}

func helper(v string) int {
	d, err := time.ParseDuration(v)
	if err != nil {
		fmt.Println("bad duration:", err)
		return 2
	}
	fmt.Printf("start pid=%d\n", os.Getpid())
	if err := Ensure(d); err != nil {
		fmt.Println("ensure:", err)
		return 1
	}
	slacks, err := OfThreads(0)
	if err != nil {
		fmt.Println("threads:", err)
		return 1
	}
	for _, d := range slacks {
		fmt.Printf("thread slack=%d\n", d.Nanoseconds())
	}
	_, marked := os.LookupEnv(reexecMark)
	fmt.Printf("marked=%v\n", marked)
	return 0
}

func runHelper(t *testing.T, slack string) (pids []int, slacks []int64, marked string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperSlack+"="+slack)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helper: %v\n%s", err, out)
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "start pid="):
			pid, _ := strconv.Atoi(strings.TrimPrefix(line, "start pid="))
			pids = append(pids, pid)
		case strings.HasPrefix(line, "thread slack="):
			ns, err := strconv.ParseInt(strings.TrimPrefix(line, "thread slack="), 10, 64)
			if err != nil {
				t.Fatalf("helper printed %q", line)
			}
			slacks = append(slacks, ns)
		case strings.HasPrefix(line, "marked="):
			marked = strings.TrimPrefix(line, "marked=")
		}
	}
	return pids, slacks, marked
}

// Ensure starts the program once more, as the same process, and every
// thread then runs with the slack; the mark that prevents a second start
// is gone from the environment the program goes on with.
func TestEnsureSetsEveryThread(t *testing.T) {
	pids, slacks, marked := runHelper(t, "345µs")
	if len(pids) != 2 || pids[0] != pids[1] {
		t.Fatalf("want two starts of one process, got pids %v", pids)
	}
	if len(slacks) == 0 {
		t.Fatal("no thread slack printed")
	}
	for _, ns := range slacks {
		if ns != 345_000 {
			t.Fatalf("thread slacks %v, want 345000 each", slacks)
		}
	}
	if marked != "false" {
		t.Fatalf("re-exec mark still in the environment: %s", marked)
	}
}

// 0 leaves the process alone: one start, the slack it was started with.
func TestEnsureZeroLeavesTheProcess(t *testing.T) {
	own, err := Current()
	if err != nil {
		t.Fatal(err)
	}
	pids, slacks, _ := runHelper(t, "0s")
	if len(pids) != 1 {
		t.Fatalf("want one start, got pids %v", pids)
	}
	for _, ns := range slacks {
		if ns != own.Nanoseconds() {
			t.Fatalf("thread slacks %v, want this test's own %d", slacks, own.Nanoseconds())
		}
	}
}

// A program started with the mark but without the slack (the kernel did
// not keep it) reports that instead of executing itself again.
func TestEnsureStopsAfterOneReexec(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperSlack+"=777µs", reexecMark+"=1")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), ErrNotKept.Error()) || strings.Count(string(out), "start pid=") != 1 {
		t.Fatalf("want one start and %q, got err %v:\n%s", ErrNotKept, err, out)
	}
}
