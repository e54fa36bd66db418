// Kernels of the integer linear ops: ai.whittle QGemm / QConv, QLinearMatMul, QLinearConv,
// MatMulInteger, ConvInteger, DynamicQuantizeLinear. The reference provider runs the plain loops of
// kernels/reference/qlinear.h; the CPU provider packs constant weights once in the factory and
// runs kernels/cpu/qgemm.h — bit-identical. Quantization parameters are validated in the factory
// when they are constants (scale finite and > 0, per-axis length = channel count, zero point of
// the data's type), else on each call; errors name the node and the parameter.
#include <algorithm>
#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kernels/cpu/parallel.h"
#include "kernels/cpu/qgemm.h"
#include "kernels/kernel.h"
#include "kernels/reference/qlinear.h"

namespace whittle {
namespace {

using Factory = StatusOr<std::unique_ptr<OpKernel>>;

// Input positions of one op family; -1 where the op has no such input.
struct QInputs {
  int x = 0, x_scale = -1, x_zp = -1, w = 1, w_scale = -1, w_zp = -1, y_scale = -1, y_zp = -1, bias = -1;
  const char* x_name = "x";  // ONNX's names of the two operands, for messages
  const char* w_name = "w";
};
constexpr QInputs kQConvInputs{0, 1, 2, 3, 4, 5, 6, 7, 8, "x", "w"};
constexpr QInputs kQMatMulInputs{0, 1, 2, 3, 4, 5, 6, 7, 8, "a", "b"};
constexpr QInputs kConvIntegerInputs{0, -1, 2, 1, -1, 3, -1, -1, -1, "x", "w"};
constexpr QInputs kMatMulIntegerInputs{0, -1, 2, 1, -1, 3, -1, -1, -1, "a", "b"};

const Tensor* In(const std::vector<const Tensor*>& v, int i) {
  return i >= 0 && static_cast<size_t>(i) < v.size() ? v[static_cast<size_t>(i)] : nullptr;
}

DType InDType(const KernelInit& init, int i) {
  return i >= 0 && static_cast<size_t>(i) < init.input_dtypes.size() ? init.input_dtypes[static_cast<size_t>(i)]
                                                                      : DType::kUndefined;
}

bool IsByte(DType t) { return t == DType::kUInt8 || t == DType::kInt8; }

// Resolved quantization parameters of one call (or of the kernel, when all are constants).
struct QParams {
  std::vector<int32_t> x_zp{0};  // 1, or per row for MatMulInteger's A
  std::vector<int32_t> w_zp{0};  // 1, or per output channel
  QOutput out;
};

// inputs: every input (nullptr when absent); channels: output channels; x_rows: rows that a
// per-row x zero point may have (MatMulInteger only), else -1.
StatusOr<QParams> ResolveQParams(const std::string& node, const QInputs& q, const std::vector<const Tensor*>& inputs,
                                 DType x_dt, DType w_dt, int64_t channels, int64_t x_rows, bool relu) {
  QParams p;
  const std::string xn = q.x_name, wn = q.w_name;
  if (q.x_scale < 0) {  // MatMulInteger / ConvInteger
    WH_ASSIGN_OR_RETURN(p.x_zp, ReadZeroPoints(node, xn + "_zero_point", In(inputs, q.x_zp), x_dt, x_rows));
    WH_ASSIGN_OR_RETURN(p.w_zp, ReadZeroPoints(node, wn + "_zero_point", In(inputs, q.w_zp), w_dt, channels));
    p.out = Int32QOutput();
    return p;
  }
  WH_ASSIGN_OR_RETURN(QChannelParams x,
                      ReadQParams(node, xn + "_scale", In(inputs, q.x_scale), In(inputs, q.x_zp), x_dt, -1));
  WH_ASSIGN_OR_RETURN(QChannelParams w,
                      ReadQParams(node, wn + "_scale", In(inputs, q.w_scale), In(inputs, q.w_zp), w_dt, channels));
  WH_ASSIGN_OR_RETURN(p.out, MakeQOutput(node, x, w, In(inputs, q.y_scale), In(inputs, q.y_zp), In(inputs, q.bias),
                                         channels, relu));
  p.x_zp = x.zero_point;
  p.w_zp = w.zero_point;
  return p;
}

bool AllParamsConstant(const KernelInit& init, const QInputs& q) {
  for (int i : {q.x_scale, q.x_zp, q.w_scale, q.w_zp, q.y_scale, q.y_zp, q.bias})
    if (i >= 0 && InDType(init, i) != DType::kUndefined && !In(init.const_inputs, i)) return false;
  return true;
}

Status CheckDataTypes(const std::string& node, const KernelInit& init, const QInputs& q) {
  for (int i : {q.x, q.w})
    if (!IsByte(InDType(init, i)))
      return InvalidArgument(node + ": input " + std::to_string(i) + " must be int8 or uint8, got " +
                             DTypeName(InDType(init, i)));
  return Status::Ok();
}

bool ReluFrom(const KernelInit& init) { return init.attrs.GetString("_activation", "") == "Relu"; }

// ---------------------------------------------------------------------------------------------
// Matrix products: QGemm, QLinearMatMul, MatMulInteger.

class QMatMulKernel : public OpKernel {
 public:
  QMatMulKernel(const KernelInit& init, QInputs q, bool cpu)
      : q_(q), cpu_(cpu), relu_(ReluFrom(init)), node_(init.node_name) {}

