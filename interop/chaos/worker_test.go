package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"nacos-lockd/interop/client"
	"nacos-lockd/protocol"
)

// A client process runs a few workers, each speaking the real protocol
// through its own connection (a session; now and then a worker goes on
// from a new one, see move), and appends every operation to a JSON-lines
// history file: an "inv" record before a request is sent, a "ret" record
// when its reply (or error) arrives. A process killed with -9 leaves invocations without returns;
// the checker treats them as indeterminate. The harness starts client
// processes by re-running the test binary with clientEnv set (TestMain).

const clientEnv = "NACOS_CHAOS_CLIENT"

// clientConfig is passed to a client process as JSON in clientEnv.
type clientConfig struct {
	Proc     int        `json:"proc"`     // process number, unique in the run
	Nodes    []string   `json:"nodes"`    // SDK gRPC addresses
	Register string     `json:"register"` // fenced register base URL
	Seed     uint64     `json:"seed"`
	Workers  int        `json:"workers"`
	Locks    []lockSpec `json:"locks"`
	History  string     `json:"history"`
	LeaseMs  [2]int64   `json:"leaseMs"` // leases drawn from [min, max]
	WaitMs   [2]int64   `json:"waitMs"`
	// StallPct is the percentage of critical sections that overrun their
	// lease on purpose before writing to the register.
	StallPct int `json:"stallPct"`
}

type lockSpec struct {
	Kind string `json:"kind"` // NON_REENTRANT, REENTRANT or NACOS_LOCK
	Key  string `json:"key"`
}

func (l lockSpec) String() string { return l.Kind + "/" + l.Key }

// record is one line of a history file.
type record struct {
	T    string `json:"t"`  // sess, end, inv, ret, push, reg
	Ts   int64  `json:"ts"` // Unix ns
	Proc int    `json:"proc"`
	W    int    `json:"w"`              // worker
	ID   int64  `json:"id,omitempty"`   // operation id within the process
	Sess string `json:"sess,omitempty"` // session name, unique in the run
	Conn string `json:"conn,omitempty"` // sess: the server's connection id
	Node int    `json:"node,omitempty"` // sess: node index
	Why  string `json:"why,omitempty"`  // end: closed, broken, abandoned

	// inv
	Op   string `json:"op,omitempty"` // ACQUIRE, RELEASE, RENEW, CANCEL_WAIT
	Lock string `json:"lock,omitempty"`
	// Owner is the lock owner: one per acquisition attempt, so that a
	// push (which names the owner) identifies the wait it answers. For
	// NACOS_LOCK it is the session name: the connection owns the lock.
	Owner string `json:"owner,omitempty"`
	Lease int64  `json:"lease,omitempty"`
	Wait  int64  `json:"wait,omitempty"`
	Retry bool   `json:"retry,omitempty"`

	// ret
	Code   int    `json:"code,omitempty"` // resultCode
	Result bool   `json:"result,omitempty"`
	HasLR  bool   `json:"hasLR,omitempty"`
	Count  int    `json:"count,omitempty"`
	Pos    int    `json:"pos,omitempty"`
	Token  uint64 `json:"token,omitempty"`
	Msg    string `json:"msg,omitempty"`
	Err    string `json:"err,omitempty"`
	// Blind: the reply was seen only as a boolean (the Java Gen 1 client,
	// interop/java ChaosGen1ClientMain): no count, token or message.
	Blind bool `json:"blind,omitempty"`

	// reg: a register call (token, what it read or wrote, whether accepted)
	RegOp    string `json:"regOp,omitempty"`
	Value    int64  `json:"value,omitempty"`
	Accepted bool   `json:"accepted,omitempty"`
}

// recorder appends records to the history file, one write per line so a
// killed process leaves whole lines behind.
type recorder struct {
	mu  sync.Mutex
	f   *os.File
	ids atomic.Int64
}

func (r *recorder) write(rec record) {
	b, _ := json.Marshal(rec)
	b = append(b, '\n')
	r.mu.Lock()
	_, _ = r.f.Write(b)
	r.mu.Unlock()
}

// runClientProcess is the body of a client process.
func runClientProcess(raw string) int {
	var cfg clientConfig
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "chaos client: bad config:", err)
		return 2
	}
	f, err := os.OpenFile(cfg.History, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos client:", err)
		return 2
	}
	defer f.Close()
	rec := &recorder{f: f}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	var wg sync.WaitGroup
	for w := range cfg.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wk := &worker{cfg: cfg, w: w, rec: rec, rng: rand.New(rand.NewPCG(cfg.Seed, uint64(cfg.Proc*1000+w))),
				http: &http.Client{Timeout: 5 * time.Second}}
			wk.run(ctx)
		}()
	}
	wg.Wait()
	return 0
}

