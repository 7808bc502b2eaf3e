package nacoslockd.interop.support;

import com.alibaba.nacos.api.lock.LockService;
import com.alibaba.nacos.api.lock.NacosLockFactory;
import com.alibaba.nacos.client.lock.core.NLockFactory;
import com.alibaba.nacos.common.remote.client.Connection;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.lang.reflect.Field;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.Random;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The Java client of the chaos suite (interop/chaos): worker threads, each with its own
 * {@link LockService} (its own connection, which owns its Gen 1 locks), take and release
 * {@code NACOS_LOCK} locks through the unmodified client while the suite injects faults, and
 * append every call to a history file in the suite's JSON-lines format.
 *
 * <p>Args: {@code serverAddr historyFile proc workers seed leaseMinMs leaseMaxMs key[,key...]}.
 *
 * <p>The Gen 1 API answers with a bare boolean, so replies are recorded as "blind" (no count,
 * token or reason). A session is one connection: its id is read from the client (reflection,
 * test only) before and after each call. When the client has reconnected on its own between
 * calls, the old session ends and a new one starts; when the connection changed during a call,
 * the call's effect cannot be attributed to either, so it is recorded as indeterminate and the
 * whole LockService is shut down, as after any exception.
 */
public final class ChaosGen1ClientMain {

    private static volatile boolean running = true;

    private ChaosGen1ClientMain() {
    }

