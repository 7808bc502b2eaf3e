package cluster

import (
	"context"
	"net/http"
	"testing"
	"time"
)

// probe returns node i's /readyz status, or 0 when nothing answers.
func (c *cluster) probe(i int, path string) int {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+c.nodes[i].httpAddr()+path, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// awaitReadyz polls node i's /readyz until it answers want, and returns
// every distinct answer seen on the way (0: no answer).
func (c *cluster) awaitReadyz(i, want int, within time.Duration) []int {
	c.t.Helper()
	var seen []int
	deadline := time.Now().Add(within)
	for {
		got := c.probe(i, "/readyz")
		if len(seen) == 0 || seen[len(seen)-1] != got {
			seen = append(seen, got)
		}
		if got == want {
			return seen
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("node %d /readyz did not turn %d within %v (answers seen: %v)", i, want, within, seen)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// holdReadyz checks node i's /readyz answers want for the whole of d.
func (c *cluster) holdReadyz(i, want int, d time.Duration) {
	c.t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if got := c.probe(i, "/readyz"); got != want {
			c.t.Fatalf("node %d /readyz answered %d, want %d", i, got, want)
		}
	}
}

// TestReadyzDuringStartAndLeaderLoss follows one node's /readyz through a
// cluster start (503 while it waits for a quorum, 200 once there is a
// leader), the loss of both other nodes (503: no leader), and their
// restart (200 again). /healthz stays 200 throughout: the process is up.
func TestReadyzDuringStartAndLeaderLoss(t *testing.T) {
	c := newCluster(t, 0, 3, fastProps) // ports and files only
	c.writeConf(3)

	// Start: the main port is served while Raft waits for a quorum.
	c.startAsync(0)
	seen := c.awaitReadyz(0, http.StatusServiceUnavailable, 60*time.Second)
	if len(seen) > 2 || (len(seen) == 2 && seen[0] != 0) {
		t.Fatalf("before the first 503, /readyz answered %v", seen)
	}
	if got := c.probe(0, "/healthz"); got != http.StatusOK {
		t.Fatalf("/healthz while waiting for a quorum: %d", got)
	}
	c.holdReadyz(0, http.StatusServiceUnavailable, 2*time.Second) // alone, it can never elect a leader
	c.startAsync(1)
	c.startAsync(2)
	for i := range 3 {
		c.waitReady(i)
	}
	c.awaitReadyz(0, http.StatusOK, 30*time.Second)
	c.holdReadyz(0, http.StatusOK, time.Second)

	// Leader loss: stop both other nodes, one gracefully, one killed; the
	// survivor (a follower or the leader) loses its leader within a few
	// election timeouts (300 ms) and says so.
	survivor := c.leader()
	others := []int{(survivor + 1) % 3, (survivor + 2) % 3}
	c.term(others[0])
	c.kill(others[1])
	start := time.Now()
	c.awaitReadyz(survivor, http.StatusServiceUnavailable, 15*time.Second)
	t.Logf("survivor node %d not ready %v after the others stopped", survivor, time.Since(start).Round(time.Millisecond))
	c.holdReadyz(survivor, http.StatusServiceUnavailable, time.Second)
	if got := c.probe(survivor, "/healthz"); got != http.StatusOK {
		t.Fatalf("/healthz of the survivor: %d", got)
	}

	// Restart: a quorum again, a leader, ready.
	for _, i := range others {
		c.startAsync(i)
	}
	for _, i := range others {
		c.waitReady(i)
	}
	c.awaitReadyz(survivor, http.StatusOK, 30*time.Second)
	for i := range 3 {
		if got := c.probe(i, "/readyz"); got != http.StatusOK {
			t.Fatalf("node %d after the restart: /readyz %d", i, got)
		}
	}
	if ms, err := c.members(survivor); err != nil || len(ms) != 3 {
		t.Fatalf("membership after the restart: %+v %v", ms, err)
	}

}
