package nacoslockd.peer;

import com.alibaba.nacos.NacosServerBasicApplication;
import com.alibaba.nacos.NacosServerWebApplication;
import com.alibaba.nacos.core.listener.startup.NacosStartUp;
import com.alibaba.nacos.core.listener.startup.NacosStartUpManager;
import com.alibaba.nacos.sys.env.DeploymentType;
import com.alibaba.nacos.sys.env.EnvUtil;
import org.springframework.boot.Banner;
import org.springframework.boot.WebApplicationType;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.context.ConfigurableApplicationContext;

/**
 * Starts a standalone Nacos server (core context, then the server web context, no console)
 * the way Nacos 3.x's NacosBootstrap does for nacos.deployment.type=server. The configuration
 * comes from system properties (see run-peer.sh / NacosDifferentialTest). Prints
 * "NACOS-PEER STARTED" when both contexts are up; readiness of the lock module must still be
 * probed with a real lock call.
 */
public final class NacosPeer {

    private NacosPeer() {
    }

    public static void main(String[] args) {
        EnvUtil.setDeploymentType(DeploymentType.SERVER);
        long t0 = System.nanoTime();
        NacosStartUpManager.start(NacosStartUp.CORE_START_UP_PHASE);
        ConfigurableApplicationContext core = new SpringApplicationBuilder(NacosServerBasicApplication.class)
                .web(WebApplicationType.NONE).bannerMode(Banner.Mode.OFF).run(args);
        NacosStartUpManager.start(NacosStartUp.WEB_START_UP_PHASE);
        new SpringApplicationBuilder(NacosServerWebApplication.class).parent(core).bannerMode(Banner.Mode.OFF)
                .run(args);
        System.out.println("NACOS-PEER STARTED in " + (System.nanoTime() - t0) / 1_000_000 + " ms");
    }
}
