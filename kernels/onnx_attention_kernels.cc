// Kernels of ai.onnx Attention (opsets 23-25), RotaryEmbedding and RMSNormalization (23; lib/ops/
// onnx_attention.cc), float32, one implementation on the reference and CPU backends (the CPU one
// spreads (batch, head) pairs or rows over threads, and runs Attention's products for 4 or more
// query rows, a prefill, as blocked GEMMs instead of the reference's per-row loops).
//
// Attention never materializes the repeated key/value heads of grouped-query attention or the
// transposes of 3-D inputs: query head h reads key/value head h / (q_num_heads / kv_num_heads) of
// the cache in place. The op's contract hands the whole cache back as a new tensor (present_key /
// present_value, [B, kv_heads, past + S, head]), so a plain run writes the past rows, then this
// call's, once per call and layer. Under Session::RunWithCaches the past lives in a KvCache
// instead (batch 1): the kernel appends only this call's rows to it and attends over it in place,
// so the past is never copied per step.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cpu/parallel.h"
#include "kernels/cpu/sgemm.h"
#include "kernels/cpu/vmath.h"
#include "kernels/kernel.h"

namespace whittle {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Element (b, h, s, t) of a Q/K/V operand, 3-D [B, S, H*D] or 4-D [B, H, S, D].
struct HeadView {
  const float* p = nullptr;
  int64_t sb = 0, sh = 0, ss = 0;  // strides of batch, head, sequence (the head's channels are contiguous)
  const float* Row(int64_t b, int64_t h, int64_t s) const { return p + b * sb + h * sh + s * ss; }
};

HeadView ViewOf(const Tensor& t, int64_t heads, int64_t dim) {
  HeadView v;
  v.p = t.data<float>();
  if (t.rank() == 3) {
    const int64_t seq = t.dim(1), hidden = heads * dim;
    v.sb = seq * hidden, v.sh = dim, v.ss = hidden;
  } else {
    const int64_t seq = t.dim(2);
    v.sb = heads * seq * dim, v.sh = seq * dim, v.ss = dim;
  }
  return v;
}

struct AttentionParams {
  bool causal = false;
  int64_t q_heads_attr = 0, kv_heads_attr = 0, mode = 0;
  float scale = 0.f;  // 0: 1 / sqrt(head_size)
  float softcap = 0.f;
  // Opset 25's sliding window: query i (at position i + offset) sees keys j with
  // i + offset - left <= j <= i + offset + right; -1 leaves that side open.
  int64_t left_window = -1, right_window = -1;
  // ai.whittle GroupedAttention: the mask broadcasts on every axis, the last too (the Add it
  // replaced), instead of ai.onnx's right-aligned shorter mask.
  bool broadcast_mask = false;
  bool gemm = false;  // the CPU backend: many query rows (prefill) run as GEMMs
};

// Query rows from which a head's product runs as GEMMs (a decode step's one row stays a loop), and
// the rows per block (the block's scores stay in cache).
constexpr int64_t kGemmMinRows = 4;
constexpr int64_t kGemmRowBlock = 64;

Status ComputeAttention(const AttentionParams& a, KernelContext& ctx) {
  const Tensor &Q = *ctx.inputs[0], &K = *ctx.inputs[1], &V = *ctx.inputs[2];
  const Tensor* mask = ctx.inputs.size() > 3 ? ctx.inputs[3] : nullptr;
  const Tensor* past_k = ctx.inputs.size() > 4 ? ctx.inputs[4] : nullptr;
  const Tensor* past_v = ctx.inputs.size() > 5 ? ctx.inputs[5] : nullptr;
  // Opset 24's nonpad_kv_seqlen [B]: keys at or past it are padding (an external cache).
  const Tensor* nonpad = ctx.inputs.size() > 6 ? ctx.inputs[6] : nullptr;
  const int rank = Q.rank();
  if ((rank != 3 && rank != 4) || K.rank() != rank || V.rank() != rank)
    return InvalidArgument("Attention: Q, K and V must all be 3-D or all 4-D, got " + DimsToString(Q.dims()) + ", " +
                           DimsToString(K.dims()) + ", " + DimsToString(V.dims()));
  const int64_t B = Q.dim(0);
  int64_t qh, kvh, qs, kvs, hd, vd;
  if (rank == 3) {
    qh = a.q_heads_attr, kvh = a.kv_heads_attr;
    if (qh < 1 || kvh < 1) return InvalidArgument("Attention: 3-D inputs need q_num_heads and kv_num_heads");
    if (Q.dim(2) % qh || K.dim(2) % kvh || V.dim(2) % kvh)
      return InvalidArgument("Attention: hidden sizes " + DimsToString({Q.dim(2), K.dim(2), V.dim(2)}) +
                             " do not divide into " + std::to_string(qh) + " query and " + std::to_string(kvh) +
                             " key/value heads");
    qs = Q.dim(1), kvs = K.dim(1), hd = Q.dim(2) / qh, vd = V.dim(2) / kvh;
    if (K.dim(2) / kvh != hd) return InvalidArgument("Attention: query and key head sizes differ");
    if (V.dim(1) != kvs) return InvalidArgument("Attention: K and V sequence lengths differ");
  } else {
    qh = Q.dim(1), kvh = K.dim(1), qs = Q.dim(2), kvs = K.dim(2), hd = Q.dim(3), vd = V.dim(3);
    if (K.dim(3) != hd || V.dim(1) != kvh || V.dim(2) != kvs)
      return InvalidArgument("Attention: K " + DimsToString(K.dims()) + " and V " + DimsToString(V.dims()) +
                             " do not fit Q " + DimsToString(Q.dims()));
  }
  if (K.dim(0) != B || V.dim(0) != B) return InvalidArgument("Attention: Q, K and V batch sizes differ");
  if (kvh < 1 || qh % kvh != 0)
    return InvalidArgument("Attention: " + std::to_string(qh) + " query heads are not a multiple of " +
                           std::to_string(kvh) + " key/value heads");
  if ((past_k == nullptr) != (past_v == nullptr)) return InvalidArgument("Attention: past_key and past_value come together");
  int64_t ps = 0;
  if (past_k) {
    ps = past_k->rank() == 4 ? past_k->dim(2) : -1;
    if (past_k->rank() != 4 || past_k->dims() != Dims{B, kvh, ps, hd} || past_v->dims() != Dims{B, kvh, ps, vd})
      return InvalidArgument("Attention: past_key " + DimsToString(past_k->dims()) + " / past_value " +
                             DimsToString(past_v->dims()) + " must be [" + std::to_string(B) + ", " + std::to_string(kvh) +
                             ", past, " + std::to_string(hd) + " / " + std::to_string(vd) + "]");
  }
  if (nonpad) {
    if (past_k) return InvalidArgument("Attention: nonpad_kv_seqlen cannot be combined with past_key and past_value");
    if (nonpad->dtype() != DType::kInt64 || nonpad->dims() != Dims{B})
      return InvalidArgument("Attention: nonpad_kv_seqlen must be int64 [" + std::to_string(B) + "], got " +
                             DimsToString(nonpad->dims()));
  }
  const int64_t T = ps + kvs, reps = qh / kvh;
  const Dims y_dims = rank == 3 ? Dims{B, qs, qh * vd} : Dims{B, qh, qs, vd};
  Tensor* Y = ctx.outputs[0];
  if (!Y || Y->dims() != y_dims)
    return Internal("Attention: output Y is not " + DimsToString(y_dims));
  // The whole cache, [B, kvh, T, hd|vd], head (b, h) at kbase + (b * kvh + h) * kstride: a KvCache
  // grown in place (rows past its length written), else present_* when asked for, else scratch.
  KvCache* ck = ctx.Cache(4);
  KvCache* cv = ctx.Cache(5);
  const HeadView kin = ViewOf(K, kvh, hd), vin = ViewOf(V, kvh, vd);
  float *kbase = nullptr, *vbase = nullptr;
  int64_t kstride = T * hd, vstride = T * vd;
  Tensor scratch_k, scratch_v;
  if (ck || cv) {
    if (!ck || !cv || !past_k) return Internal("Attention: a cache grown in place needs both past inputs bound");
    if (B != 1 || ck->heads() != kvh || ck->dim() != hd || ck->length() != ps || cv->heads() != kvh ||
        cv->dim() != vd || cv->length() != ps)
      return InvalidArgument("Attention: the bound key/value caches (" + std::to_string(ck->heads()) + " x " +
                             std::to_string(ck->length()) + " x " + std::to_string(ck->dim()) + ") do not fit past " +
                             DimsToString(past_k->dims()));
    WH_RETURN_IF_ERROR(ck->Reserve(T));
    WH_RETURN_IF_ERROR(cv->Reserve(T));
    kbase = ck->row(0, 0), vbase = cv->row(0, 0);
    kstride = ck->capacity() * hd, vstride = cv->capacity() * vd;
    for (int64_t h = 0; h < kvh; ++h)
      for (int64_t s = 0; s < kvs; ++s) {
        std::copy_n(kin.Row(0, h, s), hd, ck->row(h, ps + s));
        std::copy_n(vin.Row(0, h, s), vd, cv->row(h, ps + s));
      }
  } else {
    Tensor* pk = ctx.outputs.size() > 1 ? ctx.outputs[1] : nullptr;
    Tensor* pv = ctx.outputs.size() > 2 ? ctx.outputs[2] : nullptr;
    if (!pk) pk = &(scratch_k = Tensor(DType::kFloat32, {B, kvh, T, hd}));
    if (!pv) pv = &(scratch_v = Tensor(DType::kFloat32, {B, kvh, T, vd}));
    if (pk->dims() != Dims{B, kvh, T, hd} || pv->dims() != Dims{B, kvh, T, vd})
      return Internal("Attention: present outputs do not fit the cache");
    kbase = pk->data<float>(), vbase = pv->data<float>();
    // Empty operands can carry any dims: the loops below run only over what has elements.
    if (pk->numel() + pv->numel() > 0) {
      for (int64_t b = 0; b < B; ++b)
        for (int64_t h = 0; h < kvh; ++h) {
          float* kd = kbase + (b * kvh + h) * kstride;
          float* vdst = vbase + (b * kvh + h) * vstride;
          if (ps > 0) {
            std::copy_n(past_k->data<float>() + (b * kvh + h) * ps * hd, ps * hd, kd);
            std::copy_n(past_v->data<float>() + (b * kvh + h) * ps * vd, ps * vd, vdst);
          }
          for (int64_t s = 0; s < kvs; ++s) {
            std::copy_n(kin.Row(b, h, s), hd, kd + (ps + s) * hd);
            std::copy_n(vin.Row(b, h, s), vd, vdst + (ps + s) * vd);
          }
        }
    }
  }
  // The mask, right-aligned against [B, qh, qs, Tm]: Tm <= T, and keys past Tm are masked (the
  // reference pads a short mask with -inf / false; it does not broadcast its last axis).
  int64_t ms[4] = {0, 0, 0, 0}, mask_t = 0;
  const bool mask_bool = mask && mask->dtype() == DType::kBool;
  if (mask) {
    if (mask->rank() < 1 || mask->rank() > 4)
      return InvalidArgument("Attention: attn_mask must have rank 1 to 4, got " + DimsToString(mask->dims()));
    if (mask->dtype() != DType::kBool && mask->dtype() != DType::kFloat32)
      return InvalidArgument("Attention: attn_mask must be bool or float32");
    const Dims want{B, qh, qs, T};
    int64_t stride = 1;
    for (int i = mask->rank() - 1, j = 3; i >= 0; --i, --j) {
      const int64_t d = mask->dim(i);
      const bool last = j == 3 && !a.broadcast_mask;
      if (last ? d > T : (d != 1 && d != want[static_cast<size_t>(j)]))
        return InvalidArgument("Attention: attn_mask " + DimsToString(mask->dims()) + " does not broadcast to " +
                               DimsToString(want));
      ms[j] = (d == 1 && !last) ? 0 : stride;
      if (last) mask_t = d;
      if (j == 3 && a.broadcast_mask) mask_t = T;
      stride *= d;
    }
  }
  const float scale = std::sqrt(a.scale > 0.f ? a.scale : 1.f / std::sqrt(static_cast<float>(hd)));
  const HeadView qin = ViewOf(Q, qh, hd);
  Tensor* qk_out = ctx.outputs.size() > 3 ? ctx.outputs[3] : nullptr;
  if (qk_out && qk_out->dims() != Dims{B, qh, qs, T}) return Internal("Attention: qk_matmul_output does not fit");
  if (Y->numel() == 0 && (!qk_out || qk_out->numel() == 0)) return Status::Ok();
  float* yp = Y->data<float>();
  const int threads = B * qh * qs * T * hd >= (1 << 15) ? ctx.num_threads : 1;
  // Row i of head (b, h)'s T scores -> probabilities in place: softcap, the mask and causal bias,
  // softmax (a row whose bias masks every key attends to nothing: all 0); qk_row, where asked,
  // gets the copy qk_matmul_output_mode names.
  auto normalize = [&](float* row, int64_t b, int64_t h, int64_t i, float* qk_row) {
    if (a.softcap > 0.f)
      for (int64_t j = 0; j < T; ++j) row[j] = a.softcap * std::tanh(row[j] / a.softcap);
    if (qk_row && a.mode <= 1) std::copy(row, row + T, qk_row);
    float bias_max = kNegInf, mx = kNegInf;
    const int64_t base = b * ms[0] + h * ms[1] + i * ms[2];
    // Query i sits at position i + offset among the keys: after the past, or (an external cache)
    // the last of the nonpad_kv_seqlen valid keys' rows. Keys past the mask's length, padding
    // keys, and, when causal, keys past the diagonal are -inf; so are those outside the window.
    const int64_t np = nonpad ? nonpad->data<int64_t>()[b] : T;
    const int64_t pos = i + (nonpad ? np - qs : ps);
    int64_t open = std::min(mask ? std::min(T, mask_t) : T, std::max<int64_t>(np, 0));
    if (a.causal) open = std::min(open, pos + 1);
    if (a.right_window >= 0) open = std::min(open, pos + a.right_window + 1);
    const int64_t first = a.left_window >= 0 ? std::max<int64_t>(pos - a.left_window, 0) : 0;
    for (int64_t j = 0; j < std::min(first, T); ++j) row[j] = kNegInf;
    for (int64_t j = first; j < open; ++j) {
      float bj = 0.f;
      if (mask) {
        const int64_t off = base + j * ms[3];
        bj = mask_bool ? (mask->data<bool>()[off] ? 0.f : kNegInf) : mask->data<float>()[off];
      }
      bias_max = std::max(bias_max, bj);
      row[j] += bj;
      mx = std::max(mx, row[j]);
    }
    for (int64_t j = std::max<int64_t>(open, 0); j < T; ++j) row[j] = kNegInf;
    if (qk_row && a.mode == 2) std::copy(row, row + T, qk_row);
    if (T == 0 || bias_max == kNegInf) {
      std::fill(row, row + T, 0.f);
    } else {
      const float shift = mx == kNegInf ? 0.f : mx;
      const float sum = a.gemm ? cpu::VExpShiftSum(row, row, T, shift) : [&] {
        float acc = 0.f;
        for (int64_t j = 0; j < T; ++j) acc += (row[j] = std::exp(row[j] - shift));
        return acc;
      }();
      const float inv = sum > 0.f ? 1.f / sum : 0.f;
      for (int64_t j = 0; j < T; ++j) row[j] *= inv;
    }
    if (qk_row && a.mode == 3) std::copy(row, row + T, qk_row);
  };
  const int64_t ldy = rank == 3 ? qh * vd : vd;  // Y's row stride
  ParallelFor(B * qh, threads, [&](int64_t task) {
    const int64_t b = task / qh, h = task % qh, g = h / reps;
    const float* kc = kbase + (b * kvh + g) * kstride;
    const float* vc = vbase + (b * kvh + g) * vstride;
    float* y0 = rank == 3 ? yp + b * qs * qh * vd + h * vd : yp + (b * qh + h) * qs * vd;
    if (a.gemm && !qk_out && qs >= kGemmMinRows && T > 0) {
      // The CPU backend's prefill: blocks of query rows, S = scale * Q K^T and Y = P V as GEMMs
      // reading the cache in place (one thread each: the heads are the parallel loop).
      const int64_t blk = std::min(qs, kGemmRowBlock);
      std::vector<float> sc(static_cast<size_t>(blk * T));
      for (int64_t i0 = 0; i0 < qs; i0 += blk) {
        const int64_t m = std::min(blk, qs - i0);
        Sgemm(false, true, m, T, hd, scale * scale, qin.Row(b, h, i0), qin.ss, kc, hd, 0.f, sc.data(), T, 1);
        for (int64_t r = 0; r < m; ++r) normalize(sc.data() + r * T, b, h, i0 + r, nullptr);
        Sgemm(false, false, m, vd, T, 1.f, sc.data(), T, vc, vd, 0.f, y0 + i0 * ldy, ldy, 1);
      }
      return;
    }
    std::vector<float> qsc(static_cast<size_t>(hd)), score(static_cast<size_t>(T));
    std::vector<double> acc(static_cast<size_t>(vd));
    for (int64_t i = 0; i < qs; ++i) {
      const float* q = qin.Row(b, h, i);
      for (int64_t t = 0; t < hd; ++t) qsc[static_cast<size_t>(t)] = q[t] * scale;
      for (int64_t j = 0; j < T; ++j) {
        const float* k = kc + j * hd;
        float s0 = 0.f, s1 = 0.f, s2 = 0.f, s3 = 0.f;
        int64_t t = 0;
        for (; t + 4 <= hd; t += 4) {
          s0 += qsc[static_cast<size_t>(t)] * (k[t] * scale);
          s1 += qsc[static_cast<size_t>(t + 1)] * (k[t + 1] * scale);
          s2 += qsc[static_cast<size_t>(t + 2)] * (k[t + 2] * scale);
          s3 += qsc[static_cast<size_t>(t + 3)] * (k[t + 3] * scale);
        }
        for (; t < hd; ++t) s0 += qsc[static_cast<size_t>(t)] * (k[t] * scale);
        score[static_cast<size_t>(j)] = (s0 + s1) + (s2 + s3);
      }
      float* qk_row = qk_out ? qk_out->data<float>() + ((b * qh + h) * qs + i) * T : nullptr;
      normalize(score.data(), b, h, i, qk_row);
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t j = 0; j < T; ++j) {
        const float p = score[static_cast<size_t>(j)];
        if (p == 0.f) continue;
        const float* v = vc + j * vd;
        for (int64_t t = 0; t < vd; ++t) acc[static_cast<size_t>(t)] += static_cast<double>(p) * v[t];
      }
      float* y = y0 + i * ldy;
      for (int64_t t = 0; t < vd; ++t) y[t] = static_cast<float>(acc[static_cast<size_t>(t)]);
    }
  });
  return Status::Ok();
}

