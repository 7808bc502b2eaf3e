package nacoslockd.interop.support;

import com.alibaba.nacos.api.lock.LockService;
import com.alibaba.nacos.api.lock.NacosLockFactory;
import com.alibaba.nacos.client.lock.core.NLockFactory;
import java.util.Properties;

/**
 * Child-JVM client for {@link ClientProcess}: {@code serverAddr key leaseMs}. Locks the key with
 * the Gen 1 API, prints {@code READY locked}, and waits to be killed.
 */
public final class Gen1LockHolderMain {

    private Gen1LockHolderMain() {
    }

    public static void main(String[] args) throws Exception {
        Properties p = new Properties();
        p.put("serverAddr", args[0]);
        LockService s = NacosLockFactory.createLockService(p);
        if (!Boolean.TRUE.equals(s.lock(NLockFactory.getLock(args[1], Long.parseLong(args[2]))))) {
            System.out.println("FAILED to lock " + args[1]);
            System.exit(2);
        }
        System.out.println("READY locked " + args[1]);
        System.out.flush();
        Thread.sleep(Long.MAX_VALUE);
    }
}
