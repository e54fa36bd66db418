// TensorProto and AttributeProto conversions (see proto_convert.h).
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "lib/ir/memory_meter.h"
#include "lib/onnx/file_io.h"
#include "lib/onnx/proto_convert.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "ONNX raw_data is little-endian; Whittle's loader copies it as is and needs a little-endian host"
#endif

namespace whittle::onnx_io {
namespace {

using onnx::AttributeProto;
using onnx::TensorProto;

const char* TypedFieldName(DType dt) {
  switch (dt) {
    case DType::kFloat32: return "float_data";
    case DType::kInt64: return "int64_data";
    case DType::kFloat64: return "double_data";
    case DType::kUInt32: case DType::kUInt64: return "uint64_data";
    default: return "int32_data";  // int8/uint8/int16/uint16/int32/bool/float16/bfloat16
  }
}

// Which typed fields hold values, by name.
std::vector<std::string> NonEmptyTypedFields(const TensorProto& p) {
  std::vector<std::string> r;
  if (p.float_data_size()) r.push_back("float_data");
  if (p.int32_data_size()) r.push_back("int32_data");
  if (p.int64_data_size()) r.push_back("int64_data");
  if (p.double_data_size()) r.push_back("double_data");
  if (p.uint64_data_size()) r.push_back("uint64_data");
  if (p.string_data_size()) r.push_back("string_data");
  return r;
}

// True when integer v is representable in Dst (C++17 has no std::in_range).
template <class Dst, class Src>
bool Fits(Src v) {
  if constexpr (std::is_signed_v<Src>) {
    if (v < 0) return std::is_signed_v<Dst> && static_cast<int64_t>(v) >= static_cast<int64_t>(std::numeric_limits<Dst>::min());
  }
  return static_cast<uint64_t>(v) <= static_cast<uint64_t>(std::numeric_limits<Dst>::max());
}

// Copies a typed field into dst, checking each integer fits the element type.
template <class Dst, class Src>
Status CopyTyped(const google::protobuf::RepeatedField<Src>& src, void* dst_raw, const std::string& what,
                 const char* field, DType dt) {
  Dst* dst = static_cast<Dst*>(dst_raw);
  for (int i = 0; i < src.size(); ++i) {
    const Src v = src.Get(i);
    if constexpr (std::is_integral_v<Src>) {
      if (!Fits<Dst>(v))
        return InvalidArgument(what + ": " + field + "[" + std::to_string(i) + "] = " + std::to_string(v) +
                               " does not fit in " + DTypeName(dt));
    }
    dst[i] = static_cast<Dst>(v);
  }
  return Status::Ok();
}

Status FillFromTypedField(const TensorProto& p, DType dt, Tensor* t, const std::string& what) {
  const char* f = TypedFieldName(dt);
  void* d = t->raw_data();
  switch (dt) {
    case DType::kFloat32: return CopyTyped<float>(p.float_data(), d, what, f, dt);
    case DType::kFloat64: return CopyTyped<double>(p.double_data(), d, what, f, dt);
    case DType::kInt64: return CopyTyped<int64_t>(p.int64_data(), d, what, f, dt);
    case DType::kUInt64: return CopyTyped<uint64_t>(p.uint64_data(), d, what, f, dt);
    case DType::kUInt32: return CopyTyped<uint32_t>(p.uint64_data(), d, what, f, dt);
    case DType::kInt32: return CopyTyped<int32_t>(p.int32_data(), d, what, f, dt);
    case DType::kInt16: return CopyTyped<int16_t>(p.int32_data(), d, what, f, dt);
    case DType::kUInt16:
    case DType::kFloat16:
    case DType::kBFloat16:  // 16-bit floats are stored as their bit patterns
      return CopyTyped<uint16_t>(p.int32_data(), d, what, f, dt);
    case DType::kInt8: return CopyTyped<int8_t>(p.int32_data(), d, what, f, dt);
    case DType::kUInt8: return CopyTyped<uint8_t>(p.int32_data(), d, what, f, dt);
    case DType::kBool: return CopyTyped<bool>(p.int32_data(), d, what, f, dt);
    default: return Internal(what + ": no typed field for " + DTypeName(dt));
  }
}

int TypedFieldCount(const TensorProto& p, DType dt) {
  switch (dt) {
    case DType::kFloat32: return p.float_data_size();
    case DType::kFloat64: return p.double_data_size();
    case DType::kInt64: return p.int64_data_size();
    case DType::kUInt32: case DType::kUInt64: return p.uint64_data_size();
    default: return p.int32_data_size();
  }
}

// Strict non-negative decimal (external-data offset/length are strings in the proto).
StatusOr<int64_t> ParseNonNegative(const std::string& s, const std::string& key, const std::string& what) {
  auto bad = [&] {
    return InvalidArgument(what + ": external data " + key + " '" + s + "' is not a non-negative integer");
  };
  if (s.empty() || s.size() > 19) return bad();
  int64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return bad();
    if (v > (INT64_MAX - (c - '0')) / 10) return bad();  // 19 digits may pass 2^63 - 1
    v = v * 10 + (c - '0');
  }
  return v;
}

StatusOr<std::shared_ptr<Buffer>> ReadExternal(const TensorProto& p, size_t nbytes, const std::string& base_dir,
                                               const std::string& what) {
  if (p.has_raw_data() || !NonEmptyTypedFields(p).empty())
    return InvalidArgument(what + ": stored as external data but also holds inline data");
  std::string location;
  int64_t offset = -1, length = -1;
  bool has_location = false, has_offset = false, has_length = false;
  for (const auto& kv : p.external_data()) {
    const std::string& k = kv.key();
    bool* seen = k == "location" ? &has_location : k == "offset" ? &has_offset : k == "length" ? &has_length : nullptr;
    if (!seen) continue;  // checksum and future keys are not needed to read the data
    if (*seen) return InvalidArgument(what + ": external data key '" + k + "' appears twice");
    *seen = true;
    if (k == "location") {
      location = kv.value();
    } else if (k == "offset") {
      WH_ASSIGN_OR_RETURN(offset, ParseNonNegative(kv.value(), k, what));
    } else {
      WH_ASSIGN_OR_RETURN(length, ParseNonNegative(kv.value(), k, what));
    }
  }
  if (!has_location) return InvalidArgument(what + ": external data has no 'location'");
  return ReadExternalRange(base_dir, location, offset, length, nbytes, what);
}

const char* OnnxAttrTypeName(int t) {
  return AttributeProto::AttributeType_IsValid(t)
             ? AttributeProto::AttributeType_Name(static_cast<AttributeProto::AttributeType>(t)).c_str()
             : "UNKNOWN";
}

// Attribute kinds whose fields are populated, as AttributeProto types.
std::vector<int> PresentAttrKinds(const AttributeProto& p) {
  std::vector<int> r;
  if (p.has_f()) r.push_back(AttributeProto::FLOAT);
  if (p.has_i()) r.push_back(AttributeProto::INT);
  if (p.has_s()) r.push_back(AttributeProto::STRING);
  if (p.has_t()) r.push_back(AttributeProto::TENSOR);
  if (p.has_g()) r.push_back(AttributeProto::GRAPH);
  if (p.has_sparse_tensor()) r.push_back(AttributeProto::SPARSE_TENSOR);
  if (p.has_tp()) r.push_back(AttributeProto::TYPE_PROTO);
  if (p.floats_size()) r.push_back(AttributeProto::FLOATS);
  if (p.ints_size()) r.push_back(AttributeProto::INTS);
  if (p.strings_size()) r.push_back(AttributeProto::STRINGS);
  if (p.tensors_size()) r.push_back(AttributeProto::TENSORS);
  if (p.graphs_size()) r.push_back(AttributeProto::GRAPHS);
  if (p.sparse_tensors_size()) r.push_back(AttributeProto::SPARSE_TENSORS);
  if (p.type_protos_size()) r.push_back(AttributeProto::TYPE_PROTOS);
  return r;
}

}  // namespace

