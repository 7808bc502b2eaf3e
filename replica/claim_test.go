package replica

import (
	"testing"
	"time"

	"nacos-lockd/statemachine"
	"nacos-lockd/statemachine/lockview"
)

// waitQueued waits until group commit holds want commands in its queue:
// commands that wait for company instead of being proposed.
func waitQueued(t *testing.T, n *Node, want int) {
	t.Helper()
	for end := time.Now().Add(3 * time.Second); ; time.Sleep(time.Millisecond) {
		n.gc.mu.Lock()
		queued := len(n.gc.queue)
		n.gc.mu.Unlock()
		if queued >= want {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("%d commands waiting in the queue, want %d: they were proposed at once", queued, want)
		}
	}
}

// On a node, a claim's record waits for the next command for its lock and
// goes out in one entry with it; with nothing following it is committed
// once the window ends.
func TestNodeRecordsAClaimWithTheNextCommand(t *testing.T) {
	forEachEngine(t, testNodeRecordsAClaimWithTheNextCommand)
}

func testNodeRecordsAClaimWithTheNextCommand(t *testing.T, engine string) {
	env := &nodeEnv{engine: engine, dir: t.TempDir(), addr: freeAddr(t), window: 200 * time.Millisecond}
	n, db := env.start(t)
	defer db.Close()
	defer n.Close()
	raiseLevel(t, n) // CLAIMs are recorded only at the gate's level
	now := func() int64 { return time.Now().UnixMilli() }
	hand := func(key string) lockview.Lock {
		// a holds, b queues, a releases: b holds an unclaimed grant.
		propose(t, n, acq(N, key, "a", "c1", now(), 60000, 0))
		propose(t, n, acq(N, key, "b", "c2", now(), 60000, 60000))
		propose(t, n, rel(N, key, "a", now()))
		l, err := n.Lock(N, key)
		if err != nil || l.Owner != "b" || !l.Unclaimed {
			t.Fatalf("%s after hand-off: %+v %v", key, l, err)
		}
		return l
	}
	record := func(l lockview.Lock) <-chan error {
		done, err := n.Record(time.Now().Add(10*time.Second), claimCmd(N, l.Key, "b", "c2", now(), 60000, l.Token))
		if err != nil {
			t.Fatal(err)
		}
		return done
	}

	l := hand("paired")
	before, _ := n.Stats()
	done := record(l)
	if r := propose(t, n, rel(N, "paired", "b", now())); !r.Success() || r.Count != 0 {
		t.Fatalf("release after the claim: %+v", r) // a release of an unclaimed grant would answer the same; the entry count tells them apart
	}
	if err := <-done; err != nil {
		t.Fatalf("claim record: %v", err)
	}
	after, _ := n.Stats()
	if entries := after.Applied - before.Applied; entries != 1 {
		t.Fatalf("claim record and release took %d entries; want one", entries)
	}

	// The previous holder queueing again behind a queued claim rides along
	// too, and goes last: the release before it frees the lock, so it is
	// granted at once instead of queued.
	l = hand("three")
	before, _ = n.Stats()
	done = record(l)
	again := make(chan statemachine.Result, 1)
	go func() { again <- propose(t, n, acq(N, "three", "a", "c1", now(), 60000, 60000)) }()
	waitQueued(t, n, 2)
	if r := propose(t, n, rel(N, "three", "b", now())); !r.Success() || r.Count != 0 {
		t.Fatalf("release after the claim: %+v", r)
	}
	if r := <-again; !r.Success() || r.Count != 1 || r.WaitPosition >= 0 {
		t.Fatalf("acquire queued before the release: %+v; want granted, placed after it", r)
	}
	if err := <-done; err != nil {
		t.Fatalf("claim record: %v", err)
	}
	after, _ = n.Stats()
	if entries := after.Applied - before.Applied; entries != 1 {
		t.Fatalf("claim record, acquire and release took %d entries; want one", entries)
	}

	// The same when the re-queue comes before the claim: the table shows
	// the lock handed to b and not yet claimed, so it waits anyway.
	l = hand("early")
	before, _ = n.Stats()
	again = make(chan statemachine.Result, 1)
	go func() { again <- propose(t, n, acq(N, "early", "a", "c1", now(), 60000, 60000)) }()
	waitQueued(t, n, 1)
	done = record(l)
	if r := propose(t, n, rel(N, "early", "b", now())); !r.Success() || r.Count != 0 {
		t.Fatalf("release after the claim: %+v", r)
	}
	if r := <-again; !r.Success() || r.Count != 1 || r.WaitPosition >= 0 {
		t.Fatalf("acquire queued before the claim: %+v; want granted, placed after the release", r)
	}
	if err := <-done; err != nil {
		t.Fatalf("claim record: %v", err)
	}
	after, _ = n.Stats()
	if entries := after.Applied - before.Applied; entries != 1 {
		t.Fatalf("acquire, claim record and release took %d entries; want one", entries)
	}

	// Two earlier holders queueing again behind x: only one ACQUIRE per lock
	// fits an entry, but the release goes ahead of the second, not behind
	// it in an entry of its own: x is handed the lock in the entry that
	// queues a, who is then first in line, not second.
	l = hand("two")
	propose(t, n, acq(N, "two", "x", "c3", now(), 60000, 60000)) // queued behind b's grant
	before, _ = n.Stats()
	again = make(chan statemachine.Result, 1)
	second := make(chan statemachine.Result, 1)
	go func() { again <- propose(t, n, acq(N, "two", "a", "c1", now(), 60000, 60000)) }()
	waitQueued(t, n, 1)
	go func() { second <- propose(t, n, acq(N, "two", "y", "c4", now(), 60000, 60000)) }()
	waitQueued(t, n, 2)
	done = record(l)
	if r := propose(t, n, rel(N, "two", "b", now())); !r.Success() || r.Count != 0 {
		t.Fatalf("release after the claim: %+v", r)
	}
	if err := <-done; err != nil {
		t.Fatalf("claim record: %v", err)
	}
	if r := <-again; r.Success() || r.WaitPosition != 0 {
		t.Fatalf("first acquire queued again: %+v; want queued behind x, who got the lock", r)
	}
	if r := <-second; r.Success() || r.WaitPosition != 1 {
		t.Fatalf("second acquire queued again: %+v; want queued behind a", r)
	}
	after, _ = n.Stats()
	if entries := after.Applied - before.Applied; entries != 2 {
		t.Fatalf("claim record, release and two acquires took %d entries; want two", entries)
	}

	l = hand("alone")
	done = record(l)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("lone claim record: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a lone claim record was never committed")
	}
	if l, err := n.Lock(N, "alone"); err != nil || l.Owner != "b" || l.Unclaimed {
		t.Fatalf("after the lone claim record: %+v %v", l, err)
	}
}
