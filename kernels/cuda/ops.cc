// The CUDA backend's kernels (float32): Gemm and MatMul on cuBLAS, Conv as im2col + cuBLAS
// (strided-batched over images; the runtime's fused residual input too), MatMul's fused bias
// input, element-wise unary and broadcast binary ops, Softmax/LogSoftmax
// on the last axis, Max/Average/GlobalAveragePool in 2-D. Each is declared for Backend::kCuda
// (DeclareCudaKernel): with this backend's runtime registered, it builds the CUDA kernel where
// the node's dtypes and attributes are ones it handles, and otherwise returns null — the session
// then runs the node's CPU kernel with explicit copies and lists it (Session::fallback_nodes).
// Fused activations: Relu or none (others run after the kernel, in place).
#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kernels/common/attention_shape.h"
#include "kernels/common/fused_activation.h"
#include "kernels/cuda/cuda_util.h"
#include "kernels/cuda/kernels_impl.h"
#include "kernels/cuda/softmax_body.h"
#include "kernels/cuda/unary_params.h"
#include "kernels/kernel.h"
#include "lib/ir/domain.h"

namespace whittle::cuda {
namespace {

// --- element-wise ---------------------------------------------------------------------------

MakeFn UnaryOp(Unary op) {
  return [op](const KernelInit& init) -> KernelOr {
    if (!init.AllFloat32() || init.input_dtypes.size() != 1) return KernelOr(nullptr);
    const auto [alpha, beta] = UnaryParams(op, init.attrs);  // the attributes or ONNX's defaults
    return Kernel([op, alpha, beta](KernelContext& ctx) {
      LaunchUnary(op, ctx.inputs[0]->data<float>(), ctx.outputs[0]->data<float>(), ctx.inputs[0]->numel(), alpha,
                  Stream(), beta);
      return Launched("an element-wise kernel");
    });
  };
}

// Clip of float32 x: the bounds from the attributes (opset < 11) or the optional scalar inputs,
// read on the host (HostInputs); an absent bound does not clip.
KernelOr MakeClip(const KernelInit& init) {
  if (!init.AllFloat32() || init.num_outputs != 1) return KernelOr(nullptr);
  const bool attrs = init.opset < 11;
  const float lo_attr = init.attrs.GetFloat("min", -INFINITY), hi_attr = init.attrs.GetFloat("max", INFINITY);
  return Kernel(
      [attrs, lo_attr, hi_attr](KernelContext& ctx) -> Status {
        float lo = -INFINITY, hi = INFINITY;
        if (attrs) {
          lo = lo_attr, hi = hi_attr;
        } else {
          for (size_t k = 1; k < 3 && k < ctx.inputs.size(); ++k) {
            const Tensor* b = ctx.inputs[k];
            if (!b) continue;
            if (b->numel() != 1) return InvalidArgument("Clip bounds must be scalars, got shape " + DimsToString(b->dims()));
            (k == 1 ? lo : hi) = b->data<float>()[0];
          }
        }
        LaunchUnary(Unary::kClip, ctx.inputs[0]->data<float>(), ctx.outputs[0]->data<float>(), ctx.inputs[0]->numel(),
                    lo, Stream(), hi);
        return Launched("Clip");
      },
      attrs ? 0 : 0b110);
}

MakeFn BinaryOp(Binary op) {
  return [op](const KernelInit& init) -> KernelOr {
    Unary act;
    if (!init.AllFloat32() || init.input_dtypes.size() != 2 || !FusedKind(init.attrs, &act)) return KernelOr(nullptr);
    return Kernel([op, act](KernelContext& ctx) -> Status {
      const Tensor& a = *ctx.inputs[0];
      const Tensor& b = *ctx.inputs[1];
      Tensor& y = *ctx.outputs[0];
      BroadcastShape s;
      s.rank = std::max(1, y.rank());
      if (y.rank() > kMaxRank) return Unimplemented("CUDA element-wise ops take up to 8 dims");
      Dims out = y.dims();
      if (out.empty()) out = {1};
      for (int d = 0; d < s.rank; ++d) s.dims[d] = out[static_cast<size_t>(d)];
      BroadcastStrides(a.dims(), out, s.a_strides);
      BroadcastStrides(b.dims(), out, s.b_strides);
      LaunchBinary(op, a.data<float>(), b.data<float>(), y.data<float>(), s, y.numel(), act, Stream());
      return Launched("a broadcast kernel");
    });
  };
}

// --- Softmax ------------------------------------------------------------------------------

MakeFn SoftmaxOp(bool log) {
  return [log](const KernelInit& init) -> KernelOr {
    if (!init.AllFloat32()) return KernelOr(nullptr);
    const int64_t axis = init.attrs.GetInt("axis", init.opset < 13 ? 1 : -1);
    if (init.opset >= 13 && axis != -1) return KernelOr(nullptr);  // only the last axis, unflattened
    const int opset = init.opset;
    return Kernel([log, axis, opset](KernelContext& ctx) -> Status {
      const Tensor& x = *ctx.inputs[0];
      int64_t cols = x.rank() ? x.dims().back() : 1;
      if (opset < 13) {  // softmax over the flattened dims from axis on
        const int64_t ax = axis < 0 ? axis + x.rank() : axis;
        cols = 1;
        for (int d = static_cast<int>(ax); d < x.rank(); ++d) cols *= x.dim(d);
      }
      if (cols == 0) return Status::Ok();
      LaunchSoftmax(x.data<float>(), ctx.outputs[0]->data<float>(), x.numel() / cols, cols, log, Stream());
      return Launched("Softmax");
    });
  };
}

// LayerNormalization (opset 17), float32, Y only (training graphs that ask for Mean and
// InvStdDev keep the CPU kernel); Scale and B must have the normalised dims' element count.
KernelOr MakeLayerNorm(const KernelInit& init) {
  if (!init.AllFloat32() || init.num_outputs != 1 || init.input_dtypes.size() < 2 ||
      init.attrs.GetInt("stash_type", 1) != 1)
    return KernelOr(nullptr);
  const int64_t axis_attr = init.attrs.GetInt("axis", -1);
  const float eps = init.attrs.GetFloat("epsilon", 1e-5f);
  return Kernel([axis_attr, eps](KernelContext& ctx) -> Status {
    const Tensor& x = *ctx.inputs[0];
    const Tensor& scale = *ctx.inputs[1];
    const Tensor* bias = ctx.inputs.size() > 2 ? ctx.inputs[2] : nullptr;
    const int64_t axis = axis_attr < 0 ? axis_attr + x.rank() : axis_attr;
    if (axis < 0 || axis >= std::max<int64_t>(1, x.rank()))
      return InvalidArgument("LayerNormalization: axis " + std::to_string(axis_attr) + " is out of range");
    int64_t cols = 1;
    const Dims norm(x.dims().begin() + axis, x.dims().end());
    for (int64_t v : norm) cols *= v;
    // Scale and B broadcast to the normalised shape (unidirectionally, numpy-aligned): one that is
    // smaller is expanded into scratch first (a strided copy), so the kernel reads cols of each.
    const float* affine[2] = {scale.data<float>(), bias ? bias->data<float>() : nullptr};
    const Tensor* given[2] = {&scale, bias};
    for (int k = 0; k < 2; ++k) {
      const Tensor* t = given[k];
      if (!t || t->numel() == cols) continue;
      const bool single = t->numel() == 1;
      if ((!single && t->rank() > static_cast<int>(norm.size())) || norm.size() > static_cast<size_t>(kMaxRank))
        return InvalidArgument(std::string("LayerNormalization: ") + (k ? "B" : "Scale") + " does not broadcast to the normalised shape");
      for (int d = 1; !single && d <= t->rank(); ++d) {
        const int64_t td = t->dim(t->rank() - d), nd = norm[norm.size() - static_cast<size_t>(d)];
        if (td != 1 && td != nd)
          return InvalidArgument(std::string("LayerNormalization: ") + (k ? "B" : "Scale") + " does not broadcast to the normalised shape");
      }
      BroadcastShape b;
      b.rank = static_cast<int>(norm.size());
      for (int d = 0; d < b.rank; ++d) b.dims[d] = norm[static_cast<size_t>(d)];
      if (!single) BroadcastStrides(t->dims(), norm, b.a_strides);  // else all 0
      WH_ASSIGN_OR_RETURN(void* full, Scratch(static_cast<size_t>(cols) * sizeof(float), 1 + k));
      LaunchStridedCopy(t->data<float>(), static_cast<float*>(full), b, cols, Stream());
      affine[k] = static_cast<const float*>(full);
    }
    LaunchLayerNorm(x.data<float>(), affine[0], affine[1], ctx.outputs[0]->data<float>(), cols ? x.numel() / cols : 0,
                    cols, eps, Stream());
    return Launched("LayerNormalization");
  });
}

// InstanceNormalization of x [N, C, spatial...]: the LayerNorm kernel over the N*C planes, the
// scale and bias per plane's channel.
KernelOr MakeInstanceNorm(const KernelInit& init) {
  if (!init.AllFloat32() || init.input_dtypes.size() != 3 || init.num_outputs != 1) return KernelOr(nullptr);
  const float eps = init.attrs.GetFloat("epsilon", 1e-5f);
  return Kernel([eps](KernelContext& ctx) -> Status {
    const Tensor& x = *ctx.inputs[0];
    if (x.rank() < 3) return InvalidArgument("InstanceNormalization: X must be [N, C, spatial...], got " + DimsToString(x.dims()));
    const int64_t C = x.dim(1), planes = x.dim(0) * C;
    if (ctx.inputs[1]->numel() != C || ctx.inputs[2]->numel() != C)
      return InvalidArgument("InstanceNormalization: scale and B must have C = " + std::to_string(C) + " values");
    if (planes == 0) return Status::Ok();
    LaunchLayerNorm(x.data<float>(), ctx.inputs[1]->data<float>(), ctx.inputs[2]->data<float>(),
                    ctx.outputs[0]->data<float>(), planes, x.numel() / planes, eps, Stream(), C);
    return Launched("InstanceNormalization");
  });
}

// ai.whittle Attention (runtime/rewrite/fuse_attention.h; lib/ops/attention.cc): per head, over
// a chunk of the batch at a time, S = scale Q K^T and Y_h = softmax(S) V as strided-batched cuBLAS
// products reading Q, K and V in place from the packed QKV rows and writing Y in place, the
// softmax a warp per row between them. The scale input (the exporter's 1/sqrt(d), computed at run
// time from the shape) is read by the softmax on the device, so nothing waits for it; so is the
// additive mask, broadcast over [B, H, N, N] by strides (kernels/cuda/softmax_body.h).
KernelOr MakeAttention(const KernelInit& init) {
  const int64_t h = init.attrs.GetInt("heads", 0), d = init.attrs.GetInt("head_dim", 0);
  if (InputDType(init, 0) != DType::kFloat32 || h < 1 || d < 1 ||
      (InputDType(init, 2) != DType::kUndefined && InputDType(init, 2) != DType::kFloat32))
    return KernelOr(nullptr);
  if (InputDType(init, 1) != DType::kUndefined && InputDType(init, 1) != DType::kFloat32) return KernelOr(nullptr);
  const float scale = init.attrs.GetFloat("scale", 1.f);
  const Precision precision = init.precision;
  return Kernel([h, d, scale, precision](KernelContext& ctx) -> Status {
    const Tensor& x = *ctx.inputs[0];
    Tensor& y = *ctx.outputs[0];
    WH_RETURN_IF_ERROR(CheckAttentionQkv(x, y, h, d));
    const Tensor* scale_in = ctx.inputs.size() > 1 ? ctx.inputs[1] : nullptr;
    if (scale_in) WH_RETURN_IF_ERROR(CheckAttentionScale(*scale_in));
    const int64_t B = x.dim(0), N = x.dim(1), ld_in = 3 * h * d, ld_out = h * d;
    const Tensor* mask_t = ctx.inputs.size() > 2 ? ctx.inputs[2] : nullptr;
    int64_t ms[4] = {0, 0, 0, 0};  // the mask's strides over [B, H, N, N]
    if (mask_t) WH_RETURN_IF_ERROR(AttentionMaskStrides(*mask_t, B, h, N, ms));
    if (B == 0 || N == 0) return Status::Ok();
    // The scores of up to `chunk` batch entries at a time (about 256 MB).
    const int64_t chunk = std::max<int64_t>(1, std::min<int64_t>(B, (int64_t{64} << 20) / (N * N)));
    WH_ASSIGN_OR_RETURN(void* sp, Scratch(static_cast<size_t>(chunk * N * N) * sizeof(float)));
    float* scores = static_cast<float*>(sp);
    for (int64_t b0 = 0; b0 < B; b0 += chunk) {
      const int64_t nb = std::min(chunk, B - b0);
      for (int64_t hi = 0; hi < h; ++hi) {
        const float* q = x.data<float>() + b0 * N * ld_in + hi * d;
        GemmCall qk;  // S[b] = scale Q_b K_b^T
        qk.tb = true;
        qk.M = N;
        qk.N = N;
        qk.K = d;
        qk.alpha = scale;
        qk.A = q;
        qk.lda = ld_in;
        qk.stride_a = N * ld_in;
        qk.B = q + h * d;
        qk.ldb = ld_in;
        qk.stride_b = N * ld_in;
        qk.C = scores;
        qk.ldc = N;
        qk.stride_c = N * N;
        qk.batch = nb;
        qk.precision = precision;
        WH_RETURN_IF_ERROR(RowMajorGemm(qk));
        SoftmaxMask mask;  // rows of the chunk: nb groups (batch entries) of N query rows
        if (mask_t) mask = {mask_t->data<float>() + b0 * ms[0] + hi * ms[1], N, ms[0], ms[2], ms[3]};
        LaunchSoftmax(scores, scores, nb * N, N, false, Stream(), scale_in ? scale_in->data<float>() : nullptr,
                      mask_t ? &mask : nullptr);
        GemmCall pv;  // Y_h[b] = P[b] V_b
        pv.M = N;
        pv.N = d;
        pv.K = N;
        pv.A = scores;
        pv.lda = N;
        pv.stride_a = N * N;
        pv.B = q + 2 * h * d;
        pv.ldb = ld_in;
        pv.stride_b = N * ld_in;
        pv.C = y.data<float>() + b0 * N * ld_out + hi * d;
        pv.ldc = ld_out;
        pv.stride_c = N * ld_out;
        pv.batch = nb;
        pv.precision = precision;
        WH_RETURN_IF_ERROR(RowMajorGemm(pv));
      }
    }
    return Launched("Attention");
  });
}

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

// --- Conv and pools (2-D) -------------------------------------------------------------------

KernelOr MakeConv(const KernelInit& init) {
  Unary act;
  // The weight may be a constant or, in a training graph, an input (its dims are read per call).
  const Tensor* wt = ConstInput(init, 1);
  if (!init.AllFloat32() || !FusedKind(init.attrs, &act) || (wt && wt->rank() != 4) || !NotKnownOtherThan4d(init, {0, 1}) ||
      !TwoD(init.attrs, "pads", 4) ||
      !TwoD(init.attrs, "strides", 2) || !TwoD(init.attrs, "dilations", 2) ||
      !TwoD(init.attrs, "kernel_shape", 2))
    return KernelOr(nullptr);
  const AttributeMap at = init.attrs;
  const int64_t group = at.GetInt("group", 1);
  if (group < 1 || (wt && wt->dim(0) % group != 0) || init.input_dtypes.size() > 4) return KernelOr(nullptr);
  const Precision precision = init.precision;
  return Kernel([=](KernelContext& ctx) -> Status {
    const Tensor& x = *ctx.inputs[0];
    const Tensor& w = *ctx.inputs[1];
    const Tensor* bias = ctx.inputs.size() > 2 ? ctx.inputs[2] : nullptr;
    // The runtime's residual fusion (runtime/rewrite/fuse_conv_add.h): act(conv + b + r).
    const Tensor* residual = ctx.inputs.size() > 3 ? ctx.inputs[3] : nullptr;
    Tensor& y = *ctx.outputs[0];
    if (x.rank() != 4 || w.rank() != 4) return Unimplemented("the CUDA Conv is 2-D");
    const int64_t M = w.dim(0), Cg = w.dim(1), kh = w.dim(2), kw = w.dim(3);
    if (M % group != 0) return InvalidArgument("Conv: the weight's output channels are not a multiple of group");
    if (residual && residual->dims() != y.dims()) return Internal("Conv: the fused residual's shape differs");
    const Window2d win = WindowOf(at, kh, kw, x, y);
    const int64_t N = x.dim(0), C = x.dim(1), Mg = M / group, Kg = Cg * kh * kw, P = win.out_h * win.out_w;
    // im2col of up to `chunk` images at a time, then per group over them either one strided-
    // batched product per image (the weights shared: stride 0; a 1x1 window reads X itself) or,
    // with the columns of the images side by side, one wide product [Mg, chunk * P] into a
    // channel-major scratch that the epilogue turns back to NCHW.
    WH_ASSIGN_OR_RETURN(const ColumnPlan plan, PlanColumns(win, group, N, Kg, P));
    const bool direct = plan.direct;
    const int64_t chunk = plan.chunk;
    // On an H100 the wide product took the bundled ResNet at batch 1024 from 8.2 to 2.8 ms (with
    // the per-window im2col; per image with that im2col, 2.8 ms too, and 0.78 against 0.73 ms on
    // the CNN): one product of [Mg, Kg] x [Kg, chunk * P] instead of chunk small ones.
    const bool wide = !direct && chunk > 1;
    float* t = nullptr;
    if (wide) {
      WH_ASSIGN_OR_RETURN(void* p, Scratch(static_cast<size_t>(M * chunk * P) * sizeof(float), 1));
      t = static_cast<float*>(p);
    }
    for (int64_t n0 = 0; n0 < N; n0 += chunk) {
      const int64_t nb = std::min(chunk, N - n0);
      for (int64_t g = 0; g < group; ++g) {
        const float* col = x.data<float>() + n0 * C * P;
        const float* xg = x.data<float>() + (n0 * C + g * Cg) * win.in_h * win.in_w;
        if (!direct) {
          if (wide) LaunchIm2colWindows(xg, C * win.in_h * win.in_w, plan.col, P, nb * P, nb, Cg, win, Stream());
          else LaunchIm2col(xg, C * win.in_h * win.in_w, plan.col, Kg * P, nb, Cg, win, Stream());
          col = plan.col;
        }
        GemmCall c;
        c.M = Mg;
        c.K = Kg;
        c.A = w.data<float>() + g * Mg * Kg;
        c.lda = Kg;
        c.B = col;
        c.precision = precision;
        if (wide) {  // t [M, nb, P]: group g's rows [Mg, nb * P] = W_g [Mg, Kg] col [Kg, nb * P]
          c.N = c.ldb = c.ldc = nb * P;
          c.C = t + g * Mg * nb * P;
        } else {  // per image: y[n, g*Mg.., P] = W_g [Mg, Kg] col_n [Kg, P]
          c.N = c.ldb = c.ldc = P;
          c.stride_b = direct ? C * P : Kg * P;
          c.C = y.data<float>() + (n0 * M + g * Mg) * P;
          c.stride_c = M * P;
          c.batch = nb;
        }
        WH_RETURN_IF_ERROR(RowMajorGemm(c));
      }
      if (wide)
        LaunchChannelMajorBiasAct(t, y.data<float>() + n0 * M * P, nb, M, P, bias ? bias->data<float>() : nullptr,
                                  residual ? residual->data<float>() + n0 * M * P : nullptr, act, Stream());
    }
    if (!wide && (bias || residual || act != Unary::kIdentity))
      LaunchChannelBiasAct(y.data<float>(), N, M, P, bias ? bias->data<float>() : nullptr,
                           residual ? residual->data<float>() : nullptr, act, Stream());
    return Launched("Conv");
  });
}

KernelOr MakePool(const KernelInit& init, bool max) {
  const std::vector<int64_t> ks = init.attrs.GetInts("kernel_shape", {});
  const DType xdt = init.input_dtypes.empty() ? DType::kUndefined : init.input_dtypes[0];
  const bool bytes = max && (xdt == DType::kUInt8 || xdt == DType::kInt8);  // MaxPool on int8 data (opset 12+)
  if (!(init.AllFloat32() || bytes) || init.num_outputs != 1 || ks.size() != 2 || !NotKnownOtherThan4d(init, {0}) ||
      !TwoD(init.attrs, "pads", 4) ||
      !TwoD(init.attrs, "strides", 2) || !TwoD(init.attrs, "dilations", 2))
    return KernelOr(nullptr);
  const AttributeMap at = init.attrs;
  const bool include_pad = at.GetInt("count_include_pad", 0) != 0;
  return Kernel([=](KernelContext& ctx) -> Status {
    const Tensor& x = *ctx.inputs[0];
    Tensor& y = *ctx.outputs[0];
    if (x.rank() != 4) return Unimplemented("the CUDA pools are 2-D");
    const Window2d w = WindowOf(at, ks[0], ks[1], x, y);
    if (bytes) {
      LaunchMaxPool2dBytes(x.raw_data(), y.raw_data(), xdt == DType::kUInt8, x.dim(0) * x.dim(1), w, Stream());
    } else if (max) {
      LaunchMaxPool2d(x.data<float>(), y.data<float>(), x.dim(0) * x.dim(1), w, Stream());
    } else {
      LaunchAveragePool2d(x.data<float>(), y.data<float>(), x.dim(0) * x.dim(1), w, include_pad, Stream());
    }
    return Launched("a pool");
  });
}

KernelOr MakeGlobalAveragePool(const KernelInit& init) {
  if (!init.AllFloat32()) return KernelOr(nullptr);
  return Kernel([](KernelContext& ctx) -> Status {
    const Tensor& x = *ctx.inputs[0];
    if (x.rank() < 3) return InvalidArgument("GlobalAveragePool needs [N, C, spatial...]");
    const int64_t planes = x.dim(0) * x.dim(1);
    LaunchGlobalAveragePool(x.data<float>(), ctx.outputs[0]->data<float>(), planes, x.numel() / std::max<int64_t>(1, planes),
                            Stream());
    return Launched("GlobalAveragePool");
  });
}

}  // namespace

void RegisterRuntime();  // runtime.cc

Window2d WindowOf(const AttributeMap& at, int64_t k_h, int64_t k_w, const Tensor& x, const Tensor& y) {
  Window2d w;
  w.in_h = x.dim(2);
  w.in_w = x.dim(3);
  w.out_h = y.dim(2);
  w.out_w = y.dim(3);
  w.k_h = k_h;
  w.k_w = k_w;
  const std::vector<int64_t> strides = at.GetInts("strides", {1, 1}), dil = at.GetInts("dilations", {1, 1});
  w.stride_h = strides[0];
  w.stride_w = strides[1];
  w.dil_h = dil[0];
  w.dil_w = dil[1];
  const std::string auto_pad = at.GetString("auto_pad", "NOTSET");
  if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    const int64_t th = std::max<int64_t>(0, (w.out_h - 1) * w.stride_h + (k_h - 1) * w.dil_h + 1 - w.in_h);
    const int64_t tw = std::max<int64_t>(0, (w.out_w - 1) * w.stride_w + (k_w - 1) * w.dil_w + 1 - w.in_w);
    const bool upper = auto_pad == "SAME_UPPER";
    w.pad_top = upper ? th / 2 : th - th / 2;
    w.pad_left = upper ? tw / 2 : tw - tw / 2;
    w.pad_bottom = th - w.pad_top;
    w.pad_right = tw - w.pad_left;
  } else if (auto_pad != "VALID") {
    const std::vector<int64_t> pads = at.GetInts("pads", {0, 0, 0, 0});
    w.pad_top = pads[0];
    w.pad_left = pads[1];
    w.pad_bottom = pads[2];
    w.pad_right = pads[3];
  }
  return w;
}

