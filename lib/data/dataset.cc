#include "lib/data/dataset.h"

#include <sys/stat.h>

#include <cstdlib>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "lib/data/idx.h"
#include "lib/data/npy.h"
#include "lib/data/npz.h"

namespace whittle {
namespace {

constexpr char kFashionMnistDefaultDir[] = "/usr/share/datasets/fashion-mnist";
constexpr char kFashionMnistDirEnv[] = "WHITTLE_FASHION_MNIST_DIR";

std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    const size_t pos = s.find(sep, start);
    parts.push_back(s.substr(start, pos == std::string::npos ? std::string::npos : pos - start));
    if (pos == std::string::npos) return parts;
    start = pos + 1;
  }
}

Status BadSpec(const std::string& spec, const std::string& why) {
  return InvalidArgument("bad dataset spec '" + spec + "' (" + why + "): expected " + DatasetSpecHelp());
}

bool FileExists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

template <class T>
void CastToFloat(const Tensor& src, Tensor& dst, float scale) {
  const T* in = src.data<T>();
  float* out = dst.data<float>();
  const int64_t n = src.numel();
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(in[i]) * scale;
}

// Inputs as the model will take them: float32 stays; uint8 is taken to be 8-bit pixels and scaled
// to float32 [0,1]; float64 becomes float32; other integer types and bool are kept as stored
// (token ids, byte values, masks), so models with integer inputs get them unconverted.
StatusOr<Tensor> ToInputs(const Tensor& t, const std::string& name) {
  if (t.rank() < 1) return InvalidArgument(name + ": inputs must have a leading sample dimension, got a scalar");
  switch (t.dtype()) {
    case DType::kFloat32:
    case DType::kInt8:
    case DType::kInt16:
    case DType::kUInt16:
    case DType::kInt32:
    case DType::kUInt32:
    case DType::kInt64:
    case DType::kUInt64:
    case DType::kBool: return t;
    default: break;
  }
  Tensor out(DType::kFloat32, t.dims());
  switch (t.dtype()) {
    case DType::kUInt8: CastToFloat<uint8_t>(t, out, 1.f / 255.f); break;
    case DType::kFloat64: CastToFloat<double>(t, out, 1.f); break;
    default:
      return InvalidArgument(name + ": unsupported input dtype " + DTypeName(t.dtype()) +
                             " (expected a float, integer or bool type)");
  }
  return out;
}

template <class T>
Status CopyLabels(const Tensor& src, Tensor& dst, const std::string& name) {
  const T* in = src.data<T>();
  int64_t* out = dst.data<int64_t>();
  const int64_t n = src.numel();
  for (int64_t i = 0; i < n; ++i) {
    // Compare before converting so huge uint64 values cannot wrap to a valid-looking label.
    bool bad = false;
    if constexpr (std::is_signed_v<T>) {
      bad = in[i] < 0;
    } else {
      bad = static_cast<uint64_t>(in[i]) > static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
    }
    if (bad)
      return InvalidArgument(name + ": label " + std::to_string(i) + " is " + std::to_string(in[i]) +
                             ", labels must be class indices >= 0");
    out[i] = static_cast<int64_t>(in[i]);
  }
  return Status::Ok();
}

// Labels as int64 [N]; [N,1] is accepted and flattened since many tools save labels that way.
// Labels of higher rank ([N, T]: one class per position of a sequence model) keep their shape.
StatusOr<Tensor> ToLabels(const Tensor& t, const std::string& name) {
  const bool column = t.rank() == 2 && t.dim(1) == 1;
  if (t.rank() < 1)
    return InvalidArgument(name + ": labels must be [N] (or [N, positions]), got shape " + DimsToString(t.dims()));
  Tensor out(DType::kInt64, column ? Dims{t.dim(0)} : t.dims());
  Status st;
  switch (t.dtype()) {
    case DType::kUInt8: st = CopyLabels<uint8_t>(t, out, name); break;
    case DType::kInt8: st = CopyLabels<int8_t>(t, out, name); break;
    case DType::kInt16: st = CopyLabels<int16_t>(t, out, name); break;
    case DType::kUInt16: st = CopyLabels<uint16_t>(t, out, name); break;
    case DType::kInt32: st = CopyLabels<int32_t>(t, out, name); break;
    case DType::kUInt32: st = CopyLabels<uint32_t>(t, out, name); break;
    case DType::kInt64: st = CopyLabels<int64_t>(t, out, name); break;
    case DType::kUInt64: st = CopyLabels<uint64_t>(t, out, name); break;
    default:
      return InvalidArgument(name + ": labels must have an integer dtype, got " + DTypeName(t.dtype()));
  }
  WH_RETURN_IF_ERROR(st);
  return out;
}

