#include "runtime/quant_validation.h"

#include <cmath>
#include <cstdio>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "kernels/common/int4.h"

namespace whittle {
namespace {

// Which axis of the quantized data a per-axis parameter runs along.
enum class AxisRule {
  kPerTensor,  // only a scalar (or one-element) parameter is allowed
  kAttrAxis,   // the node's 'axis' attribute, default 1 (QuantizeLinear / DequantizeLinear)
  kFirst,      // dimension 0 (convolution weights: output channels)
  kLast,       // the last dimension (matmul B: columns)
  kRow,        // the second-to-last dimension (matmul A: rows)
};

// One quantized tensor of a node and its parameters. data < 0 means the node's output 0
// (QuantizeLinear's y, QLinear*'s y), whose type the zero point decides.
struct ParamGroup {
  int data, scale, zp;
  const char* data_name;
  const char* scale_name;
  const char* zp_name;
  AxisRule rule;
};

std::vector<ParamGroup> GroupsFor(const Node& n) {
  using R = AxisRule;
  if (n.domain.empty()) {
    if (n.op_type == "QuantizeLinear") return {{-1, 1, 2, "y", "y_scale", "y_zero_point", R::kAttrAxis}};
    if (n.op_type == "DequantizeLinear") return {{0, 1, 2, "x", "x_scale", "x_zero_point", R::kAttrAxis}};
    if (n.op_type == "QLinearConv")
      return {{0, 1, 2, "x", "x_scale", "x_zero_point", R::kPerTensor},
              {3, 4, 5, "w", "w_scale", "w_zero_point", R::kFirst},
              {-1, 6, 7, "y", "y_scale", "y_zero_point", R::kPerTensor}};
    if (n.op_type == "QLinearMatMul")
      return {{0, 1, 2, "a", "a_scale", "a_zero_point", R::kRow},
              {3, 4, 5, "b", "b_scale", "b_zero_point", R::kLast},
              {-1, 6, 7, "y", "y_scale", "y_zero_point", R::kPerTensor}};
    if (n.op_type == "MatMulInteger")
      return {{0, -1, 2, "A", "", "a_zero_point", R::kRow}, {1, -1, 3, "B", "", "b_zero_point", R::kLast}};
    if (n.op_type == "ConvInteger")
      return {{0, -1, 2, "x", "", "x_zero_point", R::kPerTensor}, {1, -1, 3, "w", "", "w_zero_point", R::kFirst}};
  } else if (n.domain == kWhittleDomain) {
    if (n.op_type == "QConv")
      return {{0, 1, 2, "x", "x_scale", "x_zero_point", R::kPerTensor},
              {3, 4, 5, "w", "w_scale", "w_zero_point", R::kFirst},
              {-1, 6, 7, "y", "y_scale", "y_zero_point", R::kPerTensor}};
    if (n.op_type == "QGemm")
      return {{0, 1, 2, "a", "a_scale", "a_zero_point", R::kPerTensor},
              {3, 4, 5, "b", "b_scale", "b_zero_point", R::kLast},
              {-1, 6, 7, "y", "y_scale", "y_zero_point", R::kPerTensor}};
  }
  return {};
}

std::string Num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

// Integer range of a quantized data type; nullopt for anything else.
std::optional<std::pair<int64_t, int64_t>> IntRange(DType t) {
  switch (t) {
    case DType::kInt4: return std::make_pair<int64_t, int64_t>(-8, 7);
    case DType::kUInt4: return std::make_pair<int64_t, int64_t>(0, 15);
    case DType::kInt8: return std::make_pair<int64_t, int64_t>(-128, 127);
    case DType::kUInt8: return std::make_pair<int64_t, int64_t>(0, 255);
    case DType::kInt16: return std::make_pair<int64_t, int64_t>(-32768, 32767);
    case DType::kUInt16: return std::make_pair<int64_t, int64_t>(0, 65535);
    case DType::kInt32:
      return std::make_pair<int64_t, int64_t>(std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max());
    case DType::kInt64:
      return std::make_pair(std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max());
    default: return std::nullopt;
  }
}

// Element i of an integer tensor as int64 (the dtype is one IntRange knows).
int64_t IntAt(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DType::kInt4: return int4::Int4At(static_cast<const uint8_t*>(t.raw_data()), i);
    case DType::kUInt4: return int4::UInt4At(static_cast<const uint8_t*>(t.raw_data()), i);
    case DType::kInt8: return t.data<int8_t>()[i];
    case DType::kUInt8: return t.data<uint8_t>()[i];
    case DType::kInt16: return t.data<int16_t>()[i];
    case DType::kUInt16: return t.data<uint16_t>()[i];
    case DType::kInt32: return t.data<int32_t>()[i];
    case DType::kInt64: return t.data<int64_t>()[i];
    default: WH_CHECK(false && "IntAt on a non-integer tensor"); return 0;
  }
}

class NodeChecker {
 public:
  NodeChecker(const Graph& g, const Node& n) : g_(g), n_(n) {}

