package nacoslockd.interop.support;

import com.alibaba.nacos.api.lock.LockService;
import com.alibaba.nacos.api.lock.NacosLockFactory;
import com.alibaba.nacos.client.lock.core.NLockFactory;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.lang.management.CompilationMXBean;
import java.lang.management.ManagementFactory;
import java.nio.charset.StandardCharsets;
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
 * <p>Args: {@code target serverAddr w1|w2 clients warmupMs durationMs leaseMs} for one point, or
 * {@code serve} for one point per line of standard input (see {@link #serve}). The report's
 * {@code extra} carries the client JVM's own CPU over the measured window ({@code
 * clientCpuCores}) and its JIT's compile time in it ({@code clientJitMs}).
 */
public final class BenchGen1Main {

    private BenchGen1Main() {
    }

    public static void main(String[] args) throws Exception {
        if (args.length == 1 && args[0].equals("serve")) {
            serve();
        } else {
            System.out.println(runPoint(args));
        }
        System.exit(0); // the client's own threads are not daemons
    }

    /**
     * Runs one point per line of standard input (the seven arguments of a single run, separated
     * by spaces) and prints one line for each: {@code BENCH-REPORT {json}}, or {@code
     * BENCH-FAILED message} when the point could not run. One JVM for all the points of a suite
     * keeps its JIT's work: pinned to one core, a fresh JVM compiles for about a minute of load
     * (W1 c=1 against nacos-lockd: 180-200 pairs/s after 10-20 s, 458 after 120 s, its compiler
     * threads busy a third of the core until then), so points each in a new JVM measured the
     * client's compiler more than either server.
     */
    private static void serve() throws IOException {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        for (String line; (line = in.readLine()) != null; ) {
            line = line.trim();
            if (line.isEmpty()) {
                continue;
            }
            String out;
            try {
                out = runPoint(line.split("\\s+"));
            } catch (Exception e) {
                out = "BENCH-FAILED " + (e.getClass().getSimpleName() + ": " + e.getMessage()).replace('\n', ' ');
            }
            System.out.println(out);
            System.out.flush();
        }
    }

    /** Runs one point: {@code target serverAddr w1|w2 clients warmupMs durationMs leaseMs}. */
    private static String runPoint(String[] args) throws Exception {
        if (args.length != 7) {
            throw new IllegalArgumentException("want 7 arguments (target serverAddr w1|w2 clients warmupMs durationMs leaseMs), got " + args.length);
        }
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
        // The client's own CPU and JIT work over the measured window: a
        // client that saturates its core, or is still compiling, is what
        // such a point measures.
        sleepUntil(times[0]);
        long cpu0 = processCpuNanos();
        long jit0 = jitMillis();
        sleepUntil(times[1]);
        long cpu1 = processCpuNanos();
        long jit1 = jitMillis();
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
        b.append(",\"extra\":{\"clientCpuCores\":").append(cpu0 < 0 || cpu1 < 0 ? -1 : (cpu1 - cpu0) / (durationMs * 1e6));
        b.append(",\"clientJitMs\":").append(jit0 < 0 || jit1 < 0 ? -1 : jit1 - jit0).append('}');
        if (firstError.get() != null) {
            b.append(",\"firstErrors\":[\"").append(firstError.get().replace("\\", "\\\\").replace("\"", "\\\"")).append("\"]");
        }
        b.append(",\"notes\":[\"driven by the unmodified nacos-client Gen 1 LockService (BenchGen1Main), one connection per client")
                .append(workload.equals("w2") ? "; no wait queue in Gen 1: a waiter retries every millisecond" : "")
                .append("\"]}");
        return b.toString();
    }

    private static void sleepUntil(long nanoTime) throws InterruptedException {
        for (long left; (left = nanoTime - System.nanoTime()) > 0; ) {
            Thread.sleep(Math.max(1, left / 1_000_000L));
        }
    }

    /** The JVM's CPU time (all threads) in nanoseconds, -1 where the JVM does not say. */
    private static long processCpuNanos() {
        if (ManagementFactory.getOperatingSystemMXBean() instanceof com.sun.management.OperatingSystemMXBean os) {
            return os.getProcessCpuTime();
        }
        return -1;
    }

    /** The JIT compilers' accumulated time in milliseconds, -1 where the JVM does not say. */
    private static long jitMillis() {
        CompilationMXBean c = ManagementFactory.getCompilationMXBean();
        return c != null && c.isCompilationTimeMonitoringSupported() ? c.getTotalCompilationTime() : -1;
    }

    private static double pct(long[] sorted, double q) {
        if (sorted.length == 0) {
            return 0;
        }
        int i = (int) Math.min(sorted.length - 1, Math.floor(q * sorted.length));
        return sorted[i] / 1e6;
    }
}