std::string SampleOf(const Tensor& t) {
  Dims sample(t.dims().begin() + 1, t.dims().end());
  return std::string(DTypeName(t.dtype())) + " " + DimsToString(sample);
}

std::string Describe(const std::string& name, const Dataset& d) {
  std::string s = name + ": " + std::to_string(d.size()) + " samples of ";
  if (d.named.empty()) s += SampleOf(d.inputs);
  for (size_t i = 0; i < d.named.size(); ++i)
    s += (i ? ", " : "") + d.named[i].first + " " + SampleOf(d.named[i].second);
  if (!d.has_labels()) return s + ", no labels";
  int64_t max_label = -1;
  const int64_t* l = d.labels.data<int64_t>();
  for (int64_t i = 0; i < d.labels.numel(); ++i) max_label = l[i] > max_label ? l[i] : max_label;
  if (max_label < 0) return s + ", labels int64";
  return s + ", labels 0.." + std::to_string(max_label);
}

// Shared tail of every loader: count check, limit, conversions, description.
StatusOr<Dataset> Assemble(Tensor inputs, Tensor labels, const std::string& name, int64_t limit,
                           bool images_add_channel) {
  if (inputs.rank() < 1) return InvalidArgument(name + ": inputs must have a leading sample dimension");
  const int64_t n = inputs.dim(0);
  if (labels.defined()) {
    if (labels.rank() < 1 || labels.dim(0) != n)
      return InvalidArgument(name + ": " + std::to_string(labels.rank() < 1 ? 1 : labels.dim(0)) +
                             " labels for " + std::to_string(n) + " inputs (counts must match)");
  }
  if (limit >= 0 && limit < n) {
    inputs = SliceBatch(inputs, 0, limit);
    if (labels.defined()) labels = SliceBatch(labels, 0, limit);
  }
  Dataset d;
  WH_ASSIGN_OR_RETURN(d.inputs, ToInputs(inputs, name));
  if (images_add_channel && d.inputs.rank() == 3) {
    d.inputs = d.inputs.Reshaped({d.inputs.dim(0), 1, d.inputs.dim(1), d.inputs.dim(2)});
  }
  if (labels.defined()) {
    WH_ASSIGN_OR_RETURN(d.labels, ToLabels(labels, name));
  }
  d.description = Describe(name, d);
  return d;
}

StatusOr<Dataset> LoadIdxPair(const std::string& images_path, const std::string& labels_path,
                              const std::string& name, int64_t limit) {
  WH_ASSIGN_OR_RETURN(Tensor images, ReadIdx(images_path));
  WH_ASSIGN_OR_RETURN(Tensor labels, ReadIdx(labels_path));
  if (images.rank() < 2)
    return InvalidArgument(name + ": " + images_path + " holds shape " + DimsToString(images.dims()) +
                           ", expected images [N,H,W] or [N,...]");
  return Assemble(std::move(images), std::move(labels), name, limit, /*images_add_channel=*/true);
}

// npz: one array per model input, named as the input; an array named `labels` holds the labels.
StatusOr<Dataset> LoadNpz(const std::string& path, const std::string& name, int64_t limit) {
  WH_ASSIGN_OR_RETURN(std::vector<NpzArray> arrays, ReadNpz(path));
  Tensor labels;
  std::vector<NpzArray> inputs;
  for (NpzArray& a : arrays) {
    if (a.name == "labels") labels = std::move(a.tensor);
    else inputs.push_back(std::move(a));
  }
  if (inputs.empty()) return InvalidArgument(name + ": " + path + " holds no input arrays (only labels)");
  const int64_t n = inputs[0].tensor.rank() >= 1 ? inputs[0].tensor.dim(0) : -1;
  for (const NpzArray& a : inputs) {
    if (a.tensor.rank() < 1 || a.tensor.dim(0) != n)
      return InvalidArgument(name + ": array '" + a.name + "' has shape " + DimsToString(a.tensor.dims()) +
                             ", '" + inputs[0].name + "' " + DimsToString(inputs[0].tensor.dims()) +
                             " (every array needs the same leading sample count)");
  }
  WH_ASSIGN_OR_RETURN(Dataset d, Assemble(inputs[0].tensor, std::move(labels), name, limit, false));
  for (const NpzArray& a : inputs) {
    Tensor t = limit >= 0 && limit < n ? SliceBatch(a.tensor, 0, limit) : a.tensor;
    WH_ASSIGN_OR_RETURN(t, ToInputs(t, name + ": array '" + a.name + "'"));
    d.named.emplace_back(a.name, std::move(t));
  }
  d.inputs = d.named[0].second;
  d.description = Describe(name, d);
  return d;
}

