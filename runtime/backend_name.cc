#include "runtime/backend_name.h"

namespace whittle {

const char* BackendChoices() { return "cpu|cuda|reference"; }

StatusOr<Backend> ParseBackend(const std::string& name) {
  for (Backend b : {Backend::kCpu, Backend::kCuda, Backend::kReference})
    if (name == BackendName(b)) return b;
  return InvalidArgument("unknown device '" + name + "' (expected one of " + BackendChoices() + ")");
}

}  // namespace whittle
