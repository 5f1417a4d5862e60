// The layer registry with the library's layers (dsl/registry.h says what an entry holds).
// A user layer is one more entry: build a dsl::LayerDef and add() it before building graphs
// that use it; docs/adding-a-layer.md walks through one.
#pragma once

#include "dsl/registry.h"

namespace vpuc::algorithms {

// The process-wide registry, holding every built-in layer on first use. Adding entries is
// not thread-safe: add user layers before compiling from several threads.
dsl::LayerRegistry &layer_registry();

} // namespace vpuc::algorithms
