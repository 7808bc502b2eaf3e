package nacoslockd.interop.support;

import java.io.IOException;
import java.io.InterruptedIOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.stream.Stream;

/**
 * One real nacos-lockd process: {@code <binary> --port P --data-dir DIR [--config FILE]}.
 *
 * <p>P is chosen so that P-1000 (Raft), P and P+1000 (SDK gRPC, the only port the Java client
 * uses) are free. The server's stderr goes to a file under {@code target/lockd/logs}; start-up
 * waits for the single {@code "message":"nacos-lockd ready"} line. {@link #stop()} sends SIGTERM
 * ({@link Process#destroy()}), waits 10 s, then kills.
 */
public final class LockdServer {

    /** System property holding the absolute path of the nacos-lockd binary. */
    public static final String BINARY_PROPERTY = "nacos.lockd.binary";

    /** System property naming the directory for logs, configs and data dirs (surefire sets it). */
    public static final String WORKDIR_PROPERTY = "nacos.lockd.workdir";

    public static final int GRPC_PORT_OFFSET = 1000;

    public static final int RAFT_PORT_OFFSET = -1000;

    private static final String READY_MARKER = "\"message\":\"nacos-lockd ready\"";

    private static final Duration READY_TIMEOUT = Duration.ofSeconds(30);

    private static final Duration STOP_TIMEOUT = Duration.ofSeconds(10);

    private static final AtomicInteger SEQUENCE = new AtomicInteger();

    private final String name;

    private final Map<String, String> config;

    private Process process;

    private int port;

    private Path logFile;

    private Path dataDir;

    private Integer exitCode;

    private long stopMillis = -1;

    private boolean ready;

    private int restarts;

    public LockdServer(String name, Map<String, String> config) {
        this.name = name.replaceAll("[^A-Za-z0-9._-]", "_");
        this.config = config;
    }

    /** Extra command-line arguments (cluster mode). */
    private final List<String> extraArgs = new ArrayList<>();

    /**
     * Starts an n-node cluster on loopback: picks every node's ports, writes one cluster.conf,
     * launches all processes at once (a node only becomes ready once a quorum is up) and waits
     * for each to log ready.
     */
    public static List<LockdServer> startCluster(String name, int n, Map<String, String> config)
            throws IOException, InterruptedException {
        Path work = workDir();
        List<LockdServer> nodes = new ArrayList<>();
        StringBuilder conf = new StringBuilder("# written by LockdServer.startCluster\n");
        for (int i = 0; i < n; i++) {
            LockdServer s = new LockdServer(name + "-node" + i, config);
            s.port = pickPort();
            while (clashes(nodes, s.port)) {
                s.port = pickPort();
            }
            nodes.add(s);
            conf.append("127.0.0.1:").append(s.port).append('\n');
        }
        Path confFile = Files.createTempFile(Files.createDirectories(work.resolve("logs")), name + "-", "-cluster.conf");
        Files.writeString(confFile, conf);
        Path data = Files.createDirectories(work.resolve("data"));
        for (LockdServer s : nodes) {
            s.extraArgs.addAll(List.of("--cluster-conf", confFile.toString(), "--ip", "127.0.0.1"));
            s.dataDir = Files.createTempDirectory(data, s.name + "-");
            s.spawn(s.name + "-" + SEQUENCE.incrementAndGet());
        }
        for (LockdServer s : nodes) {
            s.awaitReady();
            s.ready = true;
        }
        return nodes;
    }

    /** Absolute path of the binary, from {@value #BINARY_PROPERTY}; fails clearly if unusable. */
    public static Path binary() {
        String value = System.getProperty(BINARY_PROPERTY);
        if (value == null || value.isBlank()) {
            throw new IllegalStateException("System property " + BINARY_PROPERTY
                    + " is not set: pass -D" + BINARY_PROPERTY + "=/absolute/path/to/nacos-lockd"
                    + " (build it with: go build -o bin/nacos-lockd ./cmd/nacos-lockd)");
        }
        Path path = Paths.get(value);
        if (!path.isAbsolute()) {
            throw new IllegalStateException(BINARY_PROPERTY + " must be an absolute path, got '" + value + "'");
        }
        path = path.normalize();
        if (!Files.isRegularFile(path) || !Files.isExecutable(path)) {
            throw new IllegalStateException("nacos-lockd binary not found or not executable at " + path
                    + " (from -D" + BINARY_PROPERTY + "); build it with:"
                    + " go build -o bin/nacos-lockd ./cmd/nacos-lockd");
        }
        return path;
    }