bool ParseProtoBytes(const std::string& bytes, google::protobuf::MessageLite* msg) {
  if (bytes.size() > kMaxProtoBytes) return false;
  google::protobuf::io::ArrayInputStream raw(bytes.data(), static_cast<int>(bytes.size()));
  google::protobuf::io::CodedInputStream in(&raw);
  in.SetTotalBytesLimit(INT_MAX);
  return msg->ParseFromCodedStream(&in) && in.ConsumedEntireMessage();
}

StatusOr<DType> DTypeFromOnnx(int32_t t, const std::string& what) {
  if (t == TensorProto::UNDEFINED) return InvalidArgument(what + ": data type is UNDEFINED (0)");
  if (t == TensorProto::STRING) return Unimplemented(what + ": string tensors are not supported");
  if (t == TensorProto::COMPLEX64 || t == TensorProto::COMPLEX128)
    return Unimplemented(what + ": complex tensors are not supported");
  if (!IsSupportedDType(t))
    return InvalidArgument(what + ": unknown data type " + std::to_string(t) + " (not an ONNX TensorProto.DataType)");
  return static_cast<DType>(t);
}

StatusOr<Tensor> TensorFromProto(const TensorProto& p, const std::string& base_dir, const std::string& what) {
  if (p.has_segment()) return Unimplemented(what + ": segmented tensors are not supported");
  WH_ASSIGN_OR_RETURN(DType dt, DTypeFromOnnx(p.data_type(), what));
  Dims dims(p.dims().begin(), p.dims().end());
  auto numel_or = CheckedNumElements(dims);
  if (!numel_or.ok()) return numel_or.status().WithContext(what);
  const int64_t numel = *numel_or;
  const auto esize = static_cast<int64_t>(std::max<size_t>(DTypeSize(dt), 1));  // 4-bit: under a byte
  if (numel > std::numeric_limits<int64_t>::max() / esize)
    return InvalidArgument(what + ": shape " + DimsToString(dims) + " of " + DTypeName(dt) + " is too large");
  const auto nbytes = static_cast<int64_t>(DTypeStorageBytes(dt, numel));
  const std::string desc = std::to_string(numel) + " elements of " + DTypeName(dt) + ", shape " + DimsToString(dims);
  // Held to the process's memory budget (the CLIs' --max-memory) before anything is allocated.
  if (const int64_t budget = ProcessMemoryBudget(); budget > 0 && nbytes > budget)
    return ResourceExhausted(what + " (" + desc + ") needs " + HumanBytes(static_cast<uint64_t>(nbytes)) +
                             ", over the memory budget of " + HumanBytes(static_cast<uint64_t>(budget)) +
                             " (--max-memory)");

  if (p.data_location() == TensorProto::EXTERNAL) {
    WH_ASSIGN_OR_RETURN(std::shared_ptr<Buffer> buf, ReadExternal(p, static_cast<size_t>(nbytes), base_dir, what));
    return Tensor(dt, std::move(dims), std::move(buf));
  }
  if (p.data_location() != TensorProto::DEFAULT)
    return InvalidArgument(what + ": unknown data_location " + std::to_string(p.data_location()));
  if (p.external_data_size() > 0)
    return InvalidArgument(what + ": has external_data entries but data_location is not EXTERNAL");

  const std::vector<std::string> typed = NonEmptyTypedFields(p);
  if (p.has_raw_data()) {
    if (!typed.empty()) return InvalidArgument(what + ": holds both raw_data and " + typed[0]);
    if (static_cast<int64_t>(p.raw_data().size()) != nbytes)
      return InvalidArgument(what + ": raw_data has " + std::to_string(p.raw_data().size()) + " bytes, expected " +
                             std::to_string(nbytes) + " (" + desc + ")");
    Tensor t(dt, std::move(dims));
    if (nbytes > 0) std::memcpy(t.raw_data(), p.raw_data().data(), static_cast<size_t>(nbytes));
    return t;
  }
  const char* field = TypedFieldName(dt);
  for (const std::string& f : typed)
    if (f != field)
      return InvalidArgument(what + ": a " + DTypeName(dt) + " tensor stores values in " + f + "; expected " + field +
                             " or raw_data");
  // int32_data holds one packed byte (two 4-bit values) per entry for int4/uint4.
  const int count = TypedFieldCount(p, dt);
  if (IsPacked4Bit(dt)) {
    if (count != nbytes)
      return InvalidArgument(what + ": " + field + " has " + std::to_string(count) + " values, expected " +
                             std::to_string(nbytes) + " packed bytes (" + desc + ")");
    Tensor t(dt, std::move(dims));
    auto* d = static_cast<uint8_t*>(t.raw_data());
    for (int i = 0; i < count; ++i) {
      const int32_t v = p.int32_data(i);
      if (v < 0 || v > 255)
        return InvalidArgument(what + ": " + field + "[" + std::to_string(i) + "] = " + std::to_string(v) +
                               " is not a packed byte of two 4-bit values");
      d[i] = static_cast<uint8_t>(v);
    }
    return t;
  }
  if (count != numel)
    return InvalidArgument(what + ": " + field + " has " + std::to_string(count) + " values, expected " +
                           std::to_string(numel) + " (" + desc + ")");
  Tensor t(dt, std::move(dims));  // numel equals a count that protobuf already holds in memory
  WH_RETURN_IF_ERROR(FillFromTypedField(p, dt, &t, what));
  return t;
}

