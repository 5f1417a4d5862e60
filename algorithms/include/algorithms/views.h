// Layers that only rearrange data (their registry entry's `view`), as the reference and the
// lowering treat them.
#pragma once

#include "dsl/layer.h"

namespace vpuc::algorithms {

// Whether `layer` moves whole images: a view of its input's bytes (its entry's `view`, an
// alias) whose output has another batch (device N) than its input, such as a reshape changing
// the first extent. Layers compute image by image, so such a layer is only ever a view: the
// reference moves its bytes, and the lowering makes it a view of DDR memory or refuses it.
bool moves_images(const dsl::Layer &layer);

} // namespace vpuc::algorithms
