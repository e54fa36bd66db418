#include "kernels/cpu/recurrent.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/cpu/sgemm.h"

namespace whittle::cpu {
namespace {

// Below this many multiply-adds a GEMM runs on one thread: OpenMP fork/join costs more.
constexpr int64_t kMinParallelMacs = 1 << 17;

int GemmThreads(int64_t M, int64_t N, int64_t K, int requested) {
  return M * N * K >= kMinParallelMacs ? std::max(1, requested) : 1;
}

// Biases of one call, per direction: xb[d] is added to X·W^T (Wb + Rb for every gate, except
// GRU's h gate with linear_before_reset, whose Rbh sits inside r ⊙ (...)); rbh[d] is that Rbh.
struct Biases {
  std::vector<float> xb, rbh;
};

Biases MakeBiases(const RecurrentAttrs& a, const float* B, int nd, int64_t H) {
  const int64_t G = RecurrentGates(a.op), GH = G * H;
  Biases out;
  out.xb.assign(static_cast<size_t>(nd * GH), 0.f);
  out.rbh.assign(static_cast<size_t>(nd * H), 0.f);
  if (!B) return out;
  const bool split_h = a.op == RecurrentOp::kGru && a.linear_before_reset;
  for (int d = 0; d < nd; ++d) {
    const float* b = B + d * 2 * GH;
    for (int64_t k = 0; k < GH; ++k) {
      const bool rbh = split_h && k >= 2 * H;
      out.xb[static_cast<size_t>(d * GH + k)] = b[k] + (rbh ? 0.f : b[GH + k]);
      if (rbh) out.rbh[static_cast<size_t>(d * H + (k - 2 * H))] = b[GH + k];
    }
  }
  return out;
}

class RecurrentCpuKernel : public OpKernel {
 public:
  RecurrentCpuKernel(const RecurrentAttrs& a, const Tensor* w, const Tensor* r, const Tensor* b) : a_(a) {
    if (w) w_ = *w;
    if (r) r_ = *r;
    if (b && b->rank() == 2 && b->dim(0) == a.num_directions && b->dim(1) % (2 * RecurrentGates(a.op)) == 0) {
      biases_ = MakeBiases(a, b->data<float>(), a.num_directions, b->dim(1) / (2 * RecurrentGates(a.op)));
      has_biases_ = true;
    }
  }

