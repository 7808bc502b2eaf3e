package chaos

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"math"
	"slices"
	"strings"

	"github.com/anishathalye/porcupine"
)

// The model is our lock semantics for one lock (kind, key), written as a
// porcupine NondeterministicModel (statemachine/DESIGN.md,
// docs/lock-semantics.md §4-§8):
//
//   - a lock is free, or held by one owner with a count, a fencing token
//     and a lease end; a grant made to a queued waiter is "unclaimed" until
//     the waiter's next ACQUIRE claims it (count 1, same token);
//   - a waiter queue in FIFO order, each waiter with a deadline and the
//     lease it asked for; whenever the lock becomes free the queue head
//     gets it in the same step (nobody barges);
//   - tokens of new grants are above every token granted before;
//   - the server's own events are transitions the model may take between
//     client operations: a lease ends once the table clock is past it, a
//     waiter dies once the clock reaches its deadline, and every lock and
//     wait of a connection ends once the connection is gone (after the
//     server logged "connection closed" for it, or the leader logged that
//     it releases the connections of the node holding it);
//   - a lock is bound to the connection (session) of the owner's latest
//     ACQUIRE or RENEW, a handed-off grant to the waiter's; an owner that
//     reconnects and renews from its new session keeps the lock when its
//     old one is cleaned up, and that renew claims a grant it finds
//     unclaimed (a claim answered from a read and recorded after the
//     renew: statemachine/DESIGN.md, cluster level 3); a
//     fresh ACQUIRE (no waiterRetry) or a CANCEL_WAIT from another session
//     never claims or gives up an unclaimed grant: it takes effect once
//     the grant is claimed or gone.
//
// Time. Commands carry the proposing node's clock; the table clock is the
// highest stamp applied. Without clock faults a stamp is taken after the
// request arrives and before its reply leaves, so the table clock while an
// operation [call, ret] applies lies in [call - back, ret + fwd] with
// back = fwd = the rounding slack; with clock faults, fwd and back grow by
// the largest forward and backward offsets injected. A lease granted or
// renewed by [call, ret] with lease L ends within [call-back+L, ret+fwd+L],
// and is over for an operation once the clock there can be past that end
// (may) or must be (every command settles the lock it touches first).
// Operations whose reply never came are indeterminate: they may have no
// effect at all, or any legal effect at any later point (porcupine gets
// them with a return time after the end of the history).

// opKind is what an operation did.
type opKind uint8

const (
	opAcquire opKind = iota
	opRelease
	opRenew
	opCancel
	opNotify // a LockNotificationRequest received: an observation, not a command
)

func (k opKind) String() string {
	return [...]string{"acquire", "release", "renew", "cancel", "notify"}[k]
}

// lockInput is one operation on one lock.
type lockInput struct {
	Op        opKind
	Owner     int32 // owner index
	Sess      int32 // session (connection) index the command came on
	Reentrant bool
	Lease     int64 // ms, ACQUIRE and RENEW
	Wait      int64 // ms, ACQUIRE; > 0 queues
	Retry     bool
	Call, Ret int64 // real time, ms (Ret = math.MaxInt64 when unknown)
}

// outcome classifies a reply.
type outcome uint8

const (
	outUnknown  outcome = iota // no reply, transport error or "not committed": indeterminate
	outGranted                 // ACQUIRE granted (count, token)
	outQueued                  // ACQUIRE queued (pos)
	outHeld                    // ACQUIRE refused: held by another owner (or re-entry refused)
	outOK                      // RELEASE (count), RENEW, CANCEL_WAIT succeeded; NOTIFY received
	outNotFound                // RELEASE or RENEW: the lock is free or unknown
	outNotOwner                // RELEASE or RENEW: held by someone else
	outFalse                   // RENEW refused (RENEW replies carry no reason)
	outRefused                 // RELEASE refused, reason unseen (not-found or not-owner): a blind reply
)

func (o outcome) String() string {
	return [...]string{"?", "granted", "queued", "held", "ok", "not-found", "not-owner", "false", "refused"}[o]
}

