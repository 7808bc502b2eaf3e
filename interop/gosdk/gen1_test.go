package gosdk

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// The Gen 1 scenarios of the Java suite, through the Go SDK's RPC client.

const types = ", expected REENTRANT, NON_REENTRANT or NACOS_LOCK"

func dial(t *testing.T, servers ...*lockd) *Client {
	t.Helper()
	list := make([]Server, 0, len(servers))
	for _, s := range servers {
		list = append(list, s.server())
	}
	c, err := Dial(list, 15*time.Second)
	if err != nil {
		t.Fatalf("SDK client: %v (SDK log: %s)", err, sdkLog)
	}
	t.Cleanup(c.Close)
	return c
}

func do(t *testing.T, c *Client, op string, li *LockInstance) *LockOperationResponse {
	t.Helper()
	r, err := c.Do(op, li)
	if err != nil {
		t.Fatalf("%s: %v", op, err)
	}
	return r
}

func acquire(t *testing.T, c *Client, key string, lease int64) *LockOperationResponse {
	t.Helper()
	return do(t, c, "ACQUIRE", Instance(key, lease, "NACOS_LOCK"))
}

func release(t *testing.T, c *Client, key string) *LockOperationResponse {
	t.Helper()
	return do(t, c, "RELEASE", Instance(key, -1, "NACOS_LOCK"))
}

// granted checks a successful ACQUIRE and returns its fencing token.
func granted(t *testing.T, r *LockOperationResponse, what string) int64 {
	t.Helper()
	if r.GetResultCode() != 200 || !r.Granted() || r.LockResult == nil || !r.LockResult.Success ||
		r.LockResult.ReentrantCount != 1 || r.LockResult.WaitPosition != -1 || r.LockResult.FencingToken == nil {
		t.Fatalf("%s: want a grant with a fencing token, got %v", what, r)
	}
	return *r.LockResult.FencingToken
}

func refused(t *testing.T, r *LockOperationResponse, what, errorMessage string) {
	t.Helper()
	if r.GetResultCode() != 200 || r.Result == nil || *r.Result || r.LockResult == nil || r.LockResult.Success ||
		r.LockResult.FencingToken != nil || (errorMessage != "" && r.LockResult.ErrorMessage != errorMessage) {
		t.Fatalf("%s: want 200/result false (%q), got %v", what, errorMessage, r)
	}
}

func rejected(t *testing.T, r *LockOperationResponse, message string) {
	t.Helper()
	if r.GetResultCode() != 500 || r.GetErrorCode() != 0 || r.GetMessage() != message || r.Result == nil || *r.Result {
		t.Fatalf("want 500/errorCode 0/%q/result false, got %v", message, r)
	}
}

