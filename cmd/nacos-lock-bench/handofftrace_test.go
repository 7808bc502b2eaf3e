package main

import (
	"bytes"
	"math"
	"runtime/trace"
	"strings"
	"testing"
)

// Stacks as the server's goroutines show them at each step (innermost
// first, trimmed to the frames the analysis looks for).
var (
	syncStack       = []string{"syscall.RawSyscall6", "nacos-lockd/replica/walfile.pwrite.func1", "nacos-lockd/replica/walfile.pwrite"}
	claimWriteStack = []string{"nacos-lockd/transport/h2grpc.(*sockWriter).writeNow.func1", "nacos-lockd/gateway.(*Server).Notify", "github.com/lni/dragonboat/v4.(*engine).applyWorkerMain"}
	claimWaitStack  = []string{"runtime.selectgo", "nacos-lockd/gateway.(*conn).awaitAhead", "nacos-lockd/gateway.(*Server).lock"}
	proposeStack    = []string{"github.com/lni/dragonboat/v4.(*engine).setStepReady", "github.com/lni/dragonboat/v4.(*NodeHost).Propose", "nacos-lockd/replica.(*groupCommit).submit"}
	readStack       = []string{"syscall.read", "net.(*conn).Read", "golang.org/x/net/http2.(*Framer).ReadFrame", "nacos-lockd/transport/h2grpc.(*conn).readLoop"}
	dispatchStack   = []string{"runtime.selectnbsend", "nacos-lockd/transport/h2grpc.(*Server).dispatch", "nacos-lockd/transport/h2grpc.(*conn).readLoop"}
	otherWrite      = []string{"nacos-lockd/transport/h2grpc.(*sockWriter).writeNow.func1", "nacos-lockd/gateway.(*Server).lock", "nacos-lockd/transport/h2grpc.(*Server).worker"} // a handler's reply
)

const (
	step, apply, claimer, releaser, reader = 1, 2, 3, 4, 5
)

// handoff appends one hand-off's transitions, starting with its log write
// at t (µs): the sync, the claim waiting during it, the claim's reply at
// apply, then the next release: read 40 µs before its proposal, handed to
// its handler (the read loop reads again at once, finding nothing), and
// proposed. Offsets in µs.
func handoff(ts []transition, t, sync, toClaim, claimWrite, toProposal, claimWait float64) []transition {
	ns := func(us float64) int64 { return int64(us * 1e3) }
	end := t + sync
	return append(ts,
		transition{at: ns(t), g: step, by: step, from: goRunning, to: goSyscall, stack: syncStack},
		transition{at: ns(end + claimWait), g: claimer, by: claimer, from: goRunning, to: goWaiting, stack: claimWaitStack},
		transition{at: ns(end), g: step, by: step, from: goSyscall, to: goRunnable},
		// A write by another goroutine is not a claim's reply.
		transition{at: ns(end + 1), g: releaser, by: releaser, from: goRunning, to: goSyscall, stack: otherWrite},
		transition{at: ns(end + 2), g: releaser, by: releaser, from: goSyscall, to: goRunning},
		transition{at: ns(end + toClaim), g: apply, by: apply, from: goRunning, to: goSyscall, stack: claimWriteStack},
		transition{at: ns(end + toClaim + claimWrite), g: apply, by: apply, from: goSyscall, to: goRunning},
		transition{at: ns(end + toClaim + claimWrite + toProposal - 40), g: reader, by: reader, from: goRunning, to: goSyscall, stack: readStack},
		transition{at: ns(end + toClaim + claimWrite + toProposal - 38), g: reader, by: reader, from: goSyscall, to: goRunning},
		transition{at: ns(end + toClaim + claimWrite + toProposal - 35), g: releaser, by: reader, from: goWaiting, to: goRunnable, byStack: dispatchStack},
		transition{at: ns(end + toClaim + claimWrite + toProposal - 34), g: reader, by: reader, from: goRunning, to: goSyscall, stack: readStack},
		transition{at: ns(end + toClaim + claimWrite + toProposal - 33), g: reader, by: reader, from: goSyscall, to: goRunning},
		transition{at: ns(end + toClaim + claimWrite + toProposal), g: step, by: releaser, from: goWaiting, to: goRunnable, byStack: proposeStack},
	)
}

