//go:build chaos

package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"nacos-lockd/gateway/admin/adminapi"
)

// The nemesis injects faults from a seeded random schedule: every step it
// waits a quiet gap, starts one fault or a random combination of two or
// three that touch different nodes, holds them for a few seconds, and
// heals them. The same seed gives the same sequence of choices (which
// faults, which roles, offsets, durations); which node holds a role at
// that moment depends on the run.
type nemesis struct {
	t        *testing.T
	c        *cluster
	cs       *clientSet
	rng      *rand.Rand
	maxLease time.Duration
	enabled  map[string]bool // nil: all usable faults
	logMu    sync.Mutex
	log      *os.File
	transfer int
	bg       sync.WaitGroup
	clocks   map[int]clockSpan // current offset per node, under logMu
}

// occupancy is what the faults of one step hold, so that a combination
// never hits the same node twice.
type occupancy struct {
	nodes   map[int]bool
	clients map[int]bool
	net     bool // a partition is on
	clock   bool // a node's clock is off (one node at a time)
	members bool // a membership change is in progress
	all     bool // the whole cluster is busy
}

// fault is one started fault.
type fault struct {
	ev  faultEvent
	dur time.Duration // at least this long (pauses outlast a lease); 0: the step's
	end func()        // heals it; nil for instant faults
}

type faultSpec struct {
	name   string
	weight int
	usable func(n *nemesis) bool
	begin  func(n *nemesis, occ *occupancy) (*fault, error)
}

func always(*nemesis) bool          { return true }
func hooked(n *nemesis) bool        { return n.c.hooksOK }
func partitionable(n *nemesis) bool { return n.c.net.canPartition() && peered(n) }

// peered: the fault needs Raft peers (a follower, a partition between
// members, a leadership transfer, a membership change), which a
// single-node run does not have.
func peered(n *nemesis) bool { return !n.c.single }

var faultSpecs = []faultSpec{
	{"kill-leader", 3, always, func(n *nemesis, occ *occupancy) (*fault, error) {
		return n.killNode(occ, n.pickNode(occ, roleLeader), "kill-leader")
	}},
	{"kill-follower", 3, peered, func(n *nemesis, occ *occupancy) (*fault, error) {
		return n.killNode(occ, n.pickNode(occ, roleFollower), "kill-follower")
	}},
	{"restart-leader", 2, always, (*nemesis).restartLeader},
	{"pause-node", 3, always, (*nemesis).pauseNode},
	{"partition-isolate", 3, partitionable, (*nemesis).isolate},
	{"partition-split", 2, partitionable, (*nemesis).split},
	{"partition-bridge", 2, func(n *nemesis) bool { return partitionable(n) && len(n.c.memberIndexes()) >= 5 }, (*nemesis).bridge},
	{"partition-oneway", 2, partitionable, (*nemesis).oneway},
	{"partition-clients", 2, partitionable, (*nemesis).cutClients},
	{"clock-skew", 2, hooked, (*nemesis).clockSkew},
	{"clock-jumps", 2, hooked, (*nemesis).clockJumps},
	{"leader-transfer", 2, func(n *nemesis) bool { return hooked(n) && peered(n) }, (*nemesis).leaderTransfer},
	{"disk-slow", 2, hooked, (*nemesis).diskSlow},
	{"disk-fail", 1, hooked, (*nemesis).diskFail},
	{"membership-add-remove", 1, peered, (*nemesis).addRemove},
	{"membership-rejoin-wiped", 1, peered, (*nemesis).rejoinWiped},
	{"kill-client", 2, always, (*nemesis).killClient},
	{"pause-client", 3, always, (*nemesis).pauseClient},
	{"crash-cluster", 1, always, (*nemesis).crashCluster},
}

