#include "kernels/cpu/conv.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <map>
#include <mutex>
#include <vector>

#include "kernels/common/fused_activation.h"
#include "kernels/common/window.h"
#include "kernels/cpu/conv_direct.h"
#include "kernels/cpu/conv_onednn.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/sgemm.h"
#include "lib/ir/memory_meter.h"

namespace whittle::cpu {
namespace {

// Below this many multiply-adds a Conv runs on one thread: OpenMP fork/join costs more.
constexpr int64_t kMinParallelMacs = 1 << 17;

// WHITTLE_CONV=own|onednn|direct forces a 2-D float Conv path where it applies; unset or auto:
// measured per shape.
// SetConvPath (tests) overrides both.
std::atomic<int> g_conv_override{-1};
ConvPath ForcedConvPath() {
  const int o = g_conv_override.load(std::memory_order_relaxed);
  if (o >= 0) return static_cast<ConvPath>(o);
  static const ConvPath p = [] {
    const char* env = std::getenv("WHITTLE_CONV");
    const std::string v = env ? env : "";
    return v == "own" ? ConvPath::kOwn : v == "onednn" ? ConvPath::kOneDnn : v == "direct" ? ConvPath::kDirect
                                                                                            : ConvPath::kAuto;
  }();
  return p;
}

// The path measured fastest for a conv geometry (and thread count, activation, residual), shared by
// every session of the process so that two sessions of one model compute the same floats.
struct ConvChoices {
  std::mutex mu;
  std::map<std::vector<int64_t>, int> choice;
};
ConvChoices& Choices() {
  static ConvChoices c;
  return c;
}

// A scratch size in elements: the product of `factors` plus `extra`, saturated at INT64_MAX (the
// dims come from the model and may pass 2^63), which CheckScratch then refuses.
int64_t ScratchCount(std::initializer_list<int64_t> factors, int64_t extra = 0) {
  int64_t n = 1;
  for (int64_t f : factors)
    if (__builtin_mul_overflow(n, f, &n)) return std::numeric_limits<int64_t>::max();
  return __builtin_add_overflow(n, extra, &n) ? std::numeric_limits<int64_t>::max() : n;
}

// im2col scratch, one per thread, grown on demand and kept: no allocation in steady state.
float* Scratch(size_t n) {
  thread_local std::vector<float> buf;
  if (buf.size() < n) buf.resize(n);
  return buf.data();
}

// Output row epilogue: row = act(row + bias + sum) (sum: the fused residual, may be null).
void Epilogue(float* row, int64_t n, float bias, const float* sum, const FusedActivation& act) {
  if (!sum) {
    BiasActivationRow(row, n, bias, nullptr, act);
    return;
  }
  if (bias != 0.f)
    for (int64_t i = 0; i < n; ++i) row[i] += bias;
  BiasActivationRow(row, n, 0.f, sum, act);
}

// Stride-1 im2col through a padded copy: `part` receives padded input rows [oh0, oh1 + (kh-1)*dh)
// of every channel (zeros in the padding), then each (channel, kh, kw) column row is assembled
// from contiguous runs of those rows. Runs are copied 8 floats at a time, overshooting by up to 7:
// the overshoot lands where the next run (or the slack) is written later, which saves the
// per-run tail handling that dominates small images. part needs Stride1PartSize floats and col
// (channels*kh*kw) x (rows*ow) + 8.
int64_t Stride1PartSize(const Geo2D& g, int64_t channels, int64_t rows) {
  return channels * (rows + (g.kh - 1) * g.dh) * (g.iw + g.pl + g.pr) + 8;
}

void Im2ColStride1(const float* x, int64_t channels, const Geo2D& g, int64_t oh0, int64_t oh1, float* part,
                   float* col) {
  const int64_t wp = g.iw + g.pl + g.pr, rows = oh1 - oh0, n = rows * g.ow;
  const int64_t r_need = rows + (g.kh - 1) * g.dh;
  for (int64_t c = 0; c < channels; ++c) {
    for (int64_t r = 0; r < r_need; ++r) {
      float* dst = part + (c * r_need + r) * wp;
      const int64_t ih = oh0 + r - g.pt;
      if (ih < 0 || ih >= g.ih) {
        for (int64_t i = 0; i < wp; ++i) dst[i] = 0.f;
        continue;
      }
      const float* src = x + (c * g.ih + ih) * g.iw;
      for (int64_t i = 0; i < g.pl; ++i) dst[i] = 0.f;
      std::memcpy(dst + g.pl, src, static_cast<size_t>(g.iw) * sizeof(float));
      for (int64_t i = g.pl + g.iw; i < wp; ++i) dst[i] = 0.f;
    }
  }
  for (int64_t i = 0; i < 8; ++i) part[channels * r_need * wp + i] = 0.f;  // over-read slack
  for (int64_t c = 0; c < channels; ++c) {
    for (int64_t kh = 0; kh < g.kh; ++kh) {
      for (int64_t kw = 0; kw < g.kw; ++kw) {
        float* dst = col + ((c * g.kh + kh) * g.kw + kw) * n;
        const float* src = part + (c * r_need + kh * g.dh) * wp + kw * g.dw;
        for (int64_t r = 0; r < rows; ++r, dst += g.ow, src += wp)
          for (int64_t j = 0; j < g.ow; j += 8) std::memcpy(dst + j, src + j, 8 * sizeof(float));
      }
    }
  }
}

// col[(c*KH + kh)*KW + kw][(oh - oh0)*OW + ow] for output rows [oh0, oh1).
void Im2Col2D(const float* x, int64_t channels, const Geo2D& g, int64_t oh0, int64_t oh1, float* col) {
  const int64_t cols = (oh1 - oh0) * g.ow;
  for (int64_t c = 0; c < channels; ++c) {
    const float* xc = x + c * g.ih * g.iw;
    for (int64_t kh = 0; kh < g.kh; ++kh) {
      for (int64_t kw = 0; kw < g.kw; ++kw) {
        float* row = col + ((c * g.kh + kh) * g.kw + kw) * cols;
        const int64_t off = kw * g.dw - g.pl;
        int64_t lo, hi;
        ValidRange(off, g.sw, g.iw, g.ow, &lo, &hi);
        for (int64_t oh = oh0; oh < oh1; ++oh) {
          float* dst = row + (oh - oh0) * g.ow;
          const int64_t ih = oh * g.sh - g.pt + kh * g.dh;
          if (ih < 0 || ih >= g.ih) {
            std::memset(dst, 0, static_cast<size_t>(g.ow) * sizeof(float));
            continue;
          }
          const float* src = xc + ih * g.iw + off;
          for (int64_t o = 0; o < lo; ++o) dst[o] = 0.f;
          if (g.sw == 1) std::memcpy(dst + lo, src + lo, static_cast<size_t>(hi - lo) * sizeof(float));
          else for (int64_t o = lo; o < hi; ++o) dst[o] = src[o * g.sw];
          for (int64_t o = hi; o < g.ow; ++o) dst[o] = 0.f;
        }
      }
    }
  }
}

// Any spatial rank: col[c*K + k][o], one output position at a time.
void Im2ColND(const float* x, int64_t channels, const WindowGeometry& g, float* col) {
  const int n = g.spatial;
  const int64_t in_size = g.InSize(), out_size = g.OutSize(), k_size = g.KernelSize();
  int64_t k_idx[kMaxSpatialDims], o_idx[kMaxSpatialDims];
  for (int64_t kp = 0; kp < k_size; ++kp) {
    UnravelIndex(kp, g.kernel, n, k_idx);
    for (int64_t op = 0; op < out_size; ++op) {
      UnravelIndex(op, g.out, n, o_idx);
      int64_t off;
      const bool inside = TapOffset(g, o_idx, k_idx, &off);
      for (int64_t c = 0; c < channels; ++c)
        col[(c * k_size + kp) * out_size + op] = inside ? x[c * in_size + off] : 0.f;
    }
  }
}

// One depthwise plane (one input channel, one output channel), 2-D.
void DepthwisePlane(const float* x, const float* w, float bias, const float* sum, const Geo2D& g,
                    const FusedActivation& act, float* y) {
  for (int64_t oh = 0; oh < g.oh; ++oh) {
    float* out = y + oh * g.ow;
    for (int64_t o = 0; o < g.ow; ++o) out[o] = bias;
    for (int64_t kh = 0; kh < g.kh; ++kh) {
      const int64_t ih = oh * g.sh - g.pt + kh * g.dh;
      if (ih < 0 || ih >= g.ih) continue;
      const float* in = x + ih * g.iw;
      for (int64_t kw = 0; kw < g.kw; ++kw) {
        const float wv = w[kh * g.kw + kw];
        const int64_t off = kw * g.dw - g.pl;
        int64_t lo, hi;
        ValidRange(off, g.sw, g.iw, g.ow, &lo, &hi);
        if (g.sw == 1) {
          const float* src = in + off;
          for (int64_t o = lo; o < hi; ++o) out[o] += wv * src[o];
        } else {
          for (int64_t o = lo; o < hi; ++o) out[o] += wv * in[o * g.sw + off];
        }
      }
    }
    Epilogue(out, g.ow, 0.f, sum ? sum + oh * g.ow : nullptr, act);
  }
}

class ConvCpuKernel : public OpKernel {
 public:
  ConvCpuKernel(WindowAttrs a, int64_t group, FusedActivation act, const Tensor* w, const Tensor* b)
      : attrs_(std::move(a)), group_(group), act_(act) {
    if (w) w_ = *w;
    if (b) b_ = *b;
    if (w && w->rank() == 4) {
      onednn_ = std::make_unique<OneDnnConv>(w_.data<float>(), b_.defined() ? b_.data<float>() : nullptr, act_);
      if (!(w->dim(1) == 1 && group > 1))
        direct_ = std::make_unique<DirectConv>(w_.data<float>(), w->dim(0), w->dim(1), w->dim(2), w->dim(3), group);
    }
  }

