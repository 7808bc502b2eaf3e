package chaos

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// baseSlackMs covers millisecond rounding of the stamped clock against the
// harness's nanosecond times.
const baseSlackMs = 3

// report is the outcome of checking one run; it is written to report.json.
type report struct {
	Dir       string         `json:"dir"`
	Seed      uint64         `json:"seed"`
	Nodes     int            `json:"nodes"`
	Duration  string         `json:"duration"`
	History   histStats      `json:"history"`
	Locks     map[string]int `json:"opsPerLock"`
	Faults    map[string]int `json:"faults"`
	Register  regSummary     `json:"register"`
	Replicas  string         `json:"replicas"`
	ClockFwd  int64          `json:"clockAllowanceFwdMs"`
	ClockBack int64          `json:"clockAllowanceBackMs"`
	Checker   string         `json:"checker"` // Ok, Illegal or Unknown
	// PerLock is porcupine's verdict on each lock's history, with its time.
	PerLock map[string]string `json:"perLock,omitempty"`
	// ClockSkewEffect is the same check with no clock allowance, when clock
	// faults were injected: not a violation (see README, Correctness).
	ClockSkewEffect string   `json:"clockSkewEffect,omitempty"`
	CheckTime       string   `json:"checkTime"`
	Violations      []string `json:"violations"`
	Warnings        []string `json:"warnings,omitempty"`
	Files           []string `json:"files,omitempty"` // visualisations of failing histories
}

type regSummary struct {
	Reads          int `json:"reads"`
	Writes         int `json:"writes"`
	AcceptedWrites int `json:"acceptedWrites"`
	StaleReads     int `json:"staleReadsRejected"`
	StaleWrites    int `json:"staleWritesRejected"`
}

// checkOptions tune a check.
type checkOptions struct {
	skew    clockSkew
	prefix  string        // of the files written for failing locks; default "violation-"
	timeout time.Duration // porcupine budget for the whole history; 0 = none
	faults  []faultEvent  // for annotations
	// perLock, when set, receives each lock's verdict and check time.
	perLock map[string]string
}

// checkHistory runs porcupine over h and the simple token checks. It
// writes a visualisation of each failing lock next to the logs.
func checkHistory(dir string, h *history, opt checkOptions) (verdict string, violations, files []string) {
	p := modelParams{skew: opt.skew, lostAt: map[int32]int64{}}
	for _, s := range h.byIdx {
		if s.lostAt != never {
			p.lostAt[s.idx] = s.lostAt
		}
	}
	model := lockModel(p)
	violations = append(violations, checkTokens(h)...)
	if len(h.ops) == 0 {
		return string(porcupine.Ok), violations, nil
	}
	// Check lock by lock, so one slow or failing lock does not hide the
	// verdict on the others, and each failure gets its own small file.
	parts := model.Partition(h.ops)
	verdict = string(porcupine.Ok)
	for _, part := range parts {
		lock := part[0].Metadata.(opMeta).Lock
		budget := opt.timeout
		if budget > 0 {
			budget /= time.Duration(len(parts))
		}
		began := time.Now()
		res, info := porcupine.CheckOperationsVerbose(model, part, budget)
		if opt.perLock != nil {
			opt.perLock[lock] = fmt.Sprintf("%s in %s (%d operations)", res, time.Since(began).Round(time.Millisecond), len(part))
		}
		switch res {
		case porcupine.Ok:
			continue
		case porcupine.Unknown:
			if verdict == string(porcupine.Ok) {
				verdict = string(porcupine.Unknown)
			}
			continue
		}
		verdict = string(porcupine.Illegal)
		prefix := opt.prefix
		if prefix == "" {
			prefix = "violation-"
		}
		base := prefix + strings.NewReplacer("/", "-", " ", "_").Replace(lock)
		name := base + ".html"
		// The shortest failing prefix makes a small picture and names the
		// moment the history stopped being explainable.
		if cut, prefix, pinfo, ok := shortestFailingPrefix(model, part, budget); ok {
			info = pinfo
			txt := base + ".txt"
			if err := os.WriteFile(filepath.Join(dir, txt), []byte(describeWindow(model, prefix, cut, h)), 0o644); err == nil {
				files = append(files, txt)
			}
		}
		info.AddAnnotations(annotations(h, opt.faults))
		if err := porcupine.VisualizePath(model, info, filepath.Join(dir, name)); err != nil {
			violations = append(violations, fmt.Sprintf("%s: not linearizable (visualisation failed: %v)", lock, err))
			continue
		}
		files = append(files, name)
		violations = append(violations, fmt.Sprintf("%s: history not linearizable against the lock model (%d operations); see %s",
			lock, len(part), name)+stuckAt(model, part, info))
	}
	return verdict, violations, files
}

