// Status and StatusOr for the library's code: their definitions are public API
// (include/whittle/status.h), included here so internal code keeps including lib/ir/status.h.
#pragma once

#include "whittle/status.h"
