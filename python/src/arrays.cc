// Errors and NumPy conversions of the extension (bindings.h).
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "python/src/bindings.h"

namespace whittle::python {

namespace {

// Owned by the module (its attributes); kept here for the translator, never released.
PyObject* g_error = nullptr;
PyObject* g_invalid_argument = nullptr;

const char* CodeName(StatusCode c) {
  switch (c) {
    case StatusCode::kOk: return "ok";
    case StatusCode::kInvalidArgument: return "invalid_argument";
    case StatusCode::kNotFound: return "not_found";
    case StatusCode::kUnimplemented: return "unimplemented";
    case StatusCode::kOutOfRange: return "out_of_range";
    case StatusCode::kIoError: return "io_error";
    case StatusCode::kInternal: return "internal";
    case StatusCode::kResourceExhausted: return "resource_exhausted";
    case StatusCode::kDeadlineExceeded: return "deadline_exceeded";
  }
  return "unknown";
}

// One line, as the CLIs print their errors (a nested error's newlines folded).
std::string OneLine(std::string s) {
  for (char& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  return s;
}

// The buffer protocol's format (struct module letters, NumPy's exports) as a DType.
StatusOr<DType> DTypeOfFormat(const std::string& what, const std::string& format, py::ssize_t itemsize) {
  std::string f = format;
  if (!f.empty() && (f[0] == '@' || f[0] == '=' || f[0] == '<')) f = f.substr(1);
  if (f.size() == 1) {
    const char c = f[0];
    if (c == 'e') return DType::kFloat16;
    if (c == 'f') return DType::kFloat32;
    if (c == 'd') return DType::kFloat64;
    if (c == '?') return DType::kBool;
    const std::string signed_letters = "bhilq", unsigned_letters = "BHILQ";
    const std::map<py::ssize_t, std::pair<DType, DType>> ints = {{1, {DType::kInt8, DType::kUInt8}},
                                                                 {2, {DType::kInt16, DType::kUInt16}},
                                                                 {4, {DType::kInt32, DType::kUInt32}},
                                                                 {8, {DType::kInt64, DType::kUInt64}}};
    auto it = ints.find(itemsize);
    if (it != ints.end() && signed_letters.find(c) != std::string::npos) return it->second.first;
    if (it != ints.end() && unsigned_letters.find(c) != std::string::npos) return it->second.second;
  }
  return InvalidArgument(what + ": element format '" + format +
                         "' has no Whittle type (native float16/32/64, int8-64, uint8-64 or bool)");
}

StatusOr<std::string> FormatOf(const std::string& what, DType t) {
  switch (t) {
    case DType::kFloat16: return std::string("e");
    case DType::kFloat32: return std::string("f");
    case DType::kFloat64: return std::string("d");
    case DType::kBool: return std::string("?");
    case DType::kInt8: return std::string("b");
    case DType::kInt16: return std::string("h");
    case DType::kInt32: return std::string("i");
    case DType::kInt64: return std::string("q");
    case DType::kUInt8: return std::string("B");
    case DType::kUInt16: return std::string("H");
    case DType::kUInt32: return std::string("I");
    case DType::kUInt64: return std::string("Q");
    default: return InvalidArgument(what + " is " + DTypeName(t) + ", which NumPy has no type for");
  }
}

}  // namespace

void RegisterErrors(py::module_& m) {
  g_error = PyErr_NewExceptionWithDoc("whittle.Error",
                                      "An error Whittle reported: the one-line message of its Status; .code names "
                                      "its kind (invalid_argument, not_found, io_error, ...).",
                                      PyExc_RuntimeError, nullptr);
  if (!g_error) throw py::error_already_set();
  py::tuple bases = py::make_tuple(py::handle(g_error), py::handle(PyExc_ValueError));
  g_invalid_argument = PyErr_NewExceptionWithDoc("whittle.InvalidArgumentError",
                                                 "A bad argument, option, model input or data spec (also a ValueError).",
                                                 bases.ptr(), nullptr);
  if (!g_invalid_argument) throw py::error_already_set();
  m.attr("Error") = py::handle(g_error);
  m.attr("InvalidArgumentError") = py::handle(g_invalid_argument);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const StatusError& e) {
      PyObject* type = e.status().code() == StatusCode::kInvalidArgument ? g_invalid_argument : g_error;
      py::object instance = py::handle(type)(OneLine(e.status().message()));
      instance.attr("code") = CodeName(e.status().code());
      PyErr_SetObject(type, instance.ptr());
    }
  });
}