// calls: one array per input with the call count first; each call's value as it is.
StatusOr<Dataset> LoadCalls(const std::string& path, const std::string& feedback_spec, const std::string& name,
                            int64_t limit) {
  WH_ASSIGN_OR_RETURN(std::vector<NpzArray> arrays, ReadNpz(path));
  Dataset d;
  d.calls = true;
  std::vector<NpzArray> inputs;
  for (NpzArray& a : arrays) {
    if (a.name == "labels") d.labels = std::move(a.tensor);
    else inputs.push_back(std::move(a));
  }
  if (inputs.empty()) return InvalidArgument(name + ": " + path + " holds no input arrays (only labels)");
  const int64_t n = inputs[0].tensor.rank() >= 1 ? inputs[0].tensor.dim(0) : -1;
  for (const NpzArray& a : inputs)
    if (a.tensor.rank() < 1 || a.tensor.dim(0) != n)
      return InvalidArgument(name + ": array '" + a.name + "' has shape " + DimsToString(a.tensor.dims()) + ", '" +
                             inputs[0].name + "' " + DimsToString(inputs[0].tensor.dims()) +
                             " (in calls: data the first axis counts the calls, the same in every array; a 0-d "
                             "input's array is [calls])");
  if (n < 1) return InvalidArgument(name + ": no calls (the arrays' first axis is 0)");
  if (d.labels.defined()) {
    if (d.labels.rank() < 1 || d.labels.dim(0) != n)
      return InvalidArgument(name + ": labels have shape " + DimsToString(d.labels.dims()) + "; expected " +
                             std::to_string(n) + " calls first");
    WH_ASSIGN_OR_RETURN(Tensor l, ToLabels(d.labels, name));
    d.labels = std::move(l);
  }
  const int64_t keep = limit >= 0 && limit < n ? limit : n;
  for (NpzArray& a : inputs) {
    Tensor t = keep < n ? SliceBatch(a.tensor, 0, keep) : a.tensor;
    if (t.dtype() == DType::kFloat64) {  // float64 data for float32 models, as every spec does
      Tensor f(DType::kFloat32, t.dims());
      for (int64_t i = 0; i < t.numel(); ++i) f.data<float>()[i] = static_cast<float>(t.data<double>()[i]);
      t = std::move(f);
    }
    d.named.emplace_back(a.name, std::move(t));
  }
  if (d.labels.defined() && keep < n) d.labels = SliceBatch(d.labels, 0, keep);
  d.inputs = d.named[0].second;
  if (!feedback_spec.empty()) {
    for (const std::string& pair : Split(feedback_spec, ',')) {
      const size_t eq = pair.find('=');
      if (eq == std::string::npos || eq == 0 || eq + 1 == pair.size())
        return BadSpec(name, "feedback '" + pair + "' is not INPUT=OUTPUT");
      const std::string in = pair.substr(0, eq);
      if (!d.ForInput(in, 1))
        return InvalidArgument(name + ": feedback input '" + in + "' has no array (its first call's value) in " + path);
      d.feedback.emplace_back(in, pair.substr(eq + 1));
    }
  }
  std::string desc = name + ": " + std::to_string(keep) + " calls of " + d.ArrayNames();
  for (const auto& [in, out] : d.feedback) desc += ", " + in + " <- " + out;
  if (d.labels.defined()) desc += ", labels";
  d.description = desc;
  return d;
}

StatusOr<Dataset> LoadFashionMnist(const std::string& spec, const std::string& split, int64_t limit) {
  const char* env = std::getenv(kFashionMnistDirEnv);
  const std::string dir = env && *env ? env : kFashionMnistDefaultDir;
  const std::string prefix = dir + "/" + (split == "train" ? "train" : "t10k");
  const std::string images = prefix + "-images-idx3-ubyte.gz";
  const std::string labels = prefix + "-labels-idx1-ubyte.gz";
  for (const std::string& f : {images, labels}) {
    if (!FileExists(f))
      return NotFound("dataset '" + spec + "': " + f + " not found; install the Debian package " +
                      "dataset-fashion-mnist (apt-get install dataset-fashion-mnist) or set " +
                      kFashionMnistDirEnv + " to a directory holding the IDX files");
  }
  return LoadIdxPair(images, labels, spec, limit);
}

}  // namespace

const char* DatasetSpecHelp() {
  return "fashion-mnist:train, fashion-mnist:test, idx:IMAGES:LABELS npy:INPUTS.npy[:LABELS.npy] npz:DATA.npz (one array per model input, by name; optional 'labels') or calls:DATA.npz[:IN=OUT,...] (a sequence of calls: each array's first axis counts them; IN takes the previous call's OUT)";
}

