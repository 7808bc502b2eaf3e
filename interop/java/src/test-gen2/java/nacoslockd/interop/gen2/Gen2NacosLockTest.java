package nacoslockd.interop.gen2;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.alibaba.nacos.client.lock.NacosLock;
import com.alibaba.nacos.client.lock.NacosLockService;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import nacoslockd.interop.support.ClientProcess;
import nacoslockd.interop.support.LockServices;
import nacoslockd.interop.support.LockdConfig;
import nacoslockd.interop.support.LockdServer;
import nacoslockd.interop.support.LockdTest;
import nacoslockd.interop.support.Poll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInfo;
import org.junit.jupiter.api.Timeout;

/**
 * Gen 2 lock API of the 3.3-line client: {@code NacosLockService#getReentrantLock(key)} /
 * {@code #getNonReentrantLock(key)} return a {@code NacosLock} (a {@link java.util.concurrent.locks.Lock})
 * whose owner is {@code <clientId>:<threadId>}; the client sends ACQUIRE with owner/waitTimeMs/
 * waiterRetry, RELEASE, RENEW (watchdog) and CANCEL_WAIT, and waits for LockNotificationRequest
 * pushes. These methods are on the client class, not on the api's LockService interface, hence
 * the cast. Only compiled with -Pnacos-3.3.
 */
@LockdTest
@Timeout(value = 90, unit = TimeUnit.SECONDS)
class Gen2NacosLockTest {

    private static final AtomicInteger KEYS = new AtomicInteger();

    /** A waiter in lock() must get the lock this fast after unlock(); its own poll is 30 s+. */
    private static final Duration HANDOVER_LIMIT = Duration.ofSeconds(3);

    private final LockdServer server;

    private LockServices clients;

    private ExecutorService threads;

    private String key;

    Gen2NacosLockTest(LockdServer server) {
        this.server = server;
    }

    @BeforeEach
    void setUp(TestInfo info) {
        clients = new LockServices();
        threads = Executors.newCachedThreadPool();
        key = "gen2-" + info.getTestMethod().orElseThrow().getName() + "-" + KEYS.incrementAndGet();
    }

    @AfterEach
    void tearDown() throws Exception {
        threads.shutdownNow();
        threads.awaitTermination(10, TimeUnit.SECONDS);
        clients.close();
    }

    private NacosLockService service(LockdServer s) throws Exception {
        return (NacosLockService) clients.create(s);
    }

    /** tryLock() from a fresh thread (a distinct owner in any case); the lock is released again. */
    private boolean probe(NacosLock lock) throws Exception {
        return threads.submit(() -> {
            boolean got = lock.tryLock();
            if (got) {
                lock.unlock();
            }
            return got;
        }).get(30, TimeUnit.SECONDS);
    }

    @Test
    void reentrantLockTwiceUnlockTwice() throws Exception {
        NacosLock lock = service(server).getReentrantLock(key);
        NacosLock other = service(server).getReentrantLock(key);
        lock.lock();
        lock.lock();
        assertFalse(probe(other), "held twice: another client is refused");
        lock.unlock();
        assertFalse(probe(other), "still held once after the first unlock");
        lock.unlock();
        assertTrue(probe(other), "free after the second unlock");
    }

    @Test
    void tryLockRefusedFromAnotherClient() throws Exception {
        NacosLock lock = service(server).getReentrantLock(key);
        NacosLock other = service(server).getReentrantLock(key);
        assertTrue(lock.tryLock(), "tryLock on a free key");
        assertFalse(other.tryLock(), "tryLock from a second LockService");
        lock.unlock();
        assertTrue(other.tryLock(), "after the holder's unlock");
        other.unlock();
    }

