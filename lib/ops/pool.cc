// OpDefs for MaxPool (optional int64 Indices output), AveragePool, GlobalMaxPool and
// GlobalAveragePool. Window attributes and output sizes are shared with Conv (lib/ops/conv.cc).
#include <string>
#include <vector>

#include "lib/ops/op_def.h"
#include "lib/ops/window.h"

namespace whittle {


namespace {

Status CheckPool(const Node& node, int) { return CheckWindowAttributes(node); }

Status InferPool(InferContext& ctx) {
  const DType dt = ctx.InputDType(0);
  const SymShape* x = ctx.InputShape(0);
  if (!x) {
    ctx.SetOutput(0, dt, std::nullopt);
    if (ctx.HasOutput(1)) ctx.SetOutput(1, DType::kInt64, std::nullopt);
    return Status::Ok();
  }
  if (x->size() < 3) return ctx.Error("X must have rank >= 3 (N, C, spatial...), got " + SymShapeToString(*x));
  const std::vector<int64_t> kernel = ctx.attrs().GetInts("kernel_shape");
  if (kernel.size() != x->size() - 2)
    return ctx.Error("kernel_shape has " + std::to_string(kernel.size()) + " values for an input with " +
                     std::to_string(x->size() - 2) + " spatial dims");
  SymShape spatial;
  WH_RETURN_IF_ERROR(InferWindowOutput(ctx, SymShape(x->begin() + 2, x->end()), kernel, &spatial));
  SymShape out{(*x)[0], (*x)[1]};
  out.insert(out.end(), spatial.begin(), spatial.end());
  ctx.SetOutput(0, dt, out);
  if (ctx.HasOutput(1)) ctx.SetOutput(1, DType::kInt64, out);
  return Status::Ok();
}

Status InferGlobalPool(InferContext& ctx) {
  const SymShape* x = ctx.InputShape(0);
  if (x && x->size() < 3) return ctx.Error("X must have rank >= 3 (N, C, spatial...), got " + SymShapeToString(*x));
  std::optional<SymShape> out;
  if (x) {
    out = SymShape(x->size(), Dim(1));
    (*out)[0] = (*x)[0];
    (*out)[1] = (*x)[1];
  }
  ctx.SetOutput(0, ctx.InputDType(0), out);
  return Status::Ok();
}

}  // namespace

void RegisterPoolOps(OpRegistry& r) {
  OpDef max;
  max.op_type = "MaxPool";
  max.max_outputs = 2;
  max.attrs = {{"auto_pad", AttrType::kString},     {"ceil_mode", AttrType::kInt},
               {"dilations", AttrType::kInts},      {"kernel_shape", AttrType::kInts, true},
               {"pads", AttrType::kInts},           {"storage_order", AttrType::kInt},
               {"strides", AttrType::kInts}};
  max.check = CheckPool;
  max.infer = InferPool;
  r.Register(std::move(max));

  OpDef avg;
  avg.op_type = "AveragePool";
  avg.attrs = {{"auto_pad", AttrType::kString},     {"ceil_mode", AttrType::kInt},
               {"count_include_pad", AttrType::kInt}, {"kernel_shape", AttrType::kInts, true},
               {"pads", AttrType::kInts},           {"strides", AttrType::kInts}};
  avg.check = CheckPool;
  avg.infer = InferPool;
  r.Register(std::move(avg));

  for (const char* name : {"GlobalAveragePool", "GlobalMaxPool"}) {
    OpDef g;
    g.op_type = name;
    g.infer = InferGlobalPool;
    r.Register(std::move(g));
  }
}

}  // namespace whittle
