#include "tools/serve-model/request_codec.h"

#include <nlohmann/json.hpp>
#include <zlib.h>

#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <new>
#include <set>
#include <utility>

#include "kernels/common/dtype_dispatch.h"
#include "lib/data/npy.h"
#include "lib/data/npz.h"
#include "tools/serve-model/json_reader.h"

namespace whittle::serve {
namespace {

using json = nlohmann::json;

std::string Lower(std::string s) {
  for (char& c : s)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return s;
}

std::string Trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && (s[b] == ' ' || s[b] == '\t')) ++b;
  while (e > b && (s[e - 1] == ' ' || s[e - 1] == '\t')) --e;
  return s.substr(b, e - b);
}

std::string Quote(const std::string& name) { return "'" + OneLine(name, 64) + "'"; }

std::string ShapeText(const SymShape& s) { return SymShapeToString(s); }

// JSON can carry these; the packed 4-bit types and strings go as .npy or not at all.
bool JsonCarries(DType t) {
  switch (t) {
    case DType::kFloat32: case DType::kFloat64: case DType::kFloat16: case DType::kBFloat16:
    case DType::kInt8: case DType::kInt16: case DType::kInt32: case DType::kInt64:
    case DType::kUInt8: case DType::kUInt16: case DType::kUInt32: case DType::kUInt64: case DType::kBool:
      return true;
    default:
      return false;
  }
}

// A JSON scalar as the SAX reader saw it.
struct Number {
  enum Kind { kInt, kUInt, kFloat, kBool } kind;
  int64_t i = 0;
  uint64_t u = 0;
  double f = 0;
  bool b = false;
};

template <class T>
void Put(std::string* out, T v) {
  out->append(reinterpret_cast<const char*>(&v), sizeof(T));
}

// A whole number of integer type T from n, or false (fractional, out of range, not a number).
template <class T>
bool ToInteger(const Number& n, T* out) {
  using L = std::numeric_limits<T>;
  switch (n.kind) {
    case Number::kInt:
      if constexpr (L::is_signed) {
        if (n.i < static_cast<int64_t>(L::min()) || n.i > static_cast<int64_t>(L::max())) return false;
      } else {
        if (n.i < 0 || static_cast<uint64_t>(n.i) > static_cast<uint64_t>(L::max())) return false;
      }
      *out = static_cast<T>(n.i);
      return true;
    case Number::kUInt:
      if (n.u > static_cast<uint64_t>(L::max())) return false;
      *out = static_cast<T>(n.u);
      return true;
    case Number::kFloat: {
      if (!std::isfinite(n.f) || std::floor(n.f) != n.f) return false;
      // [min, 2^digits) with both ends exact in double.
      const double hi = std::ldexp(1.0, L::digits);
      const double lo = L::is_signed ? -hi : 0.0;
      if (n.f < lo || n.f >= hi) return false;
      *out = static_cast<T>(n.f);
      return true;
    }
    case Number::kBool:
      return false;
  }
  return false;
}

double ToDouble(const Number& n) {
  switch (n.kind) {
    case Number::kInt: return static_cast<double>(n.i);
    case Number::kUInt: return static_cast<double>(n.u);
    case Number::kFloat: return n.f;
    case Number::kBool: return n.b ? 1.0 : 0.0;
  }
  return 0;
}