  Status Check(const ParamGroup& p) const {
    const Tensor* scale = Const(p.scale);
    const Tensor* zp = Const(p.zp);
    if (scale) WH_RETURN_IF_ERROR(CheckScale(p, *scale));
    const DType data_dt = DataDType(p);
    if (zp) WH_RETURN_IF_ERROR(CheckZeroPoint(p, *zp, data_dt));
    if (scale && zp && scale->numel() != zp->numel())
      return Error(std::string(p.scale_name) + " has " + std::to_string(scale->numel()) + " entries but " + p.zp_name +
                   " has " + std::to_string(zp->numel()) + "; they must have the same length");
    const Tensor* params = scale ? scale : zp;
    if (!params) return Status::Ok();
    // Blocked parameters (DequantizeLinear 21) have x's rank; inference checks their shape.
    if (p.rule == AxisRule::kAttrAxis && n_.attrs.GetInt("block_size", 0) > 0) return Status::Ok();
    const char* pname = scale ? p.scale_name : p.zp_name;
    if (params->rank() > 1)
      return Error(std::string(pname) + " has shape " + DimsToString(params->dims()) +
                   "; quantization parameters must be a scalar or 1-D");
    if (params->numel() == 1) return Status::Ok();
    return CheckPerAxis(p, pname, params->numel());
  }

 private:
  Status Error(const std::string& what) const { return InvalidArgument(n_.DebugName() + ": " + what); }

  int InputId(int i) const {
    return i >= 0 && static_cast<size_t>(i) < n_.inputs.size() ? n_.inputs[static_cast<size_t>(i)] : -1;
  }
  const Tensor* Const(int i) const {
    const int id = InputId(i);
    if (id < 0) return nullptr;
    const Value& v = g_.value(id);
    return v.initializer ? &*v.initializer : nullptr;
  }
  // The initializer's name, for messages: "x_scale (initializer 'fc1_scale')".
  std::string Named(const char* input, int i) const {
    const int id = InputId(i);
    return std::string(input) + (id >= 0 ? " ('" + g_.value(id).name + "')" : "");
  }

  DType DataDType(const ParamGroup& p) const {
    if (p.data >= 0) {
      const int id = InputId(p.data);
      return id >= 0 ? g_.value(id).dtype : DType::kUndefined;
    }
    return DType::kUndefined;  // an output: its zero point decides the type
  }

  std::optional<SymShape> DataShape(const ParamGroup& p) const {
    const int id = p.data >= 0 ? InputId(p.data) : InputId(0);  // Q's y has x's shape
    if (id < 0) return std::nullopt;
    if (p.data < 0 && n_.op_type != "QuantizeLinear") {
      const int out = n_.outputs.empty() ? -1 : n_.outputs[0];
      return out >= 0 ? g_.value(out).shape : std::nullopt;
    }
    const Value& v = g_.value(id);
    if (v.initializer) return ToSymShape(v.initializer->dims());
    return v.shape;
  }

  Status CheckScale(const ParamGroup& p, const Tensor& s) const {
    if (s.dtype() != DType::kFloat32)
      return Error(Named(p.scale_name, p.scale) + " has type " + DTypeName(s.dtype()) + "; a scale must be float32");
    const float* v = s.data<float>();
    for (int64_t i = 0; i < s.numel(); ++i)
      if (!std::isfinite(v[i]) || !(v[i] > 0.f))
        return Error(Named(p.scale_name, p.scale) + (s.rank() == 0 ? "" : "[" + std::to_string(i) + "]") + " = " +
                     Num(v[i]) + "; a scale must be finite and > 0");
    return Status::Ok();
  }

