#include "algorithms/registry.h"

#include "algorithms/views.h"
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

bool moves_images(const dsl::Layer &layer) {
    if (layer.is_input() || layer.inputs().empty()) return false;
    const std::optional<dsl::ViewDef> view = layer_registry().view(layer);
    if (!view || view->kind != dsl::ViewDef::Kind::Alias) return false;
    const dsl::TensorDesc &in = dsl::input_tensor(layer, 0);
    return dsl::device_view(in).shape[dsl::dims::N] !=
           dsl::device_view(layer.output()).shape[dsl::dims::N];
}

} // namespace vpuc::algorithms