// Appends n as one element of dtype t; false when n does not fit t.
bool AppendElement(DType t, const Number& n, std::string* out) {
  if (t == DType::kBool) {
    if (n.kind == Number::kBool) return Put<uint8_t>(out, n.b ? 1 : 0), true;
    uint8_t v = 0;
    if (!ToInteger(n, &v) || v > 1) return false;
    return Put<uint8_t>(out, v), true;
  }
  if (n.kind == Number::kBool) return false;
  switch (t) {
    case DType::kFloat32: return Put(out, static_cast<float>(ToDouble(n))), true;
    case DType::kFloat64: return Put(out, ToDouble(n)), true;
    case DType::kFloat16: return Put(out, ew::DoubleToHalf(ToDouble(n))), true;
    case DType::kBFloat16: return Put(out, ew::FloatToBFloat16Rne(static_cast<float>(ToDouble(n)))), true;
#define WH_SERVE_INT(DT, T) \
  case DT: {                \
    T v{};                  \
    if (!ToInteger(n, &v)) return false; \
    return Put(out, v), true; \
  }
    WH_SERVE_INT(DType::kInt8, int8_t)
    WH_SERVE_INT(DType::kInt16, int16_t)
    WH_SERVE_INT(DType::kInt32, int32_t)
    WH_SERVE_INT(DType::kInt64, int64_t)
    WH_SERVE_INT(DType::kUInt8, uint8_t)
    WH_SERVE_INT(DType::kUInt16, uint16_t)
    WH_SERVE_INT(DType::kUInt32, uint32_t)
    WH_SERVE_INT(DType::kUInt64, uint64_t)
#undef WH_SERVE_INT
    default:
      return false;
  }
}

std::string NumberText(const Number& n) {
  switch (n.kind) {
    case Number::kInt: return std::to_string(n.i);
    case Number::kUInt: return std::to_string(n.u);
    case Number::kFloat: {
      char buf[32];
      auto r = std::to_chars(buf, buf + sizeof(buf), n.f);
      return std::string(buf, r.ptr);
    }
    case Number::kBool: return n.b ? "true" : "false";
  }
  return "?";
}

// One input being read: its elements in C order (the model dtype's bytes) and the dims its lists
// have shown so far.
struct JsonInput {
  const IoInfo* info = nullptr;
  std::string bytes;
  std::vector<int64_t> dims;   // dims[d]: the length every list at depth d must have (-1: none closed yet)
  std::vector<int64_t> count;  // elements so far in the open list at each depth
  int rank = -1;               // fixed by the first number or empty list
  int depth = 0;               // lists open
  size_t elem_size = 0;        // DTypeSize(info->dtype), asked once
};

// The events of {"inputs": {NAME: value, ...}}. Any event returning false stops the read; error_
// then says why.
class PredictSax : public JsonEvents {
 public:
  PredictSax(const std::vector<IoInfo>& inputs, const ParseLimits& limits) : inputs_(inputs), limits_(limits) {}

  bool Null() override { return Unexpected("null"); }
  bool Bool(bool v) override {
    Number n{Number::kBool};
    n.b = v;
    return Leaf(n);
  }
  bool Int(int64_t v) override {
    Number n{Number::kInt};
    n.i = v;
    return Leaf(n);
  }
  bool UInt(uint64_t v) override {
    Number n{Number::kUInt};
    n.u = v;
    return Leaf(n);
  }
  bool Float(double v) override {
    Number n{Number::kFloat};
    n.f = v;
    return Leaf(n);
  }
  bool String(std::string&) override { return Unexpected("a string"); }

