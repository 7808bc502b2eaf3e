package chaos

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The whole checking pipeline on small hand-made run directories: history
// files, a server log and the register log, as a run leaves them.

type runWriter struct {
	t    *testing.T
	dir  string
	t0   time.Time
	recs []record
	id   int64
}

func newRunWriter(t *testing.T) *runWriter {
	return &runWriter{t: t, dir: t.TempDir(), t0: time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)}
}

func (w *runWriter) at(ms int) int64 {
	return w.t0.Add(time.Duration(ms) * time.Millisecond).UnixNano()
}

func (w *runWriter) sess(ms int, name, conn string) {
	w.recs = append(w.recs, record{T: "sess", Ts: w.at(ms), Proc: 1, Sess: name, Conn: conn})
}

// op records one operation: inv at from, ret at to (to < 0: no reply).
func (w *runWriter) op(from, to int, sess, owner, op string, lease, wait int64, ret record) {
	w.id++
	w.recs = append(w.recs, record{T: "inv", Ts: w.at(from), Proc: 1, ID: w.id, Sess: sess, Owner: owner, Op: op,
		Lock: "NON_REENTRANT/k", Lease: lease, Wait: wait})
	if to >= 0 {
		ret.T, ret.Ts, ret.Proc, ret.ID, ret.Sess = "ret", w.at(to), 1, w.id, sess
		w.recs = append(w.recs, ret)
	}
}

func grantedRet(tok uint64) record {
	return record{Code: 200, Result: true, HasLR: true, Count: 1, Pos: -1, Token: tok}
}

func heldRet() record {
	return record{Code: 200, HasLR: true, Pos: -1, Msg: msgHeld}
}

func (w *runWriter) write(serverLog string) string {
	f, err := os.Create(filepath.Join(w.dir, "history-p1.jsonl"))
	if err != nil {
		w.t.Fatal(err)
	}
	for _, r := range w.recs {
		b, _ := json.Marshal(r)
		f.Write(append(b, '\n'))
	}
	f.Close()
	if err := os.WriteFile(filepath.Join(w.dir, "node0-start1.log"), []byte(serverLog), 0o644); err != nil {
		w.t.Fatal(err)
	}
	return w.dir
}

func TestCheckRunAcceptsLegalRun(t *testing.T) {
	w := newRunWriter(t)
	w.sess(0, "p1.w0.s1", "1764493200000_10.0.0.254_5000_7")
	w.sess(0, "p1.w1.s1", "1764493200000_10.0.0.254_5001_7")
	w.op(10, 20, "p1.w0.s1", "a", "ACQUIRE", 60000, 0, grantedRet(5))
	w.op(30, 40, "p1.w1.s1", "b", "ACQUIRE", 60000, 0, heldRet())
	// a's connection closes; the server logs it and may clean up after.
	w.op(3000, 3010, "p1.w1.s1", "b", "ACQUIRE", 60000, 0, grantedRet(9))
	log := `{"level":"info","conn_id":"1764493200000_10.0.0.254_5000_7","reason":"stream closed","time":"2026-11-30T09:00:01Z","message":"connection closed"}` + "\n"
	dir := w.write(log)
	rep, err := checkRun(dir, report{}, regStats{}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Violations) > 0 || rep.Checker != "Ok" {
		t.Fatalf("legal run judged %s: %v", rep.Checker, rep.Violations)
	}
	if rep.History.SessionsLost != 1 {
		t.Fatalf("the closed connection was not read from the server log: %+v", rep.History)
	}
}

func TestCheckRunReportsDoubleGrant(t *testing.T) {
	w := newRunWriter(t)
	w.sess(0, "p1.w0.s1", "1764493200000_10.0.0.254_5000_7")
	w.sess(0, "p1.w1.s1", "1764493200000_10.0.0.254_5001_7")
	w.op(10, 20, "p1.w0.s1", "a", "ACQUIRE", 60000, 0, grantedRet(5))
	w.op(30, 40, "p1.w1.s1", "b", "ACQUIRE", 60000, 0, heldRet())
	w.op(50, 60, "p1.w1.s1", "b", "ACQUIRE", 60000, 0, grantedRet(9)) // a still holds it
	w.op(70, -1, "p1.w0.s1", "a", "RELEASE", 0, 0, record{})
	dir := w.write("")
	rep, err := checkRun(dir, report{}, regStats{}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Checker != "Illegal" || len(rep.Violations) != 1 {
		t.Fatalf("double grant judged %s: %v", rep.Checker, rep.Violations)
	}
	for _, f := range []string{"violation-NON_REENTRANT-k.html", "violation-NON_REENTRANT-k.txt", "report.json"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("%s not written: %v", f, err)
		}
	}
	txt, _ := os.ReadFile(filepath.Join(dir, "violation-NON_REENTRANT-k.txt"))
	if !strings.Contains(string(txt), "granted x1 tok 9") {
		t.Errorf("the failing window does not show the second grant:\n%s", txt)
	}
}

func TestRegisterFencing(t *testing.T) {
	r := &fencedRegister{cells: map[string]*regCell{}, stats: regStats{StaleWriteSessions: map[string]int{}, AcceptedWritesByKey: map[string]int{}}}
	devnull, _ := os.Create(filepath.Join(t.TempDir(), "register.jsonl"))
	defer devnull.Close()
	r.log = devnull
	if out := r.do("read", regRequest{Lock: "k", Token: 5, Sess: "a"}); !out.Accepted {
		t.Fatal("first read refused")
	}
	if out := r.do("read", regRequest{Lock: "k", Token: 9, Sess: "b"}); !out.Accepted || out.Value != 0 {
		t.Fatal("read with a higher token refused")
	}
	if out := r.do("write", regRequest{Lock: "k", Token: 5, Sess: "a", Expect: 0, Value: 1}); out.Accepted {
		t.Fatal("stale write accepted")
	}
	if out := r.do("write", regRequest{Lock: "k", Token: 9, Sess: "b", Expect: 0, Value: 1}); !out.Accepted {
		t.Fatal("current write refused")
	}
	if len(r.stats.Violations) != 0 || r.stats.StaleWrites != 1 {
		t.Fatalf("stats %+v", r.stats)
	}
	// The same token from a second session is what broken fencing looks like.
	r.do("write", regRequest{Lock: "k", Token: 9, Sess: "c", Expect: 0, Value: 7})
	if len(r.stats.Violations) != 2 { // token reuse and the lost update
		t.Fatalf("violations %v", r.stats.Violations)
	}
}

func TestClockSkewBounds(t *testing.T) {
	s := clockSkew{base: 3, iv: []skewInterval{{start: 1000, end: 2000, off: 500}, {start: 5000, end: 6000, off: -700}}}
	for _, tc := range []struct {
		t, want int64
	}{{500, 3}, {1500, 503}, {2000, 503}, {2300, 203}, {2600, 3}} {
		if got := s.fwd(tc.t); got != tc.want {
			t.Errorf("fwd(%d) = %d, want %d", tc.t, got, tc.want)
		}
	}
	if got := s.back(5500, 5600); got != 703 {
		t.Errorf("back during the backward offset = %d", got)
	}
	if got := s.back(6100, 6200); got != 3 {
		t.Errorf("back after it = %d", got)
	}
}
