#include "algorithms/registry.h"

#include "common.h"

namespace vpuc::algorithms {

dsl::LayerRegistry &layer_registry() {
    static dsl::LayerRegistry registry = [] {
        dsl::LayerRegistry r;
        detail::register_conv_layers(r);
        detail::register_pool_layers(r);
        detail::register_eltwise_layers(r);
        detail::register_activation_layers(r);
        detail::register_layer_files(r);
        return r;
    }();
    return registry;
}

} // namespace vpuc::algorithms
