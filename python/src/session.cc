// whittle._whittle.Session: Session::Load and Session::Run for Python. Run converts the inputs
// with the GIL held (reading each array in place where its layout allows), runs with it released
// (Session::Run is thread-safe: threads share one session), and exports each output's buffer as it
// is when nothing else holds it (a copy else).
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "python/src/bindings.h"
#include "runtime/backend_name.h"
#include "whittle/session.h"

namespace whittle::python {

namespace {

py::object DimObject(const Dim& d) {
  if (d.known()) return py::int_(d.value);
  if (!d.param.empty()) return py::str(d.param);
  return py::none();
}

// (name, dtype name, shape: ints, str for a named dim, None for an unknown one, kind).
py::list IoList(const std::vector<IoInfo>& infos) {
  py::list l;
  for (const IoInfo& io : infos) {
    py::list shape;
    for (const Dim& d : io.shape) shape.append(DimObject(d));
    l.append(py::make_tuple(io.name, DTypeName(io.dtype), py::tuple(shape), ValueKindName(io.kind)));
  }
  return l;
}

const IoInfo* FindInput(const Session& s, const std::string& name) {
  for (const IoInfo& in : s.inputs())
    if (in.name == name) return &in;
  return nullptr;
}

// Bytes of input read in place and bytes copied, over a session's runs (Session.input_bytes).
struct InputBytes {
  std::atomic<int64_t> shared{0}, copied{0};
};

Tensor Feed(const std::string& what, py::handle value, InputBytes& counts) {
  bool shared = false;
  Tensor t = Unwrap(TensorFromArray(what, value, &shared));
  (shared ? counts.shared : counts.copied) += static_cast<int64_t>(t.nbytes());
  return t;
}

// One fed value: a list for a sequence input, None for an optional one, an array otherwise.
Tensor FeedValue(const IoInfo* info, const std::string& name, py::handle value, InputBytes& counts) {
  const std::string what = "input '" + name + "'";
  const bool sequence = info && (info->kind == ValueKind::kSequence || info->kind == ValueKind::kOptionalSequence);
  const bool optional = info && (info->kind == ValueKind::kOptionalTensor || info->kind == ValueKind::kOptionalSequence);
  if (optional && value.is_none()) return Tensor::NoValue();
  if (sequence && (py::isinstance<py::list>(value) || py::isinstance<py::tuple>(value))) {
    std::vector<Tensor> elements;
    size_t i = 0;
    for (py::handle item : value) elements.push_back(Feed(what + "[" + std::to_string(i++) + "]", item, counts));
    return Tensor::Sequence(info->dtype, std::move(elements));
  }
  return Feed(what, value, counts);
}

// Which outputs NumPy may take over: those whose buffer only the outputs hold (not a constant of
// the session, not another output's bytes: overlapping ranges of one buffer are copied, and never
// a caller's memory read in place).
std::vector<bool> OwnedOutputs(const std::vector<Tensor>& outs) {
  std::map<const Buffer*, long> holders;
  for (const Tensor& t : outs)
    if (t.is_tensor() && t.buffer()) ++holders[t.buffer().get()];
  std::map<const Buffer*, std::vector<std::pair<size_t, size_t>>> given;
  std::vector<bool> own(outs.size(), false);
  for (size_t i = 0; i < outs.size(); ++i) {
    const Tensor& t = outs[i];
    if (!t.is_tensor() || !t.buffer() || t.buffer()->external() || t.buffer().use_count() != holders[t.buffer().get()])
      continue;
    const size_t begin = t.offset(), end = t.offset() + t.nbytes();
    bool overlaps = false;
    for (const auto& [b, e] : given[t.buffer().get()]) overlaps |= begin < e && b < end;
    if (overlaps) continue;
    given[t.buffer().get()].push_back({begin, end});
    own[i] = true;
  }
  return own;
}

class PySession {
 public:
  PySession(const std::string& path, const std::string& device, int threads, bool optimize) {
    if (threads < 0) Throw(InvalidArgument("threads must be >= 0 (0 = all cores), got " + std::to_string(threads)));
    SessionOptions so;
    so.backend = Unwrap(ParseBackend(device));
    so.num_threads = threads;
    so.optimize = optimize;
    session_ = Unwrap(WithoutGil([&] { return Session::Load(path, so); }));
  }

  py::dict Run(const py::dict& feeds) const {
    std::map<std::string, Tensor> inputs;
    for (auto [key, value] : feeds) {
      if (!py::isinstance<py::str>(key))
        Throw(InvalidArgument("input names must be str, got " + std::string(Py_TYPE(key.ptr())->tp_name)));
      const std::string name = key.cast<std::string>();
      inputs[name] = FeedValue(FindInput(*session_, name), name, value, input_bytes_);
    }
    std::vector<Tensor> outs = Unwrap(WithoutGil([&]() -> StatusOr<std::vector<Tensor>> {
      auto r = session_->Run(inputs);
      inputs.clear();  // the outputs that are an input are copies (CollectOutputs)
      return r;
    }));
    const std::vector<bool> own = OwnedOutputs(outs);
    py::dict result;
    for (size_t i = 0; i < outs.size(); ++i) {
      const std::string& name = session_->outputs()[i].name;
      result[py::str(name)] = ArrayFromTensor("output '" + name + "'", outs[i], own[i]);
    }
    return result;
  }

  py::list Inputs() const { return IoList(session_->inputs()); }
  py::list Outputs() const { return IoList(session_->outputs()); }
  std::string Device() const { return BackendName(session_->options().backend); }
  int Threads() const { return session_->options().num_threads; }
  py::tuple InputByteCounts() const { return py::make_tuple(input_bytes_.shared.load(), input_bytes_.copied.load()); }

 private:
  std::unique_ptr<Session> session_;
  mutable InputBytes input_bytes_;
};

}  // namespace

void BindSession(py::module_& m) {
  py::class_<OutputMemory>(m, "_OutputMemory", py::buffer_protocol(),
                           "An output tensor's Whittle buffer, which NumPy wraps without a copy (the array's base).")
      .def_buffer([](OutputMemory& o) {
        return py::buffer_info(o.data, o.itemsize, o.format, static_cast<py::ssize_t>(o.shape.size()), o.shape,
                               o.strides, /*readonly=*/false);
      })
      .def_property_readonly("address",
                             [](const OutputMemory& o) { return reinterpret_cast<uintptr_t>(o.buffer->data()); })
      .def_property_readonly("nbytes", [](const OutputMemory& o) { return o.buffer->size(); });
  py::class_<PySession>(m, "Session")
      .def(py::init<const std::string&, const std::string&, int, bool>(), py::arg("path"), py::arg("device") = "cpu",
           py::arg("threads") = 1, py::arg("optimize") = true)
      .def("run", &PySession::Run, py::arg("feeds"))
      .def_property_readonly("inputs", &PySession::Inputs)
      .def_property_readonly("outputs", &PySession::Outputs)
      .def_property_readonly("device", &PySession::Device)
      .def_property_readonly("threads", &PySession::Threads)
      .def_property_readonly("input_bytes", &PySession::InputByteCounts,
                             "(bytes read in place, bytes copied) of the inputs of this session's runs");
}

}  // namespace whittle::python
