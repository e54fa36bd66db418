// The CUDA LSTM and GRU's per-step cell (kernels/cuda/recurrent.cc drives it): per direction, the
// input products X W^T of every step come from one GEMM before the loop, and each step's H R^T
// from one GEMM over the batch; this body then applies the gates to element (b, j) of the state,
// updates h (and c) in place and writes Y, Y_h (and Y_c). Sequences shorter than the input
// (sequence_lens) keep their state and leave Y zero past their end, as the reference does.
// Default activations only (sigmoid, tanh, tanh); GRU with or without linear_before_reset.
// tests/kernels/cuda_recurrent_body_test.cc runs the steps on the CPU against the reference.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/cuda/hd.h"

namespace whittle::cuda {

struct RecurrentStep {
  bool gru = false;                  // else LSTM
  int64_t seq = 0, batch = 0, hidden = 0;
  int layout = 0, dirs = 1, dir = 0;
  bool backward = false;
  int64_t step = 0;                  // s: this direction's s-th step of each sequence
  const float* xw = nullptr;         // [rows, G*H], row XRow(t, b): X W^T without biases
  const float* hr = nullptr;         // [batch, G*H]: h R^T without biases
  const float* bias = nullptr;       // [2*G*H]: the W biases, then the R biases; null: none
  const float* peep = nullptr;       // LSTM [3*H]: i, o, f; null: none
  const int32_t* lens = nullptr;     // [batch] (checked on the host); null: every sequence is seq long
  float* h = nullptr;                // [batch, H], in place
  float* c = nullptr;                // LSTM [batch, H], in place
  float* y = nullptr;                // Y or null
  float* yh = nullptr;               // Y_h or null
  float* yc = nullptr;               // Y_c or null
  bool has_clip = false;
  float clip = 0.f;
  bool input_forget = false;
  // GRU without linear_before_reset (ONNX's default): the h gate's product takes r * h, so a step
  // is phase 1 (rh = r * h, from hr's z and r columns), a GEMM rh R_h^T into hr's h columns, then
  // phase 0 (the update).
  bool linear_before_reset = true;
  int phase = 0;
  float* rh = nullptr;               // [batch, H]
};

WH_HD float RnnSigmoid(float x) { return x >= 0.f ? 1.f / (1.f + expf(-x)) : expf(x) / (1.f + expf(x)); }
WH_HD float RnnClip(const RecurrentStep& s, float v) {
  return s.has_clip ? fmaxf(-s.clip, fminf(s.clip, v)) : v;
}

// Element i = b * H + j of the state.
WH_HD void RecurrentCellAt(const RecurrentStep& s, int64_t i) {
  const int64_t H = s.hidden, b = i / H, j = i % H, G = s.gru ? 3 : 4;
  int64_t len = s.lens ? static_cast<int64_t>(s.lens[b]) : s.seq;
  len = len < 0 ? 0 : len > s.seq ? s.seq : len;
  if (s.phase == 1 && s.step >= len) {
    s.rh[i] = 0.f;  // unused: this sequence has ended
    return;
  }
  const int64_t state = (s.layout == 0 ? static_cast<int64_t>(s.dir) * s.batch + b : b * s.dirs + s.dir) * H + j;
  if (s.step >= len) {
    // Past this sequence's end: the state stays; an empty sequence ends with zero state.
    if (len == 0 && s.step == 0) {
      s.h[i] = 0.f;
      if (s.c) s.c[i] = 0.f;
      if (s.yh) s.yh[state] = 0.f;
      if (s.yc) s.yc[state] = 0.f;
    }
    return;
  }
  const int64_t t = s.backward ? len - 1 - s.step : s.step;
  const int64_t row = s.layout == 0 ? t * s.batch + b : b * s.seq + t;
  const float* xw = s.xw + row * G * H;
  const float* hr = s.hr + b * G * H;
  auto wb = [&](int64_t g) { return s.bias ? s.bias[g * H + j] : 0.f; };
  auto rb = [&](int64_t g) { return s.bias ? s.bias[(G + g) * H + j] : 0.f; };
  float h_new;
  if (s.gru) {  // gates z, r, h; linear_before_reset: h~ = tanh(xw_h + Wb_h + r * (hr_h + Rb_h)),
                // else hr_h is already (r * h) R_h^T: h~ = tanh(xw_h + Wb_h + hr_h + Rb_h)
    const float r = RnnSigmoid(RnnClip(s, xw[H + j] + wb(1) + hr[H + j] + rb(1)));
    if (s.phase == 1) {
      s.rh[i] = r * s.h[i];
      return;
    }
    const float z = RnnSigmoid(RnnClip(s, xw[j] + wb(0) + hr[j] + rb(0)));
    const float hpre = s.linear_before_reset ? xw[2 * H + j] + wb(2) + r * (hr[2 * H + j] + rb(2))
                                             : xw[2 * H + j] + wb(2) + hr[2 * H + j] + rb(2);
    const float hh = tanhf(RnnClip(s, hpre));
    h_new = (1.f - z) * hh + z * s.h[i];
  } else {  // gates i, o, f, c; peepholes i, o, f
    const float c_prev = s.c[i];
    const float p_i = s.peep ? s.peep[j] : 0.f, p_o = s.peep ? s.peep[H + j] : 0.f,
                p_f = s.peep ? s.peep[2 * H + j] : 0.f;
    const float ig = RnnSigmoid(RnnClip(s, xw[j] + wb(0) + hr[j] + rb(0) + p_i * c_prev));
    const float fg = s.input_forget ? 1.f - ig
                                    : RnnSigmoid(RnnClip(s, xw[2 * H + j] + wb(2) + hr[2 * H + j] + rb(2) + p_f * c_prev));
    const float g = tanhf(RnnClip(s, xw[3 * H + j] + wb(3) + hr[3 * H + j] + rb(3)));
    const float c_new = fg * c_prev + ig * g;
    const float og = RnnSigmoid(RnnClip(s, xw[H + j] + wb(1) + hr[H + j] + rb(1) + p_o * c_new));
    s.c[i] = c_new;
    if (s.yc) s.yc[state] = c_new;
    h_new = og * tanhf(c_new);
  }
  s.h[i] = h_new;
  if (s.yh) s.yh[state] = h_new;
  if (s.y) {
    const int64_t yo = (s.layout == 0 ? (t * s.dirs + s.dir) * s.batch + b : (b * s.seq + t) * s.dirs + s.dir) * H + j;
    s.y[yo] = h_new;
  }
}

}  // namespace whittle::cuda
