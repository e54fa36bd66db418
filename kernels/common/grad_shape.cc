#include "kernels/common/grad_shape.h"

#include <initializer_list>
#include <string>

namespace whittle {
namespace {

Status CheckFloat32(const char* op, std::initializer_list<const Tensor*> ts) {
  for (const Tensor* t : ts)
    if (t->dtype() != DType::kFloat32)
      return InvalidArgument(std::string(op) + " supports float32 only, got " + DTypeName(t->dtype()));
  return Status::Ok();
}

// dY must be [N, channels, g.out...].
Status CheckDy(const char* op, const Tensor& dy, int64_t batch, int64_t channels, const WindowGeometry& g) {
  Dims want{batch, channels};
  for (int i = 0; i < g.spatial; ++i) want.push_back(g.out[i]);
  if (dy.dims() != want)
    return InvalidArgument(std::string(op) + ": dY " + DimsToString(dy.dims()) + " is not the forward output's shape " +
                           DimsToString(want));
  return Status::Ok();
}

Status CheckDxIsX(const char* op, const Tensor& dx, const Tensor& x) {
  if (dx.dims() != x.dims())
    return Internal(std::string(op) + " output " + DimsToString(dx.dims()) + " is not X's shape " +
                    DimsToString(x.dims()));
  return Status::Ok();
}

}  // namespace

Status ResolveConvGradInput(const ConvGradAttrs& a, const Tensor& dy, const Tensor& w, const Tensor& x,
                            const Tensor& dx, ConvShape* s) {
  WH_RETURN_IF_ERROR(CheckFloat32("ConvGradInput", {&dy, &w, &x, &dx}));
  WH_RETURN_IF_ERROR(ResolveConvShape(a.window, a.group, x, w, nullptr, s));
  WH_RETURN_IF_ERROR(CheckDy("ConvGradInput", dy, s->batch, s->out_channels, s->geo));
  return CheckDxIsX("ConvGradInput", dx, x);
}

Status ResolveConvGradWeight(const ConvGradAttrs& a, const Tensor& x, const Tensor& dy, const Tensor& dw,
                             ConvShape* s) {
  WH_RETURN_IF_ERROR(CheckFloat32("ConvGradWeight", {&x, &dy, &dw}));
  // dw's dims are W's: the same checks as the forward Conv's.
  WH_RETURN_IF_ERROR(ResolveConvShape(a.window, a.group, x, dw, nullptr, s));
  return CheckDy("ConvGradWeight", dy, s->batch, s->out_channels, s->geo);
}

Status ResolvePoolGrad(const char* op, const WindowAttrs& a, const Tensor& x, const Tensor& dy, const Tensor& dx,
                       WindowGeometry* g) {
  WH_RETURN_IF_ERROR(CheckFloat32(op, {&x, &dy, &dx}));
  if (x.rank() < 3) return InvalidArgument(std::string(op) + " X must have rank >= 3, got " + DimsToString(x.dims()));
  if (a.kernel_shape.size() != static_cast<size_t>(x.rank() - 2))
    return InvalidArgument(std::string(op) + " kernel_shape has " + std::to_string(a.kernel_shape.size()) +
                           " values for X " + DimsToString(x.dims()));
  WH_RETURN_IF_ERROR(ResolveWindow(a, x.dims().data() + 2, a.kernel_shape.data(), x.rank() - 2, g));
  WH_RETURN_IF_ERROR(CheckDy(op, dy, x.dim(0), x.dim(1), *g));
  return CheckDxIsX(op, dx, x);
}

Status CheckReluGrad(const Tensor& y, const Tensor& dy, const Tensor& dx) {
  WH_RETURN_IF_ERROR(CheckFloat32("ReluGrad", {&y, &dy, &dx}));
  if (y.dims() != dy.dims())
    return InvalidArgument("ReluGrad: Y " + DimsToString(y.dims()) + " and dY " + DimsToString(dy.dims()) +
                           " must have the same shape");
  if (dx.dims() != dy.dims())
    return Internal("ReluGrad output " + DimsToString(dx.dims()) + " is not dY's shape " + DimsToString(dy.dims()));
  return Status::Ok();
}

Status ResolveGatherGrad(int64_t axis, const Tensor& x, const Tensor& indices, const Tensor& dy, const Tensor& dx,
                         GatherGradShape* s) {
  WH_RETURN_IF_ERROR(CheckFloat32("GatherGrad", {&x, &dy, &dx}));
  if (indices.dtype() != DType::kInt64 && indices.dtype() != DType::kInt32)
    return InvalidArgument(std::string("GatherGrad indices must be int32 or int64, got ") + DTypeName(indices.dtype()));
  const int64_t r = x.rank();
  if (r < 1) return InvalidArgument("GatherGrad X must have rank >= 1");
  if (axis < 0) axis += r;
  if (axis < 0 || axis >= r) return InvalidArgument("GatherGrad axis " + std::to_string(axis) + " is out of range");
  Dims want(x.dims().begin(), x.dims().begin() + axis);
  want.insert(want.end(), indices.dims().begin(), indices.dims().end());
  want.insert(want.end(), x.dims().begin() + axis + 1, x.dims().end());
  if (dy.dims() != want)
    return InvalidArgument("GatherGrad: dY " + DimsToString(dy.dims()) + " is not the forward output's shape " +
                           DimsToString(want));
  WH_RETURN_IF_ERROR(CheckDxIsX("GatherGrad", dx, x));
  s->outer = 1;
  s->inner = 1;
  for (int64_t i = 0; i < axis; ++i) s->outer *= x.dim(i);
  for (int64_t i = axis + 1; i < r; ++i) s->inner *= x.dim(i);
  const int64_t n = x.dim(axis), ni = indices.numel();
  s->n = n;
  s->idx.resize(static_cast<size_t>(ni));
  for (int64_t j = 0; j < ni; ++j) {
    const int64_t v = indices.dtype() == DType::kInt64 ? indices.data<int64_t>()[j] : indices.data<int32_t>()[j];
    if (v < -n || v >= n)
      return InvalidArgument("GatherGrad index " + std::to_string(v) + " is out of range for axis size " +
                             std::to_string(n));
    s->idx[static_cast<size_t>(j)] = v < 0 ? v + n : v;
  }
  return Status::Ok();
}

}  // namespace whittle