// past_key (input 4) and past_value (5) grow in place into present_key (output 1) and
// present_value (2) under Session::RunWithCaches.
class OnnxAttentionKernel : public OpKernel {
 public:
  explicit OnnxAttentionKernel(const AttentionParams& a) : a_(a) {}
  Status Compute(KernelContext& ctx) const override { return ComputeAttention(a_, ctx); }
  uint64_t InPlaceCacheInputs() const override { return (uint64_t{1} << 4) | (uint64_t{1} << 5); }
  int InPlaceCacheOutput(int input) const override { return input == 4 ? 1 : input == 5 ? 2 : -1; }

 private:
  AttentionParams a_;
};

StatusOr<std::unique_ptr<OpKernel>> MakeOnnxAttention(const KernelInit& init) {
  AttentionParams a;
  a.causal = init.attrs.GetInt("is_causal", 0) != 0;
  a.q_heads_attr = init.attrs.GetInt("q_num_heads", 0);
  a.kv_heads_attr = init.attrs.GetInt("kv_num_heads", 0);
  a.mode = init.attrs.GetInt("qk_matmul_output_mode", 0);
  a.scale = init.attrs.GetFloat("scale", 0.f);
  a.softcap = init.attrs.GetFloat("softcap", 0.f);
  a.left_window = init.attrs.GetInt("left_window_size", -1);
  a.right_window = init.attrs.GetInt("right_window_size", -1);
  a.broadcast_mask = init.attrs.GetInt("_broadcast_mask", 0) != 0;
  a.gemm = init.backend == Backend::kCpu;
  return std::unique_ptr<OpKernel>(new OnnxAttentionKernel(a));
}