type lockOutput struct {
	Out   outcome
	Count int32
	Pos   int32
	Token uint64
	// Blind: the client saw only a boolean (the Java Gen 1 API returns
	// true or false and hides the count, token and reason), so those are
	// not checked.
	Blind bool
}

// modelParams are the run's facts the model needs beyond the operations.
type modelParams struct {
	skew   clockSkew       // clock allowances (see above)
	lostAt map[int32]int64 // session -> earliest time its connection could have been cleaned up, ms
	// tokens, when set, makes the model log the first failing step (for
	// reports); never needed for the verdict.
}

const never = math.MaxInt64

// clockSkew says how far the table clock may be from real time: base
// covers rounding; each interval is a clock offset one node had. A
// forward offset lets the table clock run ahead (it keeps the highest
// stamp) until real time catches up; a backward one lets a command stamped
// by that node carry an earlier time while it lasts.
type clockSkew struct {
	base int64
	iv   []skewInterval
}

type skewInterval struct{ start, end, off int64 } // real ms; off in ms

// fwd is how far ahead of real time t the table clock can be.
func (c clockSkew) fwd(t int64) int64 {
	f := c.base
	for _, iv := range c.iv {
		if iv.off > 0 && iv.start <= t {
			f = max(f, c.base+iv.off-max(0, t-iv.end))
		}
	}
	return f
}

// back is how far behind real time a stamp taken in [call, ret] can be.
func (c clockSkew) back(call, ret int64) int64 {
	b := c.base
	for _, iv := range c.iv {
		if iv.off < 0 && iv.start <= ret && call <= iv.end {
			b = max(b, c.base-iv.off)
		}
	}
	return b
}

// lockState is one possible state of one lock. It is immutable: every
// transition copies.
type lockState struct {
	holder    int32 // owner, -1 when free
	conn      int32 // session the grant is bound to, -1 when free
	count     int32
	token     uint64 // 0 while unknown (a hand-off not yet claimed, an indeterminate grant)
	minTok    uint64 // an unknown token is above this
	unclaimed bool
	lo, hi    int64 // bounds of the lease end (table clock, ms)
	open      int64 // > 0: hi is not known yet; the next operation with a reply sets hi = its ret + fwd + open
	last      uint64
	q         []waiterState
	k         string // key(), set by sealed() before porcupine sees the state
}

type waiterState struct {
	owner    int32
	sess     int32 // session of its latest queueing ACQUIRE
	lease    int64
	qlo      int64 // lower bound of the table clock when (re)queued
	dlo, dhi int64 // bounds of the deadline
	open     int64 // > 0: dhi not known yet (see lockState.open)
}

func freeState() lockState { return lockState{holder: -1, conn: -1}.sealed() }

// sealed caches the state's key, which porcupine compares often.
func (s lockState) sealed() lockState {
	s.k = ""
	s.k = s.key()
	return s
}

func (s lockState) clone() lockState {
	s.q = slices.Clone(s.q)
	s.k = ""
	return s
}

func (s lockState) key() string {
	if s.k != "" {
		return s.k
	}
	b := make([]byte, 0, 64+len(s.q)*40)
	for _, v := range [...]int64{int64(s.holder), int64(s.conn), int64(s.count), int64(s.token), int64(s.minTok), s.lo, s.hi, s.open, int64(s.last)} {
		b = binary.AppendVarint(b, v)
	}
	if s.unclaimed {
		b = append(b, 1)
	}
	b = append(b, '|')
	for _, w := range s.q {
		for _, v := range [...]int64{int64(w.owner), int64(w.sess), w.lease, w.qlo, w.dlo, w.dhi, w.open} {
			b = binary.AppendVarint(b, v)
		}
	}
	return string(b)
}

