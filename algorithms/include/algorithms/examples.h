// The registry's examples in every element type an op takes. An entry's example is built in
// u8 or fp16 (dsl::LayerDef::example); the same layer with its inputs of another device type is
// what the op's build function makes of it: accepted, the op takes that type. The layer table
// (`vpuc layers --table`) and the layer matrix tests read the types from here, so the table
// says what the tests run.
#pragma once

#include <vector>

#include "dsl/registry.h"

namespace vpuc::algorithms {

// The device element types an example is tried in: u8, i8, f16, f32, i32.
const std::vector<dsl::ElemType> &example_types();

// `def`'s example with the graph inputs of its own element type (u8 for u8, i8 and i32; fp16
// for f16 and f32) given `type` instead, rebuilt from the same attributes. Undefined when the
// op has no example or its build refuses the type. An int8 input keeps its scale and takes a
// zero point of its type.
dsl::Layer example_in_type(const dsl::LayerDef &def, dsl::ElemType type);

// The types of example_types() `def` takes.
std::vector<dsl::ElemType> accepted_types(const dsl::LayerDef &def);

} // namespace vpuc::algorithms