    static Path workDir() throws IOException {
        String value = System.getProperty(WORKDIR_PROPERTY);
        Path dir = value == null || value.isBlank() ? Paths.get("target", "lockd") : Paths.get(value);
        Files.createDirectories(dir);
        return dir.toAbsolutePath().normalize();
    }

    /** Starts the process and waits until it logged the ready line. Retries on port clashes. */
    public void start() throws IOException, InterruptedException {
        binary();
        Path work = workDir();
        Path data = Files.createDirectories(work.resolve("data"));
        IllegalStateException last = null;
        for (int attempt = 1; attempt <= 3; attempt++) {
            String id = name + "-" + SEQUENCE.incrementAndGet();
            port = pickPort();
            dataDir = Files.createTempDirectory(data, id + "-");
            try {
                launch(id);
                return;
            } catch (IllegalStateException e) {
                last = e;
                forceStop();
                if (!readLog().contains("address already in use")) {
                    throw e;
                }
            }
        }
        throw last;
    }

    /**
     * Stops the process (SIGTERM, or SIGKILL when {@code kill}) and starts it again on the same
     * ports and data dir; returns the exit code of the stopped process. Clients keep their
     * {@link #serverAddr()}. Fails if the old ports are no longer free.
     */
    public int restart(boolean kill) throws IOException, InterruptedException {
        int code;
        if (kill) {
            forceStop();
            code = exitCode;
        } else {
            code = stop();
        }
        restarts++;
        launch(name + "-" + SEQUENCE.incrementAndGet() + "-restart" + restarts);
        return code;
    }

    /** Starts a stopped server again on the same ports and data dir. */
    public void startAgain() throws IOException, InterruptedException {
        if (isAlive()) {
            throw new IllegalStateException(name + " is still running");
        }
        restarts++;
        launch(name + "-" + SEQUENCE.incrementAndGet() + "-restart" + restarts);
    }

    /** SIGKILL (kill -9) now; returns the exit code. */
    public int kill() throws InterruptedException {
        forceStop();
        return exitCode;
    }

    /** Whether port's triple (port-1000, port, port+1000) overlaps another node's. */
    private static boolean clashes(List<LockdServer> nodes, int port) {
        for (LockdServer o : nodes) {
            int d = Math.abs(o.port - port);
            if (d == 0 || d == 1000 || d == 2000) {
                return true;
            }
        }
        return false;
    }

    private void launch(String id) throws IOException, InterruptedException {
        spawn(id);
        awaitReady();
        ready = true;
    }

    private void spawn(String id) throws IOException {
        Path work = workDir();
        Path logs = Files.createDirectories(work.resolve("logs"));
        logFile = logs.resolve(id + ".stderr.log");
        List<String> cmd = new ArrayList<>(List.of(binary().toString(), "--port", String.valueOf(port),
                "--data-dir", dataDir.toString()));
        if (!config.isEmpty()) {
            Path cfg = logs.resolve(id + ".properties");
            Properties props = new Properties();
            props.putAll(config);
            try (var out = Files.newOutputStream(cfg)) {
                props.store(out, "nacos-lockd config for " + id);
            }
            cmd.add("--config");
            cmd.add(cfg.toString());
        }
        cmd.addAll(extraArgs);
        process = new ProcessBuilder(cmd).redirectOutput(logs.resolve(id + ".stdout.log").toFile())
                .redirectError(logFile.toFile()).start();
        exitCode = null;
        ready = false;
    }

    private void awaitReady() throws IOException, InterruptedException {
        long deadline = System.nanoTime() + READY_TIMEOUT.toNanos();
        while (System.nanoTime() < deadline) {
            if (readLog().contains(READY_MARKER)) {
                return;
            }
            if (!process.isAlive()) {
                exitCode = process.exitValue();
                throw new IllegalStateException("nacos-lockd exited with code " + exitCode
                        + " before it was ready (port " + port + "). Its stderr (" + logFile + "):\n" + readLog());
            }
            Thread.sleep(50);
        }
        dumpGoroutines();
        throw new IllegalStateException("nacos-lockd did not log \"nacos-lockd ready\" within "
                + READY_TIMEOUT.toSeconds() + " s (port " + port + "). Its stderr (" + logFile + "):\n"
                + readLog());
    }

    /** SIGQUIT makes a Go program print every goroutine's stack to stderr and exit. */
    private void dumpGoroutines() throws InterruptedException {
        try {
            new ProcessBuilder("kill", "-QUIT", String.valueOf(process.pid())).inheritIO().start().waitFor();
            process.waitFor(3, TimeUnit.SECONDS);
        } catch (IOException e) {
            // best effort
        }
    }