type worker struct {
	cfg   clientConfig
	w     int
	rec   *recorder
	rng   *rand.Rand
	http  *http.Client
	sess  *session
	nsess int
	nown  int
	last  map[string]string // lock -> the owner of the last attempt on it
}

type session struct {
	name   string
	node   int
	c      *client.Client
	broken atomic.Bool
	pushes chan *protocol.LockNotificationRequest
	done   chan struct{}
}

func (wk *worker) base(t string) record {
	return record{T: t, Ts: time.Now().UnixNano(), Proc: wk.cfg.Proc, W: wk.w}
}

func (wk *worker) run(ctx context.Context) {
	defer wk.endSession("closed")
	for ctx.Err() == nil {
		if wk.sess == nil && !wk.dial(ctx) {
			sleep(ctx, 200*time.Millisecond)
			continue
		}
		lk := wk.cfg.Locks[wk.rng.IntN(len(wk.cfg.Locks))]
		wk.act(ctx, lk)
		if wk.sess != nil && wk.sess.broken.Load() {
			wk.endSession("broken")
		}
		if wk.sess != nil && wk.rng.IntN(100) == 0 {
			// Leave now and then, whatever is held or awaited: connection
			// loss must release it.
			wk.endSession("closed")
		}
		sleep(ctx, time.Duration(wk.rng.IntN(40))*time.Millisecond)
	}
}

func (wk *worker) dial(ctx context.Context) bool {
	s := wk.open(ctx)
	if s == nil {
		return false
	}
	wk.sess = s
	return true
}

// open starts a new session on a node picked at random; nil if the dial
// failed.
func (wk *worker) open(ctx context.Context) *session {
	node := wk.rng.IntN(len(wk.cfg.Nodes))
	dctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	c, err := client.Dial(dctx, wk.cfg.Nodes[node])
	if err != nil {
		return nil
	}
	wk.nsess++
	s := &session{
		name: fmt.Sprintf("p%d.w%d.s%d", wk.cfg.Proc, wk.w, wk.nsess), node: node, c: c,
		pushes: make(chan *protocol.LockNotificationRequest, 64), done: make(chan struct{}),
	}
	r := wk.base("sess")
	r.Sess, r.Conn, r.Node = s.name, c.ConnectionID(), node
	wk.rec.write(r)
	go func() {
		defer close(s.done)
		for m := range c.Pushes() {
			n, ok := m.(*protocol.LockNotificationRequest)
			if !ok {
				continue // ConnectResetRequest and the like: the stream ends soon
			}
			p := wk.base("push")
			p.Sess, p.Lock, p.Owner = s.name, n.LockType+"/"+n.LockKey, n.Owner
			wk.rec.write(p)
			select {
			case s.pushes <- n:
			default:
			}
		}
		s.broken.Store(true)
	}()
	return s
}

func (wk *worker) endSession(why string) {
	s := wk.sess
	if s == nil {
		return
	}
	wk.sess = nil
	wk.end(s, why)
}

// end closes a session that is no longer the worker's current one.
func (wk *worker) end(s *session, why string) {
	r := wk.base("end")
	r.Sess, r.Why = s.name, why
	wk.rec.write(r) // before Close: the server may clean up as soon as it closes
	_ = s.c.Close()
	<-s.done
}

// reply is a lock call's outcome as the worker sees it.
type reply struct {
	ok      bool // a LockOperationResponse with resultCode 200
	granted bool
	queued  bool
	count   int
	token   uint64
}