  Status Init(const KernelInit& init) {
    WH_RETURN_IF_ERROR(CheckDataTypes(node_, init, q_));
    const Tensor* w = In(init.const_inputs, q_.w);
    if (!w || w->rank() < 1) return Status::Ok();
    const int64_t channels = w->rank() == 1 ? 1 : w->dim(w->rank() - 1);
    // A per-row zero point of a (MatMulInteger) depends on a's shape: resolved per call.
    const Tensor* x_zp = In(init.const_inputs, q_.x_zp);
    if (AllParamsConstant(init, q_) && !(x_zp && x_zp->numel() > 1)) {
      WH_ASSIGN_OR_RETURN(params_, ResolveQParams(node_, q_, init.const_inputs, InDType(init, q_.x), w->dtype(),
                                                  channels, -1, relu_));
    }
    if (cpu_ && w->rank() == 2 && params_) {
      // One packed copy: for the byte kernel where it is exact, else for the int16 kernel (which
      // then packs per call in the rare case it runs anyway: WHITTLE_QGEMM=own16).
      if (w->dtype() == DType::kInt8 &&
          Q8WeightsFit(static_cast<const int8_t*>(w->raw_data()), w->dim(1), w->dim(0), true, params_->w_zp)) {
        packed_b8_ = std::make_shared<QPacked8>();
        Q8PackWeightsB(static_cast<const int8_t*>(w->raw_data()), w->dim(0), w->dim(1), packed_b8_.get());
      } else {
        packed_b_ = std::make_shared<QPackedB>();
        QMatrix b{w->raw_data(), w->dtype(), w->dim(1), &params_->w_zp};
        QPackB(b, w->dim(0), w->dim(1), packed_b_.get());
      }
    }
    return Status::Ok();
  }