StatusOr<Tensor> TensorFromArray(const std::string& what, py::handle obj, bool* shared) {
  if (shared) *shared = false;
  if (!PyObject_CheckBuffer(obj.ptr()))
    return InvalidArgument(what + ": expected a NumPy array, got " + std::string(Py_TYPE(obj.ptr())->tp_name));
  // The view the tensor may keep: released (with the GIL: the last tensor may go on any thread)
  // when its last holder drops it.
  std::shared_ptr<Py_buffer> view(new Py_buffer(), [](Py_buffer* v) {
    if (v->obj) {
      py::gil_scoped_acquire gil;
      PyBuffer_Release(v);
    }
    delete v;
  });
  if (PyObject_GetBuffer(obj.ptr(), view.get(), PyBUF_STRIDES | PyBUF_FORMAT) != 0) throw py::error_already_set();
  auto dtype = DTypeOfFormat(what, view->format ? view->format : "B", view->itemsize);
  if (!dtype.ok()) return dtype.status();
  Dims dims;
  py::ssize_t stride = view->itemsize;
  bool contiguous = true;
  for (int i = view->ndim; i-- > 0;) {
    contiguous &= view->shape[i] <= 1 || view->strides[i] == stride;
    stride *= view->shape[i];
  }
  if (!contiguous) return InvalidArgument(what + ": the array is not C-contiguous (np.ascontiguousarray makes it so)");
  for (int i = 0; i < view->ndim; ++i) dims.push_back(static_cast<int64_t>(view->shape[i]));
  const size_t bytes = DTypeStorageBytes(*dtype, NumElements(dims));
  const auto address = reinterpret_cast<uintptr_t>(view->buf);
  if (view->buf && bytes > 0 && address % static_cast<uintptr_t>(view->itemsize) == 0) {
    const void* data = view->buf;
    if (shared) *shared = true;
    return Tensor(*dtype, dims, Buffer::Wrap(data, bytes, std::shared_ptr<const void>(view, view.get())));
  }
  Tensor t(*dtype, dims);  // zero-filled, 64-byte aligned; a failed allocation throws (MemoryError)
  if (bytes > 0) std::memcpy(t.raw_data(), view->buf, bytes);
  return t;
}

py::object ArrayFromTensor(const std::string& what, const Tensor& t, bool own_buffer) {
  if (t.is_no_value()) return py::none();
  if (t.is_sequence()) {
    py::list items;
    for (size_t i = 0; i < t.elements().size(); ++i)
      items.append(ArrayFromTensor(what + "[" + std::to_string(i) + "]", t.elements()[i], false));
    return items;
  }
  if (t.device() != DeviceType::kCpu) Throw(Internal(what + " was left on the device"));
  OutputMemory m;
  m.format = Unwrap(FormatOf(what, t.dtype()));
  m.itemsize = static_cast<py::ssize_t>(DTypeSize(t.dtype()));
  const Tensor mine = own_buffer ? t : t.Clone();  // a copy when someone else holds the bytes
  m.buffer = mine.buffer();
  static char empty = 0;  // a zero-size tensor's (maybe null) data: any valid address will do
  m.data = mine.nbytes() > 0 ? const_cast<void*>(mine.raw_data()) : &empty;
  m.shape.assign(t.dims().begin(), t.dims().end());
  m.strides.resize(m.shape.size());
  py::ssize_t stride = m.itemsize;
  for (size_t i = m.shape.size(); i-- > 0;) {
    m.strides[i] = stride;
    stride *= m.shape[i];
  }
  return py::cast(std::move(m));
}

}  // namespace whittle::python