    @Test
    void blockedLockWakesWhenHolderUnlocks() throws Exception {
        NacosLock lock = service(server).getReentrantLock(key);
        NacosLock other = service(server).getReentrantLock(key);
        lock.lock();
        CountDownLatch release = new CountDownLatch(1);
        AtomicReference<Thread> waiter = new AtomicReference<>();
        CompletableFuture<Long> acquiredAt = new CompletableFuture<>();
        Future<?> task = threads.submit(() -> {
            waiter.set(Thread.currentThread());
            other.lock();
            acquiredAt.complete(System.nanoTime());
            release.await();
            other.unlock();
            return null;
        });
        // lock() has sent ACQUIRE (waitTimeMs 300000), been refused/queued and now waits for a push
        Poll.until("the waiter blocks in lock()", Duration.ofSeconds(15), Duration.ofMillis(20), () -> {
            Thread t = waiter.get();
            return t != null && (t.getState() == Thread.State.TIMED_WAITING || t.getState() == Thread.State.WAITING);
        });
        Thread.sleep(300); // let it settle in the wait (no effect on the measured hand-over)
        assertFalse(acquiredAt.isDone(), "the waiter must not get a held lock");
        long unlockedAt = System.nanoTime();
        lock.unlock();
        long handover = TimeUnit.NANOSECONDS.toMillis(acquiredAt.get(30, TimeUnit.SECONDS) - unlockedAt);
        System.out.println("[gen2] blocked lock() acquired " + handover + " ms after unlock()");
        assertTrue(handover < HANDOVER_LIMIT.toMillis(), "hand-over took " + handover
                + " ms: the server should push LockNotificationRequest(AVAILABLE) to the queued owner");
        release.countDown();
        task.get(30, TimeUnit.SECONDS);
    }

    @Test
    void nonReentrantRefusesReentry() throws Exception {
        NacosLockService svc = service(server);
        NacosLock lock = svc.getNonReentrantLock(key);
        lock.lock();
        // refused locally by the client (nothing sent)
        assertThrows(IllegalMonitorStateException.class, lock::lock, "lock() re-entry");
        assertThrows(IllegalMonitorStateException.class, lock::tryLock, "tryLock() re-entry");
        // a second NacosLock object has its own local count: the same owner (clientId:threadId)
        // sends ACQUIRE NON_REENTRANT and the server must refuse it
        assertFalse(svc.getNonReentrantLock(key).tryLock(), "server-side re-entry by the same owner");
        lock.unlock();
        assertTrue(probe(service(server).getNonReentrantLock(key)), "free after one unlock");
    }

    @Test
    void tryLockWithTimeoutReturnsFalseAfterTimeout() throws Exception {
        NacosLock lock = service(server).getReentrantLock(key);
        NacosLock other = service(server).getReentrantLock(key);
        lock.lock();
        long t0 = System.nanoTime();
        boolean got = threads.submit(() -> other.tryLock(1500, TimeUnit.MILLISECONDS)).get(30, TimeUnit.SECONDS);
        long took = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
        System.out.println("[gen2] tryLock(1500 ms) on a held lock returned " + got + " after " + took + " ms");
        assertFalse(got, "tryLock(timeout) on a lock held by another client");
        assertTrue(took >= 1400, "gave up after " + took + " ms, before the 1500 ms timeout");
        assertTrue(took < 1500 + 5000, "gave up only after " + took + " ms");
        lock.unlock();
        // CANCEL_WAIT must have removed the timed-out waiter: a third client gets the lock at once
        assertTrue(probe(service(server).getReentrantLock(key)), "free for a new client after unlock");
    }

    @Test
    void unlockByNonHolderThreadThrows() throws Exception {
        NacosLock lock = service(server).getReentrantLock(key);
        lock.lock();
        Future<?> f = threads.submit(() -> assertThrows(IllegalMonitorStateException.class, lock::unlock,
                "unlock() from a thread that does not hold the lock"));
        f.get(30, TimeUnit.SECONDS);
        assertFalse(probe(service(server).getReentrantLock(key)), "still held after the foreign unlock()");
        lock.unlock();
    }

    /** The holder's connection closes: the server frees its locks and wakes the queued waiter. */
    @Test
    void holderDisconnectWakesWaiter() throws Exception {
        NacosLockService holderService = service(server);
        NacosLock lock = holderService.getReentrantLock(key);
        NacosLock other = service(server).getReentrantLock(key);
        lock.lock();
        AtomicReference<Thread> waiter = new AtomicReference<>();
        CompletableFuture<Long> acquiredAt = new CompletableFuture<>();
        threads.submit(() -> {
            waiter.set(Thread.currentThread());
            other.lock();
            acquiredAt.complete(System.nanoTime());
            other.unlock();
            return null;
        });
        Poll.until("the waiter blocks in lock()", Duration.ofSeconds(15), Duration.ofMillis(20), () -> {
            Thread t = waiter.get();
            return t != null && (t.getState() == Thread.State.TIMED_WAITING || t.getState() == Thread.State.WAITING);
        });
        Thread.sleep(300);
        long closedAt = System.nanoTime();
        clients.shutdown(holderService);
        long handover = TimeUnit.NANOSECONDS.toMillis(acquiredAt.get(30, TimeUnit.SECONDS) - closedAt);
        System.out.println("[gen2] waiter acquired " + handover + " ms after the holder's shutdown()");
        assertTrue(handover < HANDOVER_LIMIT.toMillis(), "hand-over after disconnect took " + handover + " ms");
    }

