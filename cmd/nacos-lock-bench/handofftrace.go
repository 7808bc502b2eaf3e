package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"

	"golang.org/x/exp/trace"
)

// handoff-trace reads a Go execution trace of nacos-lockd taken while it
// serves W2 (one key, every client queued on it) and times each hand-off's
// steps from the server's own goroutines: the Raft log's synced write (the
// sync), the claim's reply written at apply, and the next release's
// proposal. A median of a step over a second's thousands of hand-offs
// moves by a microsecond or two between runs, where ab's hand-offs/s move
// by several percent: it shows where a change acts, ab whether it pays.
//
//	curl -o trace.out 'http://127.0.0.1:8848/debug/pprof/trace?seconds=1'   (server started with --pprof)
//	nacos-lock-bench handoff-trace trace.out
//
// It finds the steps by the functions on their goroutines' stacks, so it
// follows the code it names: replica/walfile's write, gateway's claim
// wait (conn.awaitAhead), the claim's reply from Raft's apply goroutine
// (h2grpc's writeNow under dragonboat's applyWorkerMain) and group
// commit's proposal (replica.groupCommit waking dragonboat's step worker).
func runHandoffTrace(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("handoff-trace", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: nacos-lock-bench handoff-trace TRACE (a Go execution trace of nacos-lockd under W2)")
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return errors.New("handoff-trace: one trace file")
	}
	f, err := os.Open(fs.Arg(0))
	if err != nil {
		return fmt.Errorf("handoff-trace: %w", err)
	}
	defer f.Close()
	ts, err := readTransitions(f)
	if err != nil {
		return fmt.Errorf("handoff-trace: %s: %w", fs.Arg(0), err)
	}
	rep := analyzeHandoffs(ts)
	if rep.Syncs == 0 {
		return errors.New("handoff-trace: no Raft log write in the trace (is it nacos-lockd's, with its own log, under load?)")
	}
	rep.print(stdout)
	return nil
}

// goState is a goroutine's state in a transition.
type goState uint8

const (
	goOther goState = iota
	goRunnable
	goRunning
	goWaiting
	goSyscall
)

// transition is one goroutine's state change: at (ns), by the goroutine
// that made it (0: the runtime), with the functions on the changed
// goroutine's stack (stack, innermost first) and on the maker's (byStack).
type transition struct {
	at       int64
	g, by    uint64
	from, to goState
	stack    []string
	byStack  []string
}

func readTransitions(r io.Reader) ([]transition, error) {
	tr, err := trace.NewReader(r)
	if err != nil {
		return nil, err
	}
	var ts []transition
	for {
		ev, err := tr.ReadEvent()
		if errors.Is(err, io.EOF) {
			return ts, nil
		}
		if err != nil {
			return nil, err
		}
		if ev.Kind() != trace.EventStateTransition {
			continue
		}
		st := ev.StateTransition()
		if st.Resource.Kind != trace.ResourceGoroutine {
			continue
		}
		from, to := st.Goroutine()
		ts = append(ts, transition{
			at: int64(ev.Time()), g: uint64(st.Resource.Goroutine()), by: goID(ev.Goroutine()),
			from: stateOf(from), to: stateOf(to), stack: funcs(st.Stack), byStack: funcs(ev.Stack()),
		})
	}
}

func goID(g trace.GoID) uint64 {
	if g == trace.NoGoroutine {
		return 0
	}
	return uint64(g)
}

func stateOf(s trace.GoState) goState {
	switch s {
	case trace.GoRunnable:
		return goRunnable
	case trace.GoRunning:
		return goRunning
	case trace.GoWaiting:
		return goWaiting
	case trace.GoSyscall:
		return goSyscall
	}
	return goOther
}

func funcs(s trace.Stack) []string {
	var out []string
	for f := range s.Frames() {
		out = append(out, f.Func)
	}
	return out
}

// has reports whether a function whose name contains each of parts is on
// stack (all of them, in any frames).
func has(stack []string, parts ...string) bool {
	for _, p := range parts {
		if !slices.ContainsFunc(stack, func(f string) bool { return strings.Contains(f, p) }) {
			return false
		}
	}
	return true
}

// handoffReport holds the steps' durations (µs), each over the hand-offs
// in which the step was found.
type handoffReport struct {
	Syncs int // the log's synced writes
	// AtApply counts the syncs after which a claim's reply was written by
	// Raft's apply goroutine before the next sync: the hand-offs whose
	// claim came in time to be answered the moment its grant applied.
	AtApply int
	// Sync is the log's write; Cycle the time from one write's start to
	// the next's.
	Sync, Cycle []float64
	// ToClaimWrite runs from a sync's end to the claim reply's write
	// (Raft's apply, the table, Notify); ClaimWrite is that write's
	// system call (the loopback and waking the client).
	ToClaimWrite, ClaimWrite []float64
	// ClaimWaits is when the claim began to wait for its grant, from the
	// end of the sync that carried the grant: negative, it came during
	// the sync (as it should: pushed ahead of the commit).
	ClaimWaits []float64
	// ToProposal runs from the claim reply written to the next entry's
	// proposal: the client's turn (its read, its release) and the
	// release's way in (read, decode, the push ahead, group commit).
	// ToWrite runs from that proposal to the log's write of it
	// (dragonboat's step worker, the log's encoding).
	ToProposal, ToWrite []float64
	// ReadToProposal is the server's part of ToProposal: from the read
	// that brought the release in (its connection's read loop) to its
	// proposal (HTTP/2 and JSON decoding, the push ahead, group commit).
	ReadToProposal []float64
}

