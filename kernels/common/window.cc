#include "kernels/common/window.h"

#include <string>

namespace whittle {
namespace {

std::string Str(int64_t v) { return std::to_string(v); }

}  // namespace

StatusOr<ConvAttrs> ParseConvAttrs(const KernelInit& init) {
  const DType dt = init.input_dtypes.empty() ? DType::kUndefined : init.input_dtypes[0];
  if (dt != DType::kFloat32 && dt != DType::kFloat64)
    return Unimplemented(std::string("Conv supports float and double, got ") + DTypeName(dt));
  ConvAttrs c;
  WH_ASSIGN_OR_RETURN(c.window, ParseWindowAttrs(init.attrs));
  c.act = FusedActivation::FromAttrs(init.attrs);
  if (c.act.kind != FusedActivation::kNone && dt != DType::kFloat32)
    return Unimplemented("a fused activation needs float32 Conv");
  c.group = init.attrs.GetInt("group", 1);
  return c;
}

StatusOr<ConvTransposeAttrs> ParseConvTransposeAttrs(const KernelInit& init) {
  const DType dt = init.input_dtypes.empty() ? DType::kUndefined : init.input_dtypes[0];
  if (dt != DType::kFloat32 && dt != DType::kFloat64)
    return Unimplemented(std::string("ConvTranspose supports float and double, got ") + DTypeName(dt));
  ConvTransposeAttrs c;
  WH_ASSIGN_OR_RETURN(c.window, ParseWindowAttrs(init.attrs));
  c.group = init.attrs.GetInt("group", 1);
  if (c.group < 1) return InvalidArgument("group must be >= 1, got " + Str(c.group));
  c.output_padding = init.attrs.GetInts("output_padding");
  c.output_shape = init.attrs.GetInts("output_shape");
  for (int64_t v : c.output_padding)
    if (v < 0) return InvalidArgument("output_padding must be >= 0, got " + Str(v));
  for (int64_t v : c.output_shape)
    if (v <= 0) return InvalidArgument("output_shape values must be > 0, got " + Str(v));
  return c;
}

bool PoolSupportsDType(PoolKind kind, DType t) {
  if (t == DType::kFloat32 || t == DType::kFloat64) return true;
  return kind == PoolKind::kMax && (t == DType::kInt8 || t == DType::kUInt8);
}

StatusOr<PoolAttrs> ParsePoolAttrs(PoolKind kind, const KernelInit& init) {
  const DType dt = init.input_dtypes.empty() ? DType::kUndefined : init.input_dtypes[0];
  if (!PoolSupportsDType(kind, dt))
    return Unimplemented(std::string("pooling does not support ") + DTypeName(dt));
  PoolAttrs p;
  p.kind = kind;
  if (kind == PoolKind::kMax || kind == PoolKind::kAverage) {
    WH_ASSIGN_OR_RETURN(p.window, ParseWindowAttrs(init.attrs));
    if (p.window.kernel_shape.empty()) return InvalidArgument("kernel_shape is required");
    if (kind == PoolKind::kMax) p.col_major_indices = init.attrs.GetInt("storage_order", 0) != 0;
    else p.count_include_pad = init.attrs.GetInt("count_include_pad", 0) != 0;
  }
  return p;
}

}  // namespace whittle