  Status Compute(KernelContext& ctx) const override {
    const Tensor& a = *ctx.inputs[static_cast<size_t>(q_.x)];
    const Tensor& b = *ctx.inputs[static_cast<size_t>(q_.w)];
    Tensor& y = *ctx.outputs[0];
    if (a.rank() < 1 || b.rank() < 1) return InvalidArgument(node_ + ": matrix inputs must have rank >= 1");
    // numpy matmul: 1-D operands are promoted and the added dim is dropped from y.
    Dims ad = a.dims(), bd = b.dims();
    if (ad.size() == 1) ad.insert(ad.begin(), 1);
    if (bd.size() == 1) bd.push_back(1);
    const int64_t M = ad[ad.size() - 2], K = ad.back(), N = bd.back();
    if (bd[bd.size() - 2] != K)
      return InvalidArgument(node_ + ": inner dims differ: " + DimsToString(a.dims()) + " x " + DimsToString(b.dims()));
    QParams local;
    const QParams* p = params_ ? &*params_ : nullptr;
    if (!p) {
      WH_ASSIGN_OR_RETURN(local, ResolveQParams(node_, q_, ctx.inputs, a.dtype(), b.dtype(), N, M, relu_));
      p = &local;
    }
    // Batch dims broadcast; y's batch is given by the output's dims.
    const size_t rank = std::max(ad.size(), bd.size());
    Dims ab(rank - 2, 1), bb(rank - 2, 1), yb(rank - 2, 1);
    for (size_t i = 0; i + 2 < ad.size(); ++i) ab[rank - ad.size() + i] = ad[i];
    for (size_t i = 0; i + 2 < bd.size(); ++i) bb[rank - bd.size() + i] = bd[i];
    int64_t batches = 1;
    for (size_t i = 0; i + 2 < rank; ++i) {
      if (ab[i] != bb[i] && ab[i] != 1 && bb[i] != 1)
        return InvalidArgument(node_ + ": batch dims do not broadcast: " + DimsToString(a.dims()) + " x " +
                               DimsToString(b.dims()));
      yb[i] = std::max(ab[i], bb[i]);
      batches *= yb[i];
    }
    if (y.numel() != batches * M * N)
      return InvalidArgument(node_ + ": output has " + std::to_string(y.numel()) + " elements, expected " +
                             std::to_string(batches * M * N));
    const size_t es = y.dtype() == DType::kUInt8 || y.dtype() == DType::kInt8 ? 1 : 4;
    // Fold a's batch into rows when b is shared and the x zero point is per-tensor.
    const bool fold = bd.size() == 2 && p->x_zp.size() == 1;
    if (fold) {
      const int64_t rows = batches * M;
      return Product(ctx, a.raw_data(), a.dtype(), rows, K, b.raw_data(), b.dtype(), N, *p, true, y.raw_data());
    }
    for (int64_t t = 0; t < batches; ++t) {
      int64_t ao = 0, bo = 0, r = t;
      int64_t astride = M * K, bstride = K * N;
      for (size_t i = rank - 2; i-- > 0;) {
        const int64_t idx = r % yb[i];
        r /= yb[i];
        if (ab[i] != 1) ao += idx * astride;
        if (bb[i] != 1) bo += idx * bstride;
        astride *= ab[i];
        bstride *= bb[i];
      }
      const char* ap = static_cast<const char*>(a.raw_data()) + ao;
      const char* bp = static_cast<const char*>(b.raw_data()) + bo;
      char* yp = static_cast<char*>(y.raw_data()) + static_cast<size_t>(t * M * N) * es;
      WH_RETURN_IF_ERROR(Product(ctx, ap, a.dtype(), M, K, bp, b.dtype(), N, *p, bo == 0 && bd.size() == 2, yp));
    }
    return Status::Ok();
  }

