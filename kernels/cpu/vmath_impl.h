// The vector math of vmath.h, written once over a traits type V, and the entry points vmath.h
// declares per ISA: vmath_avx2.cc and vmath_avx512.cc define V and include this inside their own
// namespace. VMath sits in an anonymous namespace, so no inline function compiled for one ISA can
// be picked by the linker for code running on another.
//
// Coefficients are fits made for Whittle with iteratively reweighted least squares on Chebyshev
// nodes (max relative error of the fit in brackets):
//   exp:  e^r = 1 + r + r²·P(r), r in [-ln2/2, ln2/2], P degree 5            [5e-11]
//   log:  log(1+f) = f - f²/2 + f³·Q(f), 1+f in [√½, √2), Q degree 8       [7.5e-10]
//   tanh: x·T(x²) on |x| < 0.625, T degree 6; else 1 - 2/(e^{2|x|}+1)       [1.4e-10]
//   erf:  x·E(x²) on |x| < 1, E degree 7                                     [3.3e-11]
//         1 - e^{L(|x| - 2.46)} on 1 <= |x| < 3.92, L ≈ log erfc degree 7;   [2.7e-7 abs on L]
//         else ±1 (no division: GELU runs 1.27x as fast as with the e^{-x²}·G(1/|x|) form)
// so float rounding, not the fits, bounds the errors.
#pragma once

// Expects: struct V { F (vector), M (mask), kWidth, Load, Store, Set, Add, Sub, Mul, Div, Fma,
// Min, Max, Abs, Neg sign helpers, Round, Lt, Le, Gt, IsNan, Select, Pow2 (2^n for integral n in
// [-126, 127]), Exponent/Mantissa for log } in the including TU.

namespace {

using VFnKind = whittle::cpu::VFn;

template <class V>
struct VMath {
  using F = typename V::F;
  using M = typename V::M;

  static constexpr float kExpP[6] = {0.500000006766433f,     0.16666665869425637f,   0.04166629503278916f,
                                     0.00833349697583212f,   0.0013944652283318522f, 0.00019790380929269114f};

  static inline F Poly(F x, const float* c, int n) {  // c[0] + c[1] x + ... + c[n-1] x^(n-1)
    F acc = V::Set(c[n - 1]);
    for (int i = n - 2; i >= 0; --i) acc = V::Fma(acc, x, V::Set(c[i]));
    return acc;
  }

  // e^(x - n ln2) for n = round(x / ln2), and n: the reduced exponential both forms below scale.
  static inline F ExpReduced(F x, F* n) {
    *n = V::Round(V::Mul(x, V::Set(1.44269504088896341f)));
    // r = x - n·ln2 in two steps (Cody-Waite): the high part has few mantissa bits, n·hi is exact.
    F r = V::Fma(*n, V::Set(-0.693359375f), x);
    r = V::Fma(*n, V::Set(2.12194440e-4f), r);
    const F r2 = V::Mul(r, r);
    return V::Fma(r2, Poly(r, kExpP, 6), V::Add(r, V::Set(1.f)));
  }

  // e^x for finite x in [-126 ln2, 126 ln2] (no clamping or special values).
  static inline F ExpInRange(F x) {
    F n;
    const F p = ExpReduced(x, &n);
    return V::Mul(p, V::Pow2(n));
  }

  static inline F Exp(F x) {
    const F xc = V::Min(V::Max(x, V::Set(-87.33654f)), V::Set(88.72284f));
    F n;
    F p = ExpReduced(xc, &n);
    // 2^n in two halves so that n = 128 (x near the top) and n = -126 stay representable.
    const F n1 = V::Floor(V::Mul(n, V::Set(0.5f)));
    p = V::Mul(V::Mul(p, V::Pow2(n1)), V::Pow2(V::Sub(n, n1)));
    p = V::Select(V::Lt(x, V::Set(-87.33654f)), V::Set(0.f), p);
    p = V::Select(V::Gt(x, V::Set(88.72283f)), V::Set(__builtin_inff()), p);
    return V::Select(V::IsNan(x), x, p);
  }

