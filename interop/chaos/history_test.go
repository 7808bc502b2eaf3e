package chaos

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"

	"nacos-lockd/connid"
	"nacos-lockd/protocol"
)

// A run directory holds everything a check needs, so that a run can be
// checked again later (TestRecheck):
//
//	history-p<N>.jsonl   client records (worker_test.go)
//	register.jsonl       fenced register calls
//	nemesis.jsonl        faults as injected, with times
//	node<i>-start<k>.log server logs (JSON lines)
//	run.json             the run's parameters

// sessInfo is one session (one connection) of a worker.
type sessInfo struct {
	idx     int32
	name    string
	conn    string
	node    string // node id the connection id ends with
	start   int64  // ns
	end     int64  // ns, 0 when the process died first
	why     string
	lostAt  int64 // ms: earliest time the server can have cleaned it up (never if not)
	worker  int   // porcupine client id of its worker
	lostWhy string
}

// history is a run's lock operations, ready for porcupine.
type history struct {
	ops      []porcupine.Operation
	sessions map[string]*sessInfo
	byIdx    []*sessInfo // session index (lockInput.Sess) -> session
	workers  int
	start    int64 // ns of the first record
	end      int64 // ns of the last record
	stats    histStats
	grants   []grantObs
}

type histStats struct {
	Ops           int            `json:"ops"`
	ByOp          map[string]int `json:"byOp"`
	ByOutcome     map[string]int `json:"byOutcome"`
	Indeterminate int            `json:"indeterminate"`
	Notifications int            `json:"notifications"`
	// NotificationsUnchecked are pushes whose hand-off could only be
	// placed in a window wider than maxNotifyWindow: not given to porcupine.
	NotificationsUnchecked int `json:"notificationsUnchecked"`
	Sessions               int `json:"sessions"`
	SessionsLost           int `json:"sessionsCleanedUpByServer"`
	// OwnersMoved are owners that sent commands from more than one
	// session (a worker that reconnected and renewed: worker.move).
	OwnersMoved int `json:"ownersMoved"`
}

// grantObs is a grant as a client saw it, for the token checks.
type grantObs struct {
	lock      string
	sess      string
	token     uint64
	call, ret int64 // ns
	claim     bool  // ACQUIRE with waiterRetry, or a re-entry: may repeat a token
}

func readJSONL[T any](path string, each func(T)) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var v T
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			continue // a torn last line of a killed process
		}
		each(v)
	}
	return sc.Err()
}

// serverEvents are the log lines that bound when the server may clean up
// a connection: "connection closed" (its node proposes CLEANUP_CONNECTION
// after it) and the leader's "releasing locks of connections held by an
// unreachable node". Log times have one-second precision: the lower
// bound used is the start of that second.
type serverEvents struct {
	connClosed map[string]int64   // conn id -> first "connection closed", ms
	nodeDown   map[string][]int64 // node id -> times the leader released its connections, ms
	lines      int
}

func readServerEvents(dir string) (serverEvents, error) {
	ev := serverEvents{connClosed: map[string]int64{}, nodeDown: map[string][]int64{}}
	logs, _ := filepath.Glob(filepath.Join(dir, "node*.log"))
	for _, path := range logs {
		err := readJSONL(path, func(l map[string]any) {
			ev.lines++
			msg, _ := l["message"].(string)
			ts, _ := l["time"].(string)
			t, err := time.Parse(time.RFC3339Nano, ts)
			if err != nil {
				return
			}
			ms := t.UnixMilli()
			switch msg {
			case "connection closed":
				if c, _ := l["conn_id"].(string); c != "" {
					if old, ok := ev.connClosed[c]; !ok || ms < old {
						ev.connClosed[c] = ms
					}
				}
			case "releasing locks of connections held by an unreachable node":
				if n, _ := l["node"].(string); n != "" {
					ev.nodeDown[n] = append(ev.nodeDown[n], ms)
				}
			}
		})
		if err != nil {
			return ev, err
		}
	}
	return ev, nil
}