    /** SIGTERM, wait up to 10 s, then SIGKILL. Returns the exit code. Idempotent. */
    public int stop() throws InterruptedException {
        if (process == null) {
            return 0;
        }
        if (exitCode != null) {
            return exitCode;
        }
        long t0 = System.nanoTime();
        process.destroy();
        if (!process.waitFor(STOP_TIMEOUT.toMillis(), TimeUnit.MILLISECONDS)) {
            System.err.println("[lockd] " + name + " did not exit within " + STOP_TIMEOUT.toSeconds()
                    + " s of SIGTERM; killing it");
            process.destroyForcibly();
            process.waitFor(STOP_TIMEOUT.toMillis(), TimeUnit.MILLISECONDS);
        }
        stopMillis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
        exitCode = process.isAlive() ? -1 : process.exitValue();
        return exitCode;
    }

    private void forceStop() throws InterruptedException {
        if (process == null) {
            return;
        }
        process.destroyForcibly();
        process.waitFor(STOP_TIMEOUT.toMillis(), TimeUnit.MILLISECONDS);
        exitCode = process.isAlive() ? -1 : process.exitValue();
    }

    /** Deletes the data dir (after a clean stop). */
    public void deleteDataDir() throws IOException {
        if (dataDir == null || !Files.exists(dataDir)) {
            return;
        }
        try (Stream<Path> walk = Files.walk(dataDir)) {
            for (Path p : (Iterable<Path>) walk.sorted(Comparator.reverseOrder())::iterator) {
                Files.deleteIfExists(p);
            }
        }
    }

    /** Whether {@link #start()} saw the ready line. */
    public boolean wasReady() {
        return ready;
    }

    public boolean isAlive() {
        return process != null && process.isAlive();
    }

    /** Connection ids from this process's "connection registered" log lines, oldest first. */
    public List<String> registeredConnectionIds() throws IOException {
        return logLines("\"message\":\"connection registered\"").stream()
                .map(l -> l.replaceAll(".*\"conn_id\":\"([^\"]*)\".*", "$1")).toList();
    }

    /** Main (Nacos) port P. Nothing listens on it; the client derives P+1000 from it. */
    public int port() {
        return port;
    }

    public int grpcPort() {
        return port + GRPC_PORT_OFFSET;
    }

    /** The value for the client's {@code serverAddr} property. */
    public String serverAddr() {
        return "127.0.0.1:" + port;
    }

    public Path logFile() {
        return logFile;
    }

    public long stopMillis() {
        return stopMillis;
    }

    public String name() {
        return name;
    }

    public String readLog() throws IOException {
        if (logFile == null || !Files.exists(logFile)) {
            return "";
        }
        return new String(Files.readAllBytes(logFile), StandardCharsets.UTF_8);
    }

    /** Last {@code lines} lines of the server's stderr. */
    public String tail(int lines) {
        try {
            List<String> all = readLog().lines().toList();
            return String.join("\n", all.subList(Math.max(0, all.size() - lines), all.size()));
        } catch (IOException e) {
            return "(cannot read " + logFile + ": " + e + ")";
        }
    }

    /** Server log lines containing {@code needle}. */
    public List<String> logLines(String needle) throws IOException {
        return readLog().lines().filter(l -> l.contains(needle)).toList();
    }

    /** A random P in [11000, 31000) with P-1000, P and P+1000 free on all interfaces. */
    public static int pickPort() throws IOException {
        for (int i = 0; i < 200; i++) {
            int p = ThreadLocalRandom.current().nextInt(11000, 31000);
            if (free(p + RAFT_PORT_OFFSET) && free(p) && free(p + GRPC_PORT_OFFSET)) {
                return p;
            }
        }
        throw new IOException("no free port triple (P-1000, P, P+1000) found");
    }

    private static boolean free(int port) {
        for (InetAddress addr : new InetAddress[] {null, InetAddress.getLoopbackAddress()}) {
            try (ServerSocket s = new ServerSocket()) {
                s.setReuseAddress(false);
                s.bind(addr == null ? new InetSocketAddress(port) : new InetSocketAddress(addr, port));
            } catch (InterruptedIOException e) {
                Thread.currentThread().interrupt();
                return false;
            } catch (IOException e) {
                return false;
            }
        }
        return true;
    }

    @Override
    public String toString() {
        return "nacos-lockd[" + name + ", port " + port + ", grpc " + grpcPort() + ", log " + logFile + "]";
    }
}