func (s lockState) String() string {
	var b strings.Builder
	if s.holder < 0 {
		b.WriteString("free")
	} else {
		tok := "?"
		if s.token != 0 {
			tok = fmt.Sprint(s.token)
		}
		fmt.Fprintf(&b, "o%d (s%d) x%d tok %s lease-end [%s, %s]", s.holder, s.conn, s.count, tok, msText(s.lo), msText(s.hi))
		if s.unclaimed {
			b.WriteString(" unclaimed")
		}
	}
	if len(s.q) > 0 {
		b.WriteString(" queue")
		for _, w := range s.q {
			fmt.Fprintf(&b, " o%d", w.owner)
		}
	}
	fmt.Fprintf(&b, " (last token %d)", s.last)
	return b.String()
}

func msText(v int64) string {
	if v == never {
		return "?"
	}
	return fmt.Sprintf("%d.%03d", v/1000%1000, v%1000) // seconds within the run's minute range: enough to read
}

// stepper applies operations for one history.
type stepper struct{ p modelParams }

// resolve fills bounds left open by an indeterminate operation linearized
// before this one: its effect was applied no later than this one's.
func (m stepper) resolve(s lockState, ret int64) lockState {
	if ret == never {
		return s
	}
	if s.open == 0 && !slices.ContainsFunc(s.q, func(w waiterState) bool { return w.open > 0 }) {
		return s
	}
	s = s.clone()
	if s.open > 0 {
		s.hi, s.open = m.hiClock(ret)+s.open, 0
	}
	for i := range s.q {
		if s.q[i].open > 0 {
			s.q[i].dhi, s.q[i].open = m.hiClock(ret)+s.q[i].open, 0
		}
	}
	return s
}

// maxClock is the highest the table clock can be at an operation that
// applies no later than ret (real ms, or never).
func (m stepper) maxClock(ret int64) int64 {
	return m.hiClock(ret)
}

// hiClock bounds the table clock from above at a real time (ms).
func (m stepper) hiClock(t int64) int64 {
	if t == never {
		return never
	}
	return t + m.p.skew.fwd(t)
}

// loClock bounds from below the clock stamped by a command received in
// [call, ret]: its node's clock may have been behind.
func (m stepper) loClock(call, ret int64) int64 {
	return call - m.p.skew.back(call, ret)
}

// mayBeGone reports whether waiter w may have been dropped by a settle
// that ran no later than ret: its deadline may have passed, or its
// connection may have been cleaned up. Waiters are not dropped eagerly
// (that would branch on every subset of them): they stay queued until a
// reply or a hand-off depends on whether they are still there, or until
// they must be gone (settled).
func (m stepper) mayBeGone(w waiterState, ret int64) bool {
	if m.maxClock(ret) >= w.dlo {
		return true
	}
	lost, ok := m.p.lostAt[w.sess]
	return ok && lost <= ret
}

// handOff gives a free lock to the first waiter still queued, as settle
// does in the same apply: every state for each choice of which waiters at
// the head were already gone. causeLo bounds the clock at the hand-off
// from below; ret (real ms, or never) bounds it from above.
func (m stepper) handOff(s lockState, causeLo, ret int64) []lockState {
	if s.holder >= 0 || len(s.q) == 0 {
		return []lockState{s}
	}
	var out []lockState
	for i, w := range s.q {
		gone := w.open == 0 && causeLo >= w.dhi // its deadline was surely past
		if !gone {
			n := s.clone()
			n.q = slices.Delete(n.q, 0, i+1)
			n.holder, n.conn, n.count, n.unclaimed = w.owner, w.sess, 1, true
			n.token, n.minTok = 0, s.last
			n.lo = max(causeLo, w.qlo) + w.lease
			if ret == never {
				n.hi, n.open = never, w.lease
			} else {
				n.hi, n.open = m.hiClock(ret)+w.lease, 0
			}
			out = append(out, n)
			if !m.mayBeGone(w, ret) {
				return out
			}
		}
	}
	n := s.clone() // everyone queued was gone: the lock stays free
	n.q = nil
	return append(out, n)
}

func (m stepper) free(s lockState) lockState {
	s.k = ""
	s.holder, s.conn, s.count, s.token, s.minTok, s.unclaimed, s.lo, s.hi, s.open = -1, -1, 0, 0, 0, false, 0, 0, 0
	return s
}