  bool StartObject() override {
    if (state_ == kStart) return state_ = kRootKeys, true;
    if (state_ == kExpectInputs) return state_ = kInputKeys, true;
    return Unexpected("an object");
  }
  bool EndObject() override {
    if (state_ == kInputKeys) return state_ = kRootKeys, true;
    if (state_ == kRootKeys) {
      if (!seen_inputs_) return Fail("the body has no \"inputs\" object (expected {\"inputs\": {NAME: [[...]]}})");
      return state_ = kDone, true;
    }
    return Unexpected("the end of an object");
  }
  bool Key(std::string& k) override {
    if (state_ == kRootKeys) {
      if (k != "inputs")
        return Fail("unknown key " + Quote(k) + " in the body (expected {\"inputs\": {NAME: [[...]]}})");
      if (seen_inputs_) return Fail("\"inputs\" appears twice");
      seen_inputs_ = true;
      return state_ = kExpectInputs, true;
    }
    if (state_ == kInputKeys) return BeginInput(k);
    return Unexpected("a key");
  }
  bool StartArray() override {
    if (state_ == kExpectValue) {
      cur_.depth = 1;
      cur_.count.assign(1, 0);
      cur_.dims.assign(1, -1);
      return state_ = kInArray, true;
    }
    if (state_ != kInArray) return Unexpected("a list");
    const int d = cur_.depth;  // the new list's depth index
    if (cur_.rank >= 0 && d >= cur_.rank) return Ragged();
    if (d + 1 > limits_.max_rank)
      return Fail("input " + Quote(cur_.info->name) + ": lists nested deeper than " +
                  std::to_string(limits_.max_rank));
    ++cur_.count[static_cast<size_t>(d - 1)];
    ++cur_.depth;
    if (cur_.count.size() < static_cast<size_t>(cur_.depth)) {
      cur_.count.push_back(0);
      cur_.dims.push_back(-1);
    }
    cur_.count[static_cast<size_t>(d)] = 0;
    return true;
  }
  bool EndArray() override {
    if (state_ != kInArray) return Unexpected("the end of a list");
    const size_t i = static_cast<size_t>(cur_.depth - 1);
    const int64_t n = cur_.count[i];
    if (n == 0) {
      if (cur_.rank >= 0 && cur_.rank != cur_.depth) return Ragged();
      cur_.rank = cur_.depth;
    }
    if (cur_.dims[i] < 0) {
      cur_.dims[i] = n;
    } else if (cur_.dims[i] != n) {
      return Fail("input " + Quote(cur_.info->name) + ": lists at depth " + std::to_string(i) + " have " +
                  std::to_string(cur_.dims[i]) + " and " + std::to_string(n) + " elements (ragged)");
    }
    if (--cur_.depth == 0) return FinishInput();
    return true;
  }
  const std::string& error() const override { return error_; }
  bool done() const { return state_ == kDone; }
  std::map<std::string, Tensor>& result() { return result_; }

 private:
  enum State { kStart, kRootKeys, kExpectInputs, kInputKeys, kExpectValue, kInArray, kDone };

  bool Fail(const std::string& msg) {
    if (error_.empty()) error_ = msg;
    return false;
  }
  bool Unexpected(const char* what) {
    switch (state_) {
      case kStart: return Fail(std::string("the body must be a JSON object {\"inputs\": {...}}, got ") + what);
      case kExpectInputs: return Fail(std::string("\"inputs\" must be an object {NAME: [[...]]}, got ") + what);
      case kExpectValue: case kInArray:
        return Fail("input " + Quote(cur_.info->name) + ": expected numbers in nested lists, got " + what);
      default: return Fail(std::string("unexpected ") + what + " in the body");
    }
  }
  bool Ragged() {
    return Fail("input " + Quote(cur_.info->name) + ": lists and numbers mixed at one depth (ragged nesting)");
  }

  bool BeginInput(const std::string& name) {
    const IoInfo* info = nullptr;
    for (const IoInfo& in : inputs_) info = in.name == name ? &in : info;
    if (!info) {
      std::string names;
      for (const IoInfo& in : inputs_) names += (names.empty() ? "" : ", ") + in.name;
      return Fail("the model has no input " + Quote(name) + " (its inputs: " + OneLine(names) + ")");
    }
    if (result_.count(name)) return Fail("input " + Quote(name) + " appears twice");
    if (!JsonCarries(info->dtype))
      return Fail("input " + Quote(name) + " is " + DTypeName(info->dtype) + ", which JSON cannot carry (send .npy)");
    cur_ = JsonInput();
    cur_.info = info;
    cur_.elem_size = DTypeSize(info->dtype);
    state_ = kExpectValue;
    return true;
  }

  bool Leaf(const Number& n) {
    if (state_ == kExpectValue) {  // a 0-d input
      cur_.rank = 0;
      return Append(n) && FinishInput();
    }
    if (state_ != kInArray) return Unexpected(n.kind == Number::kBool ? "a bool" : "a number");
    if (cur_.rank >= 0 && cur_.rank != cur_.depth) return Ragged();
    cur_.rank = cur_.depth;
    ++cur_.count[static_cast<size_t>(cur_.depth - 1)];
    return Append(n);
  }

