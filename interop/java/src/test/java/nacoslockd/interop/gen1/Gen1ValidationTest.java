package nacoslockd.interop.gen1;

import static nacoslockd.interop.gen1.Gen1.lock;
import static nacoslockd.interop.gen1.Gen1.nacosError;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.alibaba.nacos.api.exception.NacosException;
import com.alibaba.nacos.api.lock.LockService;
import com.alibaba.nacos.api.lock.model.LockInstance;
import com.alibaba.nacos.client.lock.core.NLockFactory;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import nacoslockd.interop.support.LockServices;
import nacoslockd.interop.support.LockdServer;
import nacoslockd.interop.support.LockdTest;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInfo;
import org.junit.jupiter.api.Timeout;

/**
 * Invalid requests a Gen 1 client can send: the server answers LockOperationResponse 500 with
 * an exact message, the client throws NacosException(errorCode 0, message), nothing changes.
 */
@LockdTest
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class Gen1ValidationTest {

    static final String ZERO_LEASE = "Lock expiredTime must be non-zero for ACQUIRE";

    static final String TYPES = ", expected REENTRANT, NON_REENTRANT or NACOS_LOCK";

    private static final AtomicInteger KEYS = new AtomicInteger();

    private final LockdServer server;

    private LockServices clients;

    private String key;

    Gen1ValidationTest(LockdServer server) {
        this.server = server;
    }

    /** A lock type of the application's own: sent as is by the 3.0-line client. */
    static final class CustomTypeLock extends LockInstance {
        CustomTypeLock(String key, String type) {
            super(key, 5000L, type);
        }
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

    private static void assertRejected(String message, NacosException e) {
        System.out.println("[gen1] rejected: errCode " + e.getErrCode() + ", errMsg '" + e.getErrMsg() + "'");
        assertEquals(message, e.getErrMsg(), "server message, passed through by the client");
        assertEquals(0, e.getErrCode(), "errorCode of a LockOperationResponse failure");
    }

    /** NLockFactory accepts 0 (no client-side check); the server rejects it for ACQUIRE. */
    @Test
    void zeroExpiredTimeIsRejected() throws Exception {
        LockService s1 = clients.create(server);
        assertRejected(ZERO_LEASE, nacosError(() -> s1.lock(NLockFactory.getLock(key, 0L))));
        assertRejected(ZERO_LEASE, nacosError(() -> s1.remoteTryLock(new LockInstance(key, 0L, "NACOS_LOCK"))));
        LockService s2 = clients.create(server);
        assertTrue(lock(s2, NLockFactory.getLock(key)), "nothing was locked by the rejected requests");
    }

    /** RELEASE does not look at expiredTime (3.3 clients send 0 on RELEASE). */
    @Test
    void zeroExpiredTimeIsFineForRelease() throws Exception {
        LockService s1 = clients.create(server);
        assertTrue(lock(s1, NLockFactory.getLock(key)));
        assertTrue(s1.unLock(NLockFactory.getLock(key, 0L)), "RELEASE with expiredTime 0");
    }

    @Test
    void unknownLockTypeIsRejected() throws Exception {
        LockService s1 = clients.create(server);
        assertRejected("Invalid lock type: MY_CUSTOM_LOCK" + TYPES,
                nacosError(() -> s1.lock(new CustomTypeLock(key, "MY_CUSTOM_LOCK"))));
        assertRejected("Invalid lock type: MY_CUSTOM_LOCK" + TYPES,
                nacosError(() -> s1.unLock(new CustomTypeLock(key, "MY_CUSTOM_LOCK"))));
        assertRejected("Invalid lock type: nacos_lock" + TYPES,
                nacosError(() -> s1.lock(new CustomTypeLock(key, "nacos_lock"))));
        assertRejected("Invalid lock type: null" + TYPES,
                nacosError(() -> s1.lock(new CustomTypeLock(key, null))));
        LockService s2 = clients.create(server);
        assertTrue(lock(s2, NLockFactory.getLock(key)), "nothing was locked by the rejected requests");
    }

    @Test
    void emptyOrMissingKeyIsRejected() throws Exception {
        LockService s1 = clients.create(server);
        assertRejected("Lock key cannot be null or empty", nacosError(() -> s1.lock(NLockFactory.getLock(""))));
        assertRejected("Lock key cannot be null or empty", nacosError(() -> s1.lock(NLockFactory.getLock(null))));
        assertRejected("Lock key cannot be null or empty", nacosError(() -> s1.unLock(NLockFactory.getLock(""))));
    }

    /** nacos.lock.max_key_length (default 4096) counts UTF-8 bytes. */
    @Test
    void overlongKeyIsRejected() throws Exception {
        LockService s1 = clients.create(server);
        String max = "k".repeat(4096);
        assertTrue(lock(s1, NLockFactory.getLock(max, 5000L)), "a 4096-byte key is accepted");
        assertTrue(s1.unLock(NLockFactory.getLock(max)));
        assertRejected("Lock key is 4097 bytes, longer than the limit of 4096 bytes",
                nacosError(() -> s1.lock(NLockFactory.getLock(max + "k", 5000L))));
        String wide = "\u00e9".repeat(2049); // 2049 chars, 4098 UTF-8 bytes
        assertRejected("Lock key is 4098 bytes, longer than the limit of 4096 bytes",
                nacosError(() -> s1.lock(NLockFactory.getLock(wide, 5000L))));
    }
}