// call sends one lock request and records it. An answer that is not a
// definite one (transport error, timeout, resultCode 500) ends the
// session: its effect is unknown, and a fresh session keeps the history
// simple.
func (wk *worker) call(ctx context.Context, op protocol.LockOp, lk lockSpec, owner string, lease, wait int64, retry bool) reply {
	s := wk.sess
	wire := owner
	if lk.Kind == protocol.LockTypeNacos {
		owner, wire = s.name, "" // Gen 1: the connection is the owner
	}
	li := client.Instance(lk.Key, lk.Kind, wire, nil, nil)
	if op == protocol.OpAcquire || op == protocol.OpRenew {
		li.ExpiredTime = client.Ms(lease)
	}
	if op == protocol.OpAcquire && lk.Kind != protocol.LockTypeNacos {
		w := int64(-1)
		if wait > 0 {
			w = wait
		}
		li.WaitTimeMs = client.Ms(w)
		li.WaiterRetry = retry
	}
	id := wk.rec.ids.Add(1)
	inv := wk.base("inv")
	inv.ID, inv.Sess, inv.Op, inv.Lock, inv.Owner, inv.Lease, inv.Wait, inv.Retry = id, s.name, string(op), lk.String(), owner, lease, wait, retry
	wk.rec.write(inv)
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	resp, err := s.c.Lock(cctx, op, li)
	cancel()
	ret := wk.base("ret")
	ret.ID, ret.Sess = id, s.name
	var rp reply
	switch {
	case err != nil:
		ret.Err = err.Error()
	default:
		ret.Code, ret.Result, ret.Msg = resp.ResultCode, resp.Result, resp.Message
		if lr := resp.LockResult; lr != nil {
			ret.HasLR, ret.Count, ret.Pos, ret.Token = true, lr.ReentrantCount, lr.WaitPosition, lr.FencingToken
			if lr.ErrorMessage != "" {
				ret.Msg = lr.ErrorMessage
			}
		}
		rp.ok = resp.ResultCode == 200
		rp.granted = rp.ok && resp.Result && op == protocol.OpAcquire
		rp.queued = rp.ok && !resp.Result && resp.LockResult != nil && resp.LockResult.WaitPosition >= 0
		if resp.LockResult != nil {
			rp.count, rp.token = resp.LockResult.ReentrantCount, resp.LockResult.FencingToken
		}
	}
	wk.rec.write(ret)
	if !rp.ok {
		wk.endSession("abandoned")
	}
	return rp
}

func (wk *worker) lease() int64 {
	return wk.cfg.LeaseMs[0] + wk.rng.Int64N(wk.cfg.LeaseMs[1]-wk.cfg.LeaseMs[0]+1)
}

// newOwner names a new acquisition attempt on lk.
func (wk *worker) newOwner(lk lockSpec) string {
	wk.nown++
	o := fmt.Sprintf("%s/o%d", wk.sess.name, wk.nown)
	if wk.last == nil {
		wk.last = map[string]string{}
	}
	wk.last[lk.String()] = o
	return o
}

// oldOwner is the owner of this session's last attempt on lk (which may
// still hold it, or not), or a new one.
func (wk *worker) oldOwner(lk lockSpec) string {
	if o, ok := wk.last[lk.String()]; ok && strings.HasPrefix(o, wk.sess.name+"/") {
		return o
	}
	return wk.newOwner(lk)
}

// act does one thing with one lock.
func (wk *worker) act(ctx context.Context, lk lockSpec) {
	gen1 := lk.Kind == protocol.LockTypeNacos
	x := wk.rng.IntN(100)
	switch {
	case gen1 || x < 45: // tryLock
		l := wk.lease()
		o := wk.newOwner(lk)
		if r := wk.call(ctx, protocol.OpAcquire, lk, o, l, 0, false); r.granted {
			wk.critical(ctx, lk, o, l, r.token, r.count)
		}
	case x < 80: // lock with a wait in the queue
		wk.waitLock(ctx, lk)
	case x < 87: // probably not held any more
		wk.call(ctx, protocol.OpRelease, lk, wk.oldOwner(lk), 0, 0, false)
	case x < 94:
		wk.call(ctx, protocol.OpRenew, lk, wk.oldOwner(lk), wk.lease(), 0, false)
	default:
		wk.call(ctx, protocol.OpCancelWait, lk, wk.oldOwner(lk), 0, 0, false)
	}
}

// waitLock queues for the lock, waits for the push and claims the grant,
// as the 3.3 client's lock(timeout) does; it gives up with CANCEL_WAIT.
func (wk *worker) waitLock(ctx context.Context, lk lockSpec) {
	l := wk.lease()
	wait := wk.cfg.WaitMs[0] + wk.rng.Int64N(wk.cfg.WaitMs[1]-wk.cfg.WaitMs[0]+1)
	o := wk.newOwner(lk)
	r := wk.call(ctx, protocol.OpAcquire, lk, o, l, wait, false)
	if r.granted {
		wk.critical(ctx, lk, o, l, r.token, r.count)
		return
	}
	if !r.queued || wk.sess == nil {
		return
	}
	s := wk.sess
	deadline := time.NewTimer(time.Duration(wait) * time.Millisecond)
	defer deadline.Stop()
	refresh := time.NewTimer(time.Duration(wait/2) * time.Millisecond)
	defer refresh.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.done:
			return
		case n := <-s.pushes:
			if n.LockType+"/"+n.LockKey != lk.String() || n.Owner != o {
				continue // a late push for an earlier wait
			}
			r := wk.call(ctx, protocol.OpAcquire, lk, o, l, wait, true)
			if r.granted {
				wk.critical(ctx, lk, o, l, r.token, r.count)
				return
			}
			if !r.queued {
				wk.giveUp(ctx, lk, o)
				return
			}
		case <-refresh.C:
			if wk.rng.IntN(2) == 0 {
				// A retry while queued refreshes the entry in place.
				r := wk.call(ctx, protocol.OpAcquire, lk, o, l, wait, true)
				if r.granted {
					wk.critical(ctx, lk, o, l, r.token, r.count)
					return
				}
				if !r.queued {
					wk.giveUp(ctx, lk, o)
					return
				}
			}
		case <-deadline.C:
			wk.giveUp(ctx, lk, o)
			return
		}
	}
}