 private:
  // y[rows, N] = epilogue(a[rows, K] * b[K, N]); b_is_weight: b is the kernel's (maybe packed) b.
  Status Product(KernelContext& ctx, const void* a, DType a_dt, int64_t rows, int64_t K, const void* b, DType b_dt,
                 int64_t N, const QParams& p, bool b_is_weight, void* y) const {
    const QMatrix am{a, a_dt, K, &p.x_zp};
    const QMatrix bm{b, b_dt, N, &p.w_zp};
    if (!cpu_) {
      std::vector<int32_t> acc(static_cast<size_t>(rows * N));
      QGemmAccReference(am, bm, rows, N, K, acc.data());
      QEpilogueReference(p.out, acc.data(), rows, N, false, y);
      return Status::Ok();
    }
    if (PreferOneDnnQGemm(am, bm, rows, N, K)) {
      std::vector<int32_t> acc(static_cast<size_t>(rows * N));
      const int threads = rows * N * K >= (int64_t{1} << 21) ? ctx.num_threads : 1;  // as in ConvOneDnn
      if (QGemmAccOneDnn(am, bm, rows, N, K, acc.data(), threads)) {
        QEpilogueCpu(p.out, acc.data(), rows, N, false, 0, y, N, threads);
        return Status::Ok();
      }
    }
    if (b_is_weight && packed_b8_ && p.x_zp.size() == 1 && AllowQ8Kernel()) {
      // The byte kernel: activations as unsigned bytes (int8 shifted by 128), weights as packed.
      const bool s8 = a_dt == DType::kInt8;
      QPacked8 pa;
      Q8PackActivationsA(a, rows, K, K, s8 ? 0x80 : 0, &pa, ctx.num_threads);
      QGemmPacked8(pa, *packed_b8_, false, p.x_zp[0] + (s8 ? 128 : 0), p.out, false, 0, y, N, ctx.num_threads);
      return Status::Ok();
    }
    QPackedA pa;
    QPackA(am, rows, K, &pa, ctx.num_threads);
    if (b_is_weight && packed_b_) {
      QGemmPacked(pa, *packed_b_, p.out, false, 0, y, N, ctx.num_threads);
      return Status::Ok();
    }
    QPackedB pb;
    QPackB(bm, K, N, &pb, ctx.num_threads);
    QGemmPacked(pa, pb, p.out, false, 0, y, N, ctx.num_threads);
    return Status::Ok();
  }

  QInputs q_;
  bool cpu_, relu_;
  std::string node_;
  std::optional<QParams> params_;
  std::shared_ptr<QPackedB> packed_b_;
  std::shared_ptr<QPacked8> packed_b8_;  // when the byte kernel is exact for these weights
};

// ---------------------------------------------------------------------------------------------
// Convolutions: QConv, QLinearConv, ConvInteger (im2col on the integer data; padding reads x_zp).

class QConvKernel : public OpKernel {
 public:
  QConvKernel(const KernelInit& init, QInputs q, bool cpu)
      : q_(q), cpu_(cpu), relu_(ReluFrom(init)), node_(init.node_name), attrs_(init.attrs) {}

  Status Init(const KernelInit& init) {
    WH_RETURN_IF_ERROR(CheckDataTypes(node_, init, q_));
    group_ = init.attrs.GetInt("group", 1);
    if (group_ < 1) return InvalidArgument(node_ + ": group must be >= 1, got " + std::to_string(group_));
    const Tensor* w = In(init.const_inputs, q_.w);
    if (!w || w->rank() < 3) return Status::Ok();
    if (AllParamsConstant(init, q_)) {
      WH_ASSIGN_OR_RETURN(params_, ResolveQParams(node_, q_, init.const_inputs, InDType(init, q_.x), w->dtype(),
                                                  w->dim(0), -1, relu_));
    }
    if (cpu_ && params_ && w->dim(0) % group_ == 0) {
      // One packed copy, as in QMatMulKernel: the byte kernel's where exact, else the int16 one's.
      const int64_t M = w->dim(0), K = w->numel() / M, mg = M / group_;
      const int8_t* wp = static_cast<const int8_t*>(w->raw_data());
      if (w->dtype() == DType::kInt8 && w->rank() <= 4 && Q8WeightsFit(wp, M, K, false, params_->w_zp)) {
        auto packed = std::make_shared<std::vector<QPacked8>>(static_cast<size_t>(group_));
        for (int64_t g = 0; g < group_; ++g) Q8PackWeightsA(wp + g * mg * K, mg, K, &(*packed)[static_cast<size_t>(g)]);
        packed_w8_ = std::move(packed);
      } else {
        packed_w_ = PackWeights(*w, params_->w_zp);
      }
    }
    return Status::Ok();
  }