// closure returns every state the server's own events can lead to before
// an operation that applies no later than ret (real ms; never = unknown):
// the holder's lease ends, or the connection its grant is bound to is
// cleaned up (with every wait on it), and the lock passes to a waiter.
func (m stepper) closure(start lockState, ret int64) []lockState {
	maxClock := m.maxClock(ret)
	seen := map[string]bool{start.key(): true}
	out := []lockState{start}
	for i := 0; i < len(out); i++ {
		s := out[i]
		if s.holder < 0 {
			continue
		}
		var next []lockState
		if maxClock > s.lo {
			next = append(next, m.handOff(m.free(s.clone()), s.lo+1, ret)...)
		}
		if lost, ok := m.p.lostAt[s.conn]; ok && lost <= ret {
			n := m.free(s.clone())
			n.q = slices.DeleteFunc(n.q, func(w waiterState) bool { return w.sess == s.conn })
			next = append(next, m.handOff(n, m.loClock(lost, never), ret)...)
		}
		for _, n := range next {
			if k := n.key(); !seen[k] {
				seen[k] = true
				out = append(out, n)
			}
		}
	}
	return out
}

// settled keeps the states in which the command at call has settled the
// lock: a lease that must be over is (those states are dropped), and so
// are waiters whose deadline must have passed (removed).
func (m stepper) settled(states []lockState, call int64) []lockState {
	minClock := m.loClock(call, call)
	out := states[:0]
	for _, s := range states {
		if s.holder >= 0 && s.open == 0 && minClock > s.hi {
			continue
		}
		if slices.ContainsFunc(s.q, func(w waiterState) bool { return w.open == 0 && minClock >= w.dhi }) {
			s = s.clone()
			s.q = slices.DeleteFunc(s.q, func(w waiterState) bool { return w.open == 0 && minClock >= w.dhi })
		}
		out = append(out, s)
	}
	return out
}

// enqueue queues w behind the holder: its entry is refreshed in place, or
// (new, or its old entry was gone) appended. This command's settle may have
// dropped waiters that were gone; when the reply tells the position
// (want >= 0), every choice of dropped waiters ahead that gives it is a
// state. Waiters behind stay as they are (see mayBeGone).
func (m stepper) enqueue(s lockState, w waiterState, ret int64, want int32) []lockState {
	own := slices.IndexFunc(s.q, func(x waiterState) bool { return x.owner == w.owner })
	var out []lockState
	place := func(q []waiterState, at int) { // at < 0: append
		n := s.clone()
		n.q = q
		if at < 0 {
			n.q = append(n.q, w)
		} else {
			n.q[at] = w
		}
		out = append(out, n)
	}
	if own >= 0 {
		// Refreshed in place: the position is own minus the dropped ahead.
		for _, drop := range m.drops(s.q[:own], ret, want) {
			q := append(dropIdx(s.q[:own], drop), s.q[own:]...)
			place(q, own-len(drop))
		}
		if !m.mayBeGone(s.q[own], ret) {
			return out
		}
	}
	// Appended: the position counts every remaining waiter.
	rest := slices.Clone(s.q)
	if own >= 0 {
		rest = slices.Delete(rest, own, own+1)
	}
	for _, drop := range m.drops(rest, ret, want) {
		place(dropIdx(rest, drop), -1)
	}
	return out
}

// drops lists the sets of indexes into q to drop so that len(q) minus the
// dropped equals want (any number when want < 0: then nothing is dropped,
// lazily). Only waiters that may be gone can be dropped.
func (m stepper) drops(q []waiterState, ret int64, want int32) [][]int {
	if want < 0 {
		return [][]int{nil}
	}
	k := len(q) - int(want)
	if k < 0 {
		return nil
	}
	var cands []int
	for i, w := range q {
		if m.mayBeGone(w, ret) {
			cands = append(cands, i)
		}
	}
	var out [][]int
	var pick func(from int, cur []int)
	pick = func(from int, cur []int) {
		if len(cur) == k {
			out = append(out, slices.Clone(cur))
			return
		}
		for i := from; i < len(cands); i++ {
			pick(i+1, append(cur, cands[i]))
		}
	}
	pick(0, nil)
	return out
}

