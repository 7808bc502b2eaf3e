package nacoslockd.interop.support;

import com.alibaba.nacos.api.lock.LockService;
import com.alibaba.nacos.api.lock.NacosLockFactory;
import com.alibaba.nacos.client.lock.core.NLockFactory;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

/**
 * The Java side of the benchmark's "same Java client" comparison (cmd/nacos-lock-bench, targets
 * {@code nacos-lockd-java} and {@code nacos-3.1}): the unmodified Gen 1 {@link LockService},
 * one per client thread (so one connection each), drives W1 or W2 against whatever server
 * {@code serverAddr} names, and prints one line {@code BENCH-REPORT {json}} in the load tool's
 * report format.
 *
 * <p>W1: each thread takes and releases its own key; one op is the pair. W2: every thread
 * contends for one key; the Gen 1 API has no wait queue, so a thread whose try fails retries
 * every millisecond (as the Redis recipe does); one op is a hand-off, its latency the time from
 * the first try to the grant.
 *
 * <p>Args: {@code target serverAddr w1|w2 clients warmupMs durationMs leaseMs}.
 */
public final class BenchGen1Main {

    private BenchGen1Main() {
    }

    public static void main(String[] args) throws Exception {
        String target = args[0];
        String serverAddr = args[1];
        String workload = args[2];
        int clients = Integer.parseInt(args[3]);
        long warmupMs = Long.parseLong(args[4]);
        long durationMs = Long.parseLong(args[5]);
        long leaseMs = Long.parseLong(args[6]);
        if (!workload.equals("w1") && !workload.equals("w2")) {
            throw new IllegalArgumentException("workload must be w1 or w2, not " + workload);
        }
        String prefix = "bench-java-" + workload + "-" + System.nanoTime();

        List<LockService> services = new ArrayList<>();
        for (int i = 0; i < clients; i++) {
            Properties p = new Properties();
            p.put("serverAddr", serverAddr);
            services.add(NacosLockFactory.createLockService(p));
        }
        AtomicLong errors = new AtomicLong();
        AtomicReference<String> firstError = new AtomicReference<>();
        long[][] lat = new long[clients][];
        int[] count = new int[clients];
        CountDownLatch ready = new CountDownLatch(clients);
        long[] times = new long[2]; // measure start, end (System.nanoTime)
        CountDownLatch go = new CountDownLatch(1);
        List<Thread> threads = new ArrayList<>();
        for (int i = 0; i < clients; i++) {
            final int id = i;
            Thread t = new Thread(() -> {
                LockService svc = services.get(id);
                String key = workload.equals("w1") ? prefix + "-" + id : prefix;
                long[] mine = new long[1 << 14];
                int n = 0;
                ready.countDown();
                try {
                    go.await();
                } catch (InterruptedException e) {
                    return;
                }
                long measureFrom = times[0];
                long end = times[1];
                while (System.nanoTime() < end) {
                    long t0 = System.nanoTime();
                    try {
                        boolean got = svc.remoteTryLock(NLockFactory.getLock(key, leaseMs));
                        if (workload.equals("w2")) {
                            while (!got && System.nanoTime() < end) {
                                Thread.sleep(1);
                                got = svc.remoteTryLock(NLockFactory.getLock(key, leaseMs));
                            }
                            if (!got) {
                                break; // the run ended while waiting
                            }
                        } else if (!got) {
                            throw new IllegalStateException("acquire of an uncontended key refused");
                        }
                        long acquired = System.nanoTime();
                        if (!svc.remoteReleaseLock(NLockFactory.getLock(key, leaseMs))) {
                            throw new IllegalStateException("release refused");
                        }
                        long done = workload.equals("w1") ? System.nanoTime() : acquired;
                        if (t0 >= measureFrom && done <= end) {
                            if (n == mine.length) {
                                mine = Arrays.copyOf(mine, n * 2);
                            }
                            mine[n++] = done - t0;
                        }
                    } catch (Exception e) {
                        errors.incrementAndGet();
                        firstError.compareAndSet(null, e.getClass().getSimpleName() + ": " + e.getMessage());
                    }
                }
                lat[id] = mine;
                count[id] = n;
            }, "bench-" + i);
            threads.add(t);
            t.start();
        }
        ready.await();
        long start = System.nanoTime();
        times[0] = start + warmupMs * 1_000_000L;
        times[1] = times[0] + durationMs * 1_000_000L;
        go.countDown();
        for (Thread t : threads) {
            t.join();
        }
        for (LockService s : services) {
            try {
                s.shutdown();
            } catch (Exception e) {
                // the run is over either way
            }
        }
        int total = 0;
        for (int c : count) {
            total += c;
        }
        long[] all = new long[total];
        int k = 0;
        for (int i = 0; i < clients; i++) {
            System.arraycopy(lat[i], 0, all, k, count[i]);
            k += count[i];
        }
        Arrays.sort(all);
        double secs = durationMs / 1000.0;
        StringBuilder b = new StringBuilder("BENCH-REPORT {");
        b.append("\"target\":\"").append(target).append("\",\"workload\":\"").append(workload).append('"');
        b.append(",\"clients\":").append(clients);
        b.append(",\"durationSeconds\":").append(secs);
        b.append(",\"ops\":").append(total);
        b.append(",\"opsPerSecond\":").append(total / secs);
        b.append(",\"errors\":").append(errors.get());
        b.append(",\"p50Ms\":").append(pct(all, 0.5));
        b.append(",\"p99Ms\":").append(pct(all, 0.99));
        b.append(",\"p999Ms\":").append(pct(all, 0.999));
        b.append(",\"fifoViolations\":-1");
        if (firstError.get() != null) {
            b.append(",\"firstErrors\":[\"").append(firstError.get().replace("\\", "\\\\").replace("\"", "\\\"")).append("\"]");
        }
        b.append(",\"notes\":[\"driven by the unmodified nacos-client Gen 1 LockService (BenchGen1Main), one connection per client")
                .append(workload.equals("w2") ? "; no wait queue in Gen 1: a waiter retries every millisecond" : "")
                .append("\"]}");
        System.out.println(b);
        System.exit(0); // the client's own threads are not daemons
    }

    private static double pct(long[] sorted, double q) {
        if (sorted.length == 0) {
            return 0;
        }
        int i = (int) Math.min(sorted.length - 1, Math.floor(q * sorted.length));
        return sorted[i] / 1e6;
    }
}