func (wk *worker) giveUp(ctx context.Context, lk lockSpec, owner string) {
	if wk.sess != nil {
		wk.call(ctx, protocol.OpCancelWait, lk, owner, 0, 0, false)
	}
}

// critical is the critical section: a read-modify-write of the fenced
// register with the grant's token, sometimes a renew or a re-entry,
// sometimes an overrun past the lease, then the release.
func (wk *worker) critical(ctx context.Context, lk lockSpec, owner string, lease int64, token uint64, count int) {
	if lk.Kind != protocol.LockTypeNacos && wk.rng.IntN(100) < 10 {
		// At once: a claim's record may still be queued on the old node.
		wk.move(ctx, lk, owner)
		if wk.sess == nil {
			return
		}
	}
	stall := wk.rng.IntN(100) < wk.cfg.StallPct
	v, ok := wk.register(ctx, "read", lk, token, 0, 0)
	if ok && stall {
		sleep(ctx, time.Duration(lease+200+wk.rng.Int64N(800))*time.Millisecond)
	}
	if ok {
		wk.register(ctx, "write", lk, token, v, v+1)
	}
	if wk.sess == nil {
		return
	}
	switch x := wk.rng.IntN(100); {
	case x < 25:
		wk.call(ctx, protocol.OpRenew, lk, owner, wk.lease(), 0, false)
	case x < 50 && lk.Kind == protocol.LockTypeReentrant:
		if r := wk.call(ctx, protocol.OpAcquire, lk, owner, lease, 0, false); r.granted {
			count = r.count
		}
	}
	sleep(ctx, time.Duration(wk.rng.IntN(60))*time.Millisecond)
	if wk.rng.IntN(100) < 5 {
		return // forget to release: the lease ends it
	}
	for range max(count, 1) {
		if wk.sess == nil {
			return
		}
		r := wk.call(ctx, protocol.OpRelease, lk, owner, 0, 0, false)
		if !r.ok || r.count == 0 {
			return
		}
	}
}

// move goes on from a new connection, as a client does after it lost its
// own: a new session (any node) renews the lock the owner holds, then the
// old session closes, and its cleanup must leave the lock with the owner.
// A claim answered from a read just before, whose record the renew can
// overtake in a cluster, must not bring the lock back to the old session
// (statemachine/DESIGN.md, cluster level 3). Gen 1 (NACOS_LOCK) cannot
// move: its owner is the connection.
func (wk *worker) move(ctx context.Context, lk lockSpec, owner string) {
	old := wk.sess
	s := wk.open(ctx)
	if s == nil {
		return // stays where it is
	}
	wk.sess = s
	wk.call(ctx, protocol.OpRenew, lk, owner, wk.lease(), 0, false)
	wk.end(old, "closed")
}

// register reads or writes the fenced register under a token.
func (wk *worker) register(ctx context.Context, op string, lk lockSpec, token uint64, expect, value int64) (int64, bool) {
	body, _ := json.Marshal(regRequest{Lock: lk.String(), Token: token, Sess: wk.sess.name, Expect: expect, Value: value})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, wk.cfg.Register+"/"+op, bytes.NewReader(body))
	if err != nil {
		return 0, false
	}
	resp, err := wk.http.Do(req)
	r := wk.base("reg")
	r.Sess, r.RegOp, r.Lock, r.Token = wk.sess.name, op, lk.String(), token
	if err != nil {
		r.Err = err.Error()
		wk.rec.write(r)
		return 0, false
	}
	defer resp.Body.Close()
	var out regReply
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		r.Err = err.Error()
		wk.rec.write(r)
		return 0, false
	}
	r.Value, r.Accepted = out.Value, out.Accepted
	wk.rec.write(r)
	return out.Value, out.Accepted
}

func sleep(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