// analyzeHandoffs finds the hand-offs' steps in ts (in time order).
func analyzeHandoffs(ts []transition) handoffReport {
	type span struct {
		start, end int64
		sync       bool // the log's write, not a claim's reply
	}
	var syncs, claimWrites []span
	var claimWaits, proposals []int64
	lastRead := map[uint64]int64{}   // each read loop's latest read (its start)
	dispatched := map[uint64]int64{} // each handler's latest request: the read that brought it in
	inbound := map[int64]int64{}     // a proposal's time -> since its request's read
	open := map[uint64]*span{}       // syncs and claim writes in progress, by goroutine
	for _, t := range ts {
		switch {
		case t.from == goRunning && t.to == goSyscall && has(t.stack, "replica/walfile.pwrite"):
			open[t.g] = &span{start: t.at, sync: true}
		case t.from == goRunning && t.to == goSyscall && has(t.stack, "writeNow", "applyWorkerMain"):
			open[t.g] = &span{start: t.at}
		case t.from == goSyscall && open[t.g] != nil:
			s := open[t.g]
			s.end = t.at
			if s.sync {
				syncs = append(syncs, *s)
			} else {
				claimWrites = append(claimWrites, *s)
			}
			delete(open, t.g)
		case t.from == goRunning && t.to == goWaiting && has(t.stack, "awaitAhead"):
			claimWaits = append(claimWaits, t.at)
		case t.to == goRunnable && has(t.byStack, "setStepReady", "replica.(*groupCommit)"):
			proposals = append(proposals, t.at)
			// The proposer's request: the read that brought it in.
			if read, ok := dispatched[t.by]; ok {
				inbound[t.at] = t.at - read
			}
		}
		switch {
		case t.from == goRunning && t.to == goSyscall && has(t.stack, "h2grpc.(*conn).readLoop"):
			lastRead[t.g] = t.at
		case t.to == goRunnable && has(t.byStack, "h2grpc.(*Server).dispatch"):
			if read, ok := lastRead[t.by]; ok {
				dispatched[t.g] = read
			}
		}
	}
	var rep handoffReport
	rep.Syncs = len(syncs)
	us := func(ns int64) float64 { return float64(ns) / 1e3 }
	next := func(xs []int64, after int64) (int64, bool) {
		i, _ := slices.BinarySearch(xs, after)
		if i == len(xs) {
			return 0, false
		}
		return xs[i], true
	}
	cwStarts := make([]int64, len(claimWrites))
	for i, c := range claimWrites {
		cwStarts[i] = c.start
	}
	for i, s := range syncs {
		rep.Sync = append(rep.Sync, us(s.end-s.start))
		if i+1 == len(syncs) {
			break
		}
		following := syncs[i+1]
		rep.Cycle = append(rep.Cycle, us(following.start-s.start))
		// The claim waiting during this sync (or after it, until the next).
		if w, ok := next(claimWaits, s.start); ok && w < following.start {
			rep.ClaimWaits = append(rep.ClaimWaits, us(w-s.end))
		}
		j, _ := slices.BinarySearch(cwStarts, s.end)
		if j == len(claimWrites) || claimWrites[j].start >= following.start {
			continue
		}
		cw := claimWrites[j]
		rep.AtApply++
		rep.ToClaimWrite = append(rep.ToClaimWrite, us(cw.start-s.end))
		rep.ClaimWrite = append(rep.ClaimWrite, us(cw.end-cw.start))
		if p, ok := next(proposals, cw.end); ok && p < following.start {
			rep.ToProposal = append(rep.ToProposal, us(p-cw.end))
			rep.ToWrite = append(rep.ToWrite, us(following.start-p))
			if in, ok := inbound[p]; ok {
				rep.ReadToProposal = append(rep.ReadToProposal, us(in))
			}
		}
	}
	return rep
}

// quantile is the q-quantile (0..1) of xs by the nearest rank, or NaN.
func quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

func (r handoffReport) print(w io.Writer) {
	fmt.Fprintf(w, "%d synced log writes, %d followed by a claim answered at apply (%.0f%%)\n",
		r.Syncs, r.AtApply, 100*float64(r.AtApply)/float64(r.Syncs))
	late := 0
	for _, x := range r.ClaimWaits {
		if x > 0 {
			late++
		}
	}
	rows := []struct {
		name string
		xs   []float64
	}{
		{"cycle (log write to the next)", r.Cycle},
		{"log write (sync)", r.Sync},
		{"sync end -> claim reply write", r.ToClaimWrite},
		{"claim reply write (syscall)", r.ClaimWrite},
		{"claim written -> next proposal", r.ToProposal},
		{"  of which release read -> proposal", r.ReadToProposal},
		{"proposal -> log write", r.ToWrite},
		{"claim waits, from its sync's end", r.ClaimWaits},
	}
	fmt.Fprintf(w, "%-34s %6s %8s %8s %8s\n", "step (µs)", "n", "p25", "p50", "p75")
	for _, row := range rows {
		fmt.Fprintf(w, "%-34s %6d %8.1f %8.1f %8.1f\n", row.name, len(row.xs),
			quantile(row.xs, 0.25), quantile(row.xs, 0.5), quantile(row.xs, 0.75))
	}
	if len(r.ClaimWaits) > 0 {
		fmt.Fprintf(w, "claims that began to wait after their sync had ended: %.0f%%\n", 100*float64(late)/float64(len(r.ClaimWaits)))
	}
}
