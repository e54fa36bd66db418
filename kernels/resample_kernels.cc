// Kernels for the resampling ops (Resize, Upsample). Each factory parses and checks the
// attributes once and picks init.backend's compute function from kResample (the reference, and
// the CPU's float32 path of kernels/cpu/resample.h); Compute reads the call's roi / scales / sizes, resolves them to one scale and
// one roi interval per axis of X, and calls it. Upsample and Resize-10 are Resize with the
// asymmetric coordinate transform and ResizeNearest::kSimple.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "kernels/common/dtype_dispatch.h"
#include "kernels/kernel.h"
#include "kernels/cpu/resample.h"
#include "kernels/reference/resample.h"
#include "kernels/resample_setup.h"

namespace whittle {
namespace {

using Factory = StatusOr<std::unique_ptr<OpKernel>>;

const BackendTable<ResampleFns> kResample{{Backend::kReference, &reference::kResampleFns},
                                          {Backend::kCpu, &cpu::kResampleFns}};

Status Bad(const KernelInit& init, const std::string& what) { return InvalidArgument(init.node_name + ": " + what); }

// The enum value named s in table; false when s is not there.
template <class E>
bool Lookup(const std::string& s, std::initializer_list<std::pair<const char*, E>> table, E* out) {
  for (const auto& [name, value] : table)
    if (s == name) {
      *out = value;
      return true;
    }
  return false;
}

}  // namespace

StatusOr<ResizeSetup> ParseResize(const KernelInit& init) {
  ResizeSetup s;
  s.opset = init.opset;
  const AttributeMap& a = init.attrs;
  const std::string mode = a.GetString("mode", "nearest");
  if (!Lookup(mode, {{"nearest", ResizeMode::kNearest}, {"linear", ResizeMode::kLinear}, {"cubic", ResizeMode::kCubic}},
              &s.params.mode) ||
      (init.opset < 11 && s.params.mode == ResizeMode::kCubic))
    return Bad(init, "unsupported mode '" + mode + "'");
  if (init.opset < 11) {  // Resize-10: Upsample's rules
    s.params.coord = ResizeCoord::kAsymmetric;
    s.params.nearest = ResizeNearest::kSimple;
    return s;
  }
  const std::string ctm = a.GetString("coordinate_transformation_mode", "half_pixel");
  if (!Lookup(ctm,
              {{"half_pixel", ResizeCoord::kHalfPixel},
               {"half_pixel_symmetric", ResizeCoord::kHalfPixelSymmetric},
               {"pytorch_half_pixel", ResizeCoord::kPytorchHalfPixel},
               {"align_corners", ResizeCoord::kAlignCorners},
               {"asymmetric", ResizeCoord::kAsymmetric},
               {"tf_half_pixel_for_nn", ResizeCoord::kTfHalfPixelForNN},
               {"tf_crop_and_resize", ResizeCoord::kTfCropAndResize}},
              &s.params.coord))
    return Bad(init, "unknown coordinate_transformation_mode '" + ctm + "'");
  const std::string nm = a.GetString("nearest_mode", "round_prefer_floor");
  if (!Lookup(nm,
              {{"round_prefer_floor", ResizeNearest::kRoundPreferFloor},
               {"round_prefer_ceil", ResizeNearest::kRoundPreferCeil},
               {"floor", ResizeNearest::kFloor},
               {"ceil", ResizeNearest::kCeil}},
              &s.params.nearest))
    return Bad(init, "unknown nearest_mode '" + nm + "'");
  s.params.cubic_coeff_a = a.GetFloat("cubic_coeff_a", -0.75f);
  s.params.exclude_outside = a.GetInt("exclude_outside", 0) != 0;
  s.params.antialias = a.GetInt("antialias", 0) != 0;
  s.params.extrapolation_value = a.GetFloat("extrapolation_value", 0.f);
  s.axes = a.GetInts("axes");
  const std::string policy = a.GetString("keep_aspect_ratio_policy", "stretch");
  using P = ResizeSetup::Policy;
  if (!Lookup(policy, {{"stretch", P::kStretch}, {"not_larger", P::kNotLarger}, {"not_smaller", P::kNotSmaller}},
              &s.policy))
    return Bad(init, "unknown keep_aspect_ratio_policy '" + policy + "'");
  return s;
}

namespace {

bool Given(const KernelContext& ctx, size_t i) {
  return i < ctx.inputs.size() && ctx.inputs[i] && ctx.inputs[i]->numel() > 0;
}

// Values of a float16/float/double tensor as double.
StatusOr<std::vector<double>> FloatValues(const Tensor& t, const char* what) {
  std::vector<double> v(static_cast<size_t>(t.numel()));
  switch (t.dtype()) {
    case DType::kFloat32:
      for (size_t i = 0; i < v.size(); ++i) v[i] = t.data<float>()[i];
      return v;
    case DType::kFloat64:
      for (size_t i = 0; i < v.size(); ++i) v[i] = t.data<double>()[i];
      return v;
    case DType::kFloat16:
      for (size_t i = 0; i < v.size(); ++i) v[i] = ew::HalfToFloat(static_cast<const uint16_t*>(t.raw_data())[i]);
      return v;
    default:
      return InvalidArgument(std::string(what) + " must be a float tensor, got " + DTypeName(t.dtype()));
  }
}

// The resized axes, normalised.
StatusOr<std::vector<size_t>> ResolveAxes(const std::vector<int64_t>& attr, int64_t rank) {
  std::vector<size_t> axes;
  if (attr.empty()) {
    for (int64_t d = 0; d < rank; ++d) axes.push_back(static_cast<size_t>(d));
    return axes;
  }
  for (int64_t a : attr) {
    WH_ASSIGN_OR_RETURN(int64_t n, KernelAxis(a, rank));
    axes.push_back(static_cast<size_t>(n));
  }
  return axes;
}

}  // namespace

Status ResolveResize(const ResizeSetup& s, const KernelContext& ctx, std::vector<double>* scales,
                     std::vector<double>* roi) {
  const Tensor& x = *ctx.inputs[0];
  const int64_t rank = x.rank();
  WH_ASSIGN_OR_RETURN(std::vector<size_t> axes, ResolveAxes(s.axes, rank));
  const size_t scales_i = s.opset < 11 ? 1 : 2, sizes_i = 3;
  scales->assign(static_cast<size_t>(rank), 1.0);
  if (Given(ctx, scales_i)) {
    const Tensor& t = *ctx.inputs[scales_i];
    if (t.dtype() != DType::kFloat32)
      return InvalidArgument(std::string("scales must be float, got ") + DTypeName(t.dtype()));
    if (t.numel() != static_cast<int64_t>(axes.size()))
      return InvalidArgument("scales has " + std::to_string(t.numel()) + " values, expected " +
                             std::to_string(axes.size()));
    for (size_t i = 0; i < axes.size(); ++i) (*scales)[axes[i]] = t.data<float>()[i];
  } else if (Given(ctx, sizes_i)) {
    const Tensor& t = *ctx.inputs[sizes_i];
    if (t.dtype() != DType::kInt64)
      return InvalidArgument(std::string("sizes must be int64, got ") + DTypeName(t.dtype()));
    if (t.numel() != static_cast<int64_t>(axes.size()))
      return InvalidArgument("sizes has " + std::to_string(t.numel()) + " values, expected " +
                             std::to_string(axes.size()));
    std::vector<double> ratio(axes.size());
    for (size_t i = 0; i < axes.size(); ++i) {
      const int64_t d = x.dims()[axes[i]];
      if (d == 0) return InvalidArgument("cannot resize the empty axis " + std::to_string(axes[i]) + " to a size");
      ratio[i] = static_cast<double>(t.data<int64_t>()[i]) / static_cast<double>(d);
    }
    if (s.policy != ResizeSetup::Policy::kStretch && !ratio.empty()) {
      const double k = s.policy == ResizeSetup::Policy::kNotLarger ? *std::min_element(ratio.begin(), ratio.end())
                                                                   : *std::max_element(ratio.begin(), ratio.end());
      std::fill(ratio.begin(), ratio.end(), k);
    }
    for (size_t i = 0; i < axes.size(); ++i) (*scales)[axes[i]] = ratio[i];
  } else {
    return InvalidArgument("one of 'scales' and 'sizes' must be given (non-empty)");
  }
  roi->clear();
  if (s.params.coord == ResizeCoord::kTfCropAndResize) {
    if (!Given(ctx, 1)) return InvalidArgument("coordinate_transformation_mode tf_crop_and_resize needs a roi");
    WH_ASSIGN_OR_RETURN(std::vector<double> v, FloatValues(*ctx.inputs[1], "roi"));
    if (v.size() != 2 * axes.size())
      return InvalidArgument("roi has " + std::to_string(v.size()) + " values, expected " +
                             std::to_string(2 * axes.size()));
    roi->assign(static_cast<size_t>(2 * rank), 0.0);
    for (int64_t d = 0; d < rank; ++d) (*roi)[static_cast<size_t>(rank + d)] = 1.0;
    for (size_t i = 0; i < axes.size(); ++i) {
      (*roi)[axes[i]] = v[i];
      (*roi)[static_cast<size_t>(rank) + axes[i]] = v[axes.size() + i];
    }
  }
  return Status::Ok();
}

namespace {

Factory MakeResize(const KernelInit& init) {
  WH_ASSIGN_OR_RETURN(const ResizeSetup setup, ParseResize(init));
  const auto resize = kResample.Pick(init.backend, &ResampleFns::resize);
  return WrapFnKernel([setup, resize](KernelContext& ctx) -> Status {
    std::vector<double> scales, roi;
    WH_RETURN_IF_ERROR(ResolveResize(setup, ctx, &scales, &roi));
    return resize(*ctx.inputs[0], scales, roi, setup.params, ctx.outputs[0]);
  });
}

Factory MakeUpsample(const KernelInit& init) {
  ResizeParams p;
  const std::string mode = init.attrs.GetString("mode", "nearest");
  if (!Lookup(mode, {{"nearest", ResizeMode::kNearest}, {"linear", ResizeMode::kLinear}}, &p.mode))
    return Bad(init, "mode must be nearest or linear, got '" + mode + "'");
  p.coord = ResizeCoord::kAsymmetric;
  p.nearest = ResizeNearest::kSimple;
  const std::vector<float> attr_scales = init.attrs.GetFloats("scales");
  const int opset = init.opset;
  const auto resize = kResample.Pick(init.backend, &ResampleFns::resize);
  return WrapFnKernel([p, attr_scales, opset, resize](KernelContext& ctx) -> Status {
    const Tensor& x = *ctx.inputs[0];
    std::vector<double> scales(attr_scales.begin(), attr_scales.end());
    if (opset >= 9) {
      if (ctx.inputs.size() < 2 || !ctx.inputs[1]) return InvalidArgument("Upsample needs its scales input");
      const Tensor& t = *ctx.inputs[1];
      if (t.dtype() != DType::kFloat32)
        return InvalidArgument(std::string("scales must be float, got ") + DTypeName(t.dtype()));
      scales.assign(t.data<float>(), t.data<float>() + t.numel());
    }
    if (scales.size() != static_cast<size_t>(x.rank()))
      return InvalidArgument("scales has " + std::to_string(scales.size()) + " values for an input of rank " +
                             std::to_string(x.rank()));
    return resize(x, scales, {}, p, ctx.outputs[0]);
  });
}

}  // namespace

void RegisterResampleKernels(KernelRegistry& r) {
  DeclareFamily(r, kResample, &ResampleFns::resize, "", "Resize", kNumericTypes, MakeResize);
  DeclareFamily(r, kResample, &ResampleFns::resize, "", "Upsample", kNumericTypes, MakeUpsample);
}

}  // namespace whittle