func dropIdx(q []waiterState, drop []int) []waiterState {
	out := make([]waiterState, 0, len(q)-len(drop))
	for i, w := range q {
		if !slices.Contains(drop, i) {
			out = append(out, w)
		}
	}
	return out
}

// step is the model's transition function.
func (m stepper) step(s lockState, in lockInput, out lockOutput) []lockState {
	if out.Out == outUnknown {
		// Not applied at all, or applied at some unknown later time with
		// any reply.
		states := []lockState{s}
		pre := m.settled(m.closure(m.resolve(s, in.Ret), never), in.Call)
		for _, p := range pre {
			states = append(states, m.apply(p, in, lockOutput{Out: outUnknown}, never)...)
		}
		return states
	}
	s = m.resolve(s, in.Ret)
	pre := m.closure(s, in.Ret)
	if in.Op != opNotify {
		pre = m.settled(pre, in.Call)
	}
	var states []lockState
	for _, p := range pre {
		states = append(states, m.apply(p, in, out, in.Ret)...)
	}
	return states
}

// apply is the operation's own effect on a settled state. With an unknown
// reply it returns every possible next state; otherwise the states in
// which the reply is the one the server gives (none if it is impossible).
func (m stepper) apply(s lockState, in lockInput, out lockOutput, ret int64) []lockState {
	unknown := out.Out == outUnknown
	lease := func(n lockState, l int64) lockState {
		n.lo = m.loClock(in.Call, in.Ret) + l
		if ret == never {
			n.hi, n.open = never, l
		} else {
			n.hi, n.open = m.hiClock(ret)+l, 0
		}
		return n
	}
	// reveal checks a token the reply carries against what the state knows
	// and records it.
	reveal := func(n lockState, tok uint64) (lockState, bool) {
		if unknown || out.Blind {
			return n, true
		}
		switch {
		case n.token != 0 && tok != n.token:
			return n, false
		case n.token == 0 && tok <= n.minTok:
			return n, false
		}
		n.token = tok
		n.last = max(n.last, tok)
		return n, true
	}
	switch in.Op {
	case opNotify:
		if s.holder == in.Owner && s.unclaimed {
			return []lockState{s}
		}
		return nil

	case opAcquire:
		switch {
		case s.holder == in.Owner && s.unclaimed && !in.Retry && in.Sess != s.conn:
			// A fresh ACQUIRE from another session does not claim: the
			// server proposes it again until the grant is claimed or gone
			// (statemachine/DESIGN.md, cluster level 3), so it cannot take
			// effect at this point.
			return nil
		case s.holder == in.Owner && s.unclaimed:
			// The waiter claims the grant it was handed: count 1, same token.
			if !unknown && (out.Out != outGranted || (!out.Blind && out.Count != 1)) {
				return nil
			}
			n, ok := reveal(s.clone(), out.Token)
			if !ok {
				return nil
			}
			n.unclaimed, n.conn = false, in.Sess
			n.q = slices.DeleteFunc(n.q, func(w waiterState) bool { return w.owner == in.Owner })
			return []lockState{lease(n, in.Lease)}
		case s.holder == in.Owner && in.Reentrant:
			if !unknown && (out.Out != outGranted || (!out.Blind && out.Count != s.count+1)) {
				return nil
			}
			n, ok := reveal(s.clone(), out.Token)
			if !ok {
				return nil
			}
			n.count++
			n.conn = in.Sess
			return []lockState{lease(n, in.Lease)}
		case s.holder == in.Owner:
			if unknown || out.Out == outHeld {
				return []lockState{s}
			}
			return nil
		case s.holder < 0:
			// Free implies an empty queue: hand-offs happen when freed.
			if !unknown && (out.Out != outGranted || (!out.Blind && (out.Count != 1 || out.Token <= s.last))) {
				return nil
			}
			n := s.clone()
			n.holder, n.conn, n.count, n.unclaimed = in.Owner, in.Sess, 1, false
			if unknown || out.Blind {
				n.token, n.minTok = 0, s.last
			} else {
				n.token, n.minTok, n.last = out.Token, 0, out.Token
			}
			return []lockState{lease(n, in.Lease)}
		case in.Wait <= 0:
			if unknown || out.Out == outHeld {
				return []lockState{s}
			}
			return nil
		}
		// Held by another: queue at the tail, or refresh in place.
		lo := m.loClock(in.Call, in.Ret)
		w := waiterState{owner: in.Owner, sess: in.Sess, lease: in.Lease, qlo: lo, dlo: lo + in.Wait}
		if ret == never {
			w.dhi, w.open = never, in.Wait
		} else {
			w.dhi = m.hiClock(ret) + in.Wait
		}
		want := int32(-1)
		if !unknown {
			if out.Out != outQueued {
				return nil
			}
			want = out.Pos
		}
		return m.enqueue(s, w, ret, want)

	case opRelease:
		switch {
		case s.holder < 0:
			if unknown || out.Out == outNotFound || out.Out == outRefused {
				return []lockState{s}
			}
			return nil
		case s.holder != in.Owner:
			if unknown || out.Out == outNotOwner || out.Out == outRefused {
				return []lockState{s}
			}
			return nil
		}
		n := s.clone()
		n.count--
		if n.unclaimed || n.count <= 0 {
			if !unknown && (out.Out != outOK || (!out.Blind && out.Count != 0)) {
				return nil
			}
			return m.handOff(m.free(n), m.loClock(in.Call, in.Ret), ret)
		}
		if !unknown && (out.Out != outOK || (!out.Blind && out.Count != n.count)) {
			return nil
		}
		return []lockState{n}

	case opRenew:
		if s.holder != in.Owner {
			if unknown || out.Out == outFalse {
				return []lockState{s}
			}
			return nil
		}
		if !unknown && out.Out != outOK {
			return nil
		}
		// A renew from another session (a client that reconnected) moves
		// the lock to it, and claims a grant it renews unclaimed (only a
		// client told it holds the lock renews it).
		n := s.clone()
		if n.unclaimed && in.Sess != n.conn {
			n.unclaimed = false
			n.q = slices.DeleteFunc(n.q, func(w waiterState) bool { return w.owner == in.Owner })
		}
		n.conn = in.Sess
		return []lockState{lease(n, in.Lease)}

	case opCancel:
		if s.holder == in.Owner && s.unclaimed && in.Sess != s.conn {
			return nil // as a fresh ACQUIRE from another session, above
		}
		if !unknown && out.Out != outOK {
			return nil
		}
		n := s.clone()
		n.q = slices.DeleteFunc(n.q, func(w waiterState) bool { return w.owner == in.Owner })
		if n.holder == in.Owner && n.unclaimed {
			return m.handOff(m.free(n), m.loClock(in.Call, in.Ret), ret)
		}
		return []lockState{n}
	}
	return nil
}

