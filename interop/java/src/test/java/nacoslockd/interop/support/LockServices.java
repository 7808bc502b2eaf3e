package nacoslockd.interop.support;

import com.alibaba.nacos.api.exception.NacosException;
import com.alibaba.nacos.api.lock.LockService;
import com.alibaba.nacos.api.lock.NacosLockFactory;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;

/**
 * Creates client LockServices the way an application does (only {@code serverAddr} set: one
 * gRPC connection to P+1000, no HTTP) and shuts them all down at the end of a test.
 * Each LockService is its own gRPC connection, i.e. its own lock owner.
 */
public final class LockServices implements AutoCloseable {

    private final List<LockService> services = new ArrayList<>();

    public static Properties properties(LockdServer server) {
        Properties p = new Properties();
        p.put("serverAddr", server.serverAddr());
        return p;
    }

    public LockService create(LockdServer server) throws NacosException {
        return create(properties(server));
    }

    /** A LockService whose serverAddr lists every given server, in this order. */
    public LockService create(LockdServer... servers) throws NacosException {
        Properties p = new Properties();
        p.put("serverAddr", String.join(",", java.util.Arrays.stream(servers).map(LockdServer::serverAddr).toList()));
        return create(p);
    }

    public LockService create(Properties p) throws NacosException {
        LockService s = NacosLockFactory.createLockService(p);
        services.add(s);
        return s;
    }

    /** Shuts one service down now (closes its connection). */
    public void shutdown(LockService s) throws NacosException {
        services.remove(s);
        s.shutdown();
    }

    @Override
    public void close() throws NacosException {
        NacosException first = null;
        for (LockService s : services) {
            try {
                s.shutdown();
            } catch (NacosException e) {
                first = first == null ? e : first;
            }
        }
        services.clear();
        if (first != null) {
            throw first;
        }
    }
}