  bool Append(const Number& n) {
    const size_t es = cur_.elem_size;
    if (static_cast<int64_t>(total_bytes_ + es) > limits_.max_decoded_bytes)
      return Fail("the inputs hold more than " + std::to_string(limits_.max_decoded_bytes) + " bytes");
    if (n.kind == Number::kFloat && cur_.info->dtype == DType::kFloat32) {  // the common case, inline
      Put(&cur_.bytes, static_cast<float>(n.f));
    } else if (!AppendElement(cur_.info->dtype, n, &cur_.bytes))
      return Fail("input " + Quote(cur_.info->name) + " is " + DTypeName(cur_.info->dtype) + ": " + NumberText(n) +
                  " does not fit it");
    total_bytes_ += es;
    return true;
  }

  bool FinishInput() {
    Dims dims(cur_.dims.begin(), cur_.dims.begin() + std::max(cur_.rank, 0));
    auto numel = CheckedNumElements(dims);
    const size_t es = DTypeSize(cur_.info->dtype);
    if (!numel.ok() || static_cast<size_t>(*numel) * es != cur_.bytes.size())
      return Fail("input " + Quote(cur_.info->name) + ": the lists do not form a rectangular array");
    Tensor t(cur_.info->dtype, dims);
    if (!cur_.bytes.empty()) std::memcpy(t.raw_data(), cur_.bytes.data(), cur_.bytes.size());
    cur_.bytes = std::string();
    Status s = CheckInput(*cur_.info, t);
    if (!s.ok()) return Fail(s.message());
    result_[cur_.info->name] = std::move(t);
    state_ = kInputKeys;
    return true;
  }

  const std::vector<IoInfo>& inputs_;
  const ParseLimits& limits_;
  State state_ = kStart;
  bool seen_inputs_ = false;
  JsonInput cur_;
  size_t total_bytes_ = 0;
  std::map<std::string, Tensor> result_;
  std::string error_;
};

StatusOr<std::map<std::string, Tensor>> ParseJson(const std::string& body, const std::vector<IoInfo>& inputs,
                                                   const ParseLimits& limits) {
  PredictSax sax(inputs, limits);
  // Depth: the body object, "inputs", and an input's lists (PredictSax refuses deeper lists first).
  const Status st = ReadJson(body, &sax, limits.max_rank + 3);
  if (!st.ok()) return InvalidArgument(OneLine(st.message(), 400));
  if (!sax.done()) return InvalidArgument("incomplete JSON body");
  return std::move(sax.result());
}

Status CheckAllGiven(const std::map<std::string, Tensor>& got, const std::vector<IoInfo>& inputs) {
  for (const IoInfo& in : inputs)
    if (!got.count(in.name))
      return InvalidArgument("missing input " + Quote(in.name) + " (" + DTypeName(in.dtype) + ShapeText(in.shape) + ")");
  return Status::Ok();
}

StatusOr<std::map<std::string, Tensor>> ParseNpyBody(const std::string& body, const std::vector<IoInfo>& inputs,
                                                     const ParseLimits& limits) {
  if (inputs.size() != 1)
    return InvalidArgument("a .npy body feeds a one-input model; this one has " + std::to_string(inputs.size()) +
                           " inputs (send an .npz with one member per input, or JSON)");
  if (static_cast<int64_t>(body.size()) > limits.max_decoded_bytes + 65536)
    return InvalidArgument("the .npy body is larger than " + std::to_string(limits.max_decoded_bytes) + " bytes");
  auto t = ParseNpy(body, "the .npy body");
  if (!t.ok()) return InvalidArgument(OneLine(t.status().message(), 400));
  WH_RETURN_IF_ERROR(CheckInput(inputs[0], *t));
  std::map<std::string, Tensor> out;
  out[inputs[0].name] = std::move(*t);
  return out;
}