  Status CheckZeroPoint(const ParamGroup& p, const Tensor& zp, DType data_dt) const {
    const std::string zname = Named(p.zp_name, p.zp);
    const auto zr = IntRange(zp.dtype());
    if (!zr)
      return Error(zname + " has type " + DTypeName(zp.dtype()) + "; a zero point must be an integer of " +
                   p.data_name + "'s type");
    if (data_dt == DType::kUndefined) {
      // An output's type is the zero point's: only 8-bit types are quantized outputs here.
      if (p.data < 0 && zp.dtype() != DType::kInt8 && zp.dtype() != DType::kUInt8)
        return Error(zname + " has type " + DTypeName(zp.dtype()) + "; " + p.data_name +
                     "'s zero point must be int8 or uint8");
      return Status::Ok();
    }
    const auto dr = IntRange(data_dt);
    if (dr) {
      for (int64_t i = 0; i < zp.numel(); ++i) {
        const int64_t v = IntAt(zp, i);
        if (v < dr->first || v > dr->second)
          return Error(zname + (zp.rank() == 0 ? "" : "[" + std::to_string(i) + "]") + " = " + std::to_string(v) +
                       " is out of range for " + DTypeName(data_dt) + " data [" + std::to_string(dr->first) + ", " +
                       std::to_string(dr->second) + "]");
      }
    }
    if (zp.dtype() != data_dt)
      return Error(zname + " has type " + DTypeName(zp.dtype()) + " but " + p.data_name + " is " +
                   DTypeName(data_dt) + "; a zero point must have the quantized data's type");
    if (data_dt == DType::kInt32) {
      for (int64_t i = 0; i < zp.numel(); ++i)
        if (IntAt(zp, i) != 0)
          return Error(zname + (zp.rank() == 0 ? "" : "[" + std::to_string(i) + "]") + " = " +
                       std::to_string(IntAt(zp, i)) + "; the zero point of int32 data must be 0");
    }
    return Status::Ok();
  }

  Status CheckPerAxis(const ParamGroup& p, const char* pname, int64_t count) const {
    if (p.rule == AxisRule::kPerTensor)
      return Error(std::string(pname) + " has " + std::to_string(count) + " entries; " + p.data_name +
                   " must be quantized per tensor (one scale and zero point)");
    if (p.rule == AxisRule::kAttrAxis && g_.OpsetFor(n_.domain) < 13)
      return Error(std::string(pname) + " has " + std::to_string(count) + " entries; per-axis parameters need opset 13");
    const std::optional<SymShape> shape = DataShape(p);
    if (!shape) return Status::Ok();
    const int64_t rank = static_cast<int64_t>(shape->size());
    int64_t axis = 0;
    std::string axis_what;
    switch (p.rule) {
      case AxisRule::kAttrAxis: {
        const int64_t a = n_.attrs.GetInt("axis", 1);
        if (a < -rank || a >= rank)
          return Error("axis " + std::to_string(a) + " is out of range for " + p.data_name + " of rank " +
                       std::to_string(rank) + " (per-axis " + pname + " with " + std::to_string(count) + " entries)");
        axis = a < 0 ? a + rank : a;
        break;
      }
      case AxisRule::kFirst: axis = 0; break;
      case AxisRule::kLast: axis = rank - 1; break;
      case AxisRule::kRow: axis = rank - 2; break;
      case AxisRule::kPerTensor: break;
    }
    if (axis < 0 || axis >= rank)
      return Error(std::string(pname) + " has " + std::to_string(count) + " entries but " + p.data_name +
                   " has rank " + std::to_string(rank) + ", too small for per-axis parameters");
    const Dim& d = (*shape)[static_cast<size_t>(axis)];
    if (d.known() && d.value != count)
      return Error(std::string(pname) + " has " + std::to_string(count) + " entries but " + p.data_name + " has " +
                   std::to_string(d.value) + " along axis " + std::to_string(axis) + " (shape " +
                   SymShapeToString(*shape) + "); per-axis parameters need one entry per slice");
    return Status::Ok();
  }

  const Graph& g_;
  const Node& n_;
};

}  // namespace

Status ValidateQuantParams(const Graph& g) {
  for (const Node& n : g.nodes()) {
    const std::vector<ParamGroup> groups = GroupsFor(n);
    if (groups.empty()) continue;
    NodeChecker checker(g, n);
    for (const ParamGroup& p : groups) WH_RETURN_IF_ERROR(checker.Check(p));
  }
  return Status::Ok();
}

}  // namespace whittle
