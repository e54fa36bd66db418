// CUDA Resize (opset 10+) of float32 tensors over their last two axes (the NCHW upsampling and
// downsampling of segmentation and detection models): nearest, linear and cubic, every coordinate
// transform but tf_crop_and_resize. roi, scales and sizes are read on the host (HostInputs); the
// tables (kernels/cuda/resize_tables.h) are built there from the same axis tables as the CPU's,
// uploaded once per input/output shape and kept by the kernel.
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "kernels/cuda/cuda_util.h"
#include "kernels/cuda/kernels_impl.h"
#include "kernels/cuda/resize_body.h"
#include "kernels/cuda/resize_tables.h"
#include "kernels/resample_setup.h"

namespace whittle::cuda {
namespace {

struct UploadedTables {
  int nh = 1, nw = 1;
  std::shared_ptr<Buffer> ints, weights;
};

// Device tables per (input dims, output dims, scales), at most a few kept.
struct TableCache {
  std::mutex mu;
  std::map<std::vector<double>, UploadedTables> by_key;
};

KernelOr MakeResize(const KernelInit& init) {
  if (InputDType(init, 0) != DType::kFloat32 || init.num_outputs != 1) return KernelOr(nullptr);
  auto setup = ParseResize(init);
  if (!setup.ok() || setup->params.coord == ResizeCoord::kTfCropAndResize) return KernelOr(nullptr);
  const ResizeSetup s = *setup;
  auto cache = std::make_shared<TableCache>();
  return Kernel(
      [s, cache](KernelContext& ctx) -> Status {
        const Tensor& x = *ctx.inputs[0];
        Tensor& y = *ctx.outputs[0];
        std::vector<double> scales, roi;
        WH_RETURN_IF_ERROR(ResolveResize(s, ctx, &scales, &roi));
        std::vector<double> key(x.dims().begin(), x.dims().end());
        key.insert(key.end(), y.dims().begin(), y.dims().end());
        key.insert(key.end(), scales.begin(), scales.end());
        UploadedTables up;
        {
          std::lock_guard<std::mutex> lock(cache->mu);
          auto it = cache->by_key.find(key);
          if (it != cache->by_key.end()) {
            up = it->second;
          } else {
            WH_ASSIGN_OR_RETURN(ResizeTables t, BuildResizeTables(s.params, x.dims(), y.dims(), scales));
            up.nh = t.nh;
            up.nw = t.nw;
            WH_ASSIGN_OR_RETURN(up.ints, Upload(t.ints.data(), t.ints.size() * sizeof(int32_t)));
            WH_ASSIGN_OR_RETURN(up.weights, Upload(t.weights.data(), t.weights.size() * sizeof(double)));
            if (cache->by_key.size() >= 8) cache->by_key.clear();
            cache->by_key.emplace(key, up);
          }
        }
        const int r = x.rank();
        ResizeGeom g;
        g.in_h = x.dim(r - 2), g.in_w = x.dim(r - 1), g.out_h = y.dim(r - 2), g.out_w = y.dim(r - 1);
        g.planes = g.in_h * g.in_w != 0 ? x.numel() / (g.in_h * g.in_w) : 0;
        g.nh = up.nh, g.nw = up.nw;
        const int32_t* ints = static_cast<const int32_t*>(up.ints->data());
        const double* weights = static_cast<const double*>(up.weights->data());
        g.iy = ints, g.ix = ints + g.out_h * g.nh;
        g.wy = weights, g.wx = weights + g.out_h * g.nh;
        LaunchResize(x.data<float>(), y.data<float>(), g, Stream());
        return Launched("Resize");
      },
      init.opset >= 11 ? 0b1110 : 0b10);
}

}  // namespace

void RegisterResizeKernels(KernelRegistry& r) { AddCudaKernel(r, "", "Resize", MakeResize); }

}  // namespace whittle::cuda
