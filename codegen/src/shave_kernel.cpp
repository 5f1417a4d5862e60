#include "codegen/shave_kernel.h"
