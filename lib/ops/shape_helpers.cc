#include "lib/ops/shape_helpers.h"

#include <algorithm>

namespace whittle {

StatusOr<SymShape> BroadcastShapes(const SymShape& a, const SymShape& b) {
  size_t r = std::max(a.size(), b.size());
  SymShape out(r);
  for (size_t i = 0; i < r; ++i) {
    const Dim da = i < r - a.size() ? Dim(1) : a[i - (r - a.size())];
    const Dim db = i < r - b.size() ? Dim(1) : b[i - (r - b.size())];
    if (da.known() && db.known()) {
      if (da.value == db.value || db.value == 1) out[i] = da;
      else if (da.value == 1) out[i] = db;
      else return InvalidArgument("shapes " + SymShapeToString(a) + " and " + SymShapeToString(b) + " do not broadcast");
    } else if (da.known() && da.value == 1) {
      out[i] = db;
    } else if (db.known() && db.value == 1) {
      out[i] = da;
    } else if (!da.known() && !db.known() && da == db) {
      out[i] = da;
    } else if (da.known()) {
      out[i] = da;
    } else if (db.known()) {
      out[i] = db;
    } else {
      out[i] = Dim();
    }
  }
  return out;
}

StatusOr<std::optional<SymShape>> BroadcastInputs(const InferContext& ctx) {
  std::optional<SymShape> acc;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    if (!ctx.HasInput(i)) continue;
    const SymShape* s = ctx.InputShape(i);
    if (!s) return std::optional<SymShape>();
    if (!acc) {
      acc = *s;
    } else {
      auto r = BroadcastShapes(*acc, *s);
      if (!r.ok()) return ctx.Error(r.status().message());
      acc = *r;
    }
  }
  return acc;
}

StatusOr<int64_t> NormalizeAxis(int64_t axis, int64_t rank, const std::string& what) {
  if (axis < -rank || axis >= rank)
    return InvalidArgument(what + " " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  return axis < 0 ? axis + rank : axis;
}

std::vector<int64_t> ToInt64Vector(const Tensor& t) {
  std::vector<int64_t> r(static_cast<size_t>(t.numel()));
  if (t.dtype() == DType::kInt64) {
    const int64_t* p = t.data<int64_t>();
    std::copy(p, p + r.size(), r.begin());
  } else if (t.dtype() == DType::kInt32) {
    const int32_t* p = t.data<int32_t>();
    std::copy(p, p + r.size(), r.begin());
  } else {
    WH_CHECK(false && "ToInt64Vector on a non-integer tensor");
  }
  return r;
}

Status InferSameAsBroadcast(InferContext& ctx) {
  WH_ASSIGN_OR_RETURN(std::optional<SymShape> s, BroadcastInputs(ctx));
  ctx.SetOutput(0, ctx.InputDType(0), s);
  return Status::Ok();
}

Status InferSameAsInput0(InferContext& ctx) {
  const SymShape* s = ctx.InputShape(0);
  ctx.SetOutput(0, ctx.InputDType(0), s ? std::optional<SymShape>(*s) : std::nullopt);
  return Status::Ok();
}

Status CheckInputsMatchX(const InferContext& ctx, int first, int last) {
  const DType dt = ctx.InputDType(0);
  for (int i = first; i <= last; ++i)
    if (ctx.HasInput(i) && ctx.InputDType(i) != DType::kUndefined && dt != DType::kUndefined &&
        ctx.InputDType(i) != dt)
      return ctx.Error("input " + std::to_string(i) + " is " + DTypeName(ctx.InputDType(i)) + " but X is " +
                       DTypeName(dt));
  return Status::Ok();
}

Status CheckLinearFeatures(const Node& node, int64_t n, int64_t k) {
  if (n < 1 || k < 1)
    return InvalidArgument(node.DebugName() + ": out_features and in_features must be >= 1, got " + std::to_string(n) +
                           " and " + std::to_string(k));
  return Status::Ok();
}

Status InferLinearFeaturesOutput(InferContext& ctx, int64_t n, int64_t k) {
  const SymShape* a = ctx.InputShape(0);
  if (!a) {
    ctx.SetOutput(0, DType::kFloat32, std::nullopt);
    return Status::Ok();
  }
  if (a->empty() || (a->back().known() && a->back().value != k))
    return ctx.Error("A " + SymShapeToString(*a) + " must end in in_features = " + std::to_string(k));
  SymShape y = *a;
  y.back() = Dim(n);
  ctx.SetOutput(0, DType::kFloat32, y);
  return Status::Ok();
}

StatusOr<SymShape> UnknownDimsOfRank(const InferContext& ctx, int64_t rank) {
  if (rank < 0 || rank > kMaxInferredRank)
    return ctx.Error("the shape input has " + std::to_string(rank) + " elements: a rank over " +
                     std::to_string(kMaxInferredRank) + " is not supported");
  return SymShape(static_cast<size_t>(rank), Dim());
}

}  // namespace whittle
