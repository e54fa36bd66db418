// The `whittle._whittle` extension: Session (session.cc), compress and finetune (pipeline.cc), and
// the error types (arrays.cc). whittle/__init__.py is the API users see; it wraps these.
#include "python/src/bindings.h"

PYBIND11_MODULE(_whittle, m) {
  m.doc() = "Whittle's runtime and compression pipeline (the extension behind the whittle package)";
  whittle::python::RegisterErrors(m);
  whittle::python::BindSession(m);
  whittle::python::BindPipeline(m);
  m.attr("__version__") = WHITTLE_VERSION;
}