Status ComputeRotary(bool interleaved, int64_t num_heads, int64_t rot_attr, KernelContext& ctx) {
  const Tensor &X = *ctx.inputs[0], &cos = *ctx.inputs[1], &sin = *ctx.inputs[2];
  const Tensor* pos = ctx.inputs.size() > 3 ? ctx.inputs[3] : nullptr;
  Tensor& Y = *ctx.outputs[0];
  if (X.rank() != 3 && X.rank() != 4)
    return InvalidArgument("RotaryEmbedding: input must be 3-D or 4-D, got " + DimsToString(X.dims()));
  const int64_t B = X.dim(0);
  int64_t H, S, D;
  if (X.rank() == 4) {
    H = X.dim(1), S = X.dim(2), D = X.dim(3);
  } else {
    if (num_heads < 1) return InvalidArgument("RotaryEmbedding: a 3-D input needs num_heads");
    if (X.dim(2) % num_heads) return InvalidArgument("RotaryEmbedding: hidden size does not divide into num_heads");
    H = num_heads, S = X.dim(1), D = X.dim(2) / num_heads;
  }
  const int64_t rot = rot_attr > 0 ? rot_attr : D, half = rot / 2;
  if (rot % 2 || rot > D)
    return InvalidArgument("RotaryEmbedding: rotary_embedding_dim " + std::to_string(rot) +
                           " must be even and at most the head size " + std::to_string(D));
  // cos/sin rows: [max_position, half] gathered by position_ids [B, S], or [B, S, half].
  if (pos) {
    if (pos->dims() != Dims{B, S}) return InvalidArgument("RotaryEmbedding: position_ids must be [batch, sequence]");
    if (cos.rank() != 2 || cos.dim(1) != half || sin.dims() != cos.dims())
      return InvalidArgument("RotaryEmbedding: with position_ids, cos_cache and sin_cache must be [max_position, " +
                             std::to_string(half) + "], got " + DimsToString(cos.dims()) + " and " + DimsToString(sin.dims()));
    for (int64_t i = 0; i < pos->numel(); ++i) {
      const int64_t p = pos->data<int64_t>()[i];
      if (p < 0 || p >= cos.dim(0))
        return InvalidArgument("RotaryEmbedding: position id " + std::to_string(p) + " is outside the " +
                               std::to_string(cos.dim(0)) + " cached positions");
    }
  } else if (cos.dims() != Dims{B, S, half} || sin.dims() != cos.dims()) {
    return InvalidArgument("RotaryEmbedding: without position_ids, cos_cache and sin_cache must be [batch, sequence, " +
                           std::to_string(half) + "], got " + DimsToString(cos.dims()));
  }
  if (X.numel() == 0) return Status::Ok();  // (its dims may be anything)
  const float* x = X.data<float>();
  float* y = Y.data<float>();
  const bool four = X.rank() == 4;
  ParallelFor(B * S, ctx.num_threads, [&](int64_t bs) {
    const int64_t b = bs / S, s = bs % S;
    const int64_t row = pos ? pos->data<int64_t>()[bs] : bs;
    const float* c = cos.data<float>() + row * half;
    const float* sn = sin.data<float>() + row * half;
    for (int64_t h = 0; h < H; ++h) {
      const int64_t off = four ? ((b * H + h) * S + s) * D : (bs * H + h) * D;
      const float* xi = x + off;
      float* yo = y + off;
      for (int64_t i = 0; i < half; ++i) {
        const int64_t i1 = interleaved ? 2 * i : i, i2 = interleaved ? 2 * i + 1 : i + half;
        const float x1 = xi[i1], x2 = xi[i2];
        yo[i1] = c[i] * x1 - sn[i] * x2;
        yo[i2] = sn[i] * x1 + c[i] * x2;
      }
      std::copy(xi + rot, xi + D, yo + rot);
    }
  });
  return Status::Ok();
}

