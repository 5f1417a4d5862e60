// `--input` options that give a network's inputs as tensors: NAME=FILE with FILE an .npy, an
// .npz or an image, or an .npz whose entries are named after the inputs. `vpuc run` and
// `vpuc reference` read them alike.
#pragma once

#include <string>
#include <vector>

#include "frontend/blob_io.h"
#include "frontend/tensor_file.h"
#include "options.h"

namespace vpuc::tools {

// The options for images, for parse_options and for usage texts.
extern const std::vector<std::string> kImageOptions; // with a value
extern const std::vector<std::string> kImageFlags;   // without
extern const char *const kTensorInputHelp;           // the --input forms and image options

// Whether some --input value is a tensor (NAME=FILE for an input named in `inputs`, or a file
// named .npy or .npz) rather than a raw file of the input's bytes.
bool tensor_inputs_given(const Options &options, const std::vector<std::string> &inputs);

// The tensors the --input options give, one per input of `inputs`, named after it. Throws
// std::runtime_error naming the option's value for a file that gives no tensor for an input,
// an input given twice or not at all, and for raw files among tensors.
std::vector<frontend::NamedTensor>
read_tensor_inputs(const Options &options, const std::vector<frontend::IoLayout> &inputs);

} // namespace vpuc::tools
