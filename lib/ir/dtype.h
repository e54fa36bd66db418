// Element types (DType, DTypeSize, DTypeName, DTypeOf): public API, defined in
// include/whittle/types.h and included here so internal code keeps including lib/ir/dtype.h.
#pragma once

#include "whittle/types.h"