func TestAnalyzeHandoffs(t *testing.T) {
	var ts []transition
	// Three hand-offs 400 µs apart: a 150 µs sync, the claim's reply 30 µs
	// after it, 20 µs long, the next proposal 180 µs later (10 µs before
	// the next write); the claim waits from 60 µs before the sync's end.
	for i := range 3 {
		ts = handoff(ts, 400*float64(i), 150, 30, 20, 180, -60)
	}
	// A fourth write whose claim came late (after the sync) and was not
	// answered at apply: no reply from the apply goroutine.
	ns := func(us float64) int64 { return int64(us * 1e3) }
	ts = append(ts,
		transition{at: ns(1200), g: step, by: step, from: goRunning, to: goSyscall, stack: syncStack},
		transition{at: ns(1340), g: step, by: step, from: goSyscall, to: goRunning},
		transition{at: ns(1355), g: claimer, by: claimer, from: goRunning, to: goWaiting, stack: claimWaitStack},
	)
	r := analyzeHandoffs(ts)
	if r.Syncs != 4 || r.AtApply != 3 {
		t.Fatalf("%d syncs, %d answered at apply; want 4 and 3", r.Syncs, r.AtApply)
	}
	check := func(name string, xs []float64, n int, want float64) {
		t.Helper()
		if len(xs) != n {
			t.Fatalf("%s: %d values, want %d: %v", name, len(xs), n, xs)
		}
		if got := quantile(xs, 0.5); math.Abs(got-want) > 0.01 {
			t.Fatalf("%s: median %.2f, want %.2f (%v)", name, got, want, xs)
		}
	}
	check("cycle", r.Cycle, 3, 400)
	check("sync", r.Sync, 4, 150)
	check("to claim write", r.ToClaimWrite, 3, 30)
	check("claim write", r.ClaimWrite, 3, 20)
	check("to proposal", r.ToProposal, 3, 180)
	check("read to proposal", r.ReadToProposal, 3, 40)
	check("to write", r.ToWrite, 3, 20) // 400 - (150 + 30 + 20 + 180)
	check("claim waits", r.ClaimWaits, 3, -60)
	// The late claim of the last write has no next write to bound it.
	var out bytes.Buffer
	r.print(&out)
	for _, want := range []string{"4 synced log writes, 3 followed by a claim answered at apply (75%)", "claim reply write (syscall)", "after their sync had ended: 0%"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("report lacks %q:\n%s", want, out.String())
		}
	}
}

func TestAnalyzeHandoffsWithoutLogWrites(t *testing.T) {
	r := analyzeHandoffs([]transition{{at: 1, g: 5, from: goRunning, to: goSyscall, stack: otherWrite}})
	if r.Syncs != 0 || len(r.Cycle) != 0 || !math.IsNaN(quantile(r.Cycle, 0.5)) {
		t.Fatalf("a trace with no log write: %+v", r)
	}
}

// readTransitions reads a real execution trace: this test's own, with a
// goroutine that blocks on a channel, so its wait and its wake-up (by the
// test's goroutine, with the sender's stack) are in it.
func TestReadTransitionsOfARealTrace(t *testing.T) {
	var buf bytes.Buffer
	if err := trace.Start(&buf); err != nil {
		t.Skipf("tracing is on already (go test -trace?): %v", err)
	}
	ch := make(chan struct{})
	done := make(chan struct{})
	go blockedReceiver(ch, done)
	for range 3 {
		ch <- struct{}{}
	}
	close(ch)
	<-done
	trace.Stop()

	ts, err := readTransitions(&buf)
	if err != nil {
		t.Fatal(err)
	}
	var waits, wakes int
	for _, tr := range ts {
		if tr.from == goRunning && tr.to == goWaiting && has(tr.stack, "blockedReceiver") {
			waits++
		}
		if tr.from == goWaiting && tr.to == goRunnable && has(tr.byStack, "TestReadTransitionsOfARealTrace") {
			wakes++
		}
	}
	if waits == 0 || wakes == 0 {
		t.Fatalf("%d transitions, %d waits in blockedReceiver, %d wake-ups by the test: want some of each", len(ts), waits, wakes)
	}
	if _, err := readTransitions(strings.NewReader("not a trace")); err == nil {
		t.Fatal("a file that is not a trace was read")
	}
}

//go:noinline
func blockedReceiver(ch <-chan struct{}, done chan<- struct{}) {
	for range ch {
	}
	close(done)
}
