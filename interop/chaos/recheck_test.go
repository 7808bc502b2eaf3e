package chaos

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
	"time"
)

// TestRecheck checks a kept run directory again (after a model change, or
// to read a failure): CHAOS_RECHECK=<dir> go test -run TestRecheck ./interop/chaos
func TestRecheck(t *testing.T) {
	dir := os.Getenv("CHAOS_RECHECK")
	if dir == "" {
		t.Skip("set CHAOS_RECHECK to a run directory")
	}
	reg, err := registerFromLog(dir)
	if err != nil {
		t.Fatal(err)
	}
	timeout := 5 * time.Minute
	if v := os.Getenv("CHAOS_CHECK_TIMEOUT"); v != "" {
		if d, err := time.ParseDuration(v); err == nil {
			timeout = d
		}
	}
	rep, err := checkRun(dir, report{Replicas: "not checked (recheck)"}, reg, timeout)
	if err != nil {
		t.Fatal(err)
	}
	logReport(t, rep)
	if len(rep.Violations) > 0 {
		t.Errorf("%d violation(s) in %s", len(rep.Violations), dir)
	}
}

// logReport prints a run's summary.
func logReport(t testing.TB, rep report) {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "operations checked: %d (%s), indeterminate %d, notifications %d, sessions %d (%d cleaned up by a server), owners that moved to a new session %d\n",
		rep.History.Ops, mapText(rep.History.ByOp), rep.History.Indeterminate, rep.History.Notifications, rep.History.Sessions, rep.History.SessionsLost,
		rep.History.OwnersMoved)
	fmt.Fprintf(&b, "outcomes: %s\n", mapText(rep.History.ByOutcome))
	fmt.Fprintf(&b, "per lock: %s\n", mapText(rep.Locks))
	total := 0
	for _, n := range rep.Faults {
		total += n
	}
	fmt.Fprintf(&b, "faults injected: %d (%s)\n", total, mapText(rep.Faults))
	fmt.Fprintf(&b, "clock allowance: +%d ms / -%d ms (plus %d ms rounding)\n", rep.ClockFwd, rep.ClockBack, baseSlackMs)
	fmt.Fprintf(&b, "fenced register: %d reads, %d writes, %d accepted writes, %d stale reads and %d stale writes rejected\n",
		rep.Register.Reads, rep.Register.Writes, rep.Register.AcceptedWrites, rep.Register.StaleReads, rep.Register.StaleWrites)
	fmt.Fprintf(&b, "replicas: %s\n", rep.Replicas)
	fmt.Fprintf(&b, "linearizability (porcupine): %s in %s\n", rep.Checker, rep.CheckTime)
	locks := make([]string, 0, len(rep.PerLock))
	for l := range rep.PerLock {
		locks = append(locks, l)
	}
	sort.Strings(locks)
	for _, l := range locks {
		fmt.Fprintf(&b, "  %s: %s\n", l, rep.PerLock[l])
	}
	if rep.ClockSkewEffect != "" {
		fmt.Fprintf(&b, "same history with perfect-clock lease bounds: %s\n", rep.ClockSkewEffect)
	}
	fmt.Fprintf(&b, "violations: %d\n", len(rep.Violations))
	for _, v := range rep.Violations {
		fmt.Fprintf(&b, "  VIOLATION %s\n", v)
	}
	for _, w := range rep.Warnings {
		fmt.Fprintf(&b, "  warning: %s\n", w)
	}
	t.Log("\n" + b.String())
}

func mapText(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}