  Status Compute(KernelContext& ctx) const override {
    const Tensor& x = *ctx.inputs[0];
    const Tensor& w = w_.defined() ? w_ : *ctx.inputs[1];
    const Tensor* b = b_.defined() ? &b_ : (ctx.inputs.size() > 2 ? ctx.inputs[2] : nullptr);
    ConvShape s;
    WH_RETURN_IF_ERROR(ResolveConvShape(attrs_, group_, x, w, b, &s));
    Tensor& y = *ctx.outputs[0];
    if (y.numel() != s.batch * s.out_channels * s.geo.OutSize())
      return Internal("Conv output " + DimsToString(y.dims()) + " does not match the resolved geometry");
    // The residual fused by runtime/rewrite/fuse_conv_add: added before the activation.
    const Tensor* sum_t = ctx.inputs.size() > 3 ? ctx.inputs[3] : nullptr;
    if (sum_t && (sum_t->dtype() != DType::kFloat32 || sum_t->dims() != y.dims()))
      return InvalidArgument("Conv's fused sum input must be float32 " + DimsToString(y.dims()) + ", got " +
                             DimsToString(sum_t->dims()));
    if (y.numel() == 0) return Status::Ok();
    const float* bias = b ? b->data<float>() : nullptr;
    const float* sum = sum_t ? sum_t->data<float>() : nullptr;
    const int64_t cg = s.in_channels / s.group;
    const int64_t macs = ScratchCount({s.batch, s.out_channels, cg, s.geo.KernelSize(), s.geo.OutSize()});  // saturated
    const int threads = macs >= kMinParallelMacs ? std::max(1, ctx.num_threads) : 1;
    const bool depthwise = cg == 1 && s.group > 1;
    const bool dnnl_ok = onednn_ && s.geo.spatial == 2 && !depthwise;
    const bool direct_ok = direct_ && direct_->Applies(s);
    const ConvPath forced = ForcedConvPath();
    if (forced == ConvPath::kOwn || (!dnnl_ok && !direct_ok)) return RunOwn(s, x, w, bias, sum, threads, y);
    if (forced == ConvPath::kOneDnn && dnnl_ok && onednn_->Run(s, x.data<float>(), sum, y.data<float>(), threads))
      return Status::Ok();
    if (forced == ConvPath::kDirect && direct_ok) {
      direct_->Run(s, x.data<float>(), bias, sum, act_, threads, y.data<float>());
      return Status::Ok();
    }
    return RunChosen(s, x, w, bias, sum, threads, dnnl_ok, direct_ok, y);
  }