// loadHistory reads a run directory into operations for the model.
func loadHistory(dir string) (*history, error) {
	files, err := filepath.Glob(filepath.Join(dir, "history-p*.jsonl"))
	if err != nil {
		return nil, err
	}
	var recs []record
	for _, f := range files {
		if err := readJSONL(f, func(r record) { recs = append(recs, r) }); err != nil {
			return nil, err
		}
	}
	sort.SliceStable(recs, func(i, j int) bool { return recs[i].Ts < recs[j].Ts })
	h := &history{sessions: map[string]*sessInfo{}, stats: histStats{ByOp: map[string]int{}, ByOutcome: map[string]int{}}}
	if len(recs) == 0 {
		return h, nil
	}
	h.start, h.end = recs[0].Ts, recs[len(recs)-1].Ts
	workerIDs := map[[2]int]int{}
	workerOf := func(r record) int {
		k := [2]int{r.Proc, r.W}
		id, ok := workerIDs[k]
		if !ok {
			id = len(workerIDs)
			workerIDs[k] = id
		}
		return id
	}
	var names []string
	for _, r := range recs {
		switch r.T {
		case "sess":
			node := connid.NodeOf(r.Conn)
			h.sessions[r.Sess] = &sessInfo{name: r.Sess, conn: r.Conn, node: node, start: r.Ts, lostAt: never, worker: workerOf(r)}
			names = append(names, r.Sess)
		case "end":
			if s := h.sessions[r.Sess]; s != nil {
				s.end, s.why = r.Ts, r.Why
			}
		}
	}
	slices.Sort(names)
	for i, n := range names {
		h.sessions[n].idx = int32(i)
		h.byIdx = append(h.byIdx, h.sessions[n])
	}
	h.workers = len(workerIDs)
	h.stats.Sessions = len(names)

	ev, err := readServerEvents(dir)
	if err != nil {
		return nil, err
	}
	for _, s := range h.sessions {
		if ms, ok := ev.connClosed[s.conn]; ok {
			s.lostAt, s.lostWhy = ms, "connection closed"
		}
		for _, ms := range ev.nodeDown[s.node] {
			if ms < s.lostAt && s.start < (ms+1000)*1e6 {
				s.lostAt, s.lostWhy = ms, "node "+s.node+" down"
			}
		}
		if s.lostAt != never {
			h.stats.SessionsLost++
		}
	}

	// Owners, numbered for the model. An owner starts on one session and
	// may go on from another (a worker that reconnects and renews); each
	// operation names its session, and a session's cleanup ends what is
	// bound to it.
	owners := map[string]int32{}
	firstSess := map[string]string{}
	for _, r := range recs {
		if r.T != "inv" || h.sessions[r.Sess] == nil {
			continue
		}
		if _, ok := owners[r.Owner]; !ok {
			owners[r.Owner] = int32(len(owners))
			firstSess[r.Owner] = r.Sess
		} else if first := firstSess[r.Owner]; first != "" && first != r.Sess {
			h.stats.OwnersMoved++
			firstSess[r.Owner] = "" // counted
		}
	}
	invs := map[[2]int64]record{}
	rets := map[[2]int64]record{}
	for _, r := range recs {
		switch r.T {
		case "inv":
			invs[[2]int64{int64(r.Proc), r.ID}] = r
		case "ret":
			rets[[2]int64{int64(r.Proc), r.ID}] = r
		}
	}
	openEnd := h.end + int64(time.Second)
	// A push names the owner it hands the lock to, and an owner waits
	// once: the hand-off came after the owner's first queueing ACQUIRE.
	type ol struct{ owner, lock string }
	queuedAt := map[ol]int64{}
	for _, r := range recs {
		if r.T == "inv" && r.Op == string(protocol.OpAcquire) && r.Wait > 0 {
			if _, ok := queuedAt[ol{r.Owner, r.Lock}]; !ok {
				queuedAt[ol{r.Owner, r.Lock}] = r.Ts
			}
		}
	}
	for _, r := range recs {
		switch r.T {
		case "inv":
			s := h.sessions[r.Sess]
			if s == nil {
				continue
			}
			ret, done := rets[[2]int64{int64(r.Proc), r.ID}]
			in := lockInput{Owner: owners[r.Owner], Sess: s.idx, Reentrant: strings.HasPrefix(r.Lock, "REENTRANT/"), Lease: r.Lease, Wait: r.Wait,
				Retry: r.Retry, Call: floorMs(r.Ts), Ret: never}
			switch protocol.LockOp(r.Op) {
			case protocol.OpAcquire:
				in.Op = opAcquire
			case protocol.OpRelease:
				in.Op = opRelease
			case protocol.OpRenew:
				in.Op = opRenew
			case protocol.OpCancelWait:
				in.Op = opCancel
			default:
				return nil, fmt.Errorf("unknown op %q in history", r.Op)
			}
			out := classify(in.Op, ret, done)
			op := porcupine.Operation{ClientId: s.worker, Input: in, Call: r.Ts, Output: out, Return: openEnd}
			if out.Out != outUnknown {
				in.Ret = ceilMs(ret.Ts)
				op.Input, op.Return = in, ret.Ts
			} else {
				h.stats.Indeterminate++
			}
			detail := fmt.Sprintf("owner %s on node %s, op %d.%d", r.Owner, s.node, r.Proc, r.ID)
			if done {
				detail += fmt.Sprintf(", reply code %d %q %s", ret.Code, ret.Msg, ret.Err)
			}
			op.Metadata = opMeta{Lock: r.Lock, Detail: detail}
			h.ops = append(h.ops, op)
			h.stats.Ops++
			h.stats.ByOp[in.Op.String()]++
			h.stats.ByOutcome[out.Out.String()]++
			if out.Out == outGranted && !out.Blind { // a blind grant shows no token
				h.grants = append(h.grants, grantObs{lock: r.Lock, sess: r.Owner, token: out.Token, call: r.Ts, ret: ret.Ts,
					claim: r.Retry || in.Reentrant})
			}
		case "push":
			s := h.sessions[r.Sess]
			o, ok := owners[r.Owner]
			if s == nil || !ok {
				continue // a push for an owner that never asked: caught below
			}
			h.stats.Notifications++
			call, ok := queuedAt[ol{r.Owner, r.Lock}]
			if !ok || call > r.Ts {
				call = r.Ts // pushed before it asked: the model will reject it
			}
			if r.Ts-call > maxNotifyWindow {
				// A window this wide says little and costs a lot; the
				// claim that follows is checked anyway.
				h.stats.NotificationsUnchecked++
				continue
			}
			in := lockInput{Op: opNotify, Owner: o, Sess: s.idx, Call: floorMs(call), Ret: ceilMs(r.Ts)}
			h.ops = append(h.ops, porcupine.Operation{ClientId: h.workers + s.worker, Input: in, Call: call,
				Output: lockOutput{Out: outOK}, Return: r.Ts,
				Metadata: opMeta{Lock: r.Lock, Detail: fmt.Sprintf("push to owner %s on node %s", r.Owner, s.node)}})
		}
	}
	return h, nil
}