    /**
     * The server let the lease lapse (default lease 1.5 s, while the client's watchdog renews
     * only every 10 s): the next unlock() is a RELEASE the server refuses (200/false), which the
     * client turns into IllegalMonitorStateException.
     */
    @Test
    @LockdConfig({"nacos.lock.default_expire_time=1500", "nacos.lock.expire.scan.interval=200"})
    void unlockAfterServerSideExpiryThrows(LockdServer dedicated) throws Exception {
        NacosLock lock = service(dedicated).getReentrantLock(key);
        NacosLock other = service(dedicated).getReentrantLock(key);
        lock.lock();
        Poll.until("another client gets the lock after the 1500 ms lease", Duration.ofSeconds(10),
                Duration.ofMillis(100), () -> probe(other));
        IllegalMonitorStateException e = assertThrows(IllegalMonitorStateException.class, lock::unlock);
        System.out.println("[gen2] unlock after expiry: " + e.getMessage());
    }

    /** Hold counts go up and down: the lock is free only after as many unlock() as lock(). */
    @Test
    void reentrancyCountsUpAndDown() throws Exception {
        NacosLock lock = service(server).getReentrantLock(key);
        NacosLock other = service(server).getReentrantLock(key);
        for (int i = 1; i <= 3; i++) {
            lock.lock();
            assertFalse(probe(other), "held " + i + " time(s)");
        }
        assertTrue(lock.tryLock(), "tryLock() re-enters too (count 4)");
        for (int i = 4; i >= 2; i--) {
            lock.unlock();
            assertFalse(probe(other), "still held after unlock, count " + (i - 1));
        }
        lock.unlock();
        assertTrue(probe(other), "free after the fourth unlock()");
        assertThrows(IllegalMonitorStateException.class, lock::unlock, "one unlock() too many");
    }

    /** Owner = clientId:threadId: another thread of the same client is a different owner. */
    @Test
    void anotherThreadOfTheSameClientIsRefused() throws Exception {
        NacosLockService svc = service(server);
        NacosLock lock = svc.getReentrantLock(key);
        lock.lock();
        assertFalse(threads.submit(() -> lock.tryLock()).get(30, TimeUnit.SECONDS),
                "same NacosLock, another thread");
        assertFalse(threads.submit(() -> svc.getReentrantLock(key).tryLock()).get(30, TimeUnit.SECONDS),
                "same service, another NacosLock, another thread");
        assertFalse(probe(service(server).getReentrantLock(key)), "another client");
        lock.unlock();
        assertTrue(threads.submit(() -> {
            boolean got = lock.tryLock();
            if (got) {
                lock.unlock();
            }
            return got;
        }).get(30, TimeUnit.SECONDS), "another thread gets it after unlock()");
    }

    /** Three clients block in lock() in a known order; unlock() hands the lock over in that order. */
    @Test
    void blockedWaitersAreServedInFifoOrder() throws Exception {
        NacosLock holder = service(server).getReentrantLock(key);
        holder.lock();
        java.util.List<String> order = java.util.Collections.synchronizedList(new java.util.ArrayList<>());
        java.util.List<Future<?>> waiters = new java.util.ArrayList<>();
        for (String name : new String[] {"w1", "w2", "w3"}) {
            NacosLock l = service(server).getReentrantLock(key);
            AtomicReference<Thread> t = new AtomicReference<>();
            waiters.add(threads.submit(() -> {
                t.set(Thread.currentThread());
                l.lock();
                order.add(name);
                Thread.sleep(100);
                l.unlock();
                return null;
            }));
            // w(n) is queued on the server before w(n+1) sends its first ACQUIRE
            Poll.until(name + " blocks in lock()", Duration.ofSeconds(15), Duration.ofMillis(20), () -> {
                Thread th = t.get();
                return th != null && (th.getState() == Thread.State.TIMED_WAITING
                        || th.getState() == Thread.State.WAITING);
            });
            Thread.sleep(300);
        }
        long t0 = System.nanoTime();
        holder.unlock();
        for (Future<?> f : waiters) {
            f.get(30, TimeUnit.SECONDS);
        }
        long took = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
        System.out.println("[gen2] FIFO hand-over order " + order + " in " + took + " ms");
        assertEquals(java.util.List.of("w1", "w2", "w3"), order, "hand-over order");
        assertTrue(took < 3 * (100 + HANDOVER_LIMIT.toMillis()), "three hand-overs took " + took + " ms");
    }