StatusOr<ColumnPlan> PlanColumns(const Window2d& w, int64_t group, int64_t images, int64_t Kg, int64_t P) {
  ColumnPlan c;
  c.direct = w.k_h == 1 && w.k_w == 1 && w.stride_h == 1 && w.stride_w == 1 && w.pad_top == 0 && w.pad_left == 0 &&
             w.pad_bottom == 0 && w.pad_right == 0 && group == 1;
  if (c.direct) {
    c.chunk = std::max<int64_t>(1, images);
    return c;
  }
  c.chunk = std::max<int64_t>(1, std::min<int64_t>(images, (int64_t{64} << 20) / std::max<int64_t>(1, Kg * P)));
  WH_ASSIGN_OR_RETURN(void* s, Scratch(static_cast<size_t>(c.chunk * Kg * P) * sizeof(float)));
  c.col = static_cast<float*>(s);
  return c;
}

bool TwoD(const AttributeMap& at, const char* key, size_t n) {
  return !at.Has(key) || at.GetInts(key, {}).size() == n;
}

bool FusedKind(const AttributeMap& a, Unary* act, std::initializer_list<const char*> also) {
  for (const auto& [name, value] : a.all()) {
    if (name.rfind('_', 0) != 0 || name == "_activation" || name == "_alpha" || name == "_beta" || name == "_min" ||
        name == "_max")
      continue;
    if (std::find_if(also.begin(), also.end(), [&name = name](const char* s) { return name == s; }) == also.end())
      return false;
  }
  const FusedActivation f = FusedActivation::FromAttrs(a);
  if (f.kind != FusedActivation::kNone && f.kind != FusedActivation::kRelu) return false;
  *act = f.kind == FusedActivation::kRelu ? Unary::kRelu : Unary::kIdentity;
  return true;
}