func newNemesis(t *testing.T, c *cluster, cs *clientSet, seed uint64, maxLease time.Duration, logPath string) (*nemesis, error) {
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	n := &nemesis{t: t, c: c, cs: cs, rng: rand.New(rand.NewPCG(seed, 0x6e656d65736973)), maxLease: maxLease, log: f}
	if v := os.Getenv("CHAOS_NEMESES"); v != "" {
		n.enabled = map[string]bool{}
		for _, name := range strings.Split(v, ",") {
			n.enabled[strings.TrimSpace(name)] = true
		}
	}
	return n, nil
}

// available lists the faults this run can inject.
func (n *nemesis) available() []string {
	var out []string
	for _, s := range faultSpecs {
		if s.usable(n) && (n.enabled == nil || n.enabled[s.name]) {
			out = append(out, s.name)
		}
	}
	return out
}

func (n *nemesis) record(ev faultEvent) {
	b, _ := json.Marshal(ev)
	n.logMu.Lock()
	_, _ = n.log.Write(append(b, '\n'))
	n.logMu.Unlock()
	n.t.Logf("nemesis: %s %s (%s)", ev.Name, ev.Detail, time.Duration(max(ev.End-ev.Start, 0)).Round(time.Millisecond))
}

func (n *nemesis) dur(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(n.rng.Int64N(int64(hi-lo)+1))
}

// run injects faults until ctx ends, then heals everything.
func (n *nemesis) run(ctx context.Context) {
	defer n.healAll()
	for ctx.Err() == nil {
		sleep(ctx, n.dur(time.Second, 3*time.Second))
		if ctx.Err() != nil {
			return
		}
		k := 1
		switch x := n.rng.Float64(); {
		case x < 0.08:
			k = 3
		case x < 0.3:
			k = 2
		}
		occ := &occupancy{nodes: map[int]bool{}, clients: map[int]bool{}}
		var active []*fault
		hold := n.dur(2*time.Second, 8*time.Second)
		for range k {
			spec, ok := n.pick(occ)
			if !ok {
				break
			}
			f, err := spec.begin(n, occ)
			if err != nil {
				n.t.Logf("nemesis: %s not injected: %v", spec.name, err)
				continue
			}
			if f.end == nil {
				f.ev.End = f.ev.Start
				n.record(f.ev)
				continue
			}
			hold = max(hold, f.dur)
			active = append(active, f)
		}
		sleep(ctx, hold)
		for _, f := range slices.Backward(active) {
			f.end()
			f.ev.End = time.Now().UnixNano()
			n.record(f.ev)
		}
	}
}

func (n *nemesis) pick(occ *occupancy) (faultSpec, bool) {
	if occ.all {
		return faultSpec{}, false
	}
	var cands []faultSpec
	total := 0
	for _, s := range faultSpecs {
		if !s.usable(n) || (n.enabled != nil && !n.enabled[s.name]) {
			continue
		}
		switch {
		case strings.HasPrefix(s.name, "partition") && occ.net,
			strings.HasPrefix(s.name, "clock") && occ.clock,
			strings.HasPrefix(s.name, "membership") && occ.members,
			s.name == "crash-cluster" && (len(occ.nodes) > 0 || occ.net || occ.members):
			continue
		}
		cands = append(cands, s)
		total += s.weight
	}
	if total == 0 {
		return faultSpec{}, false
	}
	x := n.rng.IntN(total)
	for _, s := range cands {
		if x < s.weight {
			return s, true
		}
		x -= s.weight
	}
	return faultSpec{}, false
}

type role int

const (
	roleAny role = iota
	roleLeader
	roleFollower
)

// pickNode chooses a running member with the role that no fault of this
// step holds yet (the rng decides among candidates), or -1.
func (n *nemesis) pickNode(occ *occupancy, r role) int {
	leader := -1
	if r != roleAny {
		leader = n.c.leader()
	}
	var cands []int
	for _, i := range n.c.memberIndexes() {
		nd := n.c.nodes[i]
		if occ.nodes[i] || !nd.running() || nd.paused {
			continue
		}
		if (r == roleLeader && i != leader) || (r == roleFollower && i == leader) {
			continue
		}
		cands = append(cands, i)
	}
	x := n.rng.IntN(1 << 20) // drawn whatever the candidates, to keep the sequence
	if len(cands) == 0 {
		return -1
	}
	i := cands[x%len(cands)]
	occ.nodes[i] = true
	return i
}

