package nacoslockd.interop.gen2;

import com.alibaba.nacos.api.lock.NacosLockFactory;
import com.alibaba.nacos.client.lock.NacosLock;
import com.alibaba.nacos.client.lock.NacosLockService;
import java.util.Properties;

/**
 * Child-JVM client for ClientProcess: {@code serverAddr key}. Takes a reentrant NacosLock with
 * lock() (the watchdog keeps it), prints {@code READY locked}, and waits to be killed.
 */
public final class Gen2LockHolderMain {

    private Gen2LockHolderMain() {
    }

    public static void main(String[] args) throws Exception {
        Properties p = new Properties();
        p.put("serverAddr", args[0]);
        NacosLockService s = (NacosLockService) NacosLockFactory.createLockService(p);
        NacosLock lock = s.getReentrantLock(args[1]);
        lock.lock();
        System.out.println("READY locked " + args[1]);
        System.out.flush();
        Thread.sleep(Long.MAX_VALUE);
    }
}