 private:
  enum Choice { kGemm = 0, kOneDnnConv = 1, kDirectConv = 2, kOneThread = 4 };

  Status RunOwn(const ConvShape& s, const Tensor& x, const Tensor& w, const float* bias, const float* sum, int threads,
                Tensor& y) const {
    const int64_t cg = s.in_channels / s.group;
    if (s.geo.spatial <= 2 && cg == 1 && s.group > 1) {
      Depthwise(s, x.data<float>(), w.data<float>(), bias, sum, threads, y.data<float>());
    } else if (s.geo.spatial <= 2) {
      Gemm2D(s, x.data<float>(), w.data<float>(), bias, sum, threads, y.data<float>());
    } else {
      GemmND(s, x.data<float>(), w.data<float>(), bias, sum, threads, y.data<float>());
    }
    return Status::Ok();
  }

  // Runs the path measured fastest for this geometry: on the first call each candidate (path, and
  // all threads or one) runs a few times and the best time counts; the winner is kept process-wide
  // and computes the output.
  Status RunChosen(const ConvShape& s, const Tensor& x, const Tensor& w, const float* bias, const float* sum,
                   int threads, bool dnnl_ok, bool direct_ok, Tensor& y) const {
    const Geo2D g = To2D(s.geo);
    const std::vector<int64_t> key{s.batch, s.in_channels, s.out_channels, s.group, g.ih, g.iw, g.kh, g.kw,
                                   g.sh,    g.sw,          g.dh,           g.dw,    g.pt, g.pl, g.pb, g.pr,
                                   act_.kind, sum != nullptr, threads};
    ConvChoices& cc = Choices();
    int choice = -1;
    {
      std::lock_guard<std::mutex> lock(cc.mu);
      auto it = cc.choice.find(key);
      if (it != cc.choice.end()) choice = it->second;
    }
    // A choice is a path, plus kOneThread when the call runs on one thread: where a parallel
    // region costs more than it saves (small convs at batch 1, threads that sleep between regions)
    // the measurement says so.
    auto run = [&](int c) {
      const int t = c & kOneThread ? 1 : threads;
      c &= ~kOneThread;
      if (c == kOneDnnConv) return onednn_->Run(s, x.data<float>(), sum, y.data<float>(), t);
      if (c == kDirectConv) {
        direct_->Run(s, x.data<float>(), bias, sum, act_, t, y.data<float>());
        return true;
      }
      return RunOwn(s, x, w, bias, sum, t, y).ok();
    };
    if (choice < 0) {
      using Clock = std::chrono::steady_clock;
      double best = 1e300;
      for (int c : std::initializer_list<int>{kGemm, kOneDnnConv, kDirectConv, kGemm | kOneThread,
                                               kOneDnnConv | kOneThread, kDirectConv | kOneThread}) {
        const int path = c & ~kOneThread;
        if ((path == kOneDnnConv && !dnnl_ok) || (path == kDirectConv && !direct_ok)) continue;
        if ((c & kOneThread) && threads == 1) continue;
        // Best of 3 runs, of 7 when a run is under a millisecond (timer and scheduler noise).
        double t = 1e300;
        for (int r = 0; r < (t < 1e-3 ? 7 : 3); ++r) {
          const auto t0 = Clock::now();
          if (!run(c)) break;
          t = std::min(t, std::chrono::duration<double>(Clock::now() - t0).count());
        }
        if (t < best) {
          best = t;
          choice = c;
        }
      }
      std::lock_guard<std::mutex> lock(cc.mu);
      choice = cc.choice.emplace(key, choice).first->second;  // a concurrent measurement may have won
    }
    if (run(choice)) return Status::Ok();
    return RunOwn(s, x, w, bias, sum, threads, y);
  }

