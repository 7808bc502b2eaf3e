package gateway

import (
	"context"
	"sync"
	"testing"
	"time"

	"nacos-lockd/statemachine"
)

// TestMonitorCleansDeadAndImportedConns pins which locks the leader's
// dead-node monitor releases: those of connections minted by a node that
// stays down for NodeGrace, and those of connections no node of ours
// minted (Nacos's ids from an imported snapshot, foreign ids), whatever
// their port reads as; it keeps this node's and live nodes'.
func TestMonitorCleansDeadAndImportedConns(t *testing.T) {
	var mu sync.Mutex
	asked := map[string]int{}
	ts := startServer(t, Config{
		NodeID: "1", NodeGrace: 50 * time.Millisecond, NodeCheckInterval: 10 * time.Millisecond,
		PeerAlive: func(_ context.Context, node string) bool {
			mu.Lock()
			defer mu.Unlock()
			asked[node]++
			return node == "2"
		},
	})
	kept := map[string]string{ // key -> holder's connection
		"self": "1700000000000_127.0.0.1_5000_1",
		"live": "1700000000000_10.0.0.2_5000_2",
	}
	cleaned := map[string]string{
		"dead":           "1700000000000_10.0.0.3_5000_3",
		"dead-zone":      "1700000000000_fe80::1%eth_0_5000_3",
		"nacos":          "1699999999999_10.0.0.9_8848",
		"nacos-port-two": "1699999999999_10.0.0.9_2", // not node 2's, though its port reads "2"
		"foreign":        "nacos-conn",
	}
	now := time.Now().UnixMilli()
	for _, m := range []map[string]string{kept, cleaned} {
		for key, conn := range m {
			r, err := ts.table.Propose(context.Background(), statemachine.Command{
				Op: statemachine.OpAcquire, NowMs: now, Kind: statemachine.KindNonReentrant,
				Key: key, Owner: "o-" + key, ConnID: conn, LeaseMs: 60_000,
			})
			if err != nil || !r.Success() {
				t.Fatalf("acquire %s: %+v %v", key, r, err)
			}
		}
	}
	// A waiter of a Nacos connection leaves the queue too.
	if r, _ := ts.table.Propose(context.Background(), statemachine.Command{
		Op: statemachine.OpAcquire, NowMs: now, Kind: statemachine.KindNonReentrant,
		Key: "live", Owner: "o-waiter", ConnID: "1699999999999_10.0.0.9_8849", LeaseMs: 60_000, WaitMs: 60_000,
	}); r.Success() {
		t.Fatalf("waiter acquired: %+v", r)
	}

	deadline := time.Now().Add(10 * time.Second)
	for {
		left := 0
		for key := range cleaned {
			if ts.table.Lock(statemachine.KindNonReentrant, key).Found {
				left++
			}
		}
		if len(ts.table.Lock(statemachine.KindNonReentrant, "live").Waiters) > 0 {
			left++
		}
		if left == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d locks or waiters of dead or imported connections left", left)
		}
		time.Sleep(10 * time.Millisecond)
	}
	for key, conn := range kept {
		if l := ts.table.Lock(statemachine.KindNonReentrant, key); l.Owner != "o-"+key || l.ConnID != conn {
			t.Errorf("lock %s: %+v, want kept", key, l)
		}
	}
	ts.stop()
	mu.Lock()
	defer mu.Unlock()
	if asked[""] != 0 || asked["1"] != 0 || asked["8848"] != 0 {
		t.Errorf("asked after %v: not a node, or this one", asked)
	}
	if asked["2"] == 0 || asked["3"] == 0 {
		t.Errorf("asked after %v: want nodes 2 and 3", asked)
	}
}