StatusOr<Attribute> AttributeFromProto(const AttributeProto& p, const std::string& base_dir,
                                       const std::string& where) {
  const std::string what = where + ": attribute '" + p.name() + "'";
  if (p.name().empty()) return InvalidArgument(where + ": an attribute has no name");
  if (!p.ref_attr_name().empty())
    return Unimplemented(what + " refers to a function attribute ('" + p.ref_attr_name() +
                         "'); functions are not supported");
  const std::vector<int> present = PresentAttrKinds(p);
  int type = p.type();
  if (type == AttributeProto::UNDEFINED) {
    // Files older than IR version 2 carry no type; the populated field says it.
    if (present.size() != 1) return InvalidArgument(what + " has no type and its value field is ambiguous");
    type = present[0];
  }
  for (int k : present)
    if (k != type)
      return InvalidArgument(what + " declares type " + OnnxAttrTypeName(type) + " but holds a " +
                             OnnxAttrTypeName(k) + " value");
  switch (type) {
    case AttributeProto::FLOAT: return Attribute::Float(p.f());
    case AttributeProto::INT: return Attribute::Int(p.i());
    case AttributeProto::STRING: return Attribute::String(p.s());
    case AttributeProto::FLOATS: return Attribute::Floats({p.floats().begin(), p.floats().end()});
    case AttributeProto::INTS: return Attribute::Ints({p.ints().begin(), p.ints().end()});
    case AttributeProto::STRINGS: return Attribute::Strings({p.strings().begin(), p.strings().end()});
    case AttributeProto::TENSOR: {
      WH_ASSIGN_OR_RETURN(Tensor t, TensorFromProto(p.t(), base_dir, what));
      return Attribute::TensorValue(std::move(t));
    }
    case AttributeProto::GRAPH:
    case AttributeProto::GRAPHS:
      return Unimplemented(what + " is a graph: subgraphs are not supported (control flow ops such as If/Loop/Scan)");
    case AttributeProto::TENSORS:
      return Unimplemented(what + " is a list of tensors, which is not supported");
    case AttributeProto::SPARSE_TENSOR:
    case AttributeProto::SPARSE_TENSORS:
      return Unimplemented(what + " is a sparse tensor, which is not supported");
    case AttributeProto::TYPE_PROTO: {
      // A tensor or a sequence of tensors (Optional's `type`); the element shape is not kept.
      const onnx::TypeProto* tp = &p.tp();
      ValueKind kind = ValueKind::kTensor;
      if (tp->value_case() == onnx::TypeProto::kSequenceType) {
        kind = ValueKind::kSequence;
        tp = &tp->sequence_type().elem_type();
      }
      if (tp->value_case() != onnx::TypeProto::kTensorType)
        return Unimplemented(what + " is a type other than a tensor or a sequence of tensors, which is not supported");
      DType dt = DType::kUndefined;
      if (tp->tensor_type().elem_type() != onnx::TensorProto::UNDEFINED) {
        WH_ASSIGN_OR_RETURN(dt, DTypeFromOnnx(tp->tensor_type().elem_type(), what));
      }
      return Attribute::Type(kind, dt);
    }
    case AttributeProto::TYPE_PROTOS:
      return Unimplemented(what + " is a type, which is not supported");
    default:
      return InvalidArgument(what + " has unknown type " + std::to_string(type));
  }
}

