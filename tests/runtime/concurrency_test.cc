// Several threads x several sessions x mixed shapes (issue 41: the concurrency tests the TSan
// build runs, scripts/sanitize.sh thread). The four bundled models (MLP, CNN, ResNet, a small
// transformer), each in its own session with two intra-op threads, are run by six threads at
// once, each thread picking the model and the batch size (1, 2, 3 or 5) from its own sequence;
// every output must be bit-identical to the one a single thread computed first. Sessions are
// shared between threads (Session::Run is const and thread-safe), shapes change from one run to
// the next, and the intra-op threads of ParallelFor run under the callers' threads.
#include <gtest/gtest.h>

#include <array>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tests/util/test_util.h"
#include "whittle/session.h"

namespace whittle {
namespace {

using testing::RandomFloat;

constexpr std::array<const char*, 4> kModels = {"mlp", "cnn", "resnet", "transformer"};
constexpr std::array<int64_t, 4> kBatches = {1, 2, 3, 5};

TEST(ConcurrencyTest, ThreadsTimesSessionsTimesShapesAreBitIdentical) {
  SessionOptions so;
  so.num_threads = 2;
  std::vector<std::unique_ptr<Session>> sessions;
  for (const char* m : kModels) {
    auto s = Session::Load(std::string(WHITTLE_SOURCE_DIR) + "/models/" + m + ".onnx", so);
    ASSERT_TRUE(s.ok()) << m << ": " << s.status().message();
    sessions.push_back(std::move(*s));
  }
  // The reference outputs, one thread: [model][batch].
  std::vector<std::vector<Tensor>> inputs(kModels.size()), want(kModels.size());
  for (size_t m = 0; m < kModels.size(); ++m) {
    for (size_t b = 0; b < kBatches.size(); ++b) {
      inputs[m].push_back(RandomFloat({kBatches[b], 1, 28, 28}, static_cast<uint32_t>(10 * m + b + 1)));
      auto r = sessions[m]->Run({{sessions[m]->inputs()[0].name, inputs[m][b]}});
      ASSERT_TRUE(r.ok()) << kModels[m] << ": " << r.status().message();
      want[m].push_back((*r)[0]);
    }
  }
  constexpr int kThreads = 6, kRuns = 25;
  std::vector<int> failures(kThreads, 0), mismatches(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      uint32_t x = 2654435761u * static_cast<uint32_t>(t + 1);
      for (int i = 0; i < kRuns; ++i) {
        x ^= x << 13, x ^= x >> 17, x ^= x << 5;
        const size_t m = x % kModels.size(), b = (x >> 8) % kBatches.size();
        auto r = sessions[m]->Run({{sessions[m]->inputs()[0].name, inputs[m][b]}});
        if (!r.ok()) {
          ++failures[static_cast<size_t>(t)];
          continue;
        }
        if (!(*r)[0].BitwiseEquals(want[m][b])) ++mismatches[static_cast<size_t>(t)];
      }
    });
  }
  for (std::thread& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(failures[static_cast<size_t>(t)], 0) << "thread " << t;
    EXPECT_EQ(mismatches[static_cast<size_t>(t)], 0) << "thread " << t;
  }
}

}  // namespace
}  // namespace whittle
