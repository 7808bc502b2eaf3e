package nacoslock_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"nacos-lockd/interop/procs"
	"nacos-lockd/nacoslock"
)

// cluster is three real nacos-lockd processes on loopback, configured as
// interop/cluster configures them (cluster.conf with every member).
type cluster struct {
	t     *testing.T
	nodes []*procs.Node
}

func startCluster(t *testing.T, props map[string]string) *cluster {
	t.Helper()
	dir := t.TempDir()
	conf := filepath.Join(dir, "cluster.conf")
	propsPath := filepath.Join(dir, "application.properties")
	var p strings.Builder
	for k, v := range props {
		fmt.Fprintf(&p, "%s=%s\n", k, v)
	}
	if err := os.WriteFile(propsPath, []byte(p.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	c := &cluster{t: t}
	var lines strings.Builder
	for i, port := range procs.FreePorts(t, 3) {
		n := procs.New(t, port, filepath.Join(dir, fmt.Sprintf("node%d", i)),
			"--cluster-conf", conf, "--ip", "127.0.0.1", "--config", propsPath)
		c.nodes = append(c.nodes, n)
		fmt.Fprintln(&lines, n.HTTPAddr())
	}
	if err := os.WriteFile(conf, []byte(lines.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, n := range c.nodes {
		n.Start()
	}
	for _, n := range c.nodes {
		n.WaitReady(90 * time.Second)
	}
	return c
}

// leader is the index of the node every running node names as leader.
func (c *cluster) leader() int {
	c.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		agreed := -1
		ok := true
		for _, n := range c.nodes {
			if !n.Running() || n.Paused() {
				continue
			}
			ms, err := procs.Members(n.HTTPAddr(), 5*time.Second)
			if err != nil {
				ok = false
				break
			}
			li := -1
			for _, m := range ms {
				if m.Role == "leader" {
					li = c.index(m.Address)
				}
			}
			if li < 0 || (agreed >= 0 && li != agreed) {
				ok = false
				break
			}
			agreed = li
		}
		if ok && agreed >= 0 {
			return agreed
		}
		time.Sleep(100 * time.Millisecond)
	}
	c.t.Fatal("no agreed leader within 30 s")
	return -1
}

func (c *cluster) index(addr string) int {
	for i, n := range c.nodes {
		if n.HTTPAddr() == addr {
			return i
		}
	}
	return -1
}

// addrs lists the nodes' main ports in the order of idx.
func (c *cluster) addrs(idx ...int) []string {
	var out []string
	for _, i := range idx {
		out = append(out, c.nodes[i].HTTPAddr())
	}
	return out
}

// TestClusterLeaderKill: the leader is killed (SIGKILL) while a client
// connected to it holds a lock, and while two waiters are queued, one of
// them also connected to the leader. The holder reconnects to another
// node and renews from there within the node grace, so it keeps the lock;
// the waiter that lost its connection queues again from its new one
// without losing its place. Then the lock passes holder -> first waiter -> second
// waiter, in order, with rising tokens, and never to two at once.
func TestClusterLeaderKill(t *testing.T) {
	c := startCluster(t, map[string]string{"nacos.lock.node_grace_ms": "5000"})
	l := c.leader()
	f1, f2 := (l+1)%3, (l+2)%3
	ctx := ctxFor(t, 90*time.Second)
	const k = "leader-kill"

	holder := dial(t, c.addrs(l, f1, f2)).Mutex(k, nacoslock.WithLease(30*time.Second))
	if err := holder.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	before, _ := adminLock(t, c.nodes[f1].HTTPAddr(), nacoslock.NonReentrant, k)

	var inside, overlap atomic.Int64
	var mu sync.Mutex
	var order []string
	var tokens []uint64
	waiter := func(name string, m *nacoslock.Mutex, done chan<- error) {
		if err := m.Lock(ctx); err != nil {
			done <- fmt.Errorf("%s: %w", name, err)
			return
		}
		if inside.Add(1) != 1 {
			overlap.Add(1)
		}
		mu.Lock()
		order, tokens = append(order, name), append(tokens, m.FencingToken())
		mu.Unlock()
		time.Sleep(50 * time.Millisecond)
		inside.Add(-1)
		done <- m.Unlock(ctx)
	}
	wa := dial(t, c.addrs(l, f2, f1)).Mutex(k)
	wb := dial(t, c.addrs(f2, f1, l)).Mutex(k)
	doneA, doneB := make(chan error, 1), make(chan error, 1)
	go waiter("a", wa, doneA)
	waitQueued(t, c.nodes[f1].HTTPAddr(), nacoslock.NonReentrant, k, 1)
	go waiter("b", wb, doneB)
	queued := waitQueued(t, c.nodes[f1].HTTPAddr(), nacoslock.NonReentrant, k, 2)

	c.nodes[l].Kill()
	// Both clients that were on the leader bind what they had to their
	// new connections (the holder by a renewal, the waiter by asking
	// again, which keeps its place), before the new leader's node grace
	// ends: after it, the leader releases what the dead node's
	// connections still hold, and the waiter would queue again at the
	// tail. Without the renewal at reconnect the holder's next renewal
	// would come after the grace (a 30 s lease renews every 10 s), the
	// lock would pass to a, and this would not hold.
	var v lockView
	waitFor(t, 30*time.Second, "the holder and the first waiter to move to new connections", func() bool {
		var err error
		if v, _, err = tryAdminLock(c.nodes[f1].HTTPAddr(), nacoslock.NonReentrant, k); err != nil {
			return false // no leader yet
		}
		return v.Owner == holder.Owner() && v.ConnectionID != "" && v.ConnectionID != before.ConnectionID &&
			len(v.Waiters) == 2 && v.Waiters[0].Owner == wa.Owner() && v.Waiters[0].ConnectionID != queued.Waiters[0].ConnectionID &&
			v.Waiters[1].Owner == wb.Owner()
	})
	if v.FencingToken != before.FencingToken || closed(holder.Lost()) {
		t.Fatalf("after the leader kill: %+v, lost %v (%v), want the grant of token %d", v, closed(holder.Lost()), holder.Err(), before.FencingToken)
	}
	if inside.Add(1) != 1 {
		overlap.Add(1)
	}
	inside.Add(-1)
	if err := holder.Unlock(ctx); err != nil {
		t.Fatalf("holder unlock after the leader kill: %v", err)
	}
	for _, ch := range []chan error{doneA, doneB} {
		if err := <-ch; err != nil {
			t.Fatal(err)
		}
	}
	if n := overlap.Load(); n != 0 {
		t.Fatalf("%d overlapping holds", n)
	}
	if len(order) != 2 || order[0] != "a" || order[1] != "b" {
		t.Fatalf("hand-off order %v, want [a b]", order)
	}
	if tokens[0] <= before.FencingToken || tokens[1] <= tokens[0] {
		t.Fatalf("tokens holder %d, a %d, b %d: not rising", before.FencingToken, tokens[0], tokens[1])
	}
}

// lineLog collects a client's log messages.
type lineLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lineLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *lineLog) has(s string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Contains(l.buf.String(), s)
}

// TestClusterPartitionLostAndGracefulMove: the holder's only server is
// cut off (SIGSTOP) from the client and the cluster. No renewal gets
// through, so Lost closes within the lease; the leader releases the dead
// node's clients' locks after the node grace and hands the lock to the
// waiter on another node, with a higher fencing token. Then that node is
// stopped gracefully: it asks its clients to move (ConnectResetRequest),
// and the new holder keeps the lock across the move.
func TestClusterPartitionLostAndGracefulMove(t *testing.T) {
	c := startCluster(t, map[string]string{"nacos.lock.node_grace_ms": "1500"})
	l := c.leader()
	cut, other := (l+1)%3, (l+2)%3
	ctx := ctxFor(t, 90*time.Second)
	const k = "partition"

	holder := dial(t, c.addrs(cut)).Mutex(k, nacoslock.WithLease(3*time.Second))
	if err := holder.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	tok := holder.FencingToken()
	log := &lineLog{}
	wcl := dial(t, c.addrs(other, l), nacoslock.WithLogger(slog.New(slog.NewTextHandler(log, nil))))
	w := wcl.Mutex(k, nacoslock.WithLease(10*time.Second))
	got := make(chan error, 1)
	go func() { got <- w.Lock(ctx) }()
	waitQueued(t, c.nodes[l].HTTPAddr(), nacoslock.NonReentrant, k, 1)

	c.nodes[cut].Pause()
	select {
	case <-holder.Lost():
	case <-ctx.Done():
		t.Fatal("Lost not closed while no renewal could get through")
	}
	if !errors.Is(holder.Err(), nacoslock.ErrLost) {
		t.Fatalf("holder Err: %v, want ErrLost", holder.Err())
	}
	if err := <-got; err != nil {
		t.Fatalf("waiter after the partition: %v", err)
	}
	if w.FencingToken() <= tok {
		t.Fatalf("next holder's token %d, partitioned holder's %d", w.FencingToken(), tok)
	}
	c.nodes[cut].Resume()
	if err := holder.Unlock(ctx); !errors.Is(err, nacoslock.ErrNotHeld) {
		t.Fatalf("unlock by the partitioned holder: %v, want ErrNotHeld", err)
	}

	before, _ := adminLock(t, c.nodes[l].HTTPAddr(), nacoslock.NonReentrant, k)
	c.nodes[other].Term(30 * time.Second)
	waitFor(t, 20*time.Second, "the new holder to renew from its new connection", func() bool {
		v, _, err := tryAdminLock(c.nodes[l].HTTPAddr(), nacoslock.NonReentrant, k)
		return err == nil && v.ConnectionID != "" && v.ConnectionID != before.ConnectionID
	})
	if !log.has("server asked the client to move") {
		t.Fatalf("the client did not get ConnectResetRequest; its log:\n%s", log.buf.String())
	}
	v, held := adminLock(t, c.nodes[l].HTTPAddr(), nacoslock.NonReentrant, k)
	if !held || v.Owner != w.Owner() || v.FencingToken != w.FencingToken() || closed(w.Lost()) {
		t.Fatalf("after the graceful move: held %v %+v, lost %v (%v)", held, v, closed(w.Lost()), w.Err())
	}
	if err := w.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
}