func (n *nemesis) event(name string, format string, args ...any) faultEvent {
	return faultEvent{Name: name, Detail: fmt.Sprintf(format, args...), Start: time.Now().UnixNano()}
}

var errNoTarget = fmt.Errorf("no node available for it")

func (n *nemesis) killNode(occ *occupancy, i int, name string) (*fault, error) {
	if i < 0 {
		return nil, errNoTarget
	}
	ev := n.event(name, "kill -9 node %d", i)
	n.c.kill(i)
	return &fault{ev: ev, end: func() { n.c.start(i, false) }}, nil
}

func (n *nemesis) restartLeader(occ *occupancy) (*fault, error) {
	i := n.pickNode(occ, roleLeader)
	if i < 0 {
		return nil, errNoTarget
	}
	ev := n.event("restart-leader", "SIGTERM node %d (hands leadership over, resets its clients), start it again", i)
	n.c.signal(i, syscall.SIGTERM)
	nd := n.c.nodes[i]
	select {
	case <-nd.exited:
	case <-time.After(20 * time.Second):
		n.c.kill(i)
	}
	return &fault{ev: ev, end: func() { n.c.start(i, false) }}, nil
}

func (n *nemesis) pauseNode(occ *occupancy) (*fault, error) {
	r := roleFollower
	if n.rng.IntN(2) == 0 {
		r = roleLeader
	}
	i := n.pickNode(occ, r)
	if i < 0 {
		return nil, errNoTarget
	}
	ev := n.event("pause-node", "SIGSTOP node %d", i)
	n.c.signal(i, syscall.SIGSTOP)
	return &fault{ev: ev, dur: n.maxLease + n.dur(time.Second, 3*time.Second), end: func() { n.c.signal(i, syscall.SIGCONT) }}, nil
}

// others are every node but i, the spare included.
func (n *nemesis) others(i int) []int {
	var out []int
	for _, nd := range n.c.nodes {
		if nd.i != i {
			out = append(out, nd.i)
		}
	}
	return out
}

func (n *nemesis) cutBoth(a, b []int) error {
	for _, x := range a {
		for _, y := range b {
			if err := n.c.net.cut(x, y); err != nil {
				return err
			}
			if err := n.c.net.cut(y, x); err != nil {
				return err
			}
		}
	}
	return nil
}

func (n *nemesis) healNet() {
	if err := n.c.net.heal(); err != nil {
		n.t.Logf("nemesis: heal: %v", err)
	}
}

func (n *nemesis) isolate(occ *occupancy) (*fault, error) {
	r := roleFollower
	if n.rng.IntN(2) == 0 {
		r = roleLeader
	}
	i := n.pickNode(occ, r)
	if i < 0 {
		return nil, errNoTarget
	}
	occ.net = true
	ev := n.event("partition-isolate", "node %d cut off from every other node", i)
	if err := n.cutBoth([]int{i}, n.others(i)); err != nil {
		n.healNet()
		return nil, err
	}
	return &fault{ev: ev, end: n.healNet}, nil
}

func (n *nemesis) split(occ *occupancy) (*fault, error) {
	members := n.c.memberIndexes()
	perm := n.rng.Perm(len(members))
	minority := (len(members) - 1) / 2
	var a, b []int
	for j, p := range perm {
		if j < minority {
			a = append(a, members[p])
		} else {
			b = append(b, members[p])
		}
	}
	occ.net = true
	ev := n.event("partition-split", "minority %v | majority %v", a, b)
	if err := n.cutBoth(a, b); err != nil {
		n.healNet()
		return nil, err
	}
	return &fault{ev: ev, end: n.healNet}, nil
}

