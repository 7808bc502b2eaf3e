// Package nacoslock is a Go client for nacos-lockd and other servers of
// the Nacos 3.3 lock protocol: a blocking, fenced, self-renewing mutex.
//
// Dial opens a session (Client) with the cluster: one connection to one
// server at a time, replaced by one to another server when it fails or the
// server asks the client to move. A Mutex is one owner's handle on one
// lock:
//
//   - Lock waits in the server's FIFO queue; the server pushes the grant
//     to the head of the queue when the lock is freed, so waiters do not
//     contend (they ask again every few seconds only in case a push was
//     lost). When ctx ends first, Lock leaves the queue (CANCEL_WAIT).
//   - TryLock takes the lock only if it is free.
//   - Every grant carries a fencing token that is higher than every
//     earlier grant's of the lock: hand it to the resource the lock
//     protects, which refuses writes with a lower token than it has seen.
//   - While held, a watchdog renews the lease every third of it. Lost is
//     closed when the hold ends; when it closes before Unlock, stop the
//     protected work.
//
// Reentrant and non-reentrant kinds follow Nacos 3.3: REENTRANT counts
// holds on the server, NON_REENTRANT (and the 3.0-line NACOS_LOCK) refuses
// a second hold. Reentrancy is per Mutex (its owner), not per goroutine.
//
// Compared with etcd's concurrency.Mutex: the queue is the server's, so
// there is no watch per waiter and no thundering herd; a Mutex does not
// need a Session of its own; and the lease is per lock.
package nacoslock
