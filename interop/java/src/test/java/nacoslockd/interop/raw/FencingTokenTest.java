package nacoslockd.interop.raw;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import nacoslockd.interop.support.LockdServer;
import nacoslockd.interop.support.LockdTest;
import nacoslockd.interop.support.RawNacosClient;
import nacoslockd.interop.support.RawNacosClient.Reply;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * nacos-lockd's {@code lockResult.fencingToken}, read from the raw reply JSON (the Java client's
 * LockOperationResponse has no such field). Every grant carries one; tokens strictly increase
 * across grants, keys, connections and server restarts (SIGTERM and kill -9, same data dir).
 */
@LockdTest
@Timeout(value = 90, unit = TimeUnit.SECONDS)
class FencingTokenTest {

    private final LockdServer server;

    FencingTokenTest(LockdServer server) {
        this.server = server;
    }

    private static long granted(Reply r, String what) {
        assertEquals("LockOperationResponse", r.type(), what + ": " + r);
        assertEquals(200, r.resultCode(), what + ": " + r);
        assertEquals(Boolean.TRUE, r.result(), what + ": " + r);
        assertNotNull(r.lockResult(), what + ": lockResult present: " + r);
        assertTrue(r.lockResult().path("success").asBoolean(), what + ": lockResult.success: " + r);
        assertEquals(1, r.lockResult().path("reentrantCount").asInt(), what + ": reentrantCount: " + r);
        assertEquals(-1, r.lockResult().path("waitPosition").asInt(), what + ": waitPosition: " + r);
        Long token = r.fencingToken();
        assertNotNull(token, what + ": a grant carries lockResult.fencingToken: " + r);
        assertTrue(token > 0, what + ": fencingToken > 0: " + r);
        return token;
    }

    private static void increasing(List<Long> tokens) {
        for (int i = 1; i < tokens.size(); i++) {
            assertTrue(tokens.get(i) > tokens.get(i - 1), "fencing tokens strictly increase: " + tokens);
        }
    }

    @Test
    void tokensIncreaseAcrossGrantsAndRestarts() throws Exception {
        List<Long> tokens = new ArrayList<>();
        // c1 stays open until after the restarts: closing a connection releases its locks,
        // a server restart does not
        RawNacosClient c1 = RawNacosClient.connect(server);
        try (RawNacosClient c2 = RawNacosClient.connect(server)) {
            assertEquals(Boolean.TRUE, c1.abilities().get("lock"), "SetupAckRequest advertises lock");
            tokens.add(granted(c1.acquire("fence-a", 60_000), "c1 ACQUIRE fence-a"));

            Reply refused = c2.acquire("fence-a", 60_000);
            System.out.println("[raw] refused ACQUIRE: " + refused);
            assertEquals(200, refused.resultCode(), "a refusal is not an error: " + refused);
            assertEquals(Boolean.FALSE, refused.result(), "refused: " + refused);
            assertFalse(refused.lockResult().path("success").asBoolean(true), "lockResult.success false: " + refused);
            assertNull(refused.fencingToken(), "no fencing token without a grant: " + refused);

            Reply released = c1.release("fence-a", 60_000);
            System.out.println("[raw] RELEASE: " + released);
            assertEquals(Boolean.TRUE, released.result(), "release by the holder: " + released);

            tokens.add(granted(c2.acquire("fence-a", 60_000), "c2 ACQUIRE fence-a after release"));
            tokens.add(granted(c1.acquire("fence-b", 60_000), "c1 ACQUIRE fence-b"));
            tokens.add(granted(c1.acquire("fence-c", 60_000), "c1 ACQUIRE fence-c"));
            increasing(tokens);
        }

        for (boolean kill : new boolean[] {false, true}) {
            server.restart(kill);
            try (RawNacosClient c3 = RawNacosClient.connect(server)) {
                Reply held = c3.acquire("fence-b", 60_000);
                assertEquals(Boolean.FALSE, held.result(), "fence-b is still held after the restart: " + held);
                long t = granted(c3.acquire("fence-after-" + (kill ? "kill" : "term"), 60_000),
                        "ACQUIRE after " + (kill ? "kill -9" : "SIGTERM") + " restart");
                tokens.add(t);
                increasing(tokens);
            }
        }
        c1.close();
        System.out.println("[raw] fencing tokens: " + tokens);
    }

    /** The exact reply to an invalid request, as the wire carries it. */
    @Test
    void validationReplyShape() throws Exception {
        try (RawNacosClient c = RawNacosClient.connect(server)) {
            Reply r = c.acquire("fence-zero", 0);
            System.out.println("[raw] expiredTime 0: " + r);
            assertEquals("LockOperationResponse", r.type(), r.toString());
            assertEquals(500, r.resultCode(), r.toString());
            assertEquals(0, r.errorCode(), r.toString());
            assertEquals("Lock expiredTime must be non-zero for ACQUIRE", r.message(), r.toString());
            assertEquals(Boolean.FALSE, r.result(), "result false on a rejection: " + r);

            Reply missing = c.lock("ACQUIRE", "fence-missing", null, "NACOS_LOCK");
            System.out.println("[raw] expiredTime missing: " + missing);
            assertEquals(500, missing.resultCode(), missing.toString());
            assertEquals("Lock expiredTime is required for ACQUIRE", missing.message(), missing.toString());

            Reply op = c.lock("EXPIRE", "fence-op", 1000L, "NACOS_LOCK");
            System.out.println("[raw] EXPIRE from a client: " + op);
            assertEquals(500, op.resultCode(), op.toString());
            assertEquals("There is no Handler of such operations!", op.message(), op.toString());
        }
    }
}
