package nacoslockd.interop.support;

import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;

/**
 * Server configuration ({@code --config} properties, {@code "key=value"} each) for the
 * nacos-lockd started by {@link LockdExtension}. On a test class: the class-wide server. On a
 * test method: that test gets a dedicated server of its own with this configuration.
 */
@Retention(RetentionPolicy.RUNTIME)
@Target({ElementType.TYPE, ElementType.METHOD})
public @interface LockdConfig {

    String[] value();
}
