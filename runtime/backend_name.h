// The one parser of backend names: every command-line tool (--device, --agree-with) and the C API
// turn a user's "cpu", "cuda" or "reference" into a Backend here, so the accepted names and the
// error for a wrong one are the same everywhere. BackendName (kernels/kernel.h) is the inverse.
#pragma once

#include <string>

#include "kernels/kernel.h"
#include "lib/ir/status.h"

namespace whittle {

// "cpu|cuda|reference": the names ParseBackend accepts, for help texts and errors.
const char* BackendChoices();

// "cpu" -> kCpu, "cuda" -> kCuda, "reference" -> kReference; anything else is an InvalidArgument
// that names the value and the choices. Whether a backend is built in is Session::Load's check.
StatusOr<Backend> ParseBackend(const std::string& name);

}  // namespace whittle