// stateSet is the model's porcupine state: every lock state the history
// so far can have led to (the power set construction, done here rather
// than with porcupine's NondeterministicModel so that a notification can
// be a pure check, below).
type stateSet struct {
	states []lockState
	key    string
}

func newStateSet(states []lockState) stateSet {
	byKey := make(map[string]lockState, len(states))
	for _, s := range states {
		s = s.sealed()
		byKey[s.k] = s
	}
	keys := make([]string, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := stateSet{states: make([]lockState, 0, len(keys))}
	var b strings.Builder
	for _, k := range keys {
		out.states = append(out.states, byKey[k])
		b.WriteString(k)
		b.WriteByte(0xff) // never inside a varint key
	}
	out.key = b.String()
	return out
}

// notifyPossible reports whether the owner of a notification can have
// been the unclaimed holder, or a waiter, at some point before ret,
// starting from s. A waiter may be pushed before any grant: the gateway
// pushes ahead of a release's commit to the waiter the release should
// hand the lock to (gateway/DESIGN.md), and that guess can be overtaken
// (another command ordered first, the release refused, a lease ending);
// the waiter's claim, which is checked as an ACQUIRE, then finds no grant.
func (m stepper) notifyPossible(s lockState, in lockInput) bool {
	for _, n := range m.closure(m.resolve(s, in.Ret), in.Ret) {
		if n.holder == in.Owner && n.unclaimed {
			return true
		}
		if slices.ContainsFunc(n.q, func(w waiterState) bool { return w.owner == in.Owner }) {
			return true
		}
	}
	return false
}

// lockModel is the porcupine model for one history; operations are
// partitioned by lock, so every state is one lock's.
//
// A notification is an observation that does not change the state: it
// passes if some state in the set, or one the server's own events lead
// to before the push arrived, has its owner as the unclaimed holder. (As
// a filter on the set it would be stronger, but each placement would make
// a different set and the search would explode on long waits.)
func lockModel(p modelParams) porcupine.Model {
	m := stepper{p: p}
	return porcupine.Model{
		Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
			by := map[string][]porcupine.Operation{}
			var keys []string
			for _, op := range h {
				k := op.Metadata.(opMeta).Lock
				if _, ok := by[k]; !ok {
					keys = append(keys, k)
				}
				by[k] = append(by[k], op)
			}
			slices.Sort(keys)
			out := make([][]porcupine.Operation, 0, len(keys))
			for _, k := range keys {
				out = append(out, by[k])
			}
			return out
		},
		Init: func() interface{} { return newStateSet([]lockState{freeState()}) },
		Step: func(state, input, output interface{}) (bool, interface{}) {
			set, in, out := state.(stateSet), input.(lockInput), output.(lockOutput)
			if in.Op == opNotify {
				for _, s := range set.states {
					if m.notifyPossible(s, in) {
						return true, set
					}
				}
				return false, nil
			}
			var next []lockState
			for _, s := range set.states {
				next = append(next, m.step(s, in, out)...)
			}
			if len(next) == 0 {
				return false, nil
			}
			return true, newStateSet(next)
		},
		Equal: func(a, b interface{}) bool { return a.(stateSet).key == b.(stateSet).key },
		Hash: func(s interface{}) uint64 {
			h := fnv.New64a()
			h.Write([]byte(s.(stateSet).key))
			return h.Sum64()
		},
		DescribeOperation: func(input, output interface{}) string {
			return describeOp(input.(lockInput), output.(lockOutput))
		},
		DescribeState: func(s interface{}) string {
			set := s.(stateSet)
			parts := make([]string, len(set.states))
			for i, st := range set.states {
				parts[i] = st.String()
			}
			return "{" + strings.Join(parts, " | ") + "}"
		},
		DescribeOperationMetadata: func(info interface{}) string {
			if info == nil {
				return ""
			}
			return info.(opMeta).Detail
		},
	}
}