    public static void main(String[] args) throws Exception {
        String serverAddr = args[0];
        OutputStream out = new FileOutputStream(args[1], true);
        int proc = Integer.parseInt(args[2]);
        int workers = Integer.parseInt(args[3]);
        long seed = Long.parseLong(args[4]);
        long leaseMin = Long.parseLong(args[5]);
        long leaseMax = Long.parseLong(args[6]);
        String[] keys = args[7].split(",");
        History history = new History(out);
        List<Thread> threads = new ArrayList<>();
        for (int w = 0; w < workers; w++) {
            Worker wk = new Worker(serverAddr, history, proc, w, new Random(seed * 1000 + proc * 100L + w), leaseMin, leaseMax,
                    keys);
            Thread t = new Thread(wk::run, "chaos-worker-" + w);
            threads.add(t);
            t.start();
        }
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            running = false;
            for (Thread t : threads) {
                try {
                    t.join(10_000);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }
        }));
        for (Thread t : threads) {
            t.join();
        }
        System.exit(0); // the client's own threads are not daemons
    }

    /** Appends records, one write per line, so that a killed JVM leaves whole lines. */
    static final class History {
        private final OutputStream out;
        final AtomicLong ids = new AtomicLong();

        History(OutputStream out) {
            this.out = out;
        }

        synchronized void write(String json) {
            try {
                out.write((json + "\n").getBytes(StandardCharsets.UTF_8));
                out.flush();
            } catch (IOException e) {
                throw new IllegalStateException("write history", e);
            }
        }
    }

    static final class Worker {
        private final String serverAddr;
        private final History history;
        private final int proc;
        private final int w;
        private final Random rnd;
        private final long leaseMin;
        private final long leaseMax;
        private final String[] keys;

        private LockService svc;
        private String sess; // session name, null when none
        private String sessConn;
        private int nsess;

        Worker(String serverAddr, History history, int proc, int w, Random rnd, long leaseMin, long leaseMax, String[] keys) {
            this.serverAddr = serverAddr;
            this.history = history;
            this.proc = proc;
            this.w = w;
            this.rnd = rnd;
            this.leaseMin = leaseMin;
            this.leaseMax = leaseMax;
            this.keys = keys;
        }

        void run() {
            try {
                while (running) {
                    step();
                    sleep(rnd.nextInt(40));
                }
            } finally {
                endSession("closed", true);
            }
        }

        private void step() {
            if (svc == null) {
                try {
                    Properties p = new Properties();
                    p.put("serverAddr", serverAddr);
                    svc = NacosLockFactory.createLockService(p);
                } catch (Exception e) {
                    svc = null;
                    sleep(200);
                    return;
                }
            }
            String conn = connectionId(svc);
            if (conn == null) {
                sleep(100); // connecting or reconnecting
                return;
            }
            if (!conn.equals(sessConn)) {
                endSession("broken", false); // the client moved to a new connection on its own
                startSession(conn);
            }
            String key = keys[rnd.nextInt(keys.length)];
            long lease = leaseMin + (long) (rnd.nextDouble() * (leaseMax - leaseMin));
            if (rnd.nextInt(100) < 10) {
                call("RELEASE", key, lease); // most likely not held: not-owner or not-found
            } else if (Boolean.TRUE.equals(call("ACQUIRE", key, lease))) {
                // Hold it for a while; now and then past the lease on purpose.
                long hold = rnd.nextInt(100) < 3 ? lease + 300 : (long) (rnd.nextDouble() * lease * 0.7);
                sleep(hold);
                if (sess != null) {
                    call("RELEASE", key, lease);
                }
            }
            if (sess != null && rnd.nextInt(100) == 0) {
                endSession("closed", true); // leave holding: connection loss must release it
            }
        }

        /** One call, recorded; returns the result, or null when indeterminate (session ended). */
        private Boolean call(String op, String key, long lease) {
            String before = sessConn;
            long id = history.ids.incrementAndGet();
            history.write("{\"t\":\"inv\",\"ts\":" + nowNs() + ",\"proc\":" + proc + ",\"w\":" + w + ",\"id\":" + id
                    + ",\"sess\":" + quote(sess) + ",\"op\":\"" + op + "\",\"lock\":" + quote("NACOS_LOCK/" + key)
                    + ",\"owner\":" + quote(sess) + ",\"lease\":" + lease + "}");
            Boolean result = null;
            String err = null;
            try {
                result = op.equals("ACQUIRE") ? svc.remoteTryLock(NLockFactory.getLock(key, lease))
                        : svc.remoteReleaseLock(NLockFactory.getLock(key, lease));
                if (!before.equals(connectionId(svc))) {
                    err = "the client changed connections during the call";
                } else if (result == null) {
                    err = "null result";
                }
            } catch (Exception e) {
                err = e.getClass().getSimpleName() + ": " + e.getMessage();
            }
            String head = "{\"t\":\"ret\",\"ts\":" + nowNs() + ",\"proc\":" + proc + ",\"w\":" + w + ",\"id\":" + id
                    + ",\"sess\":" + quote(sess);
            if (err != null) {
                history.write(head + ",\"err\":" + quote(err) + "}");
                endSession("abandoned", true);
                return null;
            }
            history.write(head + ",\"code\":200,\"result\":" + result + ",\"blind\":true}");
            return result;
        }

        private void startSession(String conn) {
            nsess++;
            sess = "j" + proc + ".w" + w + ".s" + nsess;
            sessConn = conn;
            history.write("{\"t\":\"sess\",\"ts\":" + nowNs() + ",\"proc\":" + proc + ",\"w\":" + w + ",\"sess\":" + quote(sess)
                    + ",\"conn\":" + quote(conn) + "}");
        }

        /** Ends the session; with shutdown, also the LockService (and so its connection). */
        private void endSession(String why, boolean shutdown) {
            if (sess != null) {
                // Written before the shutdown: the server may clean up as soon as it sees the close.
                history.write("{\"t\":\"end\",\"ts\":" + nowNs() + ",\"proc\":" + proc + ",\"w\":" + w + ",\"sess\":"
                        + quote(sess) + ",\"why\":\"" + why + "\"}");
            }
            sess = null;
            sessConn = null;
            if (shutdown && svc != null) {
                try {
                    svc.shutdown();
                } catch (Exception e) {
                    // The connection is going away either way.
                }
                svc = null;
            }
        }
    }

    /** The id the server gave the LockService's current connection, or null when there is none. */
    static String connectionId(LockService s) {
        try {
            Object grpc = field(s, "lockGrpcClient");
            Object rpc = field(grpc, "rpcClient");
            Object conn = field(rpc, "currentConnection");
            if (conn == null) {
                return null;
            }
            return ((Connection) conn).getConnectionId();
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException("read the client's connection id (client internals changed?)", e);
        }
    }

    private static Object field(Object o, String name) throws ReflectiveOperationException {
        for (Class<?> c = o.getClass(); c != null; c = c.getSuperclass()) {
            try {
                Field f = c.getDeclaredField(name);
                f.setAccessible(true);
                return f.get(o);
            } catch (NoSuchFieldException e) {
                // look in the superclass
            }
        }
        throw new NoSuchFieldException(name + " in " + o.getClass());
    }

    private static long nowNs() {
        Instant t = Instant.now();
        return t.getEpochSecond() * 1_000_000_000L + t.getNano();
    }

    private static String quote(String s) {
        if (s == null) {
            return "null";
        }
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            switch (c) {
                case '"' -> b.append("\\\"");
                case '\\' -> b.append("\\\\");
                default -> {
                    if (c < 0x20) {
                        b.append(String.format("\\u%04x", (int) c));
                    } else {
                        b.append(c);
                    }
                }
            }
        }
        return b.append('"').toString();
    }

    private static void sleep(long ms) {
        try {
            Thread.sleep(Math.max(0, ms));
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