StatusOr<std::map<std::string, Tensor>> ParseNpzBody(const std::string& body, const std::vector<IoInfo>& inputs,
                                                     const ParseLimits& limits) {
  auto claimed = ZipClaimedBytes(body);
  if (!claimed.ok()) return claimed.status();
  if (*claimed > static_cast<uint64_t>(limits.max_decoded_bytes))
    return InvalidArgument("the .npz members would hold " + std::to_string(*claimed) + " bytes, more than the limit of " +
                           std::to_string(limits.max_decoded_bytes));
  auto arrays = ParseNpz(body, "the .npz body");
  if (!arrays.ok()) return InvalidArgument(OneLine(arrays.status().message(), 400));
  std::map<std::string, Tensor> out;
  for (NpzArray& a : *arrays) {
    const IoInfo* info = nullptr;
    for (const IoInfo& in : inputs) info = in.name == a.name ? &in : info;
    if (!info) return InvalidArgument("the model has no input " + Quote(a.name) + " (.npz member " + Quote(a.name + ".npy") + ")");
    WH_RETURN_IF_ERROR(CheckInput(*info, a.tensor));
    out[a.name] = std::move(a.tensor);
  }
  return out;
}

// ---- JSON output ---------------------------------------------------------------------------

template <class T>
void AppendNumber(std::string* out, T v) {
  char buf[40];
  if constexpr (std::is_floating_point_v<T>) {
    if (!std::isfinite(v)) {
      out->append("null");
      return;
    }
  }
  auto r = std::to_chars(buf, buf + sizeof(buf), v);
  out->append(buf, r.ptr);
}

void AppendElementText(std::string* out, DType t, const char* p) {
  switch (t) {
    case DType::kFloat32: { float v; std::memcpy(&v, p, 4); AppendNumber(out, v); return; }
    case DType::kFloat64: { double v; std::memcpy(&v, p, 8); AppendNumber(out, v); return; }
    case DType::kFloat16: { uint16_t v; std::memcpy(&v, p, 2); AppendNumber(out, ew::HalfToFloat(v)); return; }
    case DType::kBFloat16: { uint16_t v; std::memcpy(&v, p, 2); AppendNumber(out, ew::BFloat16ToFloat(v)); return; }
    case DType::kBool: out->append(*p ? "true" : "false"); return;
#define WH_SERVE_INT(DT, T) \
  case DT: { T v; std::memcpy(&v, p, sizeof(T)); AppendNumber(out, v); return; }
    WH_SERVE_INT(DType::kInt8, int8_t)
    WH_SERVE_INT(DType::kInt16, int16_t)
    WH_SERVE_INT(DType::kInt32, int32_t)
    WH_SERVE_INT(DType::kInt64, int64_t)
    WH_SERVE_INT(DType::kUInt8, uint8_t)
    WH_SERVE_INT(DType::kUInt16, uint16_t)
    WH_SERVE_INT(DType::kUInt32, uint32_t)
    WH_SERVE_INT(DType::kUInt64, uint64_t)
#undef WH_SERVE_INT
    default: out->append("null"); return;
  }
}

// Nested lists of dims[d:] starting at element *index (advanced); depth is the tensor's rank at most.
void AppendNested(std::string* out, const Tensor& t, size_t d, int64_t* index) {
  const char* base = static_cast<const char*>(t.raw_data());
  const size_t es = DTypeSize(t.dtype());
  if (d == t.dims().size()) {
    AppendElementText(out, t.dtype(), base + static_cast<size_t>(*index) * es);
    ++*index;
    return;
  }
  out->push_back('[');
  for (int64_t i = 0; i < t.dims()[d]; ++i) {
    if (i) out->push_back(',');
    AppendNested(out, t, d + 1, index);
  }
  out->push_back(']');
}

std::string JsonString(const std::string& s) {
  return json(s).dump(-1, ' ', false, json::error_handler_t::replace);
}

