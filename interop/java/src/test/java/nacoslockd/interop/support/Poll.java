package nacoslockd.interop.support;

import java.time.Duration;

/** Polling with a deadline instead of fixed sleeps. */
public final class Poll {

    private Poll() {
    }

    /** A condition that may throw. */
    @FunctionalInterface
    public interface Check {
        boolean ok() throws Exception;
    }

    /**
     * Evaluates {@code check} every {@code every} until it is true or {@code within} has passed;
     * returns the time it took, or throws an AssertionError naming {@code what}.
     */
    public static Duration until(String what, Duration within, Duration every, Check check) throws Exception {
        long start = System.nanoTime();
        long deadline = start + within.toNanos();
        while (true) {
            if (check.ok()) {
                return Duration.ofNanos(System.nanoTime() - start);
            }
            if (System.nanoTime() > deadline) {
                throw new AssertionError(what + ": not true within " + within.toMillis() + " ms");
            }
            Thread.sleep(every.toMillis());
        }
    }
}
