// SessionOptions::cuda_graphs on the real CUDA backend (skipped, with the reason, where no GPU
// exists; the session's side of it is tested on any machine by device_session_test.cc and
// device_corpus_test.cc on the stand-in device). The bundled models at batch 1 and 4, each run
// with new inputs: eager, captured, replayed, every run's outputs equal an eager CUDA session's
// for the same inputs, and no capture fails; a token-id model the same, with a bad id reported.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "tests/util/test_util.h"
#include "whittle/session.h"

namespace whittle {
namespace {

TEST(CudaGraphs, BundledModelsReplayWithEachRunsInputs) {
  for (const char* name : {"mlp", "cnn", "resnet", "transformer"}) {
    SCOPED_TRACE(name);
    const std::string model = std::string(WHITTLE_SOURCE_DIR) + "/models/" + name + ".onnx";
    SessionOptions eager_opts;
    eager_opts.backend = Backend::kCuda;
    auto eager = Session::Load(model, eager_opts);
    if (!eager.ok()) {
      EXPECT_NE(eager.status().message().find("device 'cuda' is not available"), std::string::npos)
          << eager.status().message();
      GTEST_SKIP() << eager.status().message();
    }
    SessionOptions graph_opts = eager_opts;
    graph_opts.cuda_graphs = true;
    auto graphs = Session::Load(model, graph_opts);
    ASSERT_TRUE(graphs.ok()) << graphs.status().message();
    const std::string in = (*eager)->inputs()[0].name;
    for (int64_t batch : {1, 4}) {
      for (uint32_t run = 0; run < 10; ++run) {
        const Tensor x = testing::RandomFloat({batch, 1, 28, 28}, 100 * static_cast<uint32_t>(batch) + run, 0.f, 1.f);
        auto want = (*eager)->Run({{in, x}});
        auto got = (*graphs)->Run({{in, x}});
        ASSERT_TRUE(want.ok()) << want.status().message();
        ASSERT_TRUE(got.ok()) << "batch " << batch << ", run " << run << ": " << got.status().message();
        const Tensor& w = (*want)[0];
        float scale = 0.f;
        for (int64_t i = 0; i < w.numel(); ++i) scale = std::max(scale, std::fabs(w.data<float>()[i]));
        // The graph's cuBLAS calls have a workspace of their own, so cuBLAS may pick another
        // algorithm: float rounding apart, the same numbers.
        EXPECT_TRUE(testing::TensorsClose((*got)[0], w, 1e-5f * scale, 0.f)) << "batch " << batch << ", run " << run;
      }
    }
    const auto report = (*graphs)->device_graph_report();
    ASSERT_EQ(report.size(), 2u);
    for (const std::string& line : report) {
      std::printf("[ graphs   ] %-12s %s\n", name, line.c_str());
      // Captured: replayed since, or dropped for not paying; never a failed capture or an eager
      // reason (every bundled model runs wholly on the GPU).
      EXPECT_TRUE(line.find("replayed as a CUDA graph") != std::string::npos ||
                  line.find("a graph did not pay") != std::string::npos)
          << line;
    }
  }
}

// A token-id model (the corpus's PyTorch encoder: an embedding Gather of the int64 ids) is
// captured too: its Gather reads the ids on the device, so each replay gathers that run's ids, and
// an id out of range is reported on the device and comes back as the CPU session's error, word for
// word; the graph goes on serving the runs after it.
TEST(CudaGraphs, TokenIdModelReplaysEachRunsIdsAndReportsABadOne) {
  const std::string model = std::string(WHITTLE_SOURCE_DIR) + "/tests/corpus/torch_encoder_int64_op17.onnx";
  SessionOptions o;
  o.backend = Backend::kCuda;
  o.cuda_graphs = true;
  auto dev = Session::Load(model, o);
  if (!dev.ok()) {
    EXPECT_NE(dev.status().message().find("device 'cuda' is not available"), std::string::npos)
        << dev.status().message();
    GTEST_SKIP() << dev.status().message();
  }
  auto cpu = Session::Load(model);
  ASSERT_TRUE(cpu.ok()) << cpu.status().message();
  for (uint32_t run = 0; run < 12; ++run) {
    Tensor ids = testing::RandomInt64({2, 12}, 300 + run, 0, 99);
    const bool bad = run == 6;
    if (bad) ids.data<int64_t>()[17] = 100;  // the embedding has 100 rows
    auto want = (*cpu)->Run({{"ids", ids}});
    auto got = (*dev)->Run({{"ids", ids}});
    if (bad) {
      ASSERT_FALSE(want.ok());
      ASSERT_FALSE(got.ok()) << "run " << run;
      EXPECT_EQ(got.status().message(), want.status().message());
      continue;
    }
    ASSERT_TRUE(want.ok()) << want.status().message();
    ASSERT_TRUE(got.ok()) << "run " << run << ": " << got.status().message();
    EXPECT_TRUE(testing::TensorsClose((*got)[0], (*want)[0], 1e-4f, 1e-4f)) << "run " << run;
  }
  const auto report = (*dev)->device_graph_report();
  ASSERT_EQ(report.size(), 1u);
  std::printf("[ graphs   ] %-12s %s\n", "encoder", report[0].c_str());
  EXPECT_TRUE(report[0].find("replayed as a CUDA graph") != std::string::npos ||
              report[0].find("a graph did not pay") != std::string::npos)
      << report[0];
}

}  // namespace
}  // namespace whittle
