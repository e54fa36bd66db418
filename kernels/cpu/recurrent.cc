#include "kernels/cpu/recurrent.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/cpu/packed_gemm.h"
#include "kernels/cpu/sgemm.h"
#include "kernels/cpu/vmath.h"

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

// v[i] = act(v[i]) for i < n, clipped first by the node's clip when one is given: sigmoid and tanh
// on the vectorized vmath paths (the gates of every exported LSTM and GRU), the other activations
// element by element.
void Activate(const RnnActivation& act, float* v, int64_t n, const RecurrentAttrs* clip) {
  if (clip && clip->has_clip)
    for (int64_t i = 0; i < n; ++i) v[i] = clip->Clip(v[i]);
  if (act.kind == RnnActivation::kSigmoid) return VMap(VFn::kSigmoid, v, v, n);
  if (act.kind == RnnActivation::kTanh) return VMap(VFn::kTanh, v, v, n);
  for (int64_t i = 0; i < n; ++i) v[i] = act(v[i]);
}

// out[i] = x[i] + xb[i] + q[i]: a step's gate pre-activations.
void SumGates(const float* x, const float* xb, const float* q, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] + xb[i] + q[i];
}

// A constant weight of one direction packed for PackedGemmB: W (X·W^T) or R (H·R^T), rows
// [row0, row0 + rows) of that direction's [gates*hidden, cols] block.
std::vector<PackedGemmB> PackDirections(const Tensor& w, int nd, int64_t row0, int64_t rows) {
  std::vector<PackedGemmB> out;
  if (!w.defined() || w.rank() != 3 || w.dim(0) != nd) return out;
  const int64_t per = w.dim(1), cols = w.dim(2);
  if (row0 + rows > per) return out;
  for (int d = 0; d < nd; ++d)
    out.emplace_back(w.data<float>() + (d * per + row0) * cols, /*trans=*/true, cols, rows);
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
    // Constant weights packed once (packed_gemm.h): the per-step product of a small batch is a
    // matrix-vector product that a per-call packing GEMM spends most of its time packing for.
    if (r_.defined() && r_.rank() == 3 && r_.dim(1) % RecurrentGates(a.op) == 0) {
      const int64_t H = r_.dim(1) / RecurrentGates(a.op);
      const bool gru_split = a.op == RecurrentOp::kGru && !a.linear_before_reset;
      r_packed_ = PackDirections(r_, a.num_directions, 0, gru_split ? 2 * H : r_.dim(1));
      if (gru_split) rh_packed_ = PackDirections(r_, a.num_directions, 2 * H, H);
    }
    if (w_.defined()) w_packed_ = PackDirections(w_, a.num_directions, 0, w_.rank() == 3 ? w_.dim(1) : 0);
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
    std::vector<float> gate(static_cast<size_t>(5 * H));  // one batch row's gates (+ LSTM's new cell)
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
      const PackedGemmB* wp = Packed(w_packed_, dir, I, GH);
      if (rows > 0 && I > 0 && wp && PackedGemmPreferred(rows, GH))
        wp->Multiply(rows, X, I, xw.data(), GH, nullptr, false, GemmThreads(rows, GH, I, ctx.num_threads));
      else if (rows > 0 && I > 0)
        Sgemm(false, true, rows, GH, I, 1.f, X, I, Wd, I, 0.f, xw.data(), GH, GemmThreads(rows, GH, I, ctx.num_threads));
      else
        std::fill(xw.begin(), xw.end(), 0.f);
      const PackedGemmB* rp = Packed(r_packed_, dir, H, GHr);
      const PackedGemmB* rhp = gru_split ? Packed(rh_packed_, dir, H, H) : nullptr;
      const bool packed_steps = rp && PackedGemmPreferred(N, GHr) && (!gru_split || rhp);
      for (int64_t b = 0; b < N; ++b) {
        const int64_t so = d.StateOffset(a_.layout, dir, b);
        for (int64_t j = 0; j < H; ++j) {
          h[static_cast<size_t>(b * H + j)] = h0 ? h0->data<float>()[so + j] : 0.f;
          if (lstm) c[static_cast<size_t>(b * H + j)] = c0 ? c0->data<float>()[so + j] : 0.f;
        }
      }
      const int step_threads = GemmThreads(N, GHr, H, ctx.num_threads);
      for (int64_t s = 0; s < max_len; ++s) {
        if (packed_steps) rp->Multiply(N, h.data(), H, hr.data(), GH, nullptr, false, step_threads);
        else Sgemm(false, true, N, GHr, H, 1.f, h.data(), H, Rd, H, 0.f, hr.data(), GH, step_threads);
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
            // z and r side by side in gate, then r ⊙ H_{t-1}.
            SumGates(x, xb, q, gate.data(), 2 * H);
            Activate(f, gate.data(), 2 * H, &a_);
            std::memcpy(zb, gate.data(), static_cast<size_t>(H) * sizeof(float));
            for (int64_t j = 0; j < H; ++j) rhb[j] = gate[static_cast<size_t>(H + j)] * hb[j];
          }
          // (r ⊙ H_{t-1})·Rh^T into the h-gate columns of hr.
          if (packed_steps)
            rhp->Multiply(N, rh.data(), H, hr.data() + 2 * H, GH, nullptr, false, GemmThreads(N, H, H, ctx.num_threads));
          else
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
          float* gt = gate.data();
          switch (a_.op) {
            case RecurrentOp::kRnn:
              SumGates(x, xb, q, hb, H);
              Activate(f, hb, H, &a_);
              break;
            case RecurrentOp::kGru:
              if (gru_split) {
                // q's h columns already hold (r ⊙ H_{t-1})·Rh^T.
                const float* zb = z.data() + b * H;
                SumGates(x + 2 * H, xb + 2 * H, q + 2 * H, gt, H);
                Activate(g, gt, H, &a_);
                for (int64_t j = 0; j < H; ++j) hb[j] = (1.f - zb[j]) * gt[j] + zb[j] * hb[j];
              } else {
                SumGates(x, xb, q, gt, 2 * H);
                Activate(f, gt, 2 * H, &a_);  // z, r
                float* hh = gt + 2 * H;
                for (int64_t j = 0; j < H; ++j) hh[j] = x[2 * H + j] + xb[2 * H + j] + gt[H + j] * (q[2 * H + j] + rbh[j]);
                Activate(g, hh, H, &a_);
                for (int64_t j = 0; j < H; ++j) hb[j] = (1.f - gt[j]) * hh[j] + gt[j] * hb[j];
              }
              break;
            case RecurrentOp::kLstm: {
              // Gates i, o, f, c (ONNX's order) in gt; o waits for the new cell (its peephole).
              float* cb = c.data() + b * H;
              float* cn = gt + 4 * H;
              SumGates(x, xb, q, gt, 4 * H);
              if (Pd)
                for (int64_t j = 0; j < H; ++j) {
                  gt[j] += Pd[j] * cb[j];
                  gt[2 * H + j] += Pd[2 * H + j] * cb[j];
                }
              Activate(f, gt, H, &a_);
              if (a_.input_forget)
                for (int64_t j = 0; j < H; ++j) gt[2 * H + j] = 1.f - gt[j];
              else
                Activate(f, gt + 2 * H, H, &a_);
              Activate(g, gt + 3 * H, H, &a_);
              for (int64_t j = 0; j < H; ++j) cn[j] = gt[2 * H + j] * cb[j] + gt[j] * gt[3 * H + j];
              if (Pd)
                for (int64_t j = 0; j < H; ++j) gt[H + j] += Pd[H + j] * cn[j];
              Activate(f, gt + H, H, &a_);
              std::memcpy(cb, cn, static_cast<size_t>(H) * sizeof(float));
              Activate(hact, cn, H, nullptr);  // the cell unclipped, as in ONNX Runtime
              for (int64_t j = 0; j < H; ++j) hb[j] = gt[H + j] * cn[j];
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
  // Direction dir's packing when there is one for a [K x N] product (the weight was constant and
  // had the dims the call resolved), else null.
  static const PackedGemmB* Packed(const std::vector<PackedGemmB>& p, int dir, int64_t K, int64_t N) {
    if (static_cast<size_t>(dir) >= p.size()) return nullptr;
    const PackedGemmB& b = p[static_cast<size_t>(dir)];
    return b.Valid() && b.K() == K && b.N() == N ? &b : nullptr;
  }

  RecurrentAttrs a_;
  Tensor w_, r_;
  std::vector<PackedGemmB> w_packed_, r_packed_, rh_packed_;
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