  void Depthwise(const ConvShape& s, const float* x, const float* w, const float* bias, const float* sum,
                 int threads, float* y) const {
    const Geo2D g = To2D(s.geo);
    const int64_t planes = s.batch * s.out_channels, k = g.kh * g.kw, mult = s.out_channels / s.group;
    const int64_t in_plane = g.ih * g.iw, out_plane = g.oh * g.ow;
    ParallelFor(planes, threads, [&](int64_t p) {
      const int64_t n = p / s.out_channels, m = p % s.out_channels;
      const float* xc = x + (n * s.in_channels + m / mult) * in_plane;
      DepthwisePlane(xc, w + m * k, bias ? bias[m] : 0.f, sum ? sum + p * out_plane : nullptr, g, act_,
                     y + p * out_plane);
    });
  }

  // Tasks are (image, group, block of output rows); with few images the rows are split so every
  // thread gets work, and each task runs im2col + a single-threaded GEMM on its own columns.
  void Gemm2D(const ConvShape& s, const float* x, const float* w, const float* bias, const float* sum, int threads,
              float* y) const {
    const Geo2D g = To2D(s.geo);
    const int64_t cg = s.in_channels / s.group, mg = s.out_channels / s.group;
    const int64_t kdim = cg * g.kh * g.kw, in_plane = g.ih * g.iw, out_plane = g.oh * g.ow;
    const bool direct = g.kh == 1 && g.kw == 1 && g.sh == 1 && g.sw == 1 && g.pt == 0 && g.pl == 0 &&
                        g.ih == g.oh && g.iw == g.ow;
    const bool stride1 = !direct && g.sh == 1 && g.sw == 1;
    const int64_t units = s.batch * s.group;
    int64_t blocks = 1;
    if (threads > 1 && units < threads) blocks = std::min<int64_t>(g.oh, (threads + units - 1) / units);
    const int64_t rows_per_block = (g.oh + blocks - 1) / blocks;
    const int64_t tasks = units * blocks;
    // Each thread's im2col scratch, held to the budget before the team starts (it is sized by the
    // model: a huge kernel over a small map asks for far more than the tensors do).
    CheckScratch(ScratchCount({kdim, rows_per_block, g.ow}, stride1 ? Stride1PartSize(g, cg, rows_per_block) + 8 : 0),
                 sizeof(float), "Conv");
    ParallelFor(tasks, threads, [&](int64_t t) {
      const int64_t unit = t / blocks, blk = t % blocks;
      const int64_t n = unit / s.group, grp = unit % s.group;
      const int64_t oh0 = blk * rows_per_block, oh1 = std::min(g.oh, oh0 + rows_per_block);
      if (oh0 >= oh1) return;
      const int64_t cols = (oh1 - oh0) * g.ow;
      const float* xg = x + (n * s.in_channels + grp * cg) * in_plane;
      const float* wg = w + grp * mg * kdim;
      float* yg = y + (n * s.out_channels + grp * mg) * out_plane + oh0 * g.ow;
      const float* sg = sum ? sum + (yg - y) : nullptr;
      const int gemm_threads = tasks > 1 ? 1 : threads;
      if (stride1) {
        const int64_t part_size = Stride1PartSize(g, cg, oh1 - oh0);
        float* part = Scratch(static_cast<size_t>(part_size + kdim * cols + 8));
        float* col = part + part_size;
        Im2ColStride1(xg, cg, g, oh0, oh1, part, col);
        Sgemm(false, false, mg, cols, kdim, 1.f, wg, kdim, col, cols, 0.f, yg, out_plane, gemm_threads);
        for (int64_t m = 0; m < mg; ++m)
          Epilogue(yg + m * out_plane, cols, bias ? bias[grp * mg + m] : 0.f, sg ? sg + m * out_plane : nullptr, act_);
        return;
      }
      const float* col;
      int64_t ldcol;
      if (direct) {
        col = xg + oh0 * g.ow;
        ldcol = out_plane;
      } else {
        float* scratch = Scratch(static_cast<size_t>(kdim * cols));
        Im2Col2D(xg, cg, g, oh0, oh1, scratch);
        col = scratch;
        ldcol = cols;
      }
      Sgemm(false, false, mg, cols, kdim, 1.f, wg, kdim, col, ldcol, 0.f, yg, out_plane, gemm_threads);
      for (int64_t m = 0; m < mg; ++m)
        Epilogue(yg + m * out_plane, cols, bias ? bias[grp * mg + m] : 0.f, sg ? sg + m * out_plane : nullptr, act_);
    });
  }