Status TensorToProto(const Tensor& t, const std::string& name, ExternalDataPlan* plan, TensorProto* p) {
  if (!t.defined()) return InvalidArgument("tensor '" + name + "' has no data");
  if (t.dtype() == DType::kUndefined || DTypeBits(t.dtype()) == 0)
    return InvalidArgument("tensor '" + name + "' has no storable data type");
  p->Clear();
  if (!name.empty()) p->set_name(name);
  for (int64_t d : t.dims()) p->add_dims(d);
  p->set_data_type(static_cast<int32_t>(t.dtype()));
  const auto nbytes = static_cast<int64_t>(t.nbytes());
  if (plan && plan->threshold >= 0 && nbytes > 0 && nbytes >= plan->threshold) {
    const int64_t offset = (plan->total_bytes + 63) / 64 * 64;  // 64-byte aligned for mmap users
    plan->pieces.push_back({&t, offset});
    plan->total_bytes = offset + nbytes;
    p->set_data_location(TensorProto::EXTERNAL);
    auto add = [&](const char* k, const std::string& v) {
      auto* e = p->add_external_data();
      e->set_key(k);
      e->set_value(v);
    };
    add("location", plan->location);
    add("offset", std::to_string(offset));
    add("length", std::to_string(nbytes));
    return Status::Ok();
  }
  p->set_raw_data(static_cast<const char*>(t.raw_data()), static_cast<size_t>(nbytes));
  return Status::Ok();
}