StatusOr<std::string> EncodeJson(const std::vector<IoInfo>& outputs, const std::vector<Tensor>& values) {
  std::string out = "{\"outputs\":{";
  for (size_t i = 0; i < values.size(); ++i) {
    const Tensor& t = values[i];
    if (!t.is_tensor() || !JsonCarries(t.dtype()))
      return Unimplemented("output " + Quote(outputs[i].name) + " cannot be written as JSON");
    if (i) out.push_back(',');
    out += JsonString(outputs[i].name);
    out.push_back(':');
    int64_t index = 0;
    AppendNested(&out, t, 0, &index);
  }
  out += "}}";
  return out;
}

void PutLE(std::string* out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

uint64_t GetLE(const std::string& b, uint64_t at, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(b[at + static_cast<uint64_t>(i)]);
  return v;
}

bool Inside(uint64_t at, uint64_t len, uint64_t size) { return at <= size && len <= size - at; }

}  // namespace

std::string OneLine(const std::string& s, size_t max_len) {
  std::string out;
  out.reserve(std::min(s.size(), max_len) + 3);
  for (size_t i = 0; i < s.size() && i < max_len; ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    out.push_back(c < 0x20 || c == 0x7f ? '?' : static_cast<char>(c));
  }
  if (s.size() > max_len) out += "...";
  return out;
}

StatusOr<BodyFormat> FormatFromContentType(const std::string& content_type) {
  const std::string ct = Lower(Trim(content_type.substr(0, content_type.find(';'))));
  // curl -d sends application/x-www-form-urlencoded unless told otherwise: read it as JSON too.
  if (ct.empty() || ct == "application/json" || ct == "text/plain" || ct == "application/x-www-form-urlencoded")
    return BodyFormat::kJson;
  if (ct == "application/x-npy" || ct == "application/npy") return BodyFormat::kNpy;
  if (ct == "application/x-npz" || ct == "application/npz" || ct == "application/zip") return BodyFormat::kNpz;
  return Unimplemented("unsupported Content-Type " + Quote(ct) +
                       " (use application/json, application/x-npy or application/x-npz)");
}

const char* ContentTypeOf(BodyFormat f) {
  switch (f) {
    case BodyFormat::kJson: return "application/json";
    case BodyFormat::kNpy: return "application/x-npy";
    case BodyFormat::kNpz: return "application/x-npz";
  }
  return "application/octet-stream";
}

Status CheckInput(const IoInfo& info, const Tensor& t) {
  if (!t.is_tensor()) return InvalidArgument("input " + Quote(info.name) + " must be a tensor");
  if (t.dtype() != info.dtype)
    return InvalidArgument("input " + Quote(info.name) + " is " + DTypeName(info.dtype) + ", got " + DTypeName(t.dtype()));
  if (info.shape.empty()) return Status::Ok();  // rank unknown (or 0-d: the run checks)
  if (t.rank() != static_cast<int>(info.shape.size()))
    return InvalidArgument("input " + Quote(info.name) + " has rank " + std::to_string(info.shape.size()) + " " +
                           ShapeText(info.shape) + ", got rank " + std::to_string(t.rank()) + " " +
                           DimsToString(t.dims()));
  for (size_t d = 0; d < info.shape.size(); ++d)
    if (info.shape[d].known() && info.shape[d].value != t.dims()[d])
      return InvalidArgument("input " + Quote(info.name) + " has shape " + ShapeText(info.shape) + ", got " +
                             DimsToString(t.dims()) + " (dim " + std::to_string(d) + ")");
  return Status::Ok();
}