  void GemmND(const ConvShape& s, const float* x, const float* w, const float* bias, const float* sum, int threads,
              float* y) const {
    const int64_t cg = s.in_channels / s.group, mg = s.out_channels / s.group;
    const int64_t kdim = cg * s.geo.KernelSize(), in_size = s.geo.InSize(), out_size = s.geo.OutSize();
    const int64_t tasks = s.batch * s.group;
    CheckScratch(ScratchCount({kdim, out_size}), sizeof(float), "Conv");
    ParallelFor(tasks, threads, [&](int64_t t) {
      const int64_t n = t / s.group, grp = t % s.group;
      float* col = Scratch(static_cast<size_t>(kdim * out_size));
      Im2ColND(x + (n * s.in_channels + grp * cg) * in_size, cg, s.geo, col);
      float* yg = y + (n * s.out_channels + grp * mg) * out_size;
      Sgemm(false, false, mg, out_size, kdim, 1.f, w + grp * mg * kdim, kdim, col, out_size, 0.f, yg, out_size,
            tasks > 1 ? 1 : threads);
      for (int64_t m = 0; m < mg; ++m)
        Epilogue(yg + m * out_size, out_size, bias ? bias[grp * mg + m] : 0.f,
                 sum ? sum + (yg - y) + m * out_size : nullptr, act_);
    });
  }