  Status Compute(KernelContext& ctx) const override {
    const Tensor& x = *ctx.inputs[static_cast<size_t>(q_.x)];
    const Tensor& w = *ctx.inputs[static_cast<size_t>(q_.w)];
    Tensor& y = *ctx.outputs[0];
    WH_ASSIGN_OR_RETURN(ConvShape s, ResolveQConvShape(node_, attrs_, x.dims(), w.dims()));
    QParams local;
    const QParams* p = params_ ? &*params_ : nullptr;
    if (!p) {
      WH_ASSIGN_OR_RETURN(local, ResolveQParams(node_, q_, ctx.inputs, x.dtype(), w.dtype(), s.out_channels, -1, relu_));
      p = &local;
    }
    const int64_t out_size = s.geo.OutSize();
    if (y.numel() != s.batch * s.out_channels * out_size)
      return InvalidArgument(node_ + ": output has " + std::to_string(y.numel()) + " elements, expected " +
                             std::to_string(s.batch * s.out_channels * out_size));
    const int32_t x_zp = p->x_zp[0];
    if (!cpu_) {
      std::vector<int32_t> acc(static_cast<size_t>(y.numel()));
      QConvAccReference(s, x.raw_data(), x.dtype(), x_zp, w.raw_data(), w.dtype(), p->w_zp, acc.data());
      for (int64_t n = 0; n < s.batch; ++n) {
        const int64_t off = n * s.out_channels * out_size;
        QEpilogueReference(p->out, acc.data() + off, s.out_channels, out_size, true,
                           static_cast<char*>(y.raw_data()) + static_cast<size_t>(off) * ElemSize(y.dtype()));
      }
      return Status::Ok();
    }
    if (s.group == 1 && s.geo.spatial <= 2 && x.dtype() == DType::kUInt8) {
      const std::vector<int32_t> xzp{x_zp};
      const QMatrix am{x.raw_data(), x.dtype(), 0, &xzp};
      const QMatrix bm{w.raw_data(), w.dtype(), 0, &p->w_zp};
      if (PreferOneDnnQGemm(am, bm, s.out_channels, s.batch * s.geo.OutSize(), w.numel() / s.out_channels) &&
          ConvOneDnn(ctx, s, x, w, *p, y))
        return Status::Ok();
    }
    if (packed_w8_ && AllowQ8Kernel() && s.geo.spatial <= 2) return ConvBytes(ctx, s, x, *p, y);
    std::shared_ptr<const std::vector<QPackedA>> packed = packed_w_;
    if (!packed) packed = PackWeights(w, p->w_zp);
    const int64_t mg = s.out_channels / s.group;
    const int64_t in_image = s.in_channels * s.geo.InSize();
    const size_t x_es = 1, y_es = ElemSize(y.dtype());
    // Images in parallel at batch >= threads (each packs its own im2col); else threads in the GEMM.
    const bool per_image = s.batch >= ctx.num_threads;
    const int gemm_threads = per_image ? 1 : ctx.num_threads;
    const bool padded = QConvUsesPaddedPlanes(s);
    // Contiguous image blocks, one im2col buffer per block.
    const int64_t blocks = per_image ? std::min<int64_t>(s.batch, 4 * ctx.num_threads) : 1;
    ParallelFor(blocks, per_image ? ctx.num_threads : 1, [&](int64_t blk) {
      QPackedB col;
      std::vector<int16_t> planes;
      std::vector<char> tmp;
      for (int64_t n = blk * s.batch / blocks; n < (blk + 1) * s.batch / blocks; ++n) {
        const char* xi = static_cast<const char*>(x.raw_data()) + static_cast<size_t>(n * in_image) * x_es;
        for (int64_t g = 0; g < s.group; ++g) {
          char* yp = static_cast<char*>(y.raw_data()) +
                     static_cast<size_t>((n * s.out_channels + g * mg) * out_size) * y_es;
          const QPackedA& w = (*packed)[static_cast<size_t>(g)];
          if (padded) {  // no im2col copy; computed at the padded row pitch, then compacted
            int64_t pitch = 0;
            QPackConvPadded(s, xi, x.dtype(), x_zp, g, &planes, &col, &pitch);
            tmp.resize(static_cast<size_t>(mg * col.N) * y_es);
            QGemmPacked(w, col, p->out, true, g * mg, tmp.data(), col.N, gemm_threads);
            QCompactConvRows(tmp.data(), mg, s.geo.out[0], s.geo.out[1], pitch, y_es, yp);
          } else {
            QPackIm2Col(s, xi, x.dtype(), x_zp, g, &col);
            QGemmPacked(w, col, p->out, true, g * mg, yp, out_size, gemm_threads);
          }
        }
      }
    });
    return Status::Ok();
  }