func poll(t *testing.T, what string, within time.Duration, f func() bool) time.Duration {
	t.Helper()
	t0 := time.Now()
	for !f() {
		if time.Since(t0) > within {
			t.Fatalf("%s: not true within %v", what, within)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return time.Since(t0)
}

func TestAcquireRefuseRelease(t *testing.T) {
	s := startLockd(t, "acquire", nil)
	c1, c2 := dial(t, s), dial(t, s)
	t1 := granted(t, acquire(t, c1, "k", 30000), "c1 acquires a free key")
	refused(t, acquire(t, c2, "k", 30000), "c2 (another connection)", "Lock is held by another owner")
	refused(t, acquire(t, c2, "k", -1), "c2 with the default lease", "Lock is held by another owner")
	refused(t, acquire(t, c1, "k", 30000), "c1 again (NACOS_LOCK is not reentrant)", "")
	refused(t, release(t, c2, "k"), "release by a non-holder", "")
	refused(t, acquire(t, c2, "k", 30000), "still held by c1", "")
	if r := release(t, c1, "k"); r.GetResultCode() != 200 || !r.Granted() || r.LockResult == nil || r.LockResult.ReentrantCount != 0 {
		t.Fatalf("release by the holder: %v", r)
	}
	refused(t, release(t, c1, "k"), "second release", "")
	t2 := granted(t, acquire(t, c2, "k", 30000), "c2 after the release")
	if t2 <= t1 {
		t.Fatalf("fencing tokens must increase: %d then %d", t1, t2)
	}
	t.Logf("fencing tokens %d, %d", t1, t2)
}

func TestShortLeaseLetsAnotherClientIn(t *testing.T) {
	s := startLockd(t, "expiry", nil)
	c1, c2 := dial(t, s), dial(t, s)
	t0 := time.Now()
	granted(t, acquire(t, c1, "k", 1500), "c1 with a 1500 ms lease")
	refused(t, acquire(t, c2, "k", -1), "c2 while the lease runs", "")
	took := time.Since(t0)
	took = poll(t, "c2 acquires after the lease", 10*time.Second, func() bool { return acquire(t, c2, "k", -1).Granted() }) + took
	t.Logf("1500 ms lease: another client acquired after %v", took)
	if took < 1500*time.Millisecond {
		t.Fatalf("acquired after %v, before the lease ended", took)
	}
	refused(t, release(t, c1, "k"), "c1's expired lock", "")
}

func TestLeaseConfig(t *testing.T) {
	s := startLockd(t, "leases", map[string]string{
		"nacos.lock.default_expire_time":  "800",
		"nacos.lock.max_expire_time":      "1500",
		"nacos.lock.expire.scan.interval": "200",
	})
	c1, c2 := dial(t, s), dial(t, s)
	for _, tc := range []struct {
		lease    int64
		min, max time.Duration
	}{
		{-1, 800 * time.Millisecond, 1400 * time.Millisecond},    // default lease
		{1200, 1200 * time.Millisecond, 2500 * time.Millisecond}, // explicit, below the max
		{60000, 1500 * time.Millisecond, 5 * time.Second},        // capped to max_expire_time
	} {
		key := fmt.Sprintf("lease-%d", tc.lease)
		t0 := time.Now()
		granted(t, acquire(t, c1, key, tc.lease), key)
		refused(t, acquire(t, c2, key, -1), key+" right after the grant", "")
		poll(t, key+" free", 10*time.Second, func() bool { return acquire(t, c2, key, -1).Granted() })
		took := time.Since(t0)
		t.Logf("lease %d: another client acquired after %v", tc.lease, took)
		if took < tc.min || took > tc.max {
			t.Fatalf("lease %d: held %v, want %v..%v", tc.lease, took, tc.min, tc.max)
		}
	}
}

func TestValidationErrors(t *testing.T) {
	s := startLockd(t, "validation", nil)
	c := dial(t, s)
	str := func(v string) *string { return &v }
	ms := func(v int64) *int64 { return &v }
	rejected(t, do(t, c, "ACQUIRE", Instance("k", 0, "NACOS_LOCK")), "Lock expiredTime must be non-zero for ACQUIRE")
	rejected(t, do(t, c, "ACQUIRE", &LockInstance{Key: str("k"), LockType: str("NACOS_LOCK")}), "Lock expiredTime is required for ACQUIRE")
	rejected(t, do(t, c, "ACQUIRE", Instance("k", 5000, "MY_CUSTOM_LOCK")), "Invalid lock type: MY_CUSTOM_LOCK"+types)
	rejected(t, do(t, c, "RELEASE", Instance("k", 5000, "MY_CUSTOM_LOCK")), "Invalid lock type: MY_CUSTOM_LOCK"+types)
	rejected(t, do(t, c, "ACQUIRE", &LockInstance{Key: str("k"), ExpiredTime: ms(5000)}), "Invalid lock type: null"+types)
	rejected(t, do(t, c, "ACQUIRE", Instance("", 5000, "NACOS_LOCK")), "Lock key cannot be null or empty")
	rejected(t, do(t, c, "ACQUIRE", &LockInstance{ExpiredTime: ms(5000), LockType: str("NACOS_LOCK")}), "Lock key cannot be null or empty")
	rejected(t, do(t, c, "ACQUIRE", nil), "LockInstance cannot be null")
	rejected(t, do(t, c, "ACQUIRE", Instance(strings.Repeat("k", 4097), 5000, "NACOS_LOCK")),
		"Lock key is 4097 bytes, longer than the limit of 4096 bytes")
	rejected(t, do(t, c, "EXPIRE", Instance("k", 5000, "NACOS_LOCK")), "There is no Handler of such operations!")
	rejected(t, do(t, c, "", Instance("k", 5000, "NACOS_LOCK")), "There is no Handler of such operations!")
	// nothing was locked by any of them
	granted(t, acquire(t, dial(t, s), "k", 5000), "k is free")
	// RELEASE does not look at expiredTime
	granted(t, acquire(t, c, "k0", 5000), "k0")
	if r := do(t, c, "RELEASE", Instance("k0", 0, "NACOS_LOCK")); !r.Granted() {
		t.Fatalf("RELEASE with expiredTime 0: %v", r)
	}
}

func TestDisconnectFreesLocks(t *testing.T) {
	s := startLockd(t, "disconnect", nil)
	c1, c2 := dial(t, s), dial(t, s)
	granted(t, acquire(t, c1, "k", 60000), "c1")
	refused(t, acquire(t, c2, "k", 60000), "c2", "")
	c1.Close()
	took := poll(t, "c2 acquires after c1 closed", 10*time.Second, func() bool { return acquire(t, c2, "k", 60000).Granted() })
	t.Logf("lock freed %v after the holder's SDK client shut down", took)
}

// The SDK client reconnects by itself after a restart (same data dir); a
// long lease survives; fencing tokens keep increasing.
func TestServerRestart(t *testing.T) {
	s := startLockd(t, "restart", nil)
	c1 := dial(t, s)
	last := granted(t, acquire(t, c1, "long", 600000), "long lease")
	for _, kill := range []bool{false, true} {
		s.restart(kill)
		n := 0
		took := poll(t, "the SDK client works again", 30*time.Second, func() bool {
			n++
			r, err := c1.Acquire(fmt.Sprintf("new-%v", kill), 30000)
			if err != nil {
				return false
			}
			if !r.Granted() {
				t.Fatalf("acquire of a new key after restart: %v", r)
			}
			tok := *r.LockResult.FencingToken
			if tok <= last {
				t.Fatalf("fencing token %d after restart, not above %d", tok, last)
			}
			last = tok
			return true
		})
		t.Logf("restart (kill=%v): the same SDK client locked again after %v (%d tries)", kill, took, n)
		c2 := dial(t, s)
		refused(t, acquire(t, c2, "long", 30000), "the long-lease key is still held", "")
		refused(t, acquire(t, c1, "long", 30000), "also for c1's new connection (owner = old connection)", "")
	}
}

// Graceful shutdown: the SDK answers ConnectResetRequest and moves to the
// other listed server.
func TestConnectResetMovesClient(t *testing.T) {
	a, b := startLockd(t, "A", nil), startLockd(t, "B", nil)
	c := dial(t, a, b)
	granted(t, acquire(t, c, "k0", 60000), "k0")
	onA := !acquire(t, dial(t, a), "k0", 1000).Granted()
	from, to := b, a
	if onA {
		from, to = a, b
	}
	t.Logf("the SDK client is on %s", from.name)
	if err := from.stop(); err != nil {
		t.Fatalf("%s exit after SIGTERM: %v", from.name, err)
	}
	if !strings.Contains(from.stderr.String(), "shutting down: resetting clients") {
		t.Fatalf("%s did not log the client reset", from.name)
	}
	took := poll(t, "the SDK client works on the other server", 15*time.Second, func() bool {
		r, err := c.Acquire("k1", 60000)
		return err == nil && r.Granted()
	})
	t.Logf("stopped %s; the SDK client locked on %s %v later", from.name, to.name, took)
	refused(t, acquire(t, dial(t, to), "k1", 1000), "k1 is held on "+to.name, "")
	from.launch() // for the cleanup's exit check
}