  WindowAttrs attrs_;
  int64_t group_;
  FusedActivation act_;
  Tensor w_, b_;  // constant weights/bias captured at load time (undefined otherwise)
  std::unique_ptr<OneDnnConv> onednn_;  // constant 2-D weights only
  std::unique_ptr<DirectConv> direct_;  // constant 2-D weights, not depthwise
};

// Adds column rows col[(m*K + k)][x position] into the Y planes of mg output channels (the
// adjoint of im2col): 2-D windows walk whole rows with ValidRange, other ranks tap by tap.
void Col2ImChannel(const float* col, const WindowGeometry& geo, float* y) {
  const int64_t x_size = geo.OutSize(), k_size = geo.KernelSize();
  if (geo.spatial <= 2) {
    const Geo2D g = To2D(geo);
    for (int64_t kh = 0; kh < g.kh; ++kh) {
      for (int64_t kw = 0; kw < g.kw; ++kw) {
        const float* row = col + (kh * g.kw + kw) * x_size;
        const int64_t off = kw * g.dw - g.pl;
        int64_t lo, hi;
        ValidRange(off, g.sw, g.iw, g.ow, &lo, &hi);
        if (lo >= hi) continue;
        for (int64_t ih = 0; ih < g.oh; ++ih) {
          const int64_t yr = ih * g.sh - g.pt + kh * g.dh;
          if (yr < 0 || yr >= g.ih) continue;
          float* dst = y + yr * g.iw + off;
          const float* src = row + ih * g.ow;
          if (g.sw == 1) {
            for (int64_t o = lo; o < hi; ++o) dst[o] += src[o];
          } else {
            for (int64_t o = lo; o < hi; ++o) dst[o * g.sw] += src[o];
          }
        }
      }
    }
    return;
  }
  const int n = geo.spatial;
  int64_t k_idx[kMaxSpatialDims], x_idx[kMaxSpatialDims];
  for (int64_t kp = 0; kp < k_size; ++kp) {
    UnravelIndex(kp, geo.kernel, n, k_idx);
    const float* row = col + kp * x_size;
    for (int64_t xp = 0; xp < x_size; ++xp) {
      UnravelIndex(xp, geo.out, n, x_idx);
      int64_t off;
      if (TapOffset(geo, x_idx, k_idx, &off)) y[off] += row[xp];
    }
  }
}

// ConvTranspose as GEMM + col2im: per (image, group), col[Mg*K, Dx] = W_g^T [Mg*K, Cg] x X_g
// [Cg, Dx], then each output channel's plane starts at its bias and gathers its K column rows.
class ConvTransposeCpuKernel : public ConvTransposeKernelBase {
 public:
  using ConvTransposeKernelBase::ConvTransposeKernelBase;

