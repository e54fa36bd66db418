// CUDA Gather, Concat, Cast, Where (kernels/cuda/movement_body.h), Slice and DepthToSpace (strided
// copies): the
// data-movement ops that exported graphs put between layers; and the training graph's Expand,
// Transpose (float32 strided copies) and Shape. Tensors of any dtype of 1, 2, 4 or 8 bytes move as words
// (Gather, Concat, Where); Cast converts between float32, int32, int64, uint8, int8 and bool.
// Anything else (strings, float16 casts, a rank over 8) declines to the CPU kernel. The shape
// arithmetic on Shape's output never gets here: a device session computes it on the host
// (runtime/session.cc).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "kernels/common/index.h"
#include "kernels/cuda/cuda_util.h"
#include "kernels/cuda/movement.h"
#include "kernels/cuda/movement_body.h"
#include "lib/ir/device.h"

namespace whittle::cuda {
namespace {

int WordBytes(DType dt) {
  if (dt == DType::kUndefined || dt == DType::kString) return 0;
  const size_t b = DTypeSize(dt);
  return b == 1 || b == 2 || b == 4 || b == 8 ? static_cast<int>(b) : 0;
}

bool CastTypeOf(DType dt, CastType* t) {
  switch (dt) {
    case DType::kFloat32: *t = CastType::kFloat32; return true;
    case DType::kInt32: *t = CastType::kInt32; return true;
    case DType::kInt64: *t = CastType::kInt64; return true;
    case DType::kUInt8: *t = CastType::kUInt8; return true;
    case DType::kInt8: *t = CastType::kInt8; return true;
    case DType::kBool: *t = CastType::kBool; return true;
    default: return false;
  }
}

// outer, the axis, inner of dims around `axis` (already in range).
void Split3(const Dims& d, int axis, int64_t* outer, int64_t* inner) {
  *outer = *inner = 1;
  for (int k = 0; k < axis; ++k) *outer *= d[static_cast<size_t>(k)];
  for (size_t k = static_cast<size_t>(axis) + 1; k < d.size(); ++k) *inner *= d[k];
}

// Gather: the indices stay on the device (int64 or int32; a constant is uploaded once at load
// like a weight). An index out of range gives zeros and is reported on the device
// (KernelContext::device_check), which the session turns into the CPU's OutOfRange error, naming
// the index, once the run's work is done: a Gather of token ids or of computed indices neither
// waits for the device mid-run nor keeps the run out of a CUDA graph. The first bad index a
// thread reports is the one named (the CPU names the first in order). Without a report to write
// into, the indices are downloaded and checked on the host first.
KernelOr MakeGather(const KernelInit& init) {
  const DType idt = InputDType(init, 1);
  const int bytes = WordBytes(InputDType(init, 0));
  if (bytes == 0 || (idt != DType::kInt64 && idt != DType::kInt32) || init.num_outputs != 1) return KernelOr(nullptr);
  const int64_t axis_attr = init.attrs.GetInt("axis", 0);
  return CheckingKernel(
      [axis_attr, bytes](KernelContext& ctx) -> Status {
        const Tensor& x = *ctx.inputs[0];
        const Tensor& idx = *ctx.inputs[1];
        const int64_t axis = axis_attr < 0 ? axis_attr + x.rank() : axis_attr;
        if (x.rank() < 1 || axis < 0 || axis >= x.rank())
          return InvalidArgument("Gather: axis " + std::to_string(axis_attr) + " is out of range");
        if (idx.dtype() != DType::kInt64 && idx.dtype() != DType::kInt32)
          return InvalidArgument("Gather indices must be int32 or int64");
        int64_t outer = 1, inner = 1;
        Split3(x.dims(), static_cast<int>(axis), &outer, &inner);
        if (ctx.outputs[0]->numel() != outer * idx.numel() * inner) return Internal("Gather: the output size differs");
        const int64_t d = x.dim(static_cast<int>(axis));
        // No element to report through (an empty outer or inner extent), or no report: the host checks.
        if (idx.numel() > 0 && (!ctx.device_check || ctx.outputs[0]->numel() == 0)) {
          WH_ASSIGN_OR_RETURN(Tensor host, idx.ToDevice(DeviceType::kCpu));
          WH_RETURN_IF_ERROR(ResolveGatherIndices(host, axis, d).status());
        }
        if (ctx.outputs[0]->numel() == 0) return Status::Ok();
        LaunchGather(x.raw_data(), idx.raw_data(), idx.dtype() == DType::kInt64, ctx.outputs[0]->raw_data(), bytes,
                     outer, d, idx.numel(), inner, GatherReport{ctx.device_check, ctx.check_tag, axis}, Stream());
        return Launched("Gather");
      },
      [](const int64_t* r) { return GatherIndexOutOfRange(r[1], r[2], r[3], r[4]); });
}

KernelOr MakeConcat(const KernelInit& init) {
  const int bytes = WordBytes(InputDType(init, 0));
  if (bytes == 0 || init.num_outputs != 1) return KernelOr(nullptr);
  for (size_t i = 1; i < init.input_dtypes.size(); ++i)
    if (init.input_dtypes[i] != init.input_dtypes[0]) return KernelOr(nullptr);
  const int64_t axis_attr = init.attrs.GetInt("axis", 0);
  return Kernel([axis_attr, bytes](KernelContext& ctx) -> Status {
    Tensor& y = *ctx.outputs[0];
    const int64_t axis = axis_attr < 0 ? axis_attr + y.rank() : axis_attr;
    if (y.rank() < 1 || axis < 0 || axis >= y.rank())
      return InvalidArgument("Concat: axis " + std::to_string(axis_attr) + " is out of range");
    int64_t outer = 1, inner = 1;
    Split3(y.dims(), static_cast<int>(axis), &outer, &inner);
    const int64_t out_row = y.dim(static_cast<int>(axis)) * inner;
    int64_t offset = 0;
    for (const Tensor* x : ctx.inputs) {
      if (!x) continue;
      if (x->rank() != y.rank()) return Internal("Concat: an input's rank differs from the output's");
      const int64_t piece_row = x->dim(static_cast<int>(axis)) * inner;
      if (offset + piece_row > out_row) return Internal("Concat: the inputs exceed the output");
      LaunchConcatPiece(x->raw_data(), y.raw_data(), bytes, outer, piece_row, out_row, offset, Stream());
      offset += piece_row;
    }
    if (offset != out_row) return Internal("Concat: the inputs do not fill the output");
    return Launched("Concat");
  });
}

KernelOr MakeCast(const KernelInit& init) {
  CastType from, to;
  if (init.num_outputs != 1 || !CastTypeOf(InputDType(init, 0), &from) ||
      !CastTypeOf(static_cast<DType>(init.attrs.GetInt("to", 0)), &to))
    return KernelOr(nullptr);
  return Kernel([from, to](KernelContext& ctx) -> Status {
    const Tensor& x = *ctx.inputs[0];
    if (ctx.outputs[0]->numel() != x.numel()) return Internal("Cast: the output size differs");
    LaunchCast(x.raw_data(), from, ctx.outputs[0]->raw_data(), to, x.numel(), Stream());
    return Launched("Cast");
  });
}

KernelOr MakeWhere(const KernelInit& init) {
  const int bytes = WordBytes(InputDType(init, 1));
  if (InputDType(init, 0) != DType::kBool || bytes == 0 || InputDType(init, 2) != InputDType(init, 1) ||
      init.num_outputs != 1)
    return KernelOr(nullptr);
  return Kernel([bytes](KernelContext& ctx) -> Status {
    Tensor& out = *ctx.outputs[0];
    Dims d = out.dims();
    if (d.empty()) d = {1};
    if (d.size() > static_cast<size_t>(kMaxRank)) return Unimplemented("CUDA Where takes up to 8 dims");
    WhereShape s;
    s.rank = static_cast<int>(d.size());
    for (int k = 0; k < s.rank; ++k) s.dims[k] = d[static_cast<size_t>(k)];
    BroadcastStrides(ctx.inputs[0]->dims(), d, s.c_strides);
    BroadcastStrides(ctx.inputs[1]->dims(), d, s.x_strides);
    BroadcastStrides(ctx.inputs[2]->dims(), d, s.y_strides);
    LaunchWhere(ctx.inputs[0]->raw_data(), ctx.inputs[1]->raw_data(), ctx.inputs[2]->raw_data(), out.raw_data(), bytes,
                s, out.numel(), Stream());
    return Launched("Where");
  });
}

// Slice of float32 x: y's index walks x from the first selected element at x's strides times
// the steps (a strided copy). starts, ends, axes and steps are read on the host (HostInputs):
// they decide the launch, and a device session keeps the exporters' computed ones there.
KernelOr MakeSlice(const KernelInit& init) {
  if (InputDType(init, 0) != DType::kFloat32 || init.num_outputs != 1) return KernelOr(nullptr);
  const int opset = init.opset;
  const std::vector<int64_t> starts_attr = init.attrs.GetInts("starts", {}), ends_attr = init.attrs.GetInts("ends", {}),
                             axes_attr = init.attrs.GetInts("axes", {});
  return Kernel(
      [=](KernelContext& ctx) -> Status {
        const Tensor& x = *ctx.inputs[0];
        Tensor& y = *ctx.outputs[0];
        std::vector<int64_t> starts = starts_attr, ends = ends_attr, axes = axes_attr, steps;
        if (opset >= 10) {
          auto in = [&ctx](size_t i) { return i < ctx.inputs.size() ? ctx.inputs[i] : nullptr; };
          WH_ASSIGN_OR_RETURN(starts, IndexValues(in(1), "starts"));
          WH_ASSIGN_OR_RETURN(ends, IndexValues(in(2), "ends"));
          WH_ASSIGN_OR_RETURN(axes, IndexValues(in(3), "axes"));
          WH_ASSIGN_OR_RETURN(steps, IndexValues(in(4), "steps"));
        }
        WH_ASSIGN_OR_RETURN(SliceParams p, ResolveSlice(x.dims(), starts, ends, axes, steps));
        if (x.rank() > kMaxRank) return Unimplemented("CUDA Slice takes up to 8 dims");
        if (y.numel() == 0) return Status::Ok();
        BroadcastShape s;
        int64_t offset = 0;
        if (!SliceCopyShape(x.dims(), p, y.dims(), &s, &offset)) return Internal("Slice: the output size differs");
        LaunchStridedCopy(x.data<float>() + offset, y.data<float>(), s, y.numel(), Stream());
        return Launched("Slice");
      },
      init.opset >= 10 ? 0b11110 : 0);
}

// DepthToSpace of float32 x (DCR or CRD) as one strided copy.
KernelOr MakeDepthToSpace(const KernelInit& init) {
  const int64_t b = init.attrs.GetInt("blocksize", 0);
  const std::string mode = init.attrs.GetString("mode", "DCR");
  if (InputDType(init, 0) != DType::kFloat32 || b < 1 || (mode != "DCR" && mode != "CRD")) return KernelOr(nullptr);
  const bool crd = mode == "CRD";
  return Kernel([b, crd](KernelContext& ctx) -> Status {
    const Tensor& x = *ctx.inputs[0];
    Tensor& y = *ctx.outputs[0];
    BroadcastShape s;
    if (!DepthToSpaceCopyShape(x.dims(), b, crd, &s) || y.numel() != x.numel())
      return InvalidArgument("DepthToSpace: " + DimsToString(x.dims()) + " is not [N, C*" + std::to_string(b * b) + ", H, W]");
    LaunchStridedCopy(x.data<float>(), y.data<float>(), s, y.numel(), Stream());
    return Launched("DepthToSpace");
  });
}

// ConstantOfShape: the value's bytes filled over the output; the shape input is read on the host
// (HostInputs: it is the shape arithmetic's output, which stays there).
KernelOr MakeConstantOfShape(const KernelInit& init) {
  Tensor value = Tensor::Scalar<float>(0.f);
  if (const Tensor* v = init.attrs.GetTensor("value")) {
    if (!v->defined() || v->numel() != 1 || v->device() != DeviceType::kCpu) return KernelOr(nullptr);
    value = *v;
  }
  const int bytes = WordBytes(value.dtype());
  if (bytes == 0) return KernelOr(nullptr);
  uint64_t bits = 0;
  std::memcpy(&bits, value.raw_data(), static_cast<size_t>(bytes));
  return Kernel(
      [bytes, bits](KernelContext& ctx) -> Status {
        LaunchFill(ctx.outputs[0]->raw_data(), bytes, bits, ctx.outputs[0]->numel(), Stream());
        return Launched("ConstantOfShape");
      },
      0b1);
}

// Split of float32 x along an axis: output k is the slice of x at the sizes the outputs' dims
// give (shape inference resolved the split input or attribute), one strided copy each
// (SplitCopyShapes). The split input is not read (HostInputs: not uploaded).
KernelOr MakeSplit(const KernelInit& init) {
  if (InputDType(init, 0) != DType::kFloat32) return KernelOr(nullptr);
  const int64_t axis_attr = init.attrs.GetInt("axis", 0);
  return Kernel(
      [axis_attr](KernelContext& ctx) -> Status {
        const Tensor& x = *ctx.inputs[0];
        const int64_t axis = axis_attr < 0 ? axis_attr + x.rank() : axis_attr;
        std::vector<Dims> dims;
        for (Tensor* y : ctx.outputs) {
          if (!y) return Unimplemented("the CUDA Split needs every output");
          dims.push_back(y->dims());
        }
        std::vector<std::pair<BroadcastShape, int64_t>> copies;
        if (x.rank() > kMaxRank || !SplitCopyShapes(x.dims(), axis, dims, &copies))
          return InvalidArgument("Split: the outputs do not tile axis " + std::to_string(axis_attr) + " of " + DimsToString(x.dims()));
        for (size_t k = 0; k < copies.size(); ++k)
          LaunchStridedCopy(x.data<float>() + copies[k].second, ctx.outputs[k]->data<float>(), copies[k].first,
                            ctx.outputs[k]->numel(), Stream());
        return Launched("Split");
      },
      0b10);
}

// Pad of float32 x (constant, reflect, edge, wrap): per axis a table of the input index each
// output index reads, built on the host by the CPU's PadSourceIndex and uploaded once per shape;
// pads and the constant are read on the host (HostInputs). The axes input (opset 18) declines.
struct PadCache {
  std::mutex mu;
  std::map<std::vector<int64_t>, std::pair<std::shared_ptr<Buffer>, std::vector<int64_t>>> by_key;
};

KernelOr MakePad(const KernelInit& init) {
  if (InputDType(init, 0) != DType::kFloat32 || InputDType(init, 3) != DType::kUndefined || init.num_outputs != 1)
    return KernelOr(nullptr);
  auto mode = ParsePadMode(init.attrs.GetString("mode", "constant"));
  if (!mode.ok()) return KernelOr(nullptr);
  const PadMode m = *mode;
  const int opset = init.opset;
  const std::vector<int64_t> pads_attr = init.attrs.GetInts("pads", {});
  const float value_attr = init.attrs.GetFloat("value", 0.f);
  auto cache = std::make_shared<PadCache>();
  return Kernel(
      [m, opset, pads_attr, value_attr, cache](KernelContext& ctx) -> Status {
        const Tensor& x = *ctx.inputs[0];
        Tensor& y = *ctx.outputs[0];
        std::vector<int64_t> pads = pads_attr;
        float value = value_attr;
        if (opset >= 11) {
          WH_ASSIGN_OR_RETURN(pads, IndexValues(ctx.inputs.size() > 1 ? ctx.inputs[1] : nullptr, "pads"));
          const Tensor* v = ctx.inputs.size() > 2 ? ctx.inputs[2] : nullptr;
          if (v) {
            if (v->dtype() != DType::kFloat32 || v->numel() != 1)
              return InvalidArgument("constant_value must be a scalar of the data's type");
            value = v->data<float>()[0];
          }
        }
        if (y.numel() == 0) return Status::Ok();
        std::vector<int64_t> key(x.dims().begin(), x.dims().end());
        key.insert(key.end(), pads.begin(), pads.end());
        std::shared_ptr<Buffer> table;
        std::vector<int64_t> offsets;
        {
          std::lock_guard<std::mutex> lock(cache->mu);
          auto it = cache->by_key.find(key);
          if (it != cache->by_key.end()) {
            table = it->second.first;
            offsets = it->second.second;
          } else {
            std::vector<int32_t> idx;
            int64_t off[kMaxRank] = {};
            if (!PadTables(x.dims(), y.dims(), pads, m, &idx, off))
              return InvalidArgument("Pad: pads " + std::to_string(pads.size()) + " do not give " + DimsToString(y.dims()) +
                                     " from " + DimsToString(x.dims()));
            WH_ASSIGN_OR_RETURN(table, Upload(idx.data(), std::max<size_t>(1, idx.size()) * sizeof(int32_t)));
            offsets.assign(off, off + x.rank());
            if (cache->by_key.size() >= 8) cache->by_key.clear();
            cache->by_key.emplace(key, std::make_pair(table, offsets));
          }
        }
        PadGeom g;
        g.rank = x.rank();
        int64_t stride = 1;
        for (int d = g.rank - 1; d >= 0; --d) {
          g.out_dims[d] = y.dim(d);
          g.in_strides[d] = stride;
          stride *= x.dim(d);
          g.offset[d] = offsets[static_cast<size_t>(d)];
        }
        g.idx = static_cast<const int32_t*>(table->data());
        HoldForCapture(table);  // the cache may drop it while a graph still reads it
        LaunchPad(x.data<float>(), y.data<float>(), value, g, y.numel(), Stream());
        return Launched("Pad");
      },
      opset >= 11 ? 0b110 : 0);
}

// --- Expand, Transpose, Shape (the training graph's shape ops) ------------------------------

KernelOr MakeExpand(const KernelInit& init) {
  if (InputDType(init, 0) != DType::kFloat32) return KernelOr(nullptr);
  return Kernel([](KernelContext& ctx) -> Status {
    const Tensor& x = *ctx.inputs[0];
    Tensor& y = *ctx.outputs[0];
    if (y.rank() > kMaxRank) return Unimplemented("CUDA Expand takes up to 8 dims");
    BroadcastShape s;
    Dims out = y.dims();
    if (out.empty()) out = {1};
    s.rank = static_cast<int>(out.size());
    for (int d = 0; d < s.rank; ++d) s.dims[d] = out[static_cast<size_t>(d)];
    BroadcastStrides(x.dims(), out, s.a_strides);
    LaunchStridedCopy(x.data<float>(), y.data<float>(), s, y.numel(), Stream());
    return Launched("Expand");
  });
}

// Transpose of float32 x: y's index walks x at x's strides taken in perm's order.
KernelOr MakeTranspose(const KernelInit& init) {
  if (InputDType(init, 0) != DType::kFloat32) return KernelOr(nullptr);
  const std::vector<int64_t> perm = init.attrs.GetInts("perm", {});
  return Kernel([perm](KernelContext& ctx) -> Status {
    const Tensor& x = *ctx.inputs[0];
    Tensor& y = *ctx.outputs[0];
    const int r = x.rank();
    if (r > kMaxRank) return Unimplemented("CUDA Transpose takes up to 8 dims");
    if (y.numel() == 0) return Status::Ok();
    int64_t strides[kMaxRank] = {}, s = 1;
    for (int d = r - 1; d >= 0; --d) strides[d] = s, s *= x.dim(d);
    BroadcastShape b;  // a scalar: one element, rank 1
    b.rank = std::max(r, 1);
    b.dims[0] = 1;
    for (int d = 0; d < r; ++d) {
      const int64_t p = perm.empty() ? r - 1 - d : perm[static_cast<size_t>(d)];
      if (p < 0 || p >= r) return InvalidArgument("Transpose: perm is not a permutation of the axes");
      b.dims[d] = y.dim(d);
      b.a_strides[d] = strides[p];
    }
    LaunchStridedCopy(x.data<float>(), y.data<float>(), b, y.numel(), Stream());
    return Launched("Transpose");
  });
}

// Shape reads only the input's dims: on the device it saves the copy of the whole tensor that a
// CPU Shape of a device value would cost. The few int64s go up with one small copy.
KernelOr MakeShape(const KernelInit& init) {
  const int64_t start = init.attrs.GetInt("start", 0), end = init.attrs.GetInt("end", INT64_MAX);
  return Kernel([start, end](KernelContext& ctx) -> Status {
    const Dims& d = ctx.inputs[0]->dims();
    const int64_t r = static_cast<int64_t>(d.size());
    auto clamp = [r](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + r : v, 0, r); };
    const int64_t b = clamp(start), e = std::max(b, clamp(end));
    Tensor& y = *ctx.outputs[0];
    if (y.numel() != e - b) return Internal("Shape: the output size differs");
    if (e == b) return Status::Ok();
    return DeviceRuntimeFor(DeviceType::kCuda)
        ->copy(y.raw_data(), DeviceType::kCuda, d.data() + b, DeviceType::kCpu, sizeof(int64_t) * static_cast<size_t>(e - b));
  });
}

}  // namespace

