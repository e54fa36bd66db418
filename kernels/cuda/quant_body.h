// Bodies (kernels/cuda/hd.h) of the CUDA QuantizeLinear, DequantizeLinear and the byte max pool,
// one output element each, with kernels/reference/quant.h's and pool.h's arithmetic bit for bit:
//   quantize:   y = saturate(round_half_even(x / scale[c]) + zp[c])   (NaN -> zp[c])
//   dequantize: y = float(x - zp[c]) * scale[c]
// over x laid out as [outer, channels, inner] (one scale per channel; channels 1: per tensor).
#pragma once

#include <cstdint>

#include "kernels/cuda/hd.h"
#include "kernels/cuda/window.h"

namespace whittle::cuda {

struct QuantizeArgs {
  const void* x = nullptr;  // float32 (quantize) or uint8/int8 (dequantize)
  void* y = nullptr;        // uint8/int8 (quantize) or float32 (dequantize)
  bool q_uint8 = true;      // the quantized side's type
  int64_t channels = 1, inner = 1;
  const float* scale = nullptr;     // channels values
  const int32_t* zero_point = nullptr;  // channels values, or null (0)
};

WH_HD void QuantizeAt(const QuantizeArgs& a, int64_t i) {
  const int64_t c = a.channels == 1 ? 0 : (i / a.inner) % a.channels;
  const float zero = a.zero_point ? static_cast<float>(a.zero_point[c]) : 0.f;
  const float v = static_cast<const float*>(a.x)[i] / a.scale[c];
  const float lo = a.q_uint8 ? 0.f : -128.f, hi = a.q_uint8 ? 255.f : 127.f;
  float q = zero;
  if (v == v) {  // not NaN; exact while |v| < 2^24, beyond which both saturate alike
    q = RoundHalfEven(v) + zero;
    q = q < lo ? lo : (q > hi ? hi : q);
  }
  if (a.q_uint8) static_cast<uint8_t*>(a.y)[i] = static_cast<uint8_t>(static_cast<int32_t>(q));
  else static_cast<int8_t*>(a.y)[i] = static_cast<int8_t>(static_cast<int32_t>(q));
}

WH_HD void DequantizeAt(const QuantizeArgs& a, int64_t i) {
  const int64_t c = a.channels == 1 ? 0 : (i / a.inner) % a.channels;
  const int32_t zero = a.zero_point ? a.zero_point[c] : 0;
  const int32_t q = a.q_uint8 ? static_cast<int32_t>(static_cast<const uint8_t*>(a.x)[i])
                              : static_cast<int32_t>(static_cast<const int8_t*>(a.x)[i]);
  static_cast<float*>(a.y)[i] = static_cast<float>(q - zero) * a.scale[c];
}

// Output element i of a max pool over byte planes x [planes, in_h, in_w] (padding never wins; a
// window wholly in the padding gives the type's minimum, as the reference does).
template <class T, class I = int64_t>
WH_HD void MaxPoolBytesAt(const T* x, T* y, const Window2d& w, I i) {
  const I out_w = static_cast<I>(w.out_w), out_h = static_cast<I>(w.out_h);
  const I q = i / out_w, ow = i - q * out_w, p = q / out_h, oh = q - p * out_h;
  const T* xp = x + p * w.in_h * w.in_w;
  int32_t acc = static_cast<T>(0x80) < 0 ? -128 : 0;
  for (int64_t kh = 0; kh < w.k_h; ++kh)
    for (int64_t kw = 0; kw < w.k_w; ++kw) {
      const int64_t ih = oh * w.stride_h - w.pad_top + kh * w.dil_h, iw = ow * w.stride_w - w.pad_left + kw * w.dil_w;
      if (ih >= 0 && ih < w.in_h && iw >= 0 && iw < w.in_w) {
        const int32_t v = xp[ih * w.in_w + iw];
        acc = v > acc ? v : acc;
      }
    }
  y[i] = static_cast<T>(acc);
}

}  // namespace whittle::cuda