 protected:
  Status Run(const ConvTransposeShape& s, const Tensor& x, const Tensor& w, const Tensor* b, Tensor& y,
             int num_threads) const override {
    const int64_t y_size = s.geo.InSize(), x_size = s.geo.OutSize(), k_size = s.geo.KernelSize();
    if (y.numel() == 0) return Status::Ok();
    const int64_t cg = s.in_channels / s.group, mg = s.out_channels / s.group, rows = mg * k_size;
    if (w.dtype() != DType::kFloat32 || (b && b->dtype() != DType::kFloat32))
      return InvalidArgument("ConvTranspose: W and B must be float32 like X");
    const float* xd = x.data<float>();
    const float* wd = w.data<float>();
    const float* bias = b ? b->data<float>() : nullptr;
    float* yd = y.data<float>();
    const int64_t macs = ScratchCount({s.batch, s.in_channels, mg, k_size, x_size});  // saturated
    const int threads = macs >= kMinParallelMacs ? std::max(1, num_threads) : 1;
    CheckScratch(ScratchCount({rows, x_size}), sizeof(float), "ConvTranspose");
    float* col = Scratch(static_cast<size_t>(rows * x_size));
    for (int64_t n = 0; n < s.batch; ++n) {
      for (int64_t grp = 0; grp < s.group; ++grp) {
        const float* xg = xd + (n * s.in_channels + grp * cg) * x_size;
        const float* wg = wd + grp * cg * rows;
        if (cg > 0) {
          Sgemm(true, false, rows, x_size, cg, 1.f, wg, rows, xg, x_size, 0.f, col, x_size, threads);
        } else {
          std::fill(col, col + rows * x_size, 0.f);
        }
        float* yg = yd + (n * s.out_channels + grp * mg) * y_size;
        ParallelFor(mg, threads, [&](int64_t m) {
          float* plane = yg + m * y_size;
          std::fill(plane, plane + y_size, bias ? bias[grp * mg + m] : 0.f);
          Col2ImChannel(col + m * k_size * x_size, s.geo, plane);
        });
      }
    }
    return Status::Ok();
  }

};

KernelOr MakeConvTranspose(const ConvTransposeAttrs& a, const KernelInit& init) {
  const DType dt = init.input_dtypes.empty() ? DType::kUndefined : init.input_dtypes[0];
  if (dt != DType::kFloat32) return std::unique_ptr<OpKernel>();
  return std::unique_ptr<OpKernel>(std::make_unique<ConvTransposeCpuKernel>(a));
}

// float32 only; other dtypes: an ok null kernel (the reference builds it).
KernelOr MakeConv(const ConvAttrs& a, const KernelInit& init) {
  const DType dt = init.input_dtypes.empty() ? DType::kUndefined : init.input_dtypes[0];
  if (dt != DType::kFloat32) return std::unique_ptr<OpKernel>();
  const int64_t group = a.group;
  if (group < 1) return InvalidArgument("group must be >= 1, got " + std::to_string(group));
  auto konst = [&](size_t i) { return i < init.const_inputs.size() ? init.const_inputs[i] : nullptr; };
  const Tensor* w = konst(1);
  const Tensor* b = konst(2);
  if (w && (w->dtype() != DType::kFloat32 || w->rank() < 3))
    return InvalidArgument("Conv weight must be a float32 tensor of rank >= 3, got " + DimsToString(w->dims()));
  if (b && (b->dtype() != DType::kFloat32 || b->rank() != 1))  // a hostile model's int bias (fuzzing)
    return InvalidArgument(std::string("Conv bias must be a float32 vector, got ") + DTypeName(b->dtype()) + " " +
                           DimsToString(b->dims()));
  if (w && w->dim(0) % group != 0)
    return InvalidArgument("Conv group " + std::to_string(group) + " does not divide the " +
                           std::to_string(w->dim(0)) + " output channels");
  return std::unique_ptr<OpKernel>(std::make_unique<ConvCpuKernel>(a.window, group, a.act, w, b));
}

}  // namespace

const ConvFns kConvFns{&MakeConv, &MakeConvTranspose};

void SetConvPath(ConvPath p) { g_conv_override.store(static_cast<int>(p), std::memory_order_relaxed); }

}  // namespace whittle::cpu