  static inline F Log(F x) {
    static const float kQ[9] = {0.33333312595274356f,  -0.2500000961652209f, 0.2000211915658286f,
                                -0.16667995165405206f, 0.142195430423191f,   -0.12405596854108517f,
                                0.11888233201907311f,  -0.11675625582150607f, 0.06746454980128913f};
    // Subnormals: scale by 2^23 first.
    const M tiny = V::Lt(x, V::Set(1.17549435e-38f));
    const F xs = V::Select(tiny, V::Mul(x, V::Set(8388608.f)), x);
    F e = V::Exponent(xs);  // unbiased exponent as float
    e = V::Select(tiny, V::Sub(e, V::Set(23.f)), e);
    F m = V::Mantissa(xs);  // in [1, 2)
    const M big = V::Gt(m, V::Set(1.41421356237f));
    m = V::Select(big, V::Mul(m, V::Set(0.5f)), m);
    e = V::Select(big, V::Add(e, V::Set(1.f)), e);
    const F f = V::Sub(m, V::Set(1.f));
    const F f2 = V::Mul(f, f);
    F y = V::Mul(V::Mul(f2, f), Poly(f, kQ, 9));
    y = V::Fma(f2, V::Set(-0.5f), y);
    y = V::Fma(e, V::Set(-2.12194440e-4f), y);
    y = V::Add(y, f);
    y = V::Fma(e, V::Set(0.693359375f), y);
    // Special values: log(0) = -inf, log(x < 0) = NaN, log(inf) = inf, NaN stays NaN.
    y = V::Select(V::Eq(x, V::Set(__builtin_inff())), x, y);
    y = V::Select(V::Eq(x, V::Set(0.f)), V::Set(-__builtin_inff()), y);
    y = V::Select(V::Lt(x, V::Set(0.f)), V::Set(__builtin_nanf("")), y);
    return V::Select(V::IsNan(x), x, y);
  }

  static inline F Tanh(F x) {
    static const float kT[7] = {0.9999999998577926f,    -0.33333329712402304f, 0.13333183086533565f,
                                -0.05394472386065618f,  0.021691932308165247f, -0.008159340529911374f,
                                0.0021286855443999526f};
    const F a = V::Abs(x);
    const F small = V::Mul(x, Poly(V::Mul(x, x), kT, 7));
    const F e = Exp(V::Add(a, a));
    F large = V::Sub(V::Set(1.f), V::Div(V::Set(2.f), V::Add(e, V::Set(1.f))));
    large = V::CopySign(large, x);
    const F y = V::Select(V::Lt(a, V::Set(0.625f)), small, large);
    return V::Select(V::IsNan(x), x, y);
  }

  static inline F Sigmoid(F x) {
    return V::Div(V::Set(1.f), V::Add(V::Set(1.f), Exp(V::Neg(x))));
  }

  static inline F Erf(F x) {
    static const float kE[8] = {1.1283791670585448f,   -0.376126384366551f,  0.11283781995784109f,
                                -0.026865401069161472f, 0.005220947924276357f, -0.0008482861183646702f,
                                0.00011257161602887586f, -9.642080909190709e-06f};
    // log erfc(a) for a in [1, 3.92], in t = a - 2.46.
    static const float kL[8] = {-7.594217837e+00f, -5.277221851e+00f, -9.425656676e-01f, -1.121182457e-02f,
                                2.241924672e-03f,  -4.391273836e-04f, 8.807072220e-05f,  -1.383556322e-05f};
    const F a = V::Abs(x);
    const F small = V::Mul(x, Poly(V::Mul(x, x), kE, 8));
    const F ac = V::Min(V::Max(a, V::Set(1.f)), V::Set(3.92f));
    F large = V::Sub(V::Set(1.f), ExpInRange(Poly(V::Sub(ac, V::Set(2.46f)), kL, 8)));
    large = V::Select(V::Lt(a, V::Set(3.92f)), large, V::Set(1.f));
    large = V::CopySign(large, x);
    const F y = V::Select(V::Lt(a, V::Set(1.f)), small, large);
    return V::Select(V::IsNan(x), x, y);
  }

