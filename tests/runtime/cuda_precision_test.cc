// SessionOptions::precision: its names, its refusal off the CUDA backend, and on a GPU (skipped
// with the reason where there is none) the bundled models at every precision against the CPU's
// fp32 outputs: fp32 to float rounding, the tensor-core precisions to their own rounding.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "kernels/kernel.h"
#include "tests/util/test_util.h"
#include "whittle/session.h"

namespace whittle {
namespace {

TEST(Precision, NamesRoundTripAndUnknownNamesAreRefused) {
  for (Precision p : {Precision::kFp32, Precision::kTf32, Precision::kFp16, Precision::kBf16}) {
    auto back = ParsePrecision(PrecisionName(p));
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(*back, p);
  }
  auto bad = ParsePrecision("int4");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("unknown precision 'int4'"), std::string::npos) << bad.status().message();
}

TEST(Precision, OnlyTheCudaBackendTakesAReducedPrecision) {
  const std::string model = std::string(WHITTLE_SOURCE_DIR) + "/models/mlp.onnx";
  for (Backend b : {Backend::kCpu, Backend::kReference}) {
    SessionOptions o;
    o.backend = b;
    o.precision = Precision::kBf16;
    auto s = Session::Load(model, o);
    ASSERT_FALSE(s.ok()) << BackendName(b);
    EXPECT_NE(s.status().message().find("precision bf16 needs the cuda backend"), std::string::npos)
        << s.status().message();
    o.precision = Precision::kFp32;
    EXPECT_TRUE(Session::Load(model, o).ok()) << BackendName(b);
  }
}

TEST(Precision, CudaOutputsAtEveryPrecisionStayCloseToTheCpu) {
  for (const char* name : {"mlp", "cnn"}) {
    const std::string model = std::string(WHITTLE_SOURCE_DIR) + "/models/" + name + ".onnx";
    SessionOptions cpu_opts;
    auto cpu = Session::Load(model, cpu_opts);
    ASSERT_TRUE(cpu.ok()) << cpu.status().message();
    const Tensor x = testing::RandomFloat({16, 1, 28, 28}, 7, 0.f, 1.f);
    auto want = (*cpu)->Run({{(*cpu)->inputs()[0].name, x}});
    ASSERT_TRUE(want.ok()) << want.status().message();
    const Tensor& w = (*want)[0];
    float scale = 0.f;
    for (int64_t i = 0; i < w.numel(); ++i) scale = std::max(scale, std::fabs(w.data<float>()[i]));
    // Per precision, the largest difference allowed relative to the output's scale: fp32 float
    // rounding; TF32 and FP16 keep 10 mantissa bits, BF16 7.
    const std::pair<Precision, float> cases[] = {
        {Precision::kFp32, 1e-5f}, {Precision::kTf32, 1e-2f}, {Precision::kFp16, 1e-2f}, {Precision::kBf16, 5e-2f}};
    for (const auto& [p, tol] : cases) {
      SessionOptions o;
      o.backend = Backend::kCuda;
      o.precision = p;
      auto s = Session::Load(model, o);
      if (!s.ok()) {
        EXPECT_NE(s.status().message().find("device 'cuda' is not available"), std::string::npos)
            << s.status().message();
        GTEST_SKIP() << s.status().message();
      }
      auto got = (*s)->Run({{(*s)->inputs()[0].name, x}});
      ASSERT_TRUE(got.ok()) << got.status().message();
      EXPECT_TRUE(testing::TensorsClose((*got)[0], w, tol * scale, 0.f)) << name << " " << PrecisionName(p);
    }
  }
}

}  // namespace
}  // namespace whittle