 private:
  static size_t ElemSize(DType t) { return t == DType::kUInt8 || t == DType::kInt8 ? 1 : 4; }

  // The byte kernel (see kernels/cpu/qgemm.h): per image and group, the im2col as bytes (int8
  // inputs shifted to unsigned), packed into panels, times the packed weights. Stride-1 2-D convs
  // take the padded-plane im2col (no per-row copies) and are compacted from the padded pitch.
  Status ConvBytes(KernelContext& ctx, const ConvShape& s, const Tensor& x, const QParams& p, Tensor& y) const {
    const WindowGeometry& g = s.geo;
    const int64_t mg = s.out_channels / s.group, cg = s.in_channels / s.group;
    const int64_t K = cg * g.KernelSize(), out_size = g.OutSize(), in_size = g.InSize();
    const int64_t OH = g.spatial == 2 ? g.out[0] : 1, OW = g.out[g.spatial - 1];
    const bool padded = g.spatial == 2 && g.stride[0] == 1 && g.stride[1] == 1;
    const int64_t pitch = padded ? g.in[1] + g.pad_begin[1] + g.pad_end[1] : OW;
    const int64_t cols = OH * pitch;
    const bool s8 = x.dtype() == DType::kInt8;
    const uint8_t flip = s8 ? 0x80 : 0;
    const uint8_t zp_byte = static_cast<uint8_t>(p.x_zp[0]);
    const int32_t zx = p.x_zp[0] + (s8 ? 128 : 0);
    const size_t y_es = ElemSize(y.dtype());
    const bool per_image = s.batch >= ctx.num_threads;
    const int gemm_threads = per_image ? 1 : ctx.num_threads;
    const int64_t blocks = per_image ? std::min<int64_t>(s.batch, 4 * ctx.num_threads) : 1;
    ParallelFor(blocks, per_image ? ctx.num_threads : 1, [&](int64_t blk) {
      thread_local std::vector<uint8_t> rows, planes;
      thread_local std::vector<char> tmp;
      QPacked8 panel;
      rows.resize(static_cast<size_t>(K * cols));
      if (padded) tmp.resize(static_cast<size_t>(mg * cols) * y_es);
      for (int64_t n = blk * s.batch / blocks; n < (blk + 1) * s.batch / blocks; ++n) {
        for (int64_t gi = 0; gi < s.group; ++gi) {
          const uint8_t* xg = static_cast<const uint8_t*>(x.raw_data()) + (n * s.in_channels + gi * cg) * in_size;
          char* yp = static_cast<char*>(y.raw_data()) +
                     static_cast<size_t>((n * s.out_channels + gi * mg) * out_size) * y_es;
          if (padded) QIm2ColBytesPadded(s, xg, zp_byte, flip, &planes, rows.data(), cols);
          else QIm2ColBytes(s, xg, zp_byte, flip, rows.data(), cols);
          Q8PackRowsB(rows.data(), K, cols, cols, &panel);
          const QPacked8& w8 = (*packed_w8_)[static_cast<size_t>(gi)];
          if (padded) {
            QGemmPacked8(w8, panel, true, zx, p.out, true, gi * mg, tmp.data(), cols, gemm_threads);
            QCompactConvRows(tmp.data(), mg, OH, OW, pitch, y_es, yp);
          } else {
            QGemmPacked8(w8, panel, true, zx, p.out, true, gi * mg, yp, out_size, gemm_threads);
          }
        }
      }
    });
    return Status::Ok();
  }