StatusOr<std::map<std::string, Tensor>> ParsePredictBody(BodyFormat format, const std::string& body,
                                                          const std::vector<IoInfo>& inputs,
                                                          const ParseLimits& limits) {
  try {
    StatusOr<std::map<std::string, Tensor>> got = InvalidArgument("unreachable");
    switch (format) {
      case BodyFormat::kJson: got = ParseJson(body, inputs, limits); break;
      case BodyFormat::kNpy: got = ParseNpyBody(body, inputs, limits); break;
      case BodyFormat::kNpz: got = ParseNpzBody(body, inputs, limits); break;
    }
    if (!got.ok()) return got.status();
    WH_RETURN_IF_ERROR(CheckAllGiven(*got, inputs));
    return got;
  } catch (const std::bad_alloc&) {
    return ResourceExhausted("out of memory while reading the request body");
  } catch (const std::exception& e) {
    return InvalidArgument("bad request body: " + OneLine(e.what()));
  }
}

StatusOr<std::string> EncodeOutputs(BodyFormat format, const std::vector<IoInfo>& outputs,
                                    const std::vector<Tensor>& values, BodyFormat* format_out) {
  if (outputs.size() != values.size()) return Internal("output count differs from the model's");
  if (format == BodyFormat::kNpy && values.size() != 1) format = BodyFormat::kNpz;
  *format_out = format;
  try {
    switch (format) {
      case BodyFormat::kJson:
        return EncodeJson(outputs, values);
      case BodyFormat::kNpy:
        return SerializeNpy(values[0]);
      case BodyFormat::kNpz: {
        std::vector<std::pair<std::string, Tensor>> arrays;
        for (size_t i = 0; i < values.size(); ++i) arrays.emplace_back(outputs[i].name, values[i]);
        return SerializeNpzStored(arrays);
      }
    }
  } catch (const std::bad_alloc&) {
    return ResourceExhausted("out of memory while writing the response");
  }
  return Internal("unknown body format");
}

StatusOr<std::string> SerializeNpzStored(const std::vector<std::pair<std::string, Tensor>>& arrays) {
  constexpr uint64_t kMax32 = 0xFFFFFFFFu;
  if (arrays.empty() || arrays.size() >= 0xFFFF) return InvalidArgument("an .npz needs 1 to 65534 arrays");
  std::string out, central;
  std::set<std::string> names;
  for (const auto& [name, t] : arrays) {
    if (name.empty() || !names.insert(name).second) return InvalidArgument("empty or repeated array name " + Quote(name));
    if (!t.is_tensor()) return InvalidArgument("array " + Quote(name) + " is not a tensor");
    WH_ASSIGN_OR_RETURN(std::string npy, SerializeNpy(t));
    const std::string member = name + ".npy";
    if (member.size() > 0xFFFF || npy.size() > kMax32 || out.size() > kMax32)
      return InvalidArgument("array " + Quote(name) + " is too large for a plain .npz");
    const uint32_t crc = static_cast<uint32_t>(
        crc32(crc32(0L, Z_NULL, 0), reinterpret_cast<const Bytef*>(npy.data()), static_cast<uInt>(npy.size())));
    const uint64_t offset = out.size();
    // Local header: signature, version 2.0, flags, method 0 (stored), time, date (1980-01-01).
    PutLE(&out, 0x04034b50, 4); PutLE(&out, 20, 2); PutLE(&out, 0, 2); PutLE(&out, 0, 2);
    PutLE(&out, 0, 2); PutLE(&out, 0x21, 2); PutLE(&out, crc, 4);
    PutLE(&out, npy.size(), 4); PutLE(&out, npy.size(), 4); PutLE(&out, member.size(), 2); PutLE(&out, 0, 2);
    out += member;
    out += npy;
    PutLE(&central, 0x02014b50, 4); PutLE(&central, 20, 2); PutLE(&central, 20, 2); PutLE(&central, 0, 2);
    PutLE(&central, 0, 2); PutLE(&central, 0, 2); PutLE(&central, 0x21, 2); PutLE(&central, crc, 4);
    PutLE(&central, npy.size(), 4); PutLE(&central, npy.size(), 4); PutLE(&central, member.size(), 2);
    PutLE(&central, 0, 2); PutLE(&central, 0, 2); PutLE(&central, 0, 2); PutLE(&central, 0, 2);
    PutLE(&central, 0, 4); PutLE(&central, offset, 4);
    central += member;
  }
  if (out.size() > kMax32 || central.size() > kMax32) return InvalidArgument("the arrays are too large for a plain .npz");
  const uint64_t dir_offset = out.size();
  out += central;
  PutLE(&out, 0x06054b50, 4); PutLE(&out, 0, 2); PutLE(&out, 0, 2);
  PutLE(&out, arrays.size(), 2); PutLE(&out, arrays.size(), 2);
  PutLE(&out, central.size(), 4); PutLE(&out, dir_offset, 4); PutLE(&out, 0, 2);
  return out;
}