namespace {

// The element-wise op and its parameters for a fused activation the kernels' epilogues do not
// take (all but Relu: FusedKind), with FusedActivation's semantics.
bool SeparateActivation(const AttributeMap& a, Unary* op, float* alpha, float* beta) {
  const FusedActivation f = FusedActivation::FromAttrs(a);
  *alpha = f.alpha;
  *beta = f.beta;
  switch (f.kind) {
    case FusedActivation::kLeakyRelu: *op = Unary::kLeakyRelu; return true;
    case FusedActivation::kSigmoid: *op = Unary::kSigmoid; return true;
    case FusedActivation::kTanh: *op = Unary::kTanh; return true;
    case FusedActivation::kClip:
      *op = Unary::kClip;
      *alpha = f.min;
      *beta = f.max;
      return true;
    case FusedActivation::kHardSigmoid: *op = Unary::kHardSigmoid; return true;
    case FusedActivation::kHardSwish: *op = Unary::kHardSwish; return true;
    case FusedActivation::kSilu: *op = Unary::kSilu; return true;
    default: return false;
  }
}

// A device kernel built without its fused activation, which then runs as the element-wise kernel
// in place on output 0.
class ThenActivation : public OpKernel {
 public:
  ThenActivation(std::unique_ptr<OpKernel> inner, Unary op, float alpha, float beta)
      : inner_(std::move(inner)), op_(op), alpha_(alpha), beta_(beta) {}
  Status Compute(KernelContext& ctx) const override {
    WH_RETURN_IF_ERROR(inner_->Compute(ctx));
    Tensor& y = *ctx.outputs[0];
    if (y.dtype() != DType::kFloat32) return Internal("a fused activation on a non-float32 output");
    LaunchUnary(op_, y.data<float>(), y.data<float>(), y.numel(), alpha_, Stream(), beta_);
    return Launched("fused activation");
  }
  DeviceType device() const override { return inner_->device(); }
  uint64_t HostInputs() const override { return inner_->HostInputs(); }
  bool ChecksOnDevice() const override { return inner_->ChecksOnDevice(); }
  Status DeviceCheckError(const int64_t* report) const override { return inner_->DeviceCheckError(report); }

