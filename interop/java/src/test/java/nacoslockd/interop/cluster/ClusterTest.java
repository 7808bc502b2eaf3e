package nacoslockd.interop.cluster;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.alibaba.nacos.api.lock.LockService;
import com.alibaba.nacos.client.lock.core.NLockFactory;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.TimeUnit;
import nacoslockd.interop.support.LockServices;
import nacoslockd.interop.support.LockdServer;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A three-node nacos-lockd cluster from one cluster.conf, used by the real client: a client that
 * lists all three nodes locks, whichever node it lands on, and every node sees the same locks.
 */
@Timeout(value = 180, unit = TimeUnit.SECONDS)
class ClusterTest {

    private static List<LockdServer> nodes;

    private LockServices clients;

    @BeforeAll
    static void start() throws Exception {
        nodes = LockdServer.startCluster("ClusterTest", 3, Map.of("nacos.lock.node_grace_ms", "3000"));
    }

    @AfterAll
    static void stop() throws Exception {
        if (nodes != null) {
            for (LockdServer n : nodes) {
                n.stop();
            }
        }
    }

    @BeforeEach
    void setUp() {
        clients = new LockServices();
    }

    @AfterEach
    void tearDown() throws Exception {
        clients.close();
    }

    @Test
    void clientListingEveryNodeLocks() throws Exception {
        LockService all = clients.create(nodes.toArray(new LockdServer[0]));
        assertTrue(all.lock(NLockFactory.getLock("cluster-all", 60_000L)));
        for (LockdServer n : nodes) {
            LockService single = clients.create(n);
            assertFalse(single.lock(NLockFactory.getLock("cluster-all", 60_000L)),
                    "node " + n.name() + " granted a lock another node's client holds");
        }
        assertTrue(all.unLock(NLockFactory.getLock("cluster-all", 60_000L)));
    }

    @Test
    void locksThroughEachNodeInTurn() throws Exception {
        for (int i = 0; i < nodes.size(); i++) {
            LockdServer n = nodes.get(i);
            LockService holder = clients.create(n);
            String key = "cluster-turn-" + i;
            assertTrue(holder.lock(NLockFactory.getLock(key, 60_000L)), "lock through " + n.name());
            for (LockdServer other : nodes) {
                if (other != n) {
                    assertFalse(clients.create(other).lock(NLockFactory.getLock(key, 60_000L)),
                            other.name() + " granted " + key + " held through " + n.name());
                }
            }
            assertTrue(holder.unLock(NLockFactory.getLock(key, 60_000L)), "unlock through " + n.name());
            LockService next = clients.create(nodes.get((i + 1) % nodes.size()));
            assertTrue(next.lock(NLockFactory.getLock(key, 60_000L)), "the released key on the next node");
        }
    }

    @Test
    void clientMovesWhenItsNodeStops() throws Exception {
        // A client listing all nodes keeps working when one of them is stopped gracefully.
        Properties p = new Properties();
        p.put("serverAddr", String.join(",", nodes.stream().map(LockdServer::serverAddr).toList()));
        LockService all = clients.create(p);
        assertTrue(all.lock(NLockFactory.getLock("cluster-move-0", 60_000L)));
        LockdServer victim = nodes.get(2);
        victim.stop();
        try {
            boolean locked = false;
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            while (!locked && System.nanoTime() < deadline) {
                try {
                    locked = all.lock(NLockFactory.getLock("cluster-move-1", 60_000L));
                } catch (Exception e) {
                    Thread.sleep(200);
                }
            }
            assertTrue(locked, "the client did not lock again after one node stopped");
        } finally {
            victim.startAgain();
        }
    }
}