StatusOr<uint64_t> ZipClaimedBytes(const std::string& b) {
  const uint64_t size = b.size();
  auto bad = [](const std::string& why) { return InvalidArgument("not a readable .npz (zip) archive: " + why); };
  if (size < 22) return bad("shorter than its end record");
  // The end of central directory record: 22 bytes plus a comment of up to 65535.
  uint64_t end = size - 22;
  const uint64_t lowest = size - 22 > 0xFFFF ? size - 22 - 0xFFFF : 0;
  while (GetLE(b, end, 4) != 0x06054b50) {
    if (end == lowest) return bad("no end of central directory record");
    --end;
  }
  uint64_t entries = GetLE(b, end + 10, 2), dir_size = GetLE(b, end + 12, 4), dir_offset = GetLE(b, end + 16, 4);
  if (entries == 0xFFFF || dir_size == 0xFFFFFFFFu || dir_offset == 0xFFFFFFFFu) {
    // ZIP64: the locator sits right before the end record and points at the ZIP64 end record.
    if (end < 20 || GetLE(b, end - 20, 4) != 0x07064b50) return bad("ZIP64 fields without a ZIP64 locator");
    const uint64_t rec = GetLE(b, end - 20 + 8, 8);
    if (!Inside(rec, 56, size) || GetLE(b, rec, 4) != 0x06064b50) return bad("bad ZIP64 end record");
    entries = GetLE(b, rec + 32, 8);
    dir_size = GetLE(b, rec + 40, 8);
    dir_offset = GetLE(b, rec + 48, 8);
  }
  if (!Inside(dir_offset, dir_size, size)) return bad("the central directory lies outside the body");
  if (entries == 0 || entries > dir_size / 46) return bad("bad central directory entry count");
  uint64_t total = 0;
  uint64_t p = dir_offset;
  const uint64_t dir_end = dir_offset + dir_size;
  for (uint64_t i = 0; i < entries; ++i) {
    if (!Inside(p, 46, dir_end) || GetLE(b, p, 4) != 0x02014b50) return bad("bad central directory entry");
    uint64_t uncompressed = GetLE(b, p + 24, 4);
    const uint64_t name_len = GetLE(b, p + 28, 2), extra_len = GetLE(b, p + 30, 2), comment_len = GetLE(b, p + 32, 2);
    if (!Inside(p + 46, name_len + extra_len + comment_len, dir_end)) return bad("bad central directory entry");
    if (uncompressed == 0xFFFFFFFFu) {  // the real size is the first field of the ZIP64 extra record
      bool found = false;
      for (uint64_t q = p + 46 + name_len, e = q + extra_len; Inside(q, 4, e);) {
        const uint64_t id = GetLE(b, q, 2), len = GetLE(b, q + 2, 2);
        if (!Inside(q + 4, len, e)) break;
        if (id == 0x0001 && len >= 8) {
          uncompressed = GetLE(b, q + 4, 8);
          found = true;
          break;
        }
        q += 4 + len;
      }
      if (!found) return bad("a ZIP64 size without its extra field");
    }
    if (uncompressed > (uint64_t{1} << 62) - total) return bad("member sizes overflow");
    total += uncompressed;
    p += 46 + name_len + extra_len + comment_len;
  }
  return total;
}

}  // namespace whittle::serve