  Status Compute(KernelContext& ctx) const override {
    RecurrentDims d;
    WH_RETURN_IF_ERROR(d.Resolve(a_, ctx.inputs));
    auto input = [&](int i) -> const Tensor* {
      return i < static_cast<int>(ctx.inputs.size()) ? ctx.inputs[static_cast<size_t>(i)] : nullptr;
    };
    auto output = [&](int i) -> Tensor* {
      return i < static_cast<int>(ctx.outputs.size()) ? ctx.outputs[static_cast<size_t>(i)] : nullptr;
    };
    WH_ASSIGN_OR_RETURN(std::vector<int64_t> lens, ResolveSequenceLengths(input(kRnnSeqLens), d));
    const bool lstm = a_.op == RecurrentOp::kLstm;
    const float* X = input(kRnnX)->data<float>();
    const float* W = w_.defined() ? w_.data<float>() : input(kRnnW)->data<float>();
    const float* R = r_.defined() ? r_.data<float>() : input(kRnnR)->data<float>();
    Biases call_biases;
    const Biases* biases = &biases_;
    if (!has_biases_) {
      const Tensor* b = input(kRnnB);
      call_biases = MakeBiases(a_, b ? b->data<float>() : nullptr, d.num_directions, d.hidden);
      biases = &call_biases;
    }
    const Tensor* h0 = input(kRnnInitialH);
    const Tensor* c0 = lstm ? input(kRnnInitialC) : nullptr;
    const Tensor* p = lstm ? input(kRnnP) : nullptr;
    Tensor* y = output(0);
    Tensor* yh = output(1);
    Tensor* yc = lstm ? output(2) : nullptr;
    float* Y = y ? y->data<float>() : nullptr;
    int64_t max_len = 0;
    bool all_full = true;
    for (int64_t l : lens) {
      max_len = std::max(max_len, l);
      all_full = all_full && l == d.seq;
    }
    if (Y && !all_full) std::fill(Y, Y + y->numel(), 0.f);

    const int64_t H = d.hidden, I = d.input, G = d.gates, GH = G * H, N = d.batch;
    const int64_t rows = d.seq * N;
    const bool gru_split = a_.op == RecurrentOp::kGru && !a_.linear_before_reset;
    // R columns multiplied by H_{t-1} in the per-step GEMM (GRU without linear_before_reset
    // multiplies Rh by r ⊙ H_{t-1} separately).
    const int64_t GHr = gru_split ? 2 * H : GH;
    std::vector<float> xw(static_cast<size_t>(rows * GH)), hr(static_cast<size_t>(N * GH));
    std::vector<float> h(static_cast<size_t>(N * H)), c(static_cast<size_t>(lstm ? N * H : 0));
    std::vector<float> rh(static_cast<size_t>(gru_split ? N * H : 0)), z(static_cast<size_t>(gru_split ? N * H : 0));
    for (int dir = 0; dir < d.num_directions; ++dir) {
      const float* Wd = W + dir * GH * I;
      const float* Rd = R + dir * GH * H;
      const float* xb = biases->xb.data() + dir * GH;
      const float* rbh = biases->rbh.data() + dir * H;
      const float* Pd = p ? p->data<float>() + dir * 3 * H : nullptr;
      const RnnActivation& f = a_.act(dir, 0);
      const RnnActivation& g = a_.act(dir, a_.per_direction > 1 ? 1 : 0);
      const RnnActivation& hact = a_.act(dir, a_.per_direction > 2 ? 2 : 0);
      const bool backward = a_.Backward(dir);
      // Every step's input projection at once; rows follow X's layout.
      if (rows > 0 && I > 0)
        Sgemm(false, true, rows, GH, I, 1.f, X, I, Wd, I, 0.f, xw.data(), GH, GemmThreads(rows, GH, I, ctx.num_threads));
      else
        std::fill(xw.begin(), xw.end(), 0.f);
      for (int64_t b = 0; b < N; ++b) {
        const int64_t so = d.StateOffset(a_.layout, dir, b);
        for (int64_t j = 0; j < H; ++j) {
          h[static_cast<size_t>(b * H + j)] = h0 ? h0->data<float>()[so + j] : 0.f;
          if (lstm) c[static_cast<size_t>(b * H + j)] = c0 ? c0->data<float>()[so + j] : 0.f;
        }
      }
      const int step_threads = GemmThreads(N, GHr, H, ctx.num_threads);
      for (int64_t s = 0; s < max_len; ++s) {
        Sgemm(false, true, N, GHr, H, 1.f, h.data(), H, Rd, H, 0.f, hr.data(), GH, step_threads);
        if (gru_split) {
          for (int64_t b = 0; b < N; ++b) {
            const int64_t len = lens[static_cast<size_t>(b)];
            float* rhb = rh.data() + b * H;
            if (s >= len) {
              std::fill(rhb, rhb + H, 0.f);
              continue;
            }
            const int64_t t = backward ? len - 1 - s : s;
            const float* x = xw.data() + d.XRow(a_.layout, t, b) * GH;
            const float* q = hr.data() + b * GH;
            const float* hb = h.data() + b * H;
            float* zb = z.data() + b * H;
            for (int64_t j = 0; j < H; ++j) {
              zb[j] = f(a_.Clip(x[j] + xb[j] + q[j]));
              const float r = f(a_.Clip(x[H + j] + xb[H + j] + q[H + j]));
              rhb[j] = r * hb[j];
            }
          }
          // (r ⊙ H_{t-1})·Rh^T into the h-gate columns of hr.
          Sgemm(false, true, N, H, H, 1.f, rh.data(), H, Rd + 2 * H * H, H, 0.f, hr.data() + 2 * H, GH,
                GemmThreads(N, H, H, ctx.num_threads));
        }
        for (int64_t b = 0; b < N; ++b) {
          const int64_t len = lens[static_cast<size_t>(b)];
          if (s >= len) continue;
          const int64_t t = backward ? len - 1 - s : s;
          const float* x = xw.data() + d.XRow(a_.layout, t, b) * GH;
          const float* q = hr.data() + b * GH;
          float* hb = h.data() + b * H;
          switch (a_.op) {
            case RecurrentOp::kRnn:
              for (int64_t j = 0; j < H; ++j) hb[j] = f(a_.Clip(x[j] + xb[j] + q[j]));
              break;
            case RecurrentOp::kGru:
              if (gru_split) {
                const float* zb = z.data() + b * H;
                for (int64_t j = 0; j < H; ++j) {
                  const float hh = g(a_.Clip(x[2 * H + j] + xb[2 * H + j] + q[2 * H + j]));
                  hb[j] = (1.f - zb[j]) * hh + zb[j] * hb[j];
                }
              } else {
                for (int64_t j = 0; j < H; ++j) {
                  const float zj = f(a_.Clip(x[j] + xb[j] + q[j]));
                  const float r = f(a_.Clip(x[H + j] + xb[H + j] + q[H + j]));
                  const float hh = g(a_.Clip(x[2 * H + j] + xb[2 * H + j] + r * (q[2 * H + j] + rbh[j])));
                  hb[j] = (1.f - zj) * hh + zj * hb[j];
                }
              }
              break;
            case RecurrentOp::kLstm: {
              float* cb = c.data() + b * H;
              for (int64_t j = 0; j < H; ++j) {
                const float cp = cb[j];
                const float pi = Pd ? Pd[j] * cp : 0.f;
                const float i = f(a_.Clip(x[j] + xb[j] + q[j] + pi));
                const float fg = a_.input_forget
                                     ? 1.f - i
                                     : f(a_.Clip(x[2 * H + j] + xb[2 * H + j] + q[2 * H + j] + (Pd ? Pd[2 * H + j] * cp : 0.f)));
                const float gg = g(a_.Clip(x[3 * H + j] + xb[3 * H + j] + q[3 * H + j]));
                const float cn = fg * cp + i * gg;
                const float o = f(a_.Clip(x[H + j] + xb[H + j] + q[H + j] + (Pd ? Pd[H + j] * cn : 0.f)));
                cb[j] = cn;
                hb[j] = o * hact(cn);  // the cell unclipped, as in ONNX Runtime
              }
              break;
            }
          }
          if (Y) std::memcpy(Y + d.YOffset(a_.layout, t, dir, b), hb, static_cast<size_t>(H) * sizeof(float));
        }
      }
      for (int64_t b = 0; b < N; ++b) {
        const int64_t so = d.StateOffset(a_.layout, dir, b);
        // An empty sequence has no last step: its Y_h and Y_c are zero (as in ONNX Runtime).
        if (lens[static_cast<size_t>(b)] == 0) {
          std::fill(h.begin() + b * H, h.begin() + (b + 1) * H, 0.f);
          if (lstm) std::fill(c.begin() + b * H, c.begin() + (b + 1) * H, 0.f);
        }
        if (yh) std::memcpy(yh->data<float>() + so, h.data() + b * H, static_cast<size_t>(H) * sizeof(float));
        if (yc) std::memcpy(yc->data<float>() + so, c.data() + b * H, static_cast<size_t>(H) * sizeof(float));
      }
    }
    return Status::Ok();
  }

 private:
  RecurrentAttrs a_;
  Tensor w_, r_;
  Biases biases_;
  bool has_biases_ = false;
};

const Tensor* ConstInput(const KernelInit& init, size_t i) {
  return i < init.const_inputs.size() ? init.const_inputs[i] : nullptr;
}

// Float32 only; other dtypes get an ok null kernel (the reference one is built instead).
KernelOr Make(const RecurrentAttrs& a, const KernelInit& init) {
  if (a.dtype != DType::kFloat32) return std::unique_ptr<OpKernel>();
  return std::unique_ptr<OpKernel>(std::make_unique<RecurrentCpuKernel>(a, ConstInput(init, kRnnW),
                                                                        ConstInput(init, kRnnR), ConstInput(init, kRnnB)));
}

}  // namespace

const RecurrentFns kRecurrentFns{&Make, &Make, &Make};

}  // namespace whittle::cpu
