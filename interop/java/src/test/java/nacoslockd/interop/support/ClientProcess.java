package nacoslockd.interop.support;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

/**
 * A Nacos client in a child JVM (same test class path), so a test can kill -9 a client the way
 * a crashing application dies: its TCP connection goes away without a goodbye.
 *
 * <p>The child runs {@code mainClass args...}; it prints one line {@code READY <details>} when it
 * holds what it was asked to hold, then blocks until killed.
 */
public final class ClientProcess implements AutoCloseable {

    private final Process process;

    private final CompletableFuture<String> ready = new CompletableFuture<>();

    private final StringBuilder output = new StringBuilder();

    private ClientProcess(Process process) {
        this.process = process;
        Thread reader = new Thread(() -> {
            try (BufferedReader r = new BufferedReader(
                    new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8))) {
                String line;
                while ((line = r.readLine()) != null) {
                    synchronized (output) {
                        output.append(line).append('\n');
                    }
                    if (line.startsWith("READY")) {
                        ready.complete(line);
                    }
                }
            } catch (IOException e) {
                // process gone
            }
            ready.completeExceptionally(new IllegalStateException("child JVM ended before READY:\n" + output()));
        }, "client-process-reader");
        reader.setDaemon(true);
        reader.start();
    }

    /** Starts {@code mainClass} with the test class path and the client's log settings. */
    public static ClientProcess start(Class<?> mainClass, String... args) throws IOException {
        String cp = System.getProperty("surefire.test.class.path", System.getProperty("java.class.path"));
        Path java = Paths.get(System.getProperty("java.home"), "bin", "java");
        List<String> cmd = new ArrayList<>(List.of(java.toString(), "-Xmx128m", "-XX:TieredStopAtLevel=1",
                "-Dnacos.logging.default.config.enabled=false", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
                "-Duser.home=" + System.getProperty("user.home"), "-cp", cp, mainClass.getName()));
        cmd.addAll(List.of(args));
        return new ClientProcess(new ProcessBuilder(cmd).redirectErrorStream(true).start());
    }

    /** Waits for the child's READY line and returns it. */
    public String awaitReady(long timeoutMs) throws Exception {
        try {
            return ready.get(timeoutMs, TimeUnit.MILLISECONDS);
        } catch (java.util.concurrent.TimeoutException e) {
            throw new AssertionError("child JVM not READY within " + timeoutMs + " ms:\n" + output());
        }
    }

    /** kill -9. */
    public void kill() throws InterruptedException {
        process.destroyForcibly();
        process.waitFor(10, TimeUnit.SECONDS);
    }

    public String output() {
        synchronized (output) {
            return output.toString();
        }
    }

    @Override
    public void close() throws InterruptedException {
        kill();
    }
}