func (n *nemesis) bridge(occ *occupancy) (*fault, error) {
	members := n.c.memberIndexes()
	perm := n.rng.Perm(len(members))
	m := members[perm[0]]
	half := (len(members) - 1) / 2
	var a, b []int
	for j, p := range perm[1:] {
		if j < half {
			a = append(a, members[p])
		} else {
			b = append(b, members[p])
		}
	}
	occ.net = true
	ev := n.event("partition-bridge", "%v | %v, node %d sees both sides", a, b, m)
	if err := n.cutBoth(a, b); err != nil {
		n.healNet()
		return nil, err
	}
	return &fault{ev: ev, end: n.healNet}, nil
}

func (n *nemesis) oneway(occ *occupancy) (*fault, error) {
	i := n.pickNode(occ, roleAny)
	if i < 0 {
		return nil, errNoTarget
	}
	occ.net = true
	out := n.rng.IntN(2) == 0
	var ev faultEvent
	var err error
	if out {
		ev = n.event("partition-oneway", "node %d cannot send to anyone (it still receives)", i)
		for _, j := range n.others(i) {
			if err = n.c.net.cut(i, j); err != nil {
				break
			}
		}
	} else {
		ev = n.event("partition-oneway", "nobody can send to node %d (it still sends)", i)
		for _, j := range n.others(i) {
			if err = n.c.net.cut(j, i); err != nil {
				break
			}
		}
	}
	if err != nil {
		n.healNet()
		return nil, err
	}
	return &fault{ev: ev, end: n.healNet}, nil
}

// setClock changes node i's clock offset and records the interval the
// previous offset lasted (the model's clock allowance comes from these).
// cutClients cuts one node off from its clients (not from the other
// nodes): connections die without a FIN, so the server keeps them.
func (n *nemesis) cutClients(occ *occupancy) (*fault, error) {
	i := n.pickNode(occ, roleAny)
	if i < 0 {
		return nil, errNoTarget
	}
	occ.net = true
	ev := n.event("partition-clients", "node %d cut off from the clients (not from the other nodes)", i)
	if err := n.c.net.cutClients(i); err != nil {
		n.healNet()
		return nil, err
	}
	return &fault{ev: ev, end: n.healNet}, nil
}

func (n *nemesis) setClock(i int, off time.Duration) {
	n.logMu.Lock()
	if n.clocks == nil {
		n.clocks = map[int]clockSpan{}
	}
	prev := n.clocks[i]
	now := time.Now().UnixNano()
	n.clocks[i] = clockSpan{off: off, since: now}
	n.logMu.Unlock()
	if prev.off != 0 {
		b, _ := json.Marshal(faultEvent{Name: clockIntervalEvent, Detail: fmt.Sprintf("node %d clock offset %v", i, prev.off),
			Start: prev.since, End: now, ClockMs: prev.off.Milliseconds(), Node: i})
		n.logMu.Lock()
		_, _ = n.log.Write(append(b, '\n'))
		n.logMu.Unlock()
	}
	if err := n.c.setHook(i, "clock-offset", off.String()); err != nil {
		n.t.Logf("nemesis: clock: %v", err)
	}
}

type clockSpan struct {
	off   time.Duration
	since int64
}

func (n *nemesis) clockSkew(occ *occupancy) (*fault, error) {
	i := n.pickNode(occ, roleAny)
	if i < 0 {
		return nil, errNoTarget
	}
	occ.clock = true
	off := n.dur(300*time.Millisecond, 4*time.Second)
	if n.rng.IntN(2) == 0 {
		off = -off
	}
	ev := n.event("clock-skew", "node %d clock offset %v", i, off)
	n.setClock(i, off)
	return &fault{ev: ev, end: func() { n.setClock(i, 0) }}, nil
}

