package nacoslockd.interop.gen1;

import static nacoslockd.interop.gen1.Gen1.elapsedMs;
import static nacoslockd.interop.gen1.Gen1.lock;
import static nacoslockd.interop.gen1.Gen1.lockWhenConnected;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.alibaba.nacos.api.lock.LockService;
import com.alibaba.nacos.client.lock.core.NLockFactory;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import nacoslockd.interop.support.LockServices;
import nacoslockd.interop.support.LockdServer;
import nacoslockd.interop.support.Poll;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Graceful shutdown with two independent single-node servers A and B (own data dirs) in one
 * client's serverAddr. SIGTERM on the server the client is on makes that server push
 * ConnectResetRequest (serverIp empty) and exit 0; the client moves to the next listed server
 * and keeps working. Then the other way round.
 */
@Timeout(value = 90, unit = TimeUnit.SECONDS)
class Gen1FailoverTest {

    private static final Duration MOVE_LIMIT = Duration.ofSeconds(15);

    private static LockdServer a;

    private static LockdServer b;

    @BeforeAll
    static void startServers() throws Exception {
        a = new LockdServer("Gen1FailoverTest-A", Map.of());
        b = new LockdServer("Gen1FailoverTest-B", Map.of());
        a.start();
        b.start();
        System.out.println("[lockd] started " + a + " and " + b);
    }

    @AfterAll
    static void stopServers() throws Exception {
        for (LockdServer s : new LockdServer[] {a, b}) {
            if (s != null) {
                int code = s.stop();
                System.out.println("[lockd] stopped " + s.name() + " (exit " + code + ")");
                s.deleteDataDir();
            }
        }
    }

    /** Which of a/b holds {@code key} for someone: the one where a fresh probe client is refused. */
    private static LockdServer holderOf(LockServices clients, String key) throws Exception {
        boolean onA = !lock(clients.create(a), NLockFactory.getLock(key, 1000L));
        boolean onB = !lock(clients.create(b), NLockFactory.getLock(key, 1000L));
        assertTrue(onA ^ onB, "exactly one server holds " + key + " (A: " + onA + ", B: " + onB + ")");
        return onA ? a : b;
    }

    @Test
    void clientMovesToTheOtherServerOnGracefulShutdown() throws Exception {
        try (LockServices clients = new LockServices(); LockServices probes = new LockServices()) {
            LockService s = clients.create(a, b);
            assertTrue(lock(s, NLockFactory.getLock("failover-0", 60_000L)));
            LockdServer first = holderOf(probes, "failover-0");
            LockdServer second = first == a ? b : a;
            probes.close();
            System.out.println("[gen1] client is on " + first.name());

            for (int round = 1; round <= 2; round++) {
                LockdServer from = round == 1 ? first : second;
                LockdServer to = round == 1 ? second : first;
                long logMark = clientLogSize();
                int code = from.stop();
                assertEquals(0, code, from.name() + " exit status after SIGTERM");
                assertTrue(from.readLog().contains("shutting down: resetting clients"),
                        from.name() + " logged that it reset its clients");
                long t0 = System.nanoTime();
                String k = "failover-" + round;
                Poll.until("the client works again after " + from.name() + " stopped", MOVE_LIMIT,
                        Duration.ofMillis(50), () -> lockWhenConnected(s, NLockFactory.getLock(k, 60_000L)));
                System.out.println("[gen1] round " + round + ": stopped " + from.name() + ", the client locked on "
                        + to.name() + " " + elapsedMs(t0) + " ms later");
                try (LockServices p = new LockServices()) {
                    assertFalse(lock(p.create(to), NLockFactory.getLock(k, 1000L)),
                            "the lock taken after the move is on " + to.name());
                }
                List<String> resets = clientLogSince(logMark).stream()
                        .filter(l -> l.contains("ConnectResetRequest") || l.contains("reset")).toList();
                System.out.println("[gen1] client log about the reset: " + resets);
                assertFalse(resets.isEmpty(), "the client logged receiving ConnectResetRequest");
                from.startAgain(); // back for the next round (and the other direction)
            }
        }
    }

    private static Path clientLog() {
        return Paths.get(System.getProperty("nacos.client.log", "target/nacos-client.log"));
    }

    private static long clientLogSize() throws IOException {
        Path p = clientLog();
        return Files.exists(p) ? Files.size(p) : 0;
    }

    private static List<String> clientLogSince(long offset) throws IOException {
        byte[] all = Files.readAllBytes(clientLog());
        return new String(all, (int) Math.min(offset, all.length), (int) Math.max(0, all.length - offset),
                StandardCharsets.UTF_8).lines().toList();
    }
}
