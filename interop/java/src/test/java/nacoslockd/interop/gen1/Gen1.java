package nacoslockd.interop.gen1;

import static org.junit.jupiter.api.Assertions.assertThrows;

import com.alibaba.nacos.api.exception.NacosException;
import com.alibaba.nacos.api.lock.LockService;
import com.alibaba.nacos.api.lock.model.LockInstance;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.function.Executable;

/** Helpers shared by the Gen 1 (LockService / NLock) tests. */
final class Gen1 {

    private Gen1() {
    }

    /** lock() that turns the client's local "no lock ability" refusal into a clear failure. */
    static boolean lock(LockService s, LockInstance lock) throws Exception {
        try {
            return s.lock(lock);
        } catch (Exception e) {
            if (String.valueOf(e.getMessage()).contains("version is too low")) {
                throw new AssertionError("lock ability negotiation failed: the client did not get"
                        + " {\"lock\":true} in SetupAckRequest (or had no connection)", e);
            }
            throw e;
        }
    }

    /**
     * lock() that answers false instead of throwing while the client is between connections
     * (the client then fails locally with "version is too low" (501) or a request failure);
     * for polling across a server restart or fail-over.
     */
    static boolean lockWhenConnected(LockService s, LockInstance lock) {
        try {
            return Boolean.TRUE.equals(s.lock(lock));
        } catch (Exception e) {
            return false;
        }
    }

    /** Runs {@code call}, which must throw a NacosException; returns it. */
    static NacosException nacosError(Executable call) {
        return assertThrows(NacosException.class, call);
    }

    static long elapsedMs(long t0) {
        return TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
    }
}
