// What the translation units of the `whittle._whittle` extension share: a Status error carried to
// Python as whittle.Error (whittle.InvalidArgumentError, also a ValueError, for bad arguments),
// work run with the GIL released (C++ exceptions turned into a Status there), and arrays converted
// to and from Tensors through the buffer protocol (no NumPy C API: any NumPy, any pybind11):
// inputs are read in place where their layout allows (Buffer::Wrap over the array's memory, which
// the run holds as a buffer view), outputs are exported as buffers that NumPy wraps without a copy.
#pragma once

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <exception>
#include <memory>
#include <new>
#include <string>
#include <vector>
#include <utility>

#include "whittle/status.h"
#include "whittle/tensor.h"

namespace whittle::python {

namespace py = pybind11;

// A failed Status on its way to Python (RegisterErrors translates it at the module's boundary).
class StatusError : public std::exception {
 public:
  explicit StatusError(Status s) : s_(std::move(s)) {}
  const char* what() const noexcept override { return s_.message().c_str(); }
  const Status& status() const { return s_; }

 private:
  Status s_;
};

[[noreturn]] inline void Throw(const Status& s) { throw StatusError(s); }
inline void Check(const Status& s) {
  if (!s.ok()) Throw(s);
}
template <class T>
T Unwrap(StatusOr<T>&& v) {
  if (!v.ok()) Throw(v.status());
  return std::move(v).value();
}

// Creates whittle._whittle.Error (a RuntimeError) and InvalidArgumentError (an Error and a
// ValueError) and translates StatusError into them; each carries .code ("invalid_argument",
// "not_found", "io_error", ...).
void RegisterErrors(py::module_& m);

// Runs f() (returning a Status or StatusOr) with the GIL released. An exception that escapes the
// library (a failed allocation: lib/ir/tensor.h) becomes an error Status, as the CLIs' GuardedMain
// turns it into an error line.
template <class F>
auto WithoutGil(F&& f) -> decltype(f()) {
  py::gil_scoped_release release;
  try {
    return f();
  } catch (const std::bad_alloc& e) {
    return ResourceExhausted(std::string("out of memory: ") + e.what());
  } catch (const std::exception& e) {
    return Internal(e.what());
  }
}

// An output tensor exported through the buffer protocol (whittle._whittle._OutputMemory): NumPy
// wraps it without a copy and keeps it alive as the array's base; .address and .nbytes tell
// where the Whittle buffer is.
struct OutputMemory {
  std::shared_ptr<Buffer> buffer;
  void* data = nullptr;
  std::string format;  // the buffer protocol's (struct module's) letter
  py::ssize_t itemsize = 0;
  std::vector<py::ssize_t> shape, strides;
};

// A C-contiguous object with the buffer protocol (a NumPy array) as a Tensor of the matching
// dtype; `what` names it in errors ("input 'x'"). The tensor reads the object's memory in place
// (*shared true) when its address is aligned to the element size, as the kernels need: it then
// holds a buffer view of the object (which keeps it alive and, for a bytearray, its size fixed)
// until the last tensor on it goes, released with the GIL taken. Otherwise its bytes are copied
// into a Whittle buffer (*shared false).
StatusOr<Tensor> TensorFromArray(const std::string& what, py::handle obj, bool* shared = nullptr);

// A Tensor as an _OutputMemory over its bytes. own_buffer: nobody else holds them, so they are
// exported as they are; otherwise over a copy. A sequence becomes a list, an optional without a
// value None.
py::object ArrayFromTensor(const std::string& what, const Tensor& t, bool own_buffer);

void BindSession(py::module_& m);
void BindPipeline(py::module_& m);

}  // namespace whittle::python
