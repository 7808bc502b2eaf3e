package nacoslockd.interop.support;

import java.lang.reflect.AnnotatedElement;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Optional;
import org.junit.jupiter.api.extension.AfterAllCallback;
import org.junit.jupiter.api.extension.AfterEachCallback;
import org.junit.jupiter.api.extension.BeforeAllCallback;
import org.junit.jupiter.api.extension.BeforeEachCallback;
import org.junit.jupiter.api.extension.ExtensionContext;
import org.junit.jupiter.api.extension.ParameterContext;
import org.junit.jupiter.api.extension.ParameterResolutionException;
import org.junit.jupiter.api.extension.ParameterResolver;
import org.junit.jupiter.api.extension.TestWatcher;
import org.junit.platform.commons.support.AnnotationSupport;

/**
 * Starts the real nacos-lockd binary once per test class (fresh data dir, free ports) and, for a
 * test method annotated with {@link LockdConfig}, a dedicated server for that method. Test
 * methods, constructors and lifecycle methods get the right server by declaring a
 * {@link LockdServer} parameter. Servers are stopped with SIGTERM (then SIGKILL after 10 s); a
 * non-zero exit status fails the class/test. When a test fails, the tail of the server's stderr
 * is printed.
 */
public class LockdExtension implements BeforeAllCallback, AfterAllCallback, BeforeEachCallback,
        AfterEachCallback, ParameterResolver, TestWatcher {

    private static final ExtensionContext.Namespace NS = ExtensionContext.Namespace.create(LockdExtension.class);

    private static final String CLASS_SERVER = "classServer";

    private static final String METHOD_SERVER = "methodServer";

    private static final int TAIL_LINES = 80;

    @Override
    public void beforeAll(ExtensionContext context) throws Exception {
        Class<?> testClass = context.getRequiredTestClass();
        LockdServer server = new LockdServer(testClass.getSimpleName(), config(testClass));
        context.getStore(NS).put(CLASS_SERVER, server);
        server.start();
        System.out.println("[lockd] started " + server);
    }

    @Override
    public void beforeEach(ExtensionContext context) throws Exception {
        var method = context.getRequiredTestMethod();
        if (!AnnotationSupport.isAnnotated(method, LockdConfig.class)) {
            return;
        }
        LockdServer server = new LockdServer(context.getRequiredTestClass().getSimpleName() + "-"
                + method.getName(), config(method));
        context.getStore(NS).put(METHOD_SERVER, server);
        server.start();
        System.out.println("[lockd] started " + server);
    }

    @Override
    public void afterEach(ExtensionContext context) throws Exception {
        LockdServer server = context.getStore(NS).get(METHOD_SERVER, LockdServer.class);
        if (server != null) {
            stopAndCheck(server);
        }
    }

    @Override
    public void afterAll(ExtensionContext context) throws Exception {
        LockdServer server = context.getStore(NS).get(CLASS_SERVER, LockdServer.class);
        if (server != null) {
            stopAndCheck(server);
        }
    }

    private static void stopAndCheck(LockdServer server) throws Exception {
        if (!server.wasReady()) {
            server.stop(); // start-up already failed and reported why
            return;
        }
        boolean wasAlive = server.isAlive();
        int code = server.stop();
        System.out.println("[lockd] stopped " + server.name() + " (exit " + code + ", " + server.stopMillis()
                + " ms after SIGTERM)");
        if (!wasAlive) {
            throw new AssertionError("nacos-lockd " + server.name() + " was no longer running at the end of the"
                    + " test (exit " + code + "). Tail of " + server.logFile() + ":\n" + server.tail(TAIL_LINES));
        }
        if (code != 0) {
            throw new AssertionError("nacos-lockd " + server.name() + " exited with " + code
                    + " after SIGTERM (expected 0). Tail of " + server.logFile() + ":\n" + server.tail(TAIL_LINES));
        }
        server.deleteDataDir();
    }

    @Override
    public void testFailed(ExtensionContext context, Throwable cause) {
        LockdServer server = current(context);
        if (server == null) {
            return;
        }
        System.err.println("[lockd] " + context.getDisplayName() + " failed: " + cause);
        System.err.println("[lockd] ---- last " + TAIL_LINES + " lines of " + server.logFile() + " ----");
        System.err.println(server.tail(TAIL_LINES));
        System.err.println("[lockd] ---- end of server log (client log: " + System.getProperty("nacos.client.log")
                + ") ----");
    }

    @Override
    public boolean supportsParameter(ParameterContext pc, ExtensionContext ec) throws ParameterResolutionException {
        return pc.getParameter().getType() == LockdServer.class;
    }

    @Override
    public Object resolveParameter(ParameterContext pc, ExtensionContext ec) throws ParameterResolutionException {
        LockdServer server = current(ec);
        if (server == null) {
            throw new ParameterResolutionException("no nacos-lockd server started for " + ec.getUniqueId());
        }
        return server;
    }

    /** The method's dedicated server if it has one, else the class server. */
    private static LockdServer current(ExtensionContext context) {
        LockdServer method = context.getStore(NS).get(METHOD_SERVER, LockdServer.class);
        if (method != null) {
            return method;
        }
        Optional<ExtensionContext> c = Optional.of(context);
        while (c.isPresent()) {
            LockdServer s = c.get().getStore(NS).get(CLASS_SERVER, LockdServer.class);
            if (s != null) {
                return s;
            }
            c = c.get().getParent();
        }
        return null;
    }

    private static Map<String, String> config(AnnotatedElement element) {
        Map<String, String> cfg = new LinkedHashMap<>();
        AnnotationSupport.findAnnotation(element, LockdConfig.class).ifPresent(a -> {
            for (String kv : a.value()) {
                int eq = kv.indexOf('=');
                if (eq <= 0) {
                    throw new IllegalArgumentException("@LockdConfig entries must be key=value, got '" + kv + "'");
                }
                cfg.put(kv.substring(0, eq).trim(), kv.substring(eq + 1).trim());
            }
        });
        return cfg;
    }
}