// shortestFailingPrefix finds the earliest time t such that the operations
// invoked by t, with those still running at t made indeterminate, are
// already not linearizable. (That sub-history is linearizable whenever the
// whole one is, so the failure is real.)
func shortestFailingPrefix(model porcupine.Model, part []porcupine.Operation, budget time.Duration) (int64, []porcupine.Operation, porcupine.LinearizationInfo, bool) {
	ops := slices.Clone(part)
	sort.Slice(ops, func(i, j int) bool { return ops[i].Call < ops[j].Call })
	end := ops[len(ops)-1].Return
	var times []int64
	for _, op := range ops {
		times = append(times, op.Call)
		if op.Output.(lockOutput).Out != outUnknown {
			times = append(times, op.Return)
		}
	}
	slices.Sort(times)
	times = slices.Compact(times)
	prefix := func(t int64) []porcupine.Operation {
		var out []porcupine.Operation
		for _, op := range ops {
			if op.Call > t {
				break
			}
			if op.Return > t {
				in := op.Input.(lockInput)
				if in.Op == opNotify {
					continue // an observation still in flight: drop it
				}
				in.Ret = never
				op.Input, op.Output, op.Return = in, lockOutput{Out: outUnknown}, end
			}
			out = append(out, op)
		}
		return out
	}
	// The search gets the budget in all; each probe a quarter of it. A probe
	// that runs out counts as passing, so the prefix found always fails.
	deadline := time.Now().Add(budget)
	check := func(i int) (porcupine.CheckResult, porcupine.LinearizationInfo) {
		return porcupine.CheckOperationsVerbose(model, prefix(times[i]), max(budget/4, time.Second))
	}
	lo, hi := 0, len(times)-1 // the last time takes in everything, which fails
	for lo < hi && (budget == 0 || time.Now().Before(deadline)) {
		mid := (lo + hi) / 2
		if res, _ := check(mid); res == porcupine.Illegal {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	res, info := check(hi)
	if res != porcupine.Illegal {
		return 0, nil, info, false
	}
	return times[hi], prefix(times[hi]), info, true
}

// describeWindow lists the operations of the last seconds before the
// history stopped being linearizable.
func describeWindow(model porcupine.Model, prefix []porcupine.Operation, cut int64, h *history) string {
	var b strings.Builder
	fmt.Fprintf(&b, "The history up to %s is already not linearizable (operations still running then taken as indeterminate).\n", stamp(cut))
	fmt.Fprintf(&b, "Operations invoked in the 3 s before, by invocation time (o<N> = owner index; '?' = no reply):\n\n")
	for _, op := range prefix {
		if op.Call < cut-int64(3*time.Second) {
			continue
		}
		ret := "   ...    "
		if op.Output.(lockOutput).Out != outUnknown {
			ret = stamp(op.Return)
		}
		fmt.Fprintf(&b, "%s - %s  %-60s %s\n", stamp(op.Call), ret, model.DescribeOperation(op.Input, op.Output), op.Metadata.(opMeta).Detail)
	}
	return b.String()
}

// stuckAt names the operations of the longest linearizable prefix's
// frontier: where to start reading the visualisation.
func stuckAt(model porcupine.Model, part []porcupine.Operation, info porcupine.LinearizationInfo) string {
	partials := info.PartialLinearizationsOperations()
	if len(partials) == 0 || len(partials[0]) == 0 {
		return ""
	}
	longest := partials[0][0]
	for _, l := range partials[0] {
		if len(l) > len(longest) {
			longest = l
		}
	}
	// The first operation (by call time) that is not in the longest prefix.
	in := map[int64]bool{}
	for _, op := range longest {
		in[op.Call*31+op.Return] = true
	}
	var first *porcupine.Operation
	for i := range part {
		op := &part[i]
		if in[op.Call*31+op.Return] {
			continue
		}
		if first == nil || op.Call < first.Call {
			first = op
		}
	}
	if first == nil {
		return ""
	}
	last := ""
	if len(longest) > 0 {
		l := longest[len(longest)-1]
		last = fmt.Sprintf("; last linearized: %s at %s", model.DescribeOperation(l.Input, l.Output), stamp(l.Call))
	}
	return fmt.Sprintf("; stuck before: %s at %s (%s)%s", model.DescribeOperation(first.Input, first.Output), stamp(first.Call),
		first.Metadata.(opMeta).Detail, last)
}

func stamp(ns int64) string { return time.Unix(0, ns).UTC().Format("15:04:05.000") }

// annotations mark faults and session losses in the visualisation.
func annotations(h *history, faults []faultEvent) []porcupine.Annotation {
	var out []porcupine.Annotation
	for _, f := range faults {
		if f.Name == clockIntervalEvent {
			continue
		}
		end := f.End
		if end == 0 {
			end = h.end
		}
		out = append(out, porcupine.Annotation{Tag: "nemesis", Start: f.Start, End: end, Description: f.Name,
			Details: f.Detail, BackgroundColor: "#fde2e2"})
	}
	for _, s := range h.byIdx {
		if s.lostAt != never {
			out = append(out, porcupine.Annotation{ClientId: s.worker, Start: s.lostAt * 1e6,
				Description: s.name + " may be cleaned up", Details: s.lostWhy, BackgroundColor: "#e2ecfd"})
		}
	}
	return out
}

// checkTokens checks fencing tokens without the model: a token belongs to
// one session, and a grant that completed before another was invoked has
// the lower token.
func checkTokens(h *history) []string {
	var out []string
	byLock := map[string][]grantObs{}
	for _, g := range h.grants {
		byLock[g.lock] = append(byLock[g.lock], g)
	}
	locks := make([]string, 0, len(byLock))
	for l := range byLock {
		locks = append(locks, l)
	}
	slices.Sort(locks)
	for _, l := range locks {
		gs := byLock[l]
		owner := map[uint64]string{}
		for _, g := range gs {
			if o, ok := owner[g.token]; ok && o != g.sess {
				out = append(out, fmt.Sprintf("%s: token %d granted to two sessions, %s and %s", l, g.token, o, g.sess))
			}
			owner[g.token] = g.sess
		}
		sort.Slice(gs, func(i, j int) bool { return gs[i].ret < gs[j].ret })
		// For each grant, the highest token among grants that completed
		// before it was invoked must be lower (or its own, for a claim or
		// re-entry).
		maxBefore := uint64(0)
		j := 0
		byCall := slices.Clone(gs)
		sort.Slice(byCall, func(a, b int) bool { return byCall[a].call < byCall[b].call })
		var maxG grantObs
		for _, g := range byCall {
			for j < len(gs) && gs[j].ret < g.call {
				if gs[j].token > maxBefore {
					maxBefore, maxG = gs[j].token, gs[j]
				}
				j++
			}
			if g.token < maxBefore || (g.token == maxBefore && maxG.sess != g.sess) {
				out = append(out, fmt.Sprintf("%s: token %d granted to %s at %s, after token %d had been granted to %s at %s",
					l, g.token, g.sess, stamp(g.ret), maxBefore, maxG.sess, stamp(maxG.ret)))
			}
		}
	}
	return out
}

// faultEvent is one line of nemesis.jsonl.
type faultEvent struct {
	Name   string `json:"name"`
	Detail string `json:"detail"`
	Start  int64  `json:"start"` // ns
	End    int64  `json:"end"`   // ns, 0 while active
	// ClockMs is a clock offset (clock-interval events: node Node had it
	// from Start to End).
	ClockMs int64 `json:"clockMs,omitempty"`
	Node    int   `json:"node,omitempty"`
}

func readFaults(dir string) ([]faultEvent, error) {
	var out []faultEvent
	err := readJSONL(filepath.Join(dir, "nemesis.jsonl"), func(f faultEvent) { out = append(out, f) })
	if os.IsNotExist(err) {
		return nil, nil
	}
	return out, err
}

// clockIntervalEvent is the nemesis's record of one node's clock offset
// over an interval; it is bookkeeping for the model, not a fault.
const clockIntervalEvent = "clock-interval"

// hookLagMs covers the time a node takes to pick up a changed hook file.
const hookLagMs = 300

// clockAllowance turns the clock intervals into the model's skew, and
// reports the largest forward and backward offsets.
func clockAllowance(faults []faultEvent) (skew clockSkew, fwd, back int64) {
	skew.base = baseSlackMs
	for _, f := range faults {
		if f.Name != clockIntervalEvent || f.ClockMs == 0 {
			continue
		}
		end := f.End
		if end == 0 {
			end = 1 << 62
		}
		skew.iv = append(skew.iv, skewInterval{start: floorMs(f.Start), end: ceilMs(end) + hookLagMs, off: f.ClockMs})
		fwd = max(fwd, f.ClockMs)
		back = max(back, -f.ClockMs)
	}
	return skew, fwd, back
}

func summarizeRegister(st regStats) regSummary {
	acc := 0
	for _, n := range st.AcceptedWritesByKey {
		acc += n
	}
	return regSummary{Reads: st.Reads, Writes: st.Writes, AcceptedWrites: acc, StaleReads: st.StaleReads, StaleWrites: st.StaleWrites}
}

// registerFromLog rebuilds the register's verdicts from register.jsonl
// (for rechecks): the violations it recorded are re-derived the same way.
func registerFromLog(dir string) (regStats, error) {
	r := &fencedRegister{cells: map[string]*regCell{}, stats: regStats{StaleWriteSessions: map[string]int{}, AcceptedWritesByKey: map[string]int{}}}
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		return regStats{}, err
	}
	defer devnull.Close()
	r.log = devnull
	err = readJSONL(filepath.Join(dir, "register.jsonl"), func(e regEvent) {
		r.do(e.Op, regRequest{Lock: e.Lock, Token: e.Token, Sess: e.Sess, Expect: e.Expect, Value: e.Value})
	})
	if os.IsNotExist(err) {
		err = nil
	}
	return r.snapshot(), err
}

// checkRun checks a run directory and writes report.json.
func checkRun(dir string, rep report, reg regStats, timeout time.Duration) (report, error) {
	faults, err := readFaults(dir)
	if err != nil {
		return rep, err
	}
	h, err := loadHistory(dir)
	if err != nil {
		return rep, err
	}
	rep.Dir = dir
	rep.History = h.stats
	rep.Locks = map[string]int{}
	for _, op := range h.ops {
		rep.Locks[op.Metadata.(opMeta).Lock]++
	}
	rep.Faults = map[string]int{}
	for _, f := range faults {
		if f.Name != clockIntervalEvent {
			rep.Faults[f.Name]++
		}
	}
	skew, fwd, back := clockAllowance(faults)
	rep.ClockFwd, rep.ClockBack = fwd, back
	start := time.Now()
	rep.PerLock = map[string]string{}
	verdict, violations, files := checkHistory(dir, h, checkOptions{skew: skew, timeout: timeout, faults: faults, perLock: rep.PerLock})
	rep.CheckTime = time.Since(start).Round(time.Millisecond).String()
	rep.Checker, rep.Files = verdict, files
	rep.Violations = append(rep.Violations, violations...)
	if verdict == string(porcupine.Unknown) {
		rep.Warnings = append(rep.Warnings, fmt.Sprintf("porcupine did not finish within its time budget (%v for all locks; CHAOS_CHECK_TIMEOUT) for some lock: not proven, not refuted", timeout))
	}
	if len(skew.iv) > 0 {
		// The verdict above allows for the clock faults. Checked again as if
		// clocks were perfect, a failure shows where a fault shortened (or
		// stretched) a lease in real time: what a client that trusts its
		// lease without fencing would have suffered.
		strict, _, sf := checkHistory(dir, h, checkOptions{skew: clockSkew{base: baseSlackMs}, timeout: min(timeout, time.Minute),
			faults: faults, prefix: "clockskew-"})
		rep.ClockSkewEffect = "none: the history is linearizable even with perfect-clock lease bounds"
		switch strict {
		case string(porcupine.Ok):
		case string(porcupine.Unknown):
			rep.ClockSkewEffect = "not decided within its budget: no lock shown to see a lease end early or late in real time"
		default:
			rep.ClockSkewEffect = fmt.Sprintf("%s with perfect-clock lease bounds: %d lock(s) saw a lease end early or late in real time (%s)",
				strict, len(sf)/2, strings.Join(sf, ", "))
		}
	}
	rep.Register = summarizeRegister(reg)
	rep.Violations = append(rep.Violations, reg.Violations...)
	b, _ := json.MarshalIndent(rep, "", "  ")
	if err := os.WriteFile(filepath.Join(dir, "report.json"), b, 0o644); err != nil {
		return rep, err
	}
	return rep, nil
}