  // Group-1 convolution as one oneDNN GEMM per chunk of images: acc[m, n*P + p] = W * im2col, with
  // the uint8 im2col shifted to int8 (x ^ 0x80 = x - 128, zero point x_zp - 128) so that the
  // weights can be the GEMM's A (oneDNN's u8 x s8 wants the unsigned operand first). Each image's
  // accumulators go through the same epilogue as our kernel. Chunks are sized so that the byte
  // im2col and the int32 accumulators stay in L2, and run in parallel (a single-threaded GEMM
  // each) when there are enough images; buffers are per thread and reused across calls. False
  // when oneDNN refuses the operands (the caller falls back to our kernel).
  bool ConvOneDnn(KernelContext& ctx, const ConvShape& s, const Tensor& x, const Tensor& w, const QParams& p,
                  Tensor& y) const {
    const WindowGeometry& g = s.geo;
    const int64_t Cout = s.out_channels, K = w.numel() / Cout;
    const int64_t OH = g.spatial == 2 ? g.out[0] : 1, OW = g.out[g.spatial - 1];
    const bool padded = g.spatial == 2 && g.stride[0] == 1 && g.stride[1] == 1;
    const int64_t pitch = padded ? g.in[1] + g.pad_begin[1] + g.pad_end[1] : OW;
    const int64_t cols = OH * pitch;  // GEMM columns per image
    const int64_t in_image = s.in_channels * g.InSize();
    const size_t y_es = ElemSize(y.dtype());
    const int threads = std::max(1, ctx.num_threads);
    const int64_t per_image_bytes = cols * (K + 4 * Cout);
    int64_t chunk = std::max<int64_t>(1, std::min<int64_t>(s.batch, (int64_t{384} << 10) / per_image_bytes));
    // Enough chunks for every thread (when there are enough images).
    chunk = std::min(chunk, std::max<int64_t>(1, s.batch / threads));
    const int64_t chunks = (s.batch + chunk - 1) / chunk;
    const bool parallel_chunks = chunks >= threads;
    // One GEMM for everything: threads inside it only when it is big enough to pay for them
    // (below ~2M multiply-adds, e.g. conv2 at batch 1, 2 threads were slower than 1).
    const int gemm_threads = parallel_chunks || Cout * s.batch * cols * K < (int64_t{1} << 21) ? 1 : threads;
    const std::vector<int32_t> col_zp{p.x_zp[0] - 128};
    const uint8_t x_zp = static_cast<uint8_t>(p.x_zp[0]);
    std::atomic<bool> ok{true};
    ParallelFor(chunks, parallel_chunks ? threads : 1, [&](int64_t ci) {
      thread_local std::vector<uint8_t> col, planes;
      thread_local std::vector<int32_t> acc;
      const int64_t n0 = ci * chunk, nb = std::min(chunk, s.batch - n0), ld = nb * cols;
      col.resize(static_cast<size_t>(K * ld));
      acc.resize(static_cast<size_t>(Cout * ld));
      for (int64_t i = 0; i < nb; ++i) {
        const uint8_t* xi = static_cast<const uint8_t*>(x.raw_data()) + (n0 + i) * in_image;
        if (padded) QIm2ColBytesPadded(s, xi, x_zp, 0x80, &planes, col.data() + i * cols, ld);
        else QIm2ColBytes(s, xi, x_zp, 0x80, col.data() + i * cols, ld);
      }
      const QMatrix am{w.raw_data(), w.dtype(), K, &p.w_zp};
      const QMatrix bm{col.data(), DType::kInt8, ld, &col_zp};
      if (!QGemmAccOneDnn(am, bm, Cout, ld, K, acc.data(), gemm_threads)) {
        ok = false;  // the kernel falls back as a whole
        return;
      }
      QConvEpilogueCpu(p.out, acc.data(), Cout, ld, nb, cols, OH, OW, pitch,
                       static_cast<char*>(y.raw_data()) + static_cast<size_t>(n0 * Cout * OH * OW) * y_es,
                       gemm_threads);
    });
    return ok.load();
  }