Status ComputeRmsNorm(int64_t axis_attr, float eps, KernelContext& ctx) {
  const Tensor &X = *ctx.inputs[0], &W = *ctx.inputs[1];
  Tensor& Y = *ctx.outputs[0];
  const int r = X.rank();
  const int64_t axis = axis_attr < 0 ? axis_attr + r : axis_attr;
  if (axis < 0 || axis >= r) return InvalidArgument("RMSNormalization: axis is outside the input's rank");
  if (X.numel() == 0) return Status::Ok();  // (its dims may be anything)
  int64_t n = 1;
  for (int i = static_cast<int>(axis); i < r; ++i) n *= X.dim(i);
  // scale broadcasts (right-aligned) over the normalized dims [axis, r).
  if (W.rank() > r - axis)
    return InvalidArgument("RMSNormalization: scale " + DimsToString(W.dims()) + " does not broadcast to the normalized shape");
  std::vector<int64_t> wstride(static_cast<size_t>(r - axis), 0);
  for (int i = W.rank() - 1, j = r - 1, stride = 1; i >= 0; --i, --j) {
    if (W.dim(i) != 1 && W.dim(i) != X.dim(j))
      return InvalidArgument("RMSNormalization: scale " + DimsToString(W.dims()) + " does not broadcast to " +
                             DimsToString(X.dims()) + " from axis " + std::to_string(axis));
    wstride[static_cast<size_t>(j - axis)] = W.dim(i) == 1 ? 0 : stride;
    stride *= static_cast<int>(W.dim(i));
  }
  std::vector<int64_t> wofs(static_cast<size_t>(n));
  for (int64_t e = 0; e < n; ++e) {  // scale offset of each normalized element
    int64_t rem = e, off = 0;
    for (int j = r - 1; j >= axis; --j) {
      off += (rem % X.dim(j)) * wstride[static_cast<size_t>(j - axis)];
      rem /= X.dim(j);
    }
    wofs[static_cast<size_t>(e)] = off;
  }
  const int64_t rows = n == 0 ? 0 : X.numel() / n;
  const float* x = X.data<float>();
  const float* w = W.data<float>();
  float* y = Y.data<float>();
  ParallelFor(rows, rows * n >= (1 << 14) ? ctx.num_threads : 1, [&](int64_t row) {
    const float* xr = x + row * n;
    float* yr = y + row * n;
    double ss = 0;
    for (int64_t e = 0; e < n; ++e) ss += static_cast<double>(xr[e]) * xr[e];
    const float inv = 1.f / std::sqrt(static_cast<float>(ss / static_cast<double>(n)) + eps);
    for (int64_t e = 0; e < n; ++e) yr[e] = xr[e] * inv * w[wofs[static_cast<size_t>(e)]];
  });
  return Status::Ok();
}

}  // namespace

