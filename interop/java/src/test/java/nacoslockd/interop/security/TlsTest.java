package nacoslockd.interop.security;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.alibaba.nacos.api.lock.LockService;
import com.alibaba.nacos.client.lock.core.NLockFactory;
import java.nio.file.Path;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.TimeUnit;
import nacoslockd.interop.support.LockServices;
import nacoslockd.interop.support.LockdServer;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * TLS on the SDK port with the client's nacos.remote.client.rpc.tls.* properties, against the
 * test certificates in src/test/resources/tls (a CA, a server certificate for 127.0.0.1, a
 * client certificate).
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class TlsTest {

    private static final Path TLS = Path.of(System.getProperty("interop.java.dir", "."), "src/test/resources/tls").toAbsolutePath().normalize();

    /**
     * The client reads its TLS files as resources: a bare path is looked up on the classpath, so
     * files need the {@code file:} prefix.
     */
    private static String clientFile(String name) {
        return "file:" + TLS.resolve(name);
    }

    private LockdServer server;

    private LockServices clients;

    @BeforeEach
    void setUp() {
        clients = new LockServices();
    }

    @AfterEach
    void tearDown() throws Exception {
        clients.close();
        if (server != null) {
            server.stop();
        }
    }

    private void start(boolean mutual) throws Exception {
        server = new LockdServer("TlsTest-" + (mutual ? "mutual" : "server"), Map.of(
                "nacos.remote.server.rpc.tls.enableTls", "true",
                "nacos.remote.server.rpc.tls.certChainFile", TLS.resolve("server.pem").toString(),
                "nacos.remote.server.rpc.tls.certPrivateKey", TLS.resolve("server-key.pem").toString(),
                "nacos.remote.server.rpc.tls.trustCollectionCertFile", TLS.resolve("ca.pem").toString(),
                "nacos.remote.server.rpc.tls.mutualAuthEnable", String.valueOf(mutual)));
        server.start();
    }

    private Properties tls(boolean trustAll) {
        Properties p = LockServices.properties(server);
        p.put("nacos.remote.client.rpc.tls.enable", "true");
        p.put("nacos.remote.client.rpc.tls.trustAll", String.valueOf(trustAll));
        if (!trustAll) {
            p.put("nacos.remote.client.rpc.tls.trustCollectionChainPath", clientFile("ca.pem"));
        }
        return p;
    }

    private static boolean locks(LockService s, String key) {
        try {
            return s.lock(NLockFactory.getLock(key, 10_000L));
        } catch (Exception e) {
            return false;
        }
    }

    @Test
    void trustAllClientLocksOverTls() throws Exception {
        start(false);
        assertTrue(locks(clients.create(tls(true)), "tls-trust-all"));
    }

    @Test
    void verifyingClientTrustsOurCa() throws Exception {
        start(false);
        assertTrue(locks(clients.create(tls(false)), "tls-verified"));
    }

    @Test
    void plaintextClientCannotUseTheTlsPort() throws Exception {
        start(false);
        LockService plain = clients.create(LockServices.properties(server));
        assertFalse(locks(plain, "tls-plain"), "a plaintext client locked on a TLS-only port");
    }

    @Test
    void mutualTlsNeedsAClientCertificate() throws Exception {
        start(true);
        Properties withCert = tls(false);
        withCert.put("nacos.remote.client.rpc.tls.mutualAuth", "true");
        withCert.put("nacos.remote.client.rpc.tls.certChainFile", clientFile("client.pem"));
        withCert.put("nacos.remote.client.rpc.tls.certPrivateKey", clientFile("client-key.pem"));
        assertTrue(locks(clients.create(withCert), "mtls-with-cert"));
        assertFalse(locks(clients.create(tls(false)), "mtls-without-cert"), "a client without a certificate locked");
    }
}
