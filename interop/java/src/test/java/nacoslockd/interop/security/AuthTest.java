package nacoslockd.interop.security;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.alibaba.nacos.api.exception.NacosException;
import com.alibaba.nacos.api.lock.LockService;
import com.alibaba.nacos.client.lock.core.NLockFactory;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Base64;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.TimeUnit;
import nacoslockd.interop.support.LockServices;
import nacoslockd.interop.support.LockdServer;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Nacos auth with the real client: the client logs in over HTTP on the main port with its
 * {@code username}/{@code password} properties and sends the token on every lock request.
 * Users are created with {@code nacos-lockd user}, as an operator would.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class AuthTest {

    /** 26 s: the client re-logs in (checking every 5 s) at about 25 s, just before expiry. */
    private static final int TOKEN_TTL_SECONDS = 26;

    private static LockdServer server;

    private LockServices clients;

    @BeforeAll
    static void startServer() throws Exception {
        Path dir = Files.createTempDirectory(Files.createDirectories(Path.of("target")), "auth-");
        Path users = dir.resolve("users.json").toAbsolutePath();
        user(users, "app-password\n", "user", "add", "app");
        user(users, "reader-password\n", "user", "add", "reader");
        user(users, "", "user", "grant", "app", "auth-*", "w");
        String key = Base64.getEncoder().encodeToString("an HS256 secret of at least 32 bytes!".getBytes(StandardCharsets.UTF_8));
        server = new LockdServer("AuthTest", Map.of(
                "nacos.core.auth.enabled", "true",
                "nacos.core.auth.plugin.nacos.token.secret.key", key,
                "nacos.core.auth.plugin.nacos.token.expire.seconds", String.valueOf(TOKEN_TTL_SECONDS),
                "nacos.lock.auth.users_file", users.toString()));
        server.start();
    }

    private static void user(Path users, String stdin, String... args) throws IOException, InterruptedException {
        String[] cmd = new String[args.length + 3];
        cmd[0] = LockdServer.binary().toString();
        System.arraycopy(args, 0, cmd, 1, args.length);
        cmd[args.length + 1] = "--users-file";
        cmd[args.length + 2] = users.toString();
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        p.getOutputStream().write(stdin.getBytes(StandardCharsets.UTF_8));
        p.getOutputStream().close();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertEquals(0, p.waitFor(), "nacos-lockd " + String.join(" ", args) + ": " + out);
    }

    @AfterAll
    static void stopServer() throws Exception {
        if (server != null) {
            server.stop();
        }
    }

    @BeforeEach
    void setUp() {
        clients = new LockServices();
    }

    @AfterEach
    void tearDown() throws Exception {
        clients.close();
    }

    private LockService login(String user, String password) throws NacosException {
        Properties p = LockServices.properties(server);
        p.put("username", user);
        p.put("password", password);
        return clients.create(p);
    }

    @Test
    void goodLoginLocks() throws Exception {
        LockService s = login("app", "app-password");
        assertTrue(s.lock(NLockFactory.getLock("auth-good", 10_000L)));
        assertTrue(s.unLock(NLockFactory.getLock("auth-good", 10_000L)));
    }

    @Test
    void wrongPasswordIsRefused() throws Exception {
        LockService s = login("app", "not-the-password");
        NacosException e = assertThrows(NacosException.class, () -> s.lock(NLockFactory.getLock("auth-wrong", 10_000L)));
        assertEquals(403, e.getErrCode());
        assertEquals("user not found or token expired", e.getErrMsg());
    }

    @Test
    void noCredentialsIsRefused() throws Exception {
        LockService s = clients.create(server);
        NacosException e = assertThrows(NacosException.class, () -> s.lock(NLockFactory.getLock("auth-anon", 10_000L)));
        assertEquals(403, e.getErrCode());
    }

    @Test
    void userWithoutPermissionIsRefused() throws Exception {
        LockService s = login("reader", "reader-password");
        NacosException e = assertThrows(NacosException.class, () -> s.lock(NLockFactory.getLock("auth-reader", 10_000L)));
        assertEquals(403, e.getErrCode());
        assertEquals("authorization failed!", e.getErrMsg());
        // app may lock that key pattern, reader may not lock anything.
        assertTrue(login("app", "app-password").lock(NLockFactory.getLock("auth-reader", 10_000L)));
    }

    @Test
    void expiredTokenIsRefreshedByTheClient() throws Exception {
        LockService s = login("app", "app-password");
        assertTrue(s.lock(NLockFactory.getLock("auth-refresh-0", 60_000L)));
        // Past the first token's expiry: only a refreshed token can still lock.
        Thread.sleep((TOKEN_TTL_SECONDS + 3) * 1000L);
        assertTrue(s.lock(NLockFactory.getLock("auth-refresh-1", 60_000L)),
                "the client did not refresh its token before the first one expired");
        assertTrue(server.readLog().split("\"message\":\"login\"", -1).length - 1 >= 2,
                "the server saw fewer than two logins");
    }
}
