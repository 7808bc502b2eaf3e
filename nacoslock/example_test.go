package nacoslock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"nacos-lockd/nacoslock"
)

// The examples run against a real nacos-lockd that TestMain starts;
// sharedServer is its main-port address, "10.0.0.1:8848" in a deployment.

func ExampleMutex_Lock() {
	ctx := context.Background()
	cl, err := nacoslock.Dial(ctx, []string{sharedServer}, nacoslock.WithClientName("invoice-worker"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cl.Close()

	m := cl.Mutex("example/invoice-2024-001", nacoslock.WithLease(10*time.Second))
	// Waits in the server's FIFO queue while another owner holds the lock.
	lockCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := m.Lock(lockCtx); err != nil {
		fmt.Println(err)
		return
	}
	defer m.Unlock(ctx)

	// Do the work while watching for the loss of the lock.
	work := time.NewTimer(10 * time.Millisecond)
	defer work.Stop()
	select {
	case <-work.C:
		fmt.Println("invoice processed under the lock")
	case <-m.Lost():
		fmt.Println("lock lost, stopping:", m.Err())
	}
	// Output: invoice processed under the lock
}

func ExampleMutex_TryLock() {
	ctx := context.Background()
	cl, err := nacoslock.Dial(ctx, []string{sharedServer})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cl.Close()

	a := cl.Mutex("example/nightly-report")
	b := cl.Mutex("example/nightly-report") // another owner, though the same client
	fmt.Println("a:", a.TryLock(ctx))
	err = b.TryLock(ctx)
	fmt.Println("b locked out:", errors.Is(err, nacoslock.ErrLocked))
	_ = a.Unlock(ctx)
	fmt.Println("b after a unlocked:", b.TryLock(ctx))
	_ = b.Unlock(ctx)
	// Output:
	// a: <nil>
	// b locked out: true
	// b after a unlocked: <nil>
}

// invoices stands in for a database table with a fencing-token column:
//
//	UPDATE invoices SET status = ?, token = ? WHERE id = ? AND token < ?
//
// A write carrying a token lower than the last one applied is refused, so
// a holder that lost the lock without noticing (a GC pause or a partition
// longer than the lease) cannot overwrite the next holder's write.
type invoices struct {
	mu     sync.Mutex
	status map[string]string
	token  map[string]uint64
}

func (db *invoices) update(id, status string, token uint64) bool {
	db.mu.Lock()
	defer db.mu.Unlock()
	if token <= db.token[id] { // the WHERE token < ? of the UPDATE
		return false
	}
	db.status[id], db.token[id] = status, token
	return true
}

func ExampleMutex_FencingToken() {
	ctx := context.Background()
	cl, err := nacoslock.Dial(ctx, []string{sharedServer})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cl.Close()
	db := &invoices{status: map[string]string{}, token: map[string]uint64{}}

	first := cl.Mutex("example/invoice-7")
	if err := first.Lock(ctx); err != nil {
		fmt.Println(err)
		return
	}
	stale := first.FencingToken()
	_ = first.Unlock(ctx)

	next := cl.Mutex("example/invoice-7")
	if err := next.Lock(ctx); err != nil {
		fmt.Println(err)
		return
	}
	defer next.Unlock(ctx)
	fmt.Println("next holder's write:", db.update("7", "paid", next.FencingToken()))
	// The first holder, unaware that its hold ended, tries to write late.
	fmt.Println("stale write:", db.update("7", "void", stale))
	fmt.Println("status:", db.status["7"])
	// Output:
	// next holder's write: true
	// stale write: false
	// status: paid
}