Status AttributeToProto(const std::string& name, const Attribute& a, ExternalDataPlan* plan, AttributeProto* p) {
  p->set_name(name);
  switch (a.type) {
    case AttrType::kFloat: p->set_type(AttributeProto::FLOAT); p->set_f(a.f); break;
    case AttrType::kInt: p->set_type(AttributeProto::INT); p->set_i(a.i); break;
    case AttrType::kString: p->set_type(AttributeProto::STRING); p->set_s(a.s); break;
    case AttrType::kFloats:
      p->set_type(AttributeProto::FLOATS);
      for (float v : a.floats) p->add_floats(v);
      break;
    case AttrType::kInts:
      p->set_type(AttributeProto::INTS);
      for (int64_t v : a.ints) p->add_ints(v);
      break;
    case AttrType::kStrings:
      p->set_type(AttributeProto::STRINGS);
      for (const auto& v : a.strings) p->add_strings(v);
      break;
    case AttrType::kType: {
      p->set_type(AttributeProto::TYPE_PROTO);
      onnx::TypeProto* tp = p->mutable_tp();
      if (a.type_kind == ValueKind::kSequence) tp = tp->mutable_sequence_type()->mutable_elem_type();
      onnx::TypeProto::Tensor* tt = tp->mutable_tensor_type();
      if (a.type_dtype != DType::kUndefined) tt->set_elem_type(static_cast<int32_t>(a.type_dtype));
      break;
    }
    case AttrType::kTensor:
      p->set_type(AttributeProto::TENSOR);
      return TensorToProto(a.t, "", plan, p->mutable_t()).WithContext("attribute '" + name + "'");
    default:
      return Unimplemented("attribute '" + name + "' has type " + AttrTypeName(a.type) + ", which cannot be saved");
  }
  return Status::Ok();
}

}  // namespace whittle::onnx_io
