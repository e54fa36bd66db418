// Vectorized transcendental kernels (kernels/cpu/vmath.h) against double-precision libm, over the
// ranges that matter, on every ISA this CPU runs (scalar, AVX2, AVX-512 where present).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <vector>

#include "kernels/cpu/vmath.h"

namespace whittle::cpu {
namespace {

double Ref(VFn fn, double x) {
  switch (fn) {
    case VFn::kExp: return std::exp(x);
    case VFn::kLog: return std::log(x);
    case VFn::kErf: return std::erf(x);
    case VFn::kTanh: return std::tanh(x);
    case VFn::kSigmoid: return 1.0 / (1.0 + std::exp(-x));
    case VFn::kGelu: return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
    case VFn::kGeluTanh: return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
  }
  return 0;
}

struct Case {
  VFn fn;
  const char* name;
  double lo, hi;
  bool log_spaced;
  double rel, abs;  // pass when |err| <= max(rel * |ref|, abs)
};

std::vector<SimdIsa> Isas() {
  std::vector<SimdIsa> v{SimdIsa::kScalar};
  if (static_cast<int>(CpuSimdIsa()) >= static_cast<int>(SimdIsa::kAvx2)) v.push_back(SimdIsa::kAvx2);
  if (CpuSimdIsa() == SimdIsa::kAvx512) v.push_back(SimdIsa::kAvx512);
  return v;
}

TEST(VMath, MaxErrorAgainstDoubleLibmOnEveryIsa) {
  // Relative bounds of a few float ulps (2^-23 = 1.2e-7); GELU's bound is absolute for large
  // negative x, where x·Φ(x) is a difference of nearly equal terms in any float implementation.
  const std::vector<Case> cases = {
      {VFn::kExp, "exp", -87.0, 88.5, false, 3e-7, 0},
      {VFn::kLog, "log", 1e-37, 3e38, true, 3e-7, 0},
      {VFn::kLog, "log near 1", 0.5, 2.0, false, 3e-7, 1e-9},
      {VFn::kErf, "erf", -6.0, 6.0, false, 4e-7, 1e-30},
      {VFn::kTanh, "tanh", -12.0, 12.0, false, 4e-7, 1e-30},
      {VFn::kSigmoid, "sigmoid", -80.0, 30.0, false, 4e-7, 0},
      {VFn::kGelu, "gelu", -10.0, 10.0, false, 4e-7, 3e-7},
      {VFn::kGeluTanh, "gelu tanh", -10.0, 10.0, false, 4e-7, 3e-7},
  };
  const int n = 200003;  // not a multiple of the vector width: the tail path runs too
  for (SimdIsa isa : Isas()) {
    for (const Case& c : cases) {
      std::vector<float> x(n), y(n);
      for (int i = 0; i < n; ++i) {
        const double t = static_cast<double>(i) / (n - 1);
        x[i] = static_cast<float>(c.log_spaced ? std::exp(std::log(c.lo) + t * (std::log(c.hi) - std::log(c.lo)))
                                               : c.lo + t * (c.hi - c.lo));
      }
      VMapWith(isa, c.fn, x.data(), y.data(), n);
      double worst = 0;
      int worst_i = 0;
      for (int i = 0; i < n; ++i) {
        const double ref = Ref(c.fn, x[i]);
        const double err = std::fabs(y[i] - ref) / std::max(c.rel * std::fabs(ref), c.abs);
        if (!(err <= worst)) worst = err, worst_i = i;
      }
      std::printf("%-6s %-10s worst error %.2f of the bound\n", SimdIsaName(isa), c.name, worst);
      EXPECT_LE(worst, 1.0) << SimdIsaName(isa) << " " << c.name << ": x=" << x[worst_i] << " got " << y[worst_i]
                            << " want " << Ref(c.fn, x[worst_i]);
    }
  }
}

TEST(VMath, SpecialValues) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  for (SimdIsa isa : Isas()) {
    SCOPED_TRACE(SimdIsaName(isa));
    auto one = [&](VFn fn, float v) {
      float y;
      VMapWith(isa, fn, &v, &y, 1);
      return y;
    };
    EXPECT_EQ(one(VFn::kExp, -inf), 0.f);
    EXPECT_EQ(one(VFn::kExp, inf), inf);
    EXPECT_EQ(one(VFn::kExp, -200.f), 0.f);
    EXPECT_EQ(one(VFn::kExp, 100.f), inf);
    EXPECT_EQ(one(VFn::kExp, 0.f), 1.f);
    EXPECT_TRUE(std::isnan(one(VFn::kExp, nan)));
    EXPECT_EQ(one(VFn::kLog, 0.f), -inf);
    EXPECT_EQ(one(VFn::kLog, inf), inf);
    EXPECT_EQ(one(VFn::kLog, 1.f), 0.f);
    EXPECT_TRUE(std::isnan(one(VFn::kLog, -1.f)));
    EXPECT_NEAR(one(VFn::kLog, 1e-40f), std::log(1e-40), 1e-5);  // subnormal input
    EXPECT_EQ(one(VFn::kTanh, inf), 1.f);
    EXPECT_EQ(one(VFn::kTanh, -inf), -1.f);
    EXPECT_EQ(one(VFn::kErf, inf), 1.f);
    EXPECT_EQ(one(VFn::kErf, -inf), -1.f);
    EXPECT_EQ(one(VFn::kSigmoid, -inf), 0.f);
    EXPECT_EQ(one(VFn::kSigmoid, inf), 1.f);
    for (VFn fn : {VFn::kErf, VFn::kTanh, VFn::kSigmoid, VFn::kGelu}) EXPECT_TRUE(std::isnan(one(fn, nan)));
  }
}

TEST(VMath, ExpShiftSumIsTheSumOfTheExponentials) {
  std::vector<float> x(37), y(37);
  for (int i = 0; i < 37; ++i) x[i] = 0.25f * static_cast<float>(i) - 3.f;
  const float s = VExpShiftSum(x.data(), y.data(), 37, 5.f);
  double want = 0;
  for (int i = 0; i < 37; ++i) {
    EXPECT_NEAR(y[i], std::exp(static_cast<double>(x[i]) - 5.0), 3e-7 * std::exp(static_cast<double>(x[i]) - 5.0));
    want += std::exp(static_cast<double>(x[i]) - 5.0);
  }
  EXPECT_NEAR(s, want, 1e-6 * want);
}

}  // namespace
}  // namespace whittle::cpu