// clockJumps moves one node's clock back and forth every 700 ms.
func (n *nemesis) clockJumps(occ *occupancy) (*fault, error) {
	i := n.pickNode(occ, roleAny)
	if i < 0 {
		return nil, errNoTarget
	}
	occ.clock = true
	jumps := make([]time.Duration, 12)
	for j := range jumps {
		jumps[j] = n.dur(0, 6*time.Second) - 3*time.Second
	}
	ev := n.event("clock-jumps", "node %d clock jumps within +-3s every 700ms: %v", i, jumps)
	stop := make(chan struct{})
	n.bg.Add(1)
	go func() {
		defer n.bg.Done()
		t := time.NewTicker(700 * time.Millisecond)
		defer t.Stop()
		for _, j := range jumps {
			n.setClock(i, j)
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	return &fault{ev: ev, end: func() {
		close(stop)
		n.bg.Wait()
		n.setClock(i, 0)
	}}, nil
}

func (n *nemesis) leaderTransfer(occ *occupancy) (*fault, error) {
	i := n.pickNode(occ, roleLeader)
	if i < 0 {
		return nil, errNoTarget
	}
	n.transfer++
	ev := n.event("leader-transfer", "node %d asked to hand leadership over", i)
	if err := n.c.setHook(i, "transfer-leader", fmt.Sprint(n.transfer)); err != nil {
		return nil, err
	}
	return &fault{ev: ev}, nil
}

func (n *nemesis) diskSlow(occ *occupancy) (*fault, error) {
	i := n.pickNode(occ, roleAny)
	if i < 0 {
		return nil, errNoTarget
	}
	d := n.dur(20*time.Millisecond, 300*time.Millisecond)
	ev := n.event("disk-slow", "node %d: every storage commit takes %v more", i, d)
	if err := n.c.setHook(i, "storage-slow", d.String()); err != nil {
		return nil, err
	}
	return &fault{ev: ev, end: func() { _ = n.c.setHook(i, "storage-slow", "") }}, nil
}

// diskFail makes one node's storage fail: its replica halts on the next
// applied batch. The node is restarted with a working disk at the end.
func (n *nemesis) diskFail(occ *occupancy) (*fault, error) {
	i := n.pickNode(occ, roleAny)
	if i < 0 {
		return nil, errNoTarget
	}
	ev := n.event("disk-fail", "node %d: storage commits fail", i)
	if err := n.c.setHook(i, "storage-fail", "true"); err != nil {
		return nil, err
	}
	return &fault{ev: ev, end: func() {
		_ = n.c.setHook(i, "storage-fail", "")
		n.c.kill(i) // a halted replica may leave the process up
		n.c.start(i, false)
	}}, nil
}

// addRemove adds the spare node as a member and removes it at the end.
func (n *nemesis) addRemove(occ *occupancy) (*fault, error) {
	spare := len(n.c.nodes) - 1
	sp := n.c.nodes[spare]
	if sp.member || sp.running() || occ.nodes[spare] {
		return nil, errNoTarget
	}
	via := n.pickNode(occ, roleAny)
	if via < 0 {
		return nil, errNoTarget
	}
	occ.members, occ.nodes[spare] = true, true
	ev := n.event("membership-add-remove", "node %d added through node %d, removed at the end", spare, via)
	// With the level this build reads, as nacos-lockctl sends it: a
	// request without one counts as an older build's and is refused.
	if err := n.c.adminCall(via, "POST", "/v1/cluster/members", fmt.Sprintf(`{"address":%q,"level":%d}`, sp.address(), adminapi.BuildLevel)); err != nil {
		return nil, err
	}
	n.c.mu.Lock()
	sp.member = true
	n.c.mu.Unlock()
	_ = os.RemoveAll(sp.dataDir)
	n.c.start(spare, true)
	return &fault{ev: ev, end: func() {
		var err error
		for _, j := range n.c.memberIndexes() {
			if j == spare || !n.c.nodes[j].running() || n.c.nodes[j].paused {
				continue
			}
			if err = n.c.adminCall(j, "DELETE", "/v1/cluster/members/"+sp.address(), ""); err == nil {
				break
			}
		}
		if err != nil {
			n.t.Logf("nemesis: remove node %d: %v (it stays a member)", spare, err)
			return
		}
		n.c.kill(spare)
		n.c.mu.Lock()
		sp.member = false
		n.c.mu.Unlock()
		_ = os.RemoveAll(sp.dataDir)
	}}, nil
}

// rejoinWiped kills a follower, wipes its data and starts it with --join:
// it comes back as a new replica and catches up from a snapshot.
func (n *nemesis) rejoinWiped(occ *occupancy) (*fault, error) {
	i := n.pickNode(occ, roleFollower)
	if i < 0 {
		return nil, errNoTarget
	}
	occ.members = true
	ev := n.event("membership-rejoin-wiped", "node %d killed, data wiped, back with --join", i)
	n.c.kill(i)
	if err := os.RemoveAll(n.c.nodes[i].dataDir); err != nil {
		return nil, err
	}
	n.c.start(i, true)
	return &fault{ev: ev, end: func() {}}, nil
}

func (n *nemesis) pickClient(occ *occupancy) int {
	var cands []int
	for s := range n.cs.slots {
		if !occ.clients[s] {
			cands = append(cands, s)
		}
	}
	x := n.rng.IntN(1 << 20)
	if len(cands) == 0 {
		return -1
	}
	s := cands[x%len(cands)]
	occ.clients[s] = true
	return s
}

func (n *nemesis) killClient(occ *occupancy) (*fault, error) {
	s := n.pickClient(occ)
	if s < 0 {
		return nil, errNoTarget
	}
	ev := n.event("kill-client", "")
	proc := n.cs.kill(s)
	ev.Detail = fmt.Sprintf("kill -9 client process p%d (its locks must pass on)", proc)
	return &fault{ev: ev, end: func() { n.cs.start(s) }}, nil
}

func (n *nemesis) pauseClient(occ *occupancy) (*fault, error) {
	s := n.pickClient(occ)
	if s < 0 {
		return nil, errNoTarget
	}
	ev := n.event("pause-client", "")
	proc := n.cs.signal(s, syscall.SIGSTOP)
	ev.Detail = fmt.Sprintf("SIGSTOP client process p%d past its leases", proc)
	return &fault{ev: ev, dur: n.maxLease + n.dur(time.Second, 3*time.Second),
		end: func() { n.cs.signal(s, syscall.SIGCONT) }}, nil
}

func (n *nemesis) crashCluster(occ *occupancy) (*fault, error) {
	occ.all = true
	members := n.c.memberIndexes()
	for _, i := range members {
		occ.nodes[i] = true
	}
	ev := n.event("crash-cluster", "kill -9 every node %v, restart them all", members)
	for _, i := range members {
		n.c.signal(i, syscall.SIGKILL)
	}
	for _, i := range members {
		n.c.kill(i)
	}
	return &fault{ev: ev, dur: 2 * time.Second, end: func() {
		for _, i := range members {
			n.c.start(i, false)
		}
	}}, nil
}

// healAll undoes anything left: partitions, pauses, clock offsets, storage
// faults, dead members and paused clients.
func (n *nemesis) healAll() {
	n.bg.Wait()
	n.healNet()
	for _, nd := range n.c.nodes {
		if n.c.hooksOK {
			n.setClock(nd.i, 0)
			for _, k := range []string{"storage-slow", "storage-fail"} {
				_ = n.c.setHook(nd.i, k, "")
			}
		}
		if nd.running() && nd.paused {
			n.c.signal(nd.i, syscall.SIGCONT)
		}
	}
	for _, i := range n.c.memberIndexes() {
		if !n.c.nodes[i].running() {
			_, err := os.Stat(n.c.nodes[i].dataDir)
			n.c.start(i, os.IsNotExist(err))
		}
	}
	for s := range n.cs.slots {
		n.cs.signal(s, syscall.SIGCONT)
		n.cs.start(s)
	}
}
