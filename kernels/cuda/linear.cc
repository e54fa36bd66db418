// The CUDA backend's Gemm and MatMul (float32) on cuBLAS (RowMajorGemm; the session's
// precision), with the bias and a fused Relu in one epilogue launch.
#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_util.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/kernel.h"

namespace whittle::cuda {
namespace {

// --- Gemm and MatMul ------------------------------------------------------------------------

KernelOr MakeGemm(const KernelInit& init) {
  Unary act;
  if (!init.AllFloat32() || !FusedKind(init.attrs, &act)) return KernelOr(nullptr);
  const bool ta = init.attrs.GetInt("transA", 0) != 0, tb = init.attrs.GetInt("transB", 0) != 0;
  const float alpha = init.attrs.GetFloat("alpha", 1.f), beta = init.attrs.GetFloat("beta", 1.f);
  const Precision precision = init.precision;
  return Kernel([=](KernelContext& ctx) -> Status {
    const Tensor& a = *ctx.inputs[0];
    const Tensor& b = *ctx.inputs[1];
    const Tensor* c = ctx.inputs.size() > 2 ? ctx.inputs[2] : nullptr;
    Tensor& y = *ctx.outputs[0];
    const int64_t M = y.dim(0), N = y.dim(1), K = ta ? a.dim(0) : a.dim(1);
    GemmCall g;
    g.ta = ta;
    g.tb = tb;
    g.M = M;
    g.N = N;
    g.K = K;
    g.alpha = alpha;
    g.A = a.data<float>();
    g.lda = a.dim(1);
    g.B = b.data<float>();
    g.ldb = b.dim(1);
    g.C = y.data<float>();
    g.ldc = N;
    g.precision = precision;
    WH_RETURN_IF_ERROR(RowMajorGemm(g));
    int64_t cr = 1, cc = 1;
    if (c && c->rank() == 1) cc = c->dim(0);
    if (c && c->rank() == 2) {
      cr = c->dim(0);
      cc = c->dim(1);
    }
    if (c || act != Unary::kIdentity)
      LaunchBiasAct(y.data<float>(), M, N, c ? c->data<float>() : nullptr, cr, cc, beta, act, Stream());
    return Launched("the Gemm epilogue");
  });
}

KernelOr MakeMatMul(const KernelInit& init) {
  Unary act;
  if (!init.AllFloat32() || !FusedKind(init.attrs, &act) || init.input_dtypes.size() > 3) return KernelOr(nullptr);
  const Precision precision = init.precision;
  return Kernel([act, precision](KernelContext& ctx) -> Status {
    const Tensor& a = *ctx.inputs[0];
    const Tensor& b = *ctx.inputs[1];
    Tensor& y = *ctx.outputs[0];
    if (y.numel() == 0) return Status::Ok();
    const int64_t K = a.dims().back();
    const int64_t M = a.rank() >= 2 ? a.dim(a.rank() - 2) : 1;
    const int64_t N = b.rank() >= 2 ? b.dims().back() : 1;
    const int64_t a_batch = a.numel() / std::max<int64_t>(1, M * K), b_batch = b.numel() / std::max<int64_t>(1, K * N);
    const int64_t y_batch = y.numel() / (M * N);
    GemmCall g;  // row-major [M, K] x [K, N]
    g.M = M;
    g.N = N;
    g.K = K;
    g.lda = K;
    g.ldb = N;
    g.ldc = N;
    g.precision = precision;
    if (b_batch == 1 && a_batch == y_batch) {  // a Linear layer: every row of A against one B
      g.M = a_batch * M;
      g.A = a.data<float>();
      g.B = b.data<float>();
      g.C = y.data<float>();
      WH_RETURN_IF_ERROR(RowMajorGemm(g));
    } else if (a_batch == y_batch && b_batch == y_batch) {
      g.A = a.data<float>();
      g.stride_a = M * K;
      g.B = b.data<float>();
      g.stride_b = K * N;
      g.C = y.data<float>();
      g.stride_c = M * N;
      g.batch = y_batch;
      WH_RETURN_IF_ERROR(RowMajorGemm(g));
    } else {  // general broadcasting of the batch dims: one product per output matrix
      // y's batch dims: all but its matrix dims (a 1-D operand contributes none: [K] x [B, K, N]
      // is [B, N]).
      const Dims& yd = y.dims();
      const int br = y.rank() - (a.rank() >= 2 ? 1 : 0) - (b.rank() >= 2 ? 1 : 0);
      Dims ab(static_cast<size_t>(br), 1), bb(static_cast<size_t>(br), 1);
      for (int d = 0; d < br; ++d) {
        const int ad = d - (br - (a.rank() - 2)), bd = d - (br - (b.rank() - 2));
        ab[static_cast<size_t>(d)] = ad >= 0 ? a.dim(ad) : 1;
        bb[static_cast<size_t>(d)] = bd >= 0 ? b.dim(bd) : 1;
      }
      for (int64_t i = 0; i < y_batch; ++i) {
        int64_t rem = i, ao = 0, bo = 0, as = 1, bs = 1;
        for (int d = br - 1; d >= 0; --d) {
          const int64_t c = rem % yd[static_cast<size_t>(d)];
          rem /= yd[static_cast<size_t>(d)];
          if (ab[static_cast<size_t>(d)] != 1) ao += c * as;
          if (bb[static_cast<size_t>(d)] != 1) bo += c * bs;
          as *= ab[static_cast<size_t>(d)];
          bs *= bb[static_cast<size_t>(d)];
        }
        g.A = a.data<float>() + ao * M * K;
        g.B = b.data<float>() + bo * K * N;
        g.C = y.data<float>() + i * M * N;
        WH_RETURN_IF_ERROR(RowMajorGemm(g));
      }
    }
    // The runtime's bias fusion (runtime/rewrite/fuse_matmul_bias.h): N values along the last dim.
    const Tensor* bias = ctx.inputs.size() > 2 ? ctx.inputs[2] : nullptr;
    if (bias && bias->numel() != N) return Internal("MatMul: the fused bias must have N values");
    if (bias || act != Unary::kIdentity)
      LaunchBiasAct(y.data<float>(), y.numel() / N, N, bias ? bias->data<float>() : nullptr, 1, N, 1.f, act, Stream());
    return Launched("MatMul");
  });
}

}  // namespace

void RegisterLinearKernels(KernelRegistry& r) {
  DeclareCudaKernel(r, "", "Gemm", {DType::kFloat32}, MakeGemm);
  DeclareCudaKernel(r, "", "MatMul", {DType::kFloat32}, MakeMatMul);
}

}  // namespace whittle::cuda