void RegisterMovementKernels(KernelRegistry& r) {
  DeclareCudaKernel(r, "", "Pad", {DType::kFloat32}, MakePad);
  DeclareCudaKernel(r, "", "Split", {DType::kFloat32}, MakeSplit);
  DeclareCudaKernel(r, "", "ConstantOfShape", {DType::kInt64}, MakeConstantOfShape);
  DeclareCudaKernel(r, "", "DepthToSpace", {DType::kFloat32}, MakeDepthToSpace);
  DeclareCudaKernel(r, "", "Slice", {DType::kFloat32}, MakeSlice);
  DeclareCudaKernel(r, "", "Gather", kAllTypes, MakeGather);
  DeclareCudaKernel(r, "", "Concat", kAllTypes, MakeConcat);
  DeclareCudaKernel(r, "", "Cast", {DType::kFloat32, DType::kInt32, DType::kInt64, DType::kUInt8, DType::kInt8, DType::kBool}, MakeCast);
  DeclareCudaKernel(r, "", "Where", {DType::kBool}, MakeWhere);
  DeclareCudaKernel(r, "", "Expand", {DType::kFloat32}, MakeExpand);
  DeclareCudaKernel(r, "", "Shape", kAllTypes, MakeShape);
  DeclareCudaKernel(r, "", "Transpose", {DType::kFloat32}, MakeTranspose);
}

}  // namespace whittle::cuda