// opMeta travels with each operation: which lock it touched and a line for
// the visualisation's tooltip.
type opMeta struct {
	Lock   string
	Detail string
}

func describeOp(in lockInput, out lockOutput) string {
	var b strings.Builder
	fmt.Fprintf(&b, "o%d s%d %s", in.Owner, in.Sess, in.Op)
	switch in.Op {
	case opAcquire:
		fmt.Fprintf(&b, "(lease %d", in.Lease)
		if in.Wait > 0 {
			fmt.Fprintf(&b, ", wait %d", in.Wait)
		}
		if in.Retry {
			b.WriteString(", retry")
		}
		b.WriteString(")")
	case opRenew:
		fmt.Fprintf(&b, "(lease %d)", in.Lease)
	}
	b.WriteString(" -> ")
	switch out.Out {
	case outGranted:
		if out.Blind {
			b.WriteString("true (granted)")
			break
		}
		fmt.Fprintf(&b, "granted x%d tok %d", out.Count, out.Token)
	case outQueued:
		fmt.Fprintf(&b, "queued #%d", out.Pos)
	case outOK:
		if in.Op == opRelease && !out.Blind {
			fmt.Fprintf(&b, "ok x%d", out.Count)
		} else {
			b.WriteString("ok")
		}
	default:
		b.WriteString(out.Out.String())
	}
	return b.String()
}