    /**
     * The watchdog renews every max(1 s, min(lease/3, 10 s)); with the server's default lease at
     * 12 s (the client assumes 30 s for expiredTime -1, so it renews every 10 s) the lock stays
     * held for 25 s, more than two leases.
     */
    @Test
    @LockdConfig({"nacos.lock.default_expire_time=12000", "nacos.lock.expire.scan.interval=200"})
    void watchdogKeepsTheLockPastItsLease(LockdServer dedicated) throws Exception {
        NacosLock lock = service(dedicated).getReentrantLock(key);
        NacosLock other = service(dedicated).getReentrantLock(key);
        lock.lock();
        long t0 = System.nanoTime();
        while (TimeUnit.NANOSECONDS.toSeconds(System.nanoTime() - t0) < 25) {
            assertFalse(probe(other), "refused " + TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0)
                    + " ms after lock() with a 12 s lease: the watchdog must keep renewing");
            Thread.sleep(1000);
        }
        lock.unlock();
        assertTrue(probe(other), "free after unlock()");
    }

    /** kill -9 of the holder's JVM: the server frees its lock and wakes the blocked waiter. */
    @Test
    void killedHolderJvmHandsTheLockToTheWaiter() throws Exception {
        NacosLock other = service(server).getReentrantLock(key);
        try (ClientProcess holder = ClientProcess.start(Gen2LockHolderMain.class, server.serverAddr(), key)) {
            holder.awaitReady(30_000);
            AtomicReference<Thread> waiter = new AtomicReference<>();
            CompletableFuture<Long> acquiredAt = new CompletableFuture<>();
            threads.submit(() -> {
                waiter.set(Thread.currentThread());
                other.lock();
                acquiredAt.complete(System.nanoTime());
                other.unlock();
                return null;
            });
            Poll.until("the waiter blocks in lock()", Duration.ofSeconds(15), Duration.ofMillis(20), () -> {
                Thread t = waiter.get();
                return t != null && (t.getState() == Thread.State.TIMED_WAITING
                        || t.getState() == Thread.State.WAITING);
            });
            Thread.sleep(300);
            long killedAt = System.nanoTime();
            holder.kill();
            long handover = TimeUnit.NANOSECONDS.toMillis(acquiredAt.get(30, TimeUnit.SECONDS) - killedAt);
            System.out.println("[gen2] waiter acquired " + handover + " ms after kill -9 of the holder JVM");
            assertTrue(handover < HANDOVER_LIMIT.toMillis() + 2000, "hand-over after kill -9 took " + handover + " ms");
        }
    }

    @Test
    void manyThreadsMutualExclusion() throws Exception {
        NacosLock a = service(server).getReentrantLock(key);
        NacosLock b = service(server).getReentrantLock(key);
        AtomicInteger inside = new AtomicInteger();
        AtomicInteger maxInside = new AtomicInteger();
        AtomicInteger done = new AtomicInteger();
        Future<?>[] fs = new Future<?>[4];
        for (int i = 0; i < fs.length; i++) {
            NacosLock l = i % 2 == 0 ? a : b;
            fs[i] = threads.submit(() -> {
                for (int j = 0; j < 3; j++) {
                    l.lock();
                    try {
                        maxInside.accumulateAndGet(inside.incrementAndGet(), Math::max);
                        Thread.sleep(20);
                        inside.decrementAndGet();
                    } finally {
                        l.unlock();
                    }
                    done.incrementAndGet();
                }
                return null;
            });
        }
        for (Future<?> f : fs) {
            f.get(60, TimeUnit.SECONDS);
        }
        assertEquals(12, done.get());
        assertEquals(1, maxInside.get(), "at most one thread inside the critical section");
    }
}