void RegisterOnnxAttentionKernels(KernelRegistry& r) {
  for (Backend b : {Backend::kReference, Backend::kCpu}) {
    r.Add(DeclareKernel(b, "", "Attention", {DType::kFloat32}, MakeOnnxAttention, 23));
    r.Add(DeclareKernel(b, kWhittleDomain, "GroupedAttention", {DType::kFloat32}, MakeOnnxAttention));
    r.Add(DeclareKernel(b, "", "RotaryEmbedding", {DType::kFloat32},
                        [](const KernelInit& init) -> StatusOr<std::unique_ptr<OpKernel>> {
                          const bool inter = init.attrs.GetInt("interleaved", 0) != 0;
                          const int64_t heads = init.attrs.GetInt("num_heads", 0);
                          const int64_t rot = init.attrs.GetInt("rotary_embedding_dim", 0);
                          return WrapFnKernel([=](KernelContext& ctx) { return ComputeRotary(inter, heads, rot, ctx); });
                        },
                        23));
    r.Add(DeclareKernel(b, "", "RMSNormalization", {DType::kFloat32},
                        [](const KernelInit& init) -> StatusOr<std::unique_ptr<OpKernel>> {
                          const int64_t axis = init.attrs.GetInt("axis", -1);
                          const float eps = init.attrs.GetFloat("epsilon", 1e-5f);
                          return WrapFnKernel([=](KernelContext& ctx) { return ComputeRmsNorm(axis, eps, ctx); });
                        }));  // any opset: the runtime fuses written-out RMS norms of older models into it
                              // (runtime/rewrite/fuse_layernorm.h); a model's own node is checked at load
  }
}

}  // namespace whittle