 private:
  std::unique_ptr<OpKernel> inner_;
  Unary op_;
  float alpha_, beta_;
};

// make(init) without init's fused activation, wrapped to apply it after Compute; null when the
// activation is none of SeparateActivation's or make declines the node. Float inputs only: an
// integer kernel's output is not float (it falls back as before). The factories copy what they
// keep of the attributes, so a local map serves.
KernelOr WithSeparateActivation(const KernelInit& init, const MakeFn& make) {
  Unary op;
  float alpha = 0.f, beta = 0.f;
  if (init.num_outputs != 1 || !init.AllFloat32() || !SeparateActivation(init.attrs, &op, &alpha, &beta))
    return KernelOr(nullptr);
  AttributeMap attrs = init.attrs;
  for (const char* k : {"_activation", "_alpha", "_beta", "_min", "_max"}) attrs.Erase(k);
  const KernelInit bare{attrs,          init.opset,   init.input_dtypes, init.const_inputs, init.num_outputs,
                        init.node_name, init.backend, init.precision,    init.input_ranks};
  KernelOr k = make(bare);
  if (!k.ok()) return k;
  if (!*k || (*k)->OutputAliasesInput() >= 0) return KernelOr(nullptr);
  return std::unique_ptr<OpKernel>(new ThenActivation(std::move(*k), op, alpha, beta));
}

}  // namespace

