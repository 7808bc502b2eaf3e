package nacoslockd.interop.gen1;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.alibaba.nacos.api.exception.NacosException;
import com.alibaba.nacos.api.lock.LockService;
import com.alibaba.nacos.api.lock.model.LockInstance;
import com.alibaba.nacos.client.lock.core.NLock;
import com.alibaba.nacos.client.lock.core.NLockFactory;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import nacoslockd.interop.support.ClientProcess;
import nacoslockd.interop.support.Gen1LockHolderMain;
import nacoslockd.interop.support.LockServices;
import nacoslockd.interop.support.LockdServer;
import nacoslockd.interop.support.LockdTest;
import nacoslockd.interop.support.Poll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInfo;
import org.junit.jupiter.api.Timeout;

/**
 * Gen 1 lock API (nacos-client 3.0.x .. 3.2.x, and the legacy API of 3.3):
 * {@code NacosLockFactory.createLockService(props)}, {@code NLockFactory.getLock(key[, leaseMs])},
 * {@code lock}/{@code unLock} sending ACQUIRE/RELEASE with lockType NACOS_LOCK. Every
 * LockService is its own gRPC connection and therefore its own lock owner.
 */
@LockdTest
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class Gen1LockServiceTest {

    private static final AtomicInteger KEYS = new AtomicInteger();

    private final LockdServer server;

    private LockServices clients;

    private String key;

    Gen1LockServiceTest(LockdServer server) {
        this.server = server;
    }

    @BeforeEach
    void setUp(TestInfo info) {
        clients = new LockServices();
        key = "gen1-" + info.getTestMethod().orElseThrow().getName() + "-" + KEYS.incrementAndGet();
    }

    @AfterEach
    void tearDown() throws Exception {
        clients.close();
    }

    static boolean lock(LockService s, NLock lock) throws Exception {
        return Gen1.lock(s, lock);
    }

    @Test
    void abilityNegotiatedAndLockGranted() throws Exception {
        LockService s1 = clients.create(server);
        assertTrue(lock(s1, NLockFactory.getLock(key)), "first lock on a free key");
        assertTrue(s1.unLock(NLockFactory.getLock(key)), "release by the owner");
    }

    @Test
    void secondLockServiceIsRefused() throws Exception {
        LockService s1 = clients.create(server);
        LockService s2 = clients.create(server);
        assertTrue(lock(s1, NLockFactory.getLock(key)), "s1 locks a free key");
        assertFalse(lock(s2, NLockFactory.getLock(key)), "s2 (another connection) must be refused");
        assertFalse(lock(s2, NLockFactory.getLock(key, 5000L)), "s2 refused with an explicit lease too");
    }

    @Test
    void ownerReleaseLetsOtherServiceAcquire() throws Exception {
        LockService s1 = clients.create(server);
        LockService s2 = clients.create(server);
        assertTrue(lock(s1, NLockFactory.getLock(key)));
        assertFalse(lock(s2, NLockFactory.getLock(key)));
        assertTrue(s1.unLock(NLockFactory.getLock(key)), "release by the owner");
        assertTrue(lock(s2, NLockFactory.getLock(key)), "s2 re-acquires after the owner released");
        assertFalse(lock(s1, NLockFactory.getLock(key)), "now s1 is refused");
        assertTrue(s2.unLock(NLockFactory.getLock(key)));
    }

    @Test
    void releaseByNonHolderIsRefused() throws Exception {
        LockService s1 = clients.create(server);
        LockService s2 = clients.create(server);
        assertTrue(lock(s1, NLockFactory.getLock(key)));
        assertFalse(s2.unLock(NLockFactory.getLock(key)), "release from a LockService that does not hold it");
        assertFalse(lock(s2, NLockFactory.getLock(key)), "the lock is still held by s1 after s2's release");
        assertTrue(s1.unLock(NLockFactory.getLock(key)), "the owner can still release it");
    }

    @Test
    void releaseOfUnheldLockIsRefused() throws Exception {
        LockService s1 = clients.create(server);
        assertFalse(s1.unLock(NLockFactory.getLock(key)), "release of a key nobody holds");
    }

    @Test
    void shortLeaseExpiresForOtherService() throws Exception {
        LockService s1 = clients.create(server);
        LockService s2 = clients.create(server);
        long leaseMs = 1500;
        long t0 = System.nanoTime();
        assertTrue(lock(s1, NLockFactory.getLock(key, leaseMs)));
        if (elapsedMs(t0) < leaseMs - 300) {
            assertFalse(lock(s2, NLockFactory.getLock(key)), "s2 refused while the lease runs");
        }
        // lease 1.5 s + reaper scan interval (1 s default) + slack for a 2-core CI machine
        Poll.until("s2 acquires after s1's " + leaseMs + " ms lease ended", Duration.ofSeconds(10),
                Duration.ofMillis(100), () -> lock(s2, NLockFactory.getLock(key)));
        long took = elapsedMs(t0);
        System.out.println("[gen1] " + leaseMs + " ms lease: other service acquired after " + took + " ms");
        assertTrue(took >= leaseMs, "acquired after " + took + " ms, before the " + leaseMs + " ms lease ended");
        assertFalse(s1.unLock(NLockFactory.getLock(key)), "s1's expired lock cannot be released by s1");
        assertTrue(s2.unLock(NLockFactory.getLock(key)));
    }

    /** nacos-lockd frees a connection's NACOS_LOCK locks when it closes (disconnect_grace_ms 0). */
    @Test
    void holderShutdownFreesLock() throws Exception {
        LockService s1 = clients.create(server);
        LockService s2 = clients.create(server);
        assertTrue(lock(s1, NLockFactory.getLock(key, 60000L)), "s1 locks with a 60 s lease");
        assertFalse(lock(s2, NLockFactory.getLock(key)));
        long t0 = System.nanoTime();
        clients.shutdown(s1);
        Poll.until("s2 acquires after s1's connection closed", Duration.ofSeconds(15), Duration.ofMillis(100),
                () -> lock(s2, NLockFactory.getLock(key)));
        System.out.println("[gen1] lock freed " + elapsedMs(t0) + " ms after the holder's shutdown()");
    }

    /**
     * The holder's JVM dies (kill -9, no shutdown()): the server sees its connection end and
     * frees its NACOS_LOCK locks long before their 60 s lease.
     */
    @Test
    void holderJvmKilledFreesLock() throws Exception {
        LockService s2 = clients.create(server);
        try (ClientProcess holder = ClientProcess.start(Gen1LockHolderMain.class, server.serverAddr(), key, "60000")) {
            holder.awaitReady(30_000);
            assertFalse(lock(s2, NLockFactory.getLock(key)), "held by the child JVM");
            long t0 = System.nanoTime();
            holder.kill();
            Poll.until("s2 acquires after the holder JVM was killed", Duration.ofSeconds(15), Duration.ofMillis(50),
                    () -> lock(s2, NLockFactory.getLock(key)));
            System.out.println("[gen1] lock freed " + elapsedMs(t0) + " ms after kill -9 of the holder JVM");
        }
    }

    @Test
    void manyKeysIndependent() throws Exception {
        LockService s1 = clients.create(server);
        LockService s2 = clients.create(server);
        for (int i = 0; i < 20; i++) {
            assertTrue(lock(i % 2 == 0 ? s1 : s2, NLockFactory.getLock(key + "-" + i)), "key " + i);
        }
        int refused = 0;
        for (int i = 0; i < 20; i++) {
            if (!lock(i % 2 == 0 ? s2 : s1, NLockFactory.getLock(key + "-" + i))) {
                refused++;
            }
        }
        assertEquals(20, refused, "every key is held by its first owner");
    }

    /**
     * remoteTryLock/remoteReleaseLock (on LockService since 3.0.0) send ACQUIRE/RELEASE with the
     * given instance directly; same outcomes as lock/unLock.
     */
    @Test
    void remoteTryLockAndRemoteReleaseLock() throws Exception {
        LockService s1 = clients.create(server);
        LockService s2 = clients.create(server);
        assertTrue(s1.remoteTryLock(NLockFactory.getLock(key, 30000L)), "remoteTryLock on a free key");
        assertFalse(s2.remoteTryLock(NLockFactory.getLock(key)), "remoteTryLock from another LockService");
        assertFalse(lock(s2, NLockFactory.getLock(key)), "lock() from another LockService");
        assertFalse(s2.remoteReleaseLock(NLockFactory.getLock(key)), "remoteReleaseLock by a non-holder");
        assertTrue(s1.remoteReleaseLock(NLockFactory.getLock(key)), "remoteReleaseLock by the holder");
        assertFalse(s1.remoteReleaseLock(NLockFactory.getLock(key)), "second remoteReleaseLock: nothing held");
        assertTrue(s2.remoteTryLock(NLockFactory.getLock(key)), "free again for s2");
        assertTrue(s2.unLock(NLockFactory.getLock(key)), "unLock() releases what remoteTryLock took");
    }

    /**
     * LockService.lock(i)/unLock(i) call i.lock(service)/i.unLock(service), which call
     * remoteTryLock/remoteReleaseLock: a LockInstance subclass can wrap them. remoteTryLock
     * bypasses the instance's hook.
     */
    @Test
    void lockDelegatesToTheInstanceAndRemoteTryLockDoesNot() throws Exception {
        LockService s1 = clients.create(server);
        LockService s2 = clients.create(server);
        AtomicInteger hooks = new AtomicInteger();
        class CountingLock extends LockInstance {
            CountingLock(String k) {
                super(k, 30000L, "NACOS_LOCK");
            }

            @Override
            public Boolean lock(LockService service) throws NacosException {
                hooks.incrementAndGet();
                return super.lock(service);
            }

            @Override
            public Boolean unLock(LockService service) throws NacosException {
                hooks.incrementAndGet();
                return super.unLock(service);
            }
        }
        assertTrue(s1.lock(new CountingLock(key)), "lock() through the subclass");
        assertEquals(1, hooks.get(), "lock() went through LockInstance.lock(LockService)");
        assertFalse(s2.remoteTryLock(new CountingLock(key)), "held by s1");
        assertEquals(1, hooks.get(), "remoteTryLock() bypasses the instance hook");
        assertTrue(s1.unLock(new CountingLock(key)), "unLock() through the subclass");
        assertEquals(2, hooks.get(), "unLock() went through LockInstance.unLock(LockService)");

        // a hook that answers locally: nothing reaches the server
        LockInstance local = new LockInstance(key, 30000L, "NACOS_LOCK") {
            @Override
            public Boolean lock(LockService service) {
                return Boolean.TRUE;
            }
        };
        assertTrue(s1.lock(local), "answered by the instance");
        assertTrue(lock(s2, NLockFactory.getLock(key)), "the server never saw s1's local 'lock'");
    }

    private static long elapsedMs(long t0) {
        return TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
    }
}