  // W [M, C/group, k...] as one A matrix per group: rows = the group's output channels.
  std::shared_ptr<const std::vector<QPackedA>> PackWeights(const Tensor& w, const std::vector<int32_t>& w_zp) const {
    auto out = std::make_shared<std::vector<QPackedA>>(static_cast<size_t>(group_));
    const int64_t M = w.dim(0), mg = M / group_, kg = w.numel() / M;
    for (int64_t g = 0; g < group_; ++g) {
      std::vector<int32_t> zp;
      if (w_zp.size() == 1) zp = w_zp;
      else zp.assign(w_zp.begin() + g * mg, w_zp.begin() + (g + 1) * mg);
      const QMatrix a{static_cast<const char*>(w.raw_data()) + g * mg * kg, w.dtype(), kg, &zp};
      QPackA(a, mg, kg, &(*out)[static_cast<size_t>(g)]);
    }
    return out;
  }

  QInputs q_;
  bool cpu_, relu_;
  std::string node_;
  AttributeMap attrs_;
  int64_t group_ = 1;
  std::optional<QParams> params_;
  std::shared_ptr<const std::vector<QPackedA>> packed_w_;
  std::shared_ptr<const std::vector<QPacked8>> packed_w8_;  // when the byte kernel is exact for these weights
};

template <class K>
Factory Make(const KernelInit& init, QInputs q, bool cpu) {
  auto k = std::make_unique<K>(init, q, cpu);
  WH_RETURN_IF_ERROR(k->Init(init));
  return std::unique_ptr<OpKernel>(std::move(k));
}

Factory MakeDynamicQuantize(const KernelInit& init) {
  const std::string node = init.node_name;
  if (InDType(init, 0) != DType::kFloat32)
    return InvalidArgument(node + ": x must be float32, got " + DTypeName(InDType(init, 0)));
  return WrapFnKernel([](KernelContext& ctx) -> Status {
    const Tensor& x = *ctx.inputs[0];
    uint8_t scale_zp = 0;
    float scale = 0.f;
    DynamicQuantizeLinearReference(x.data<float>(), x.numel(), ctx.outputs[0]->data<uint8_t>(), &scale, &scale_zp);
    if (ctx.outputs.size() > 1 && ctx.outputs[1]) ctx.outputs[1]->data<float>()[0] = scale;
    if (ctx.outputs.size() > 2 && ctx.outputs[2]) ctx.outputs[2]->data<uint8_t>()[0] = scale_zp;
    return Status::Ok();
  });
}

}  // namespace

void RegisterQLinearKernels(KernelRegistry& r) {
  {
    r.Register("ai.whittle", "QGemm", [](const KernelInit& i) { return Make<QMatMulKernel>(i, kQMatMulInputs, i.backend == Backend::kCpu); });
    r.Register("", "QLinearMatMul", [](const KernelInit& i) { return Make<QMatMulKernel>(i, kQMatMulInputs, i.backend == Backend::kCpu); });
    r.Register("", "MatMulInteger", [](const KernelInit& i) { return Make<QMatMulKernel>(i, kMatMulIntegerInputs, i.backend == Backend::kCpu); });
    r.Register("ai.whittle", "QConv", [](const KernelInit& i) { return Make<QConvKernel>(i, kQConvInputs, i.backend == Backend::kCpu); });
    r.Register("", "QLinearConv", [](const KernelInit& i) { return Make<QConvKernel>(i, kQConvInputs, i.backend == Backend::kCpu); });
    r.Register("", "ConvInteger", [](const KernelInit& i) { return Make<QConvKernel>(i, kConvIntegerInputs, i.backend == Backend::kCpu); });
    r.Register("", "DynamicQuantizeLinear", MakeDynamicQuantize);
  }
}

}  // namespace whittle
