package local.aiostreams;

import io.apicurio.common.apps.config.DynamicConfigPropertyList;
import javax.enterprise.context.ApplicationScoped;
import javax.enterprise.inject.Produces;

/** Stands in for the build step of the config-index extension (not on Maven Central): no dynamic properties. */
@ApplicationScoped
public class ConfigPropertyListProducer {
    @Produces
    @ApplicationScoped
    public DynamicConfigPropertyList dynamicConfigPropertyList() {
        return new DynamicConfigPropertyList(new java.util.ArrayList<>());
    }
}