  static inline F Gelu(F x) {  // x · ½ (1 + erf(x / √2))
    const F e = Erf(V::Mul(x, V::Set(0.70710678118654752f)));
    return V::Mul(V::Mul(x, V::Set(0.5f)), V::Add(e, V::Set(1.f)));
  }

  static inline F GeluTanh(F x) {  // x · ½ (1 + tanh(√(2/π) (x + 0.044715 x³)))
    const F inner = V::Mul(V::Set(0.79788456080286536f), V::Fma(V::Mul(V::Mul(x, x), x), V::Set(0.044715f), x));
    return V::Mul(V::Mul(x, V::Set(0.5f)), V::Add(Tanh(inner), V::Set(1.f)));
  }

  template <class Fn>
  static inline void Apply(const float* x, float* y, int64_t n, Fn fn) {
    int64_t i = 0;
    for (; i + V::kWidth <= n; i += V::kWidth) V::Store(y + i, fn(V::Load(x + i)));
    if (i < n) {
      float buf[V::kWidth] = {};
      for (int64_t k = i; k < n; ++k) buf[k - i] = x[k];
      V::Store(buf, fn(V::Load(buf)));
      for (int64_t k = i; k < n; ++k) y[k] = buf[k - i];
    }
  }

  static void Map(VFnKind fn, const float* x, float* y, int64_t n) {
    switch (fn) {
      case VFnKind::kExp: return Apply(x, y, n, [](F v) { return Exp(v); });
      case VFnKind::kLog: return Apply(x, y, n, [](F v) { return Log(v); });
      case VFnKind::kErf: return Apply(x, y, n, [](F v) { return Erf(v); });
      case VFnKind::kTanh: return Apply(x, y, n, [](F v) { return Tanh(v); });
      case VFnKind::kSigmoid: return Apply(x, y, n, [](F v) { return Sigmoid(v); });
      case VFnKind::kGelu: return Apply(x, y, n, [](F v) { return Gelu(v); });
      case VFnKind::kGeluTanh: return Apply(x, y, n, [](F v) { return GeluTanh(v); });
    }
  }

  static float ExpShiftSum(const float* x, float* y, int64_t n, float shift) {
    const F s = V::Set(shift);
    F acc = V::Set(0.f);
    int64_t i = 0;
    for (; i + V::kWidth <= n; i += V::kWidth) {
      const F e = Exp(V::Sub(V::Load(x + i), s));
      V::Store(y + i, e);
      acc = V::Add(acc, e);
    }
    float total = V::Sum(acc);
    if (i < n) {
      float buf[V::kWidth];
      for (int k = 0; k < V::kWidth; ++k) buf[k] = i + k < n ? x[i + k] : -__builtin_inff();
      V::Store(buf, Exp(V::Sub(V::Load(buf), s)));
      for (int64_t k = i; k < n; ++k) {
        y[k] = buf[k - i];
        total += buf[k - i];
      }
    }
    return total;
  }
};

}  // namespace

void Map(VFn fn, const float* x, float* y, int64_t n) { VMath<V>::Map(fn, x, y, n); }
float ExpShiftSum(const float* x, float* y, int64_t n, float shift) { return VMath<V>::ExpShiftSum(x, y, n, shift); }

float FmaLoop(int64_t iterations, double* flops) {
  constexpr int kChains = 12;  // > latency (4) x FMA units (2)
  V::F acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = V::Set(0.001f * static_cast<float>(c));
  const V::F a = V::Set(0.999999f), b = V::Set(1e-7f);
  for (int64_t i = 0; i < iterations; ++i)
    for (int c = 0; c < kChains; ++c) acc[c] = V::Fma(acc[c], a, b);
  V::F s = acc[0];
  for (int c = 1; c < kChains; ++c) s = V::Add(s, acc[c]);
  *flops = 2.0 * kChains * V::kWidth * static_cast<double>(iterations);
  return V::Sum(s);
}