void DeclareCudaKernel(KernelRegistry& r, const char* domain, const char* op, std::vector<DType> dtypes, MakeFn make) {
  r.Add(DeclareKernel(Backend::kCuda, domain, op, std::move(dtypes), [make](const KernelInit& init) -> KernelOr {
    if (!RuntimeActive()) return KernelOr(nullptr);
    KernelOr k = make(init);
    if (!k.ok() || *k) return k;
    // A fused activation the kernel's epilogue lacks (it takes Relu): the kernel without it,
    // then the activation in place, rather than the whole node on the CPU.
    return WithSeparateActivation(init, make);
  }));
}

void RegisterKernels(KernelRegistry& r) {
  RegisterRuntime();
  auto add = [&r](const char* op, MakeFn make, std::vector<DType> dtypes = {DType::kFloat32}) {
    DeclareCudaKernel(r, "", op, std::move(dtypes), std::move(make));
  };
  const std::pair<const char*, Unary> unary[] = {{"Relu", Unary::kRelu}, {"Sigmoid", Unary::kSigmoid},
                                                 {"Tanh", Unary::kTanh}, {"Exp", Unary::kExp},
                                                 {"Log", Unary::kLog},   {"Neg", Unary::kNeg},
                                                 {"Abs", Unary::kAbs},   {"Sqrt", Unary::kSqrt},
                                                 {"Erf", Unary::kErf},   {"LeakyRelu", Unary::kLeakyRelu},
                                                 {"Reciprocal", Unary::kReciprocal}, {"HardSigmoid", Unary::kHardSigmoid},
                                                 {"HardSwish", Unary::kHardSwish}, {"Elu", Unary::kElu},
                                                 {"Selu", Unary::kSelu}, {"Softplus", Unary::kSoftplus},
                                                 {"Softsign", Unary::kSoftsign}, {"Floor", Unary::kFloor},
                                                 {"Ceil", Unary::kCeil}, {"Round", Unary::kRound},
                                                 {"ThresholdedRelu", Unary::kThresholdedRelu}};
  for (const auto& [op, u] : unary) add(op, UnaryOp(u));
  // Gelu (opset 20; also what runtime/rewrite/fuse_gelu.h makes of exported erf patterns).
  add("Gelu", [](const KernelInit& i) {
    return UnaryOp(i.attrs.GetString("approximate", "none") == "tanh" ? Unary::kGeluTanh : Unary::kGelu)(i);
  });
  add("LayerNormalization", MakeLayerNorm);
  add("InstanceNormalization", MakeInstanceNorm);
  const std::pair<const char*, Binary> binary[] = {{"Add", Binary::kAdd}, {"Sub", Binary::kSub},
                                                   {"Mul", Binary::kMul}, {"Div", Binary::kDiv},
                                                   {"Pow", Binary::kPow}, {"PRelu", Binary::kPRelu},
                                                   {"Max", Binary::kMax}, {"Min", Binary::kMin}};  // Max/Min: two inputs
  for (const auto& [op, b] : binary) add(op, BinaryOp(b));
  add("Clip", MakeClip);
  add("Softmax", SoftmaxOp(false));
  add("LogSoftmax", SoftmaxOp(true));
  add("Gemm", MakeGemm);
  add("MatMul", MakeMatMul);
  add("Conv", MakeConv);
  add("MaxPool", [](const KernelInit& i) { return MakePool(i, true); },
      {DType::kFloat32, DType::kUInt8, DType::kInt8});
  add("AveragePool", [](const KernelInit& i) { return MakePool(i, false); });
  add("GlobalAveragePool", MakeGlobalAveragePool);
  DeclareCudaKernel(r, kWhittleDomain, "Attention", {DType::kFloat32}, MakeAttention);
  RegisterQLinearKernels(r);
  RegisterBinaryCodebookKernels(r);
  RegisterCirculantFftKernels(r);
  RegisterTrainingKernels(r);
  RegisterMovementKernels(r);
  RegisterResizeKernels(r);
  RegisterRecurrentKernels(r);
}

}  // namespace whittle::cuda