// maxNotifyWindow bounds the window of a notification given to the model.
const maxNotifyWindow = int64(10 * time.Second)

// The Nacos result strings for refusals (lockResult.errorMessage), as the
// server sends them; this suite reads them off the wire like any client.
const (
	msgHeld     = "Lock is held by another owner"
	msgNotOwner = "Unlock failed: not held by this owner"
	msgNotFound = "Lock does not exist or already expired"
)

// classify turns a reply into the model's outcome.
func classify(op opKind, ret record, done bool) lockOutput {
	if !done || ret.Err != "" || ret.Code != 200 {
		return lockOutput{Out: outUnknown}
	}
	if ret.Blind {
		return classifyBlind(op, ret.Result)
	}
	switch op {
	case opAcquire:
		switch {
		case ret.Result:
			return lockOutput{Out: outGranted, Count: int32(ret.Count), Token: ret.Token}
		case ret.HasLR && ret.Pos >= 0:
			return lockOutput{Out: outQueued, Pos: int32(ret.Pos)}
		case ret.Msg == msgHeld:
			return lockOutput{Out: outHeld}
		}
	case opRelease:
		switch {
		case ret.Result:
			return lockOutput{Out: outOK, Count: int32(ret.Count)}
		case ret.Msg == msgNotFound:
			return lockOutput{Out: outNotFound}
		case ret.Msg == msgNotOwner:
			return lockOutput{Out: outNotOwner}
		}
	case opRenew:
		if ret.Result {
			return lockOutput{Out: outOK}
		}
		return lockOutput{Out: outFalse}
	case opCancel:
		if ret.Result {
			return lockOutput{Out: outOK}
		}
	}
	// A definite reply the model has no transition for (a wrong message,
	// a refused cancel): keep it definite so the check fails on it.
	return lockOutput{Out: outFalse}
}

// classifyBlind turns a Java Gen 1 reply, a bare boolean, into the
// model's outcome: an ACQUIRE without a wait is granted or refused as held;
// a RELEASE succeeds or is refused for a reason the client never sees.
func classifyBlind(op opKind, result bool) lockOutput {
	switch {
	case op == opAcquire && result:
		return lockOutput{Out: outGranted, Blind: true}
	case op == opAcquire:
		return lockOutput{Out: outHeld, Blind: true}
	case op == opRelease && result:
		return lockOutput{Out: outOK, Blind: true}
	case op == opRelease:
		return lockOutput{Out: outRefused, Blind: true}
	}
	return lockOutput{Out: outFalse} // the Java client sends nothing else
}

func floorMs(ns int64) int64 { return ns / 1e6 }
func ceilMs(ns int64) int64  { return (ns + 1e6 - 1) / 1e6 }
