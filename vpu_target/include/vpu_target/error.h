// The base of every error vpuc throws for a bad input, schedule, model or blob, so a caller
// can catch them all with one handler. Each library derives its own kind (ScheduleError,
// LoweringError, BlobError, ...); the message names the layer, tensor, task or file.
//
// It lives in vpu_target/ because that is the library every other one links; it knows
// nothing of the compiler.
#pragma once

#include <stdexcept>
#include <string>

namespace vpuc {

class Error : public std::runtime_error {
  public:
    using std::runtime_error::runtime_error;
};

} // namespace vpuc