StatusOr<Dataset> MakeDataset(const Tensor& inputs, const Tensor& labels, const std::string& name, int64_t limit) {
  if (!inputs.defined()) return InvalidArgument(name + ": no inputs");
  return Assemble(inputs, labels, name, limit, /*images_add_channel=*/false);
}

StatusOr<Dataset> CheckDataArgument(StatusOr<Dataset> loaded, const std::string& what, const std::string& spec,
                                    bool need_labels) {
  if (!loaded.ok()) return loaded.status().WithContext(what);
  if (need_labels && !loaded->has_labels())
    return InvalidArgument(what + " " + spec + " has no labels; accuracy needs labelled data");
  if (loaded->size() == 0) return InvalidArgument(what + " " + spec + " has no samples");
  return loaded;
}

StatusOr<Dataset> LoadDataset(const std::string& spec, int64_t limit) {
  const std::vector<std::string> parts = Split(spec, ':');
  for (const std::string& p : parts) {
    if (p.empty()) return BadSpec(spec, "empty part");
  }
  const std::string& kind = parts[0];
  if (kind == "fashion-mnist") {
    if (parts.size() != 2 || (parts[1] != "train" && parts[1] != "test"))
      return BadSpec(spec, "fashion-mnist takes train or test");
    return LoadFashionMnist(spec, parts[1], limit);
  }
  if (kind == "idx") {
    if (parts.size() != 3) return BadSpec(spec, "idx needs an images file and a labels file");
    return LoadIdxPair(parts[1], parts[2], spec, limit);
  }
  if (kind == "npy") {
    if (parts.size() != 2 && parts.size() != 3) return BadSpec(spec, "npy needs an inputs file and optional labels");
    WH_ASSIGN_OR_RETURN(Tensor inputs, ReadNpy(parts[1]));
    Tensor labels;
    if (parts.size() == 3) {
      WH_ASSIGN_OR_RETURN(labels, ReadNpy(parts[2]));
    }
    return Assemble(std::move(inputs), std::move(labels), spec, limit, /*images_add_channel=*/false);
  }
  if (kind == "npz") {
    if (parts.size() != 2) return BadSpec(spec, "npz needs one archive (labels go in it as an array named 'labels')");
    return LoadNpz(parts[1], spec, limit);
  }
  if (kind == "calls") {
    if (parts.size() != 2 && parts.size() != 3)
      return BadSpec(spec, "calls needs one archive and optional feedback INPUT=OUTPUT[,INPUT=OUTPUT]");
    return LoadCalls(parts[1], parts.size() == 3 ? parts[2] : "", spec, limit);
  }
  return BadSpec(spec, "unknown kind '" + kind + "'");
}

const Tensor* Dataset::ForInput(const std::string& name, size_t index) const {
  if (named.empty()) return index == 0 && inputs.defined() ? &inputs : nullptr;
  for (const auto& [n, t] : named)
    if (n == name) return &t;
  return named.size() == 1 && index == 0 ? &named[0].second : nullptr;
}

StatusOr<Tensor> Dataset::CallInput(const std::string& name, int64_t c) const {
  const Tensor* t = ForInput(name, 1);
  if (!t) return NotFound("the data '" + description + "' has no array for input '" + name + "' (it holds " +
                          ArrayNames() + ")");
  if (c < 0 || c >= t->dim(0)) return InvalidArgument("call " + std::to_string(c) + " is past the data's calls");
  Tensor row = SliceBatch(*t, c, c + 1);
  return row.Reshaped(Dims(t->dims().begin() + 1, t->dims().end()));
}

std::string Dataset::ArrayNames() const {
  if (named.empty()) return "one unnamed array";
  std::string s;
  for (const auto& [n, t] : named) s += (s.empty() ? "" : ", ") + n;
  return s;
}

Tensor SliceBatch(const Tensor& t, int64_t begin, int64_t end) {
  WH_CHECK(t.defined() && t.rank() >= 1);
  WH_CHECK(0 <= begin && begin <= end && end <= t.dim(0));
  Dims dims = t.dims();
  const int64_t row = dims[0] == 0 ? 0 : t.numel() / dims[0];
  dims[0] = end - begin;
  Tensor out(t.dtype(), dims);
  const size_t row_bytes = static_cast<size_t>(row) * DTypeSize(t.dtype());
  if (out.nbytes() > 0)
    std::memcpy(out.raw_data(), static_cast<const char*>(t.raw_data()) + static_cast<size_t>(begin) * row_bytes,
                out.nbytes());
  return out;
}

}  // namespace whittle
