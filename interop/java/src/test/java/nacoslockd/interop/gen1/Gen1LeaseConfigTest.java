package nacoslockd.interop.gen1;

import static nacoslockd.interop.gen1.Gen1.elapsedMs;
import static nacoslockd.interop.gen1.Gen1.lock;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.alibaba.nacos.api.lock.LockService;
import com.alibaba.nacos.client.lock.core.NLockFactory;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
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
 * Leases against a server with small lease properties: nacos.lock.default_expire_time 800 ms
 * (used for expiredTime -1, i.e. NLockFactory.getLock(key)) and nacos.lock.max_expire_time
 * 1500 ms (longer leases are capped, not rejected). The two differ so a test can tell which
 * one applied.
 */
@LockdTest
@LockdConfig({"nacos.lock.default_expire_time=800", "nacos.lock.max_expire_time=1500",
        "nacos.lock.expire.scan.interval=200"})
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class Gen1LeaseConfigTest {

    private static final AtomicInteger KEYS = new AtomicInteger();

    private final LockdServer server;

    private LockServices clients;

    private String key;

    Gen1LeaseConfigTest(LockdServer server) {
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

    /** Locks with {@code leaseMs} from s1 and returns how long until s2 got the key. */
    private long heldFor(Long leaseMs) throws Exception {
        LockService s1 = clients.create(server);
        LockService s2 = clients.create(server);
        long t0 = System.nanoTime();
        assertTrue(lock(s1, leaseMs == null ? NLockFactory.getLock(key) : NLockFactory.getLock(key, leaseMs)));
        if (leaseMs == null || leaseMs >= 800) {
            assertFalse(lock(s2, NLockFactory.getLock(key)), "s2 refused right after s1's grant");
        }
        Poll.until("s2 acquires after s1's lease", Duration.ofSeconds(15), Duration.ofMillis(50),
                () -> lock(s2, NLockFactory.getLock(key)));
        long took = elapsedMs(t0);
        System.out.println("[gen1] lease " + (leaseMs == null ? "-1 (default)" : leaseMs + " ms")
                + ": another client acquired after " + took + " ms");
        return took;
    }

    @Test
    void defaultLeaseComesFromServerConfig() throws Exception {
        long took = heldFor(null);
        assertTrue(took >= 800, "free after " + took + " ms, before the 800 ms default lease");
        assertTrue(took < 1400, "held " + took + " ms: the default lease (800 ms) was not used");
    }

    @Test
    void explicitLeaseBelowTheMaximumIsUsedAsIs() throws Exception {
        long took = heldFor(1200L);
        assertTrue(took >= 1200, "free after " + took + " ms, before the 1200 ms lease");
        assertTrue(took < 1500 + 1000, "held " + took + " ms for a 1200 ms lease");
    }

    @Test
    void leaseLongerThanMaxExpireTimeIsCapped() throws Exception {
        long took = heldFor(60000L);
        assertTrue(took >= 1500, "free after " + took + " ms, before the 1500 ms maximum");
        assertTrue(took < 5000, "held " + took + " ms: a 60000 ms lease was not capped to 1500 ms");
    }

    @Test
    void oneMillisecondLeaseIsLegal() throws Exception {
        long took = heldFor(1L);
        assertTrue(took < 1000, "a 1 ms lease held the key for " + took + " ms");
    }
}
