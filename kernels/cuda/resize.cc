// CUDA Resize (opset 10+) of float32 tensors of up to 8 dims (the NCHW upsampling and downsampling
// of segmentation and detection models, any axes): nearest, linear and cubic, every coordinate
// transform but tf_crop_and_resize. roi, scales and sizes are read on the host (HostInputs); the
// tables (kernels/cuda/resize_tables.h) are built there from the same axis tables as the CPU's,
// uploaded once per input/output shape and kept by the kernel.
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "kernels/cuda/cuda_util.h"
#include "kernels/cuda/resize.h"
#include "kernels/cuda/resize_body.h"
#include "kernels/cuda/resize_tables.h"
#include "kernels/resample_setup.h"

namespace whittle::cuda {
namespace {

struct UploadedTables {
  ResizeTables layout;  // taps and offsets (the host vectors cleared)
  std::shared_ptr<Buffer> idx, w;
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
        if (y.numel() == 0) return Status::Ok();
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
            WH_ASSIGN_OR_RETURN(up.idx, Upload(t.idx.data(), t.idx.size() * sizeof(int32_t)));
            WH_ASSIGN_OR_RETURN(up.w, Upload(t.w.data(), t.w.size() * sizeof(double)));
            t.idx.clear();
            t.w.clear();
            up.layout = std::move(t);
            if (cache->by_key.size() >= 8) cache->by_key.clear();
            cache->by_key.emplace(key, up);
          }
        }
        const ResizeGeom g = ResizeGeomOf(up.layout, x.dims(), y.dims(), static_cast<const int32_t*>(up.idx->data()),
                                          static_cast<const double*>(up.w->data()));
        HoldForCapture(up.idx);  // the cache may drop the tables while a graph still reads them
        HoldForCapture(up.w);
        LaunchResize(x.data<float>(), y.data<float>(), g, y.numel(), Stream());
        return Launched("Resize");
      },
      init.opset >= 11 ? 0b1110 : 0b10);
}

}  // namespace

void RegisterResizeKernels(KernelRegistry& r) { DeclareCudaKernel(r, "", "Resize", {DType::kFloat32}, MakeResize); }

}  // namespace whittle::cuda
