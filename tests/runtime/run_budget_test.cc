// The time budget of a run (SessionOptions::max_run_ms, --max-run-time, whittle_set_limits; issue
// 41): a model whose shapes fit in memory but ask for far more arithmetic than its caller allows
// stops early with a DeadlineExceeded error naming the node, and the session stays usable.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "kernels/cpu/parallel.h"
#include "lib/ir/run_deadline.h"
#include "lib/onnx/model_io.h"
#include "lib/ops/op_def.h"
#include "tests/util/graph_builder.h"
#include "tests/util/infer_test_util.h"
#include "tests/util/run_command.h"
#include "tests/util/test_util.h"
#include "whittle/session.h"
#include "whittle/whittle_c.h"

namespace whittle {
namespace {

using testing::GraphBuilder;

constexpr int kConvs = 20;

// x [1, 16, H, W] -> 20 Convs 16 -> 16, 3x3, pads 1 -> y: about 4.8 GFLOP per Conv at
// 1024 x 1024 (a tenth of a second or more on one core; 2.25x that at 1536), microseconds at 4 x 4.
Graph ConvChain(const SymShape& x_shape) {
  GraphBuilder b(17);
  b.Input("x", DType::kFloat32, x_shape).Init("w", testing::RandomFloat({16, 16, 3, 3}, 7, -0.1f, 0.1f));
  std::string prev = "x";
  for (int i = 0; i < kConvs; ++i) {
    const std::string out = i + 1 == kConvs ? "y" : "h" + std::to_string(i);
    b.Op("Conv", {prev, "w"}, {out}, testing::Attrs({{"pads", Attribute::Ints({1, 1, 1, 1})}}));
    prev = out;
  }
  return b.Output("y").Build();
}

// Whether a DeadlineExceeded message names a node in the first half of the chain: x's reorder to
// the blocked layout (64 MB: its first run's page faults alone can take the budget) or one of the
// first ten Convs (GraphBuilder names them Conv_0, Conv_1, ...).
bool StoppedEarly(const std::string& m) {
  if (m.find("'x_to_nchwc'") != std::string::npos) return true;
  const size_t at = m.find("Conv_");
  return at != std::string::npos && std::stoi(m.substr(at + 5)) < kConvs / 2;
}

TEST(RunBudget, ParallelForSkipsItsWorkOnceTheDeadlinePassed) {
  for (int threads : {1, 4}) {
    SCOPED_TRACE("threads " + std::to_string(threads));
    std::atomic<int64_t> done{0};
    // No deadline installed: every index runs once.
    ParallelFor(1000, threads, [&](int64_t) { done.fetch_add(1); });
    EXPECT_EQ(done.load(), 1000);
    // A deadline that has not passed: the same.
    const RunDeadline later(60000);
    {
      ScopedRunDeadline scope(&later);
      done = 0;
      ParallelFor(1000, threads, [&](int64_t) { done.fetch_add(1); });
    }
    EXPECT_EQ(done.load(), 1000);
    // One that has passed: nothing runs (each chunk checks before it starts).
    const RunDeadline past(1);
    std::this_thread::sleep_for(std::chrono::milliseconds(3));
    {
      ScopedRunDeadline scope(&past);
      done = 0;
      ParallelFor(1000, threads, [&](int64_t) { done.fetch_add(1); });
      EXPECT_EQ(CurrentRunDeadline(), &past);
    }
    EXPECT_EQ(done.load(), 0);
    EXPECT_EQ(CurrentRunDeadline(), nullptr);
    EXPECT_TRUE(past.Expired());
    EXPECT_NE(past.Message().find("past its time budget of 1 ms"), std::string::npos) << past.Message();
  }
  EXPECT_FALSE(RunDeadline(0).active());
  EXPECT_FALSE(RunDeadline(0).Expired());
  EXPECT_FALSE(RunDeadline(INT64_MAX).Expired());  // past what the clock can add: no deadline
}

TEST(RunBudget, ALongRunStopsEarlyAndTheSessionStaysUsable) {
  RegisterAllOps();
  const Graph g = ConvChain({1, 16, Dim::Symbol("h"), Dim::Symbol("w")});
  const Tensor small = testing::RandomFloat({1, 16, 4, 4}, 3);
  const Tensor big = testing::RandomFloat({1, 16, 1536, 1536}, 4);
  SessionOptions free_opts;
  auto reference = Session::FromGraph(g, free_opts);
  ASSERT_TRUE(reference.ok()) << reference.status().message();
  auto want = (*reference)->Run({{"x", small}});
  ASSERT_TRUE(want.ok()) << want.status().message();

  for (int threads : {1, 2}) {
    SCOPED_TRACE("threads " + std::to_string(threads));
    SessionOptions o;
    o.num_threads = threads;
    o.max_run_ms = 150;  // a small run stays far below it even with the cores shared (ctest -j)
    auto s = Session::FromGraph(g, o);
    ASSERT_TRUE(s.ok()) << s.status().message();
    EXPECT_EQ((*s)->options().max_run_ms, 150);
    // The small input's first runs set things up (oneDNN primitives, the shape plan): by the
    // third it runs in microseconds.
    for (int i = 0; i < 2; ++i) (void)(*s)->Run({{"x", small}});
    // A run of microseconds can still be preempted past the budget on a loaded machine:
    // a small run is retried a few times on the deadline alone, never on another error.
    auto small_run = [&]() {
      auto r = (*s)->Run({{"x", small}});
      for (int retry = 0; retry < 5 && !r.ok() && r.status().code() == StatusCode::kDeadlineExceeded; ++retry)
        r = (*s)->Run({{"x", small}});
      return r;
    };
    auto warm = small_run();
    ASSERT_TRUE(warm.ok()) << warm.status().message();

    auto r = (*s)->Run({{"x", big}});
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kDeadlineExceeded) << r.status().message();
    EXPECT_NE(r.status().message().find("past its time budget of 150 ms"), std::string::npos) << r.status().message();
    // It stopped well before the end of the chain (each Conv alone takes about the budget or more).
    EXPECT_TRUE(StoppedEarly(r.status().message())) << r.status().message();

    // The same session then runs the small input, with the unbudgeted session's outputs.
    auto after = small_run();
    ASSERT_TRUE(after.ok()) << after.status().message();
    EXPECT_TRUE((*after)[0].BitwiseEquals((*want)[0]));
  }

  SessionOptions bad;
  bad.max_run_ms = -1;
  auto refused = Session::FromGraph(g, bad);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("max_run_ms must be >= 0"), std::string::npos);
}

// A session with max_run_ms 0 takes the process's default (what the CLIs' --max-run-time and
// whittle_set_limits set); its own value wins over it.
TEST(RunBudget, TheProcessDefaultAppliesToSessionsWithoutTheirOwn) {
  RegisterAllOps();
  const Graph g = ConvChain({1, 16, 8, 8});
  struct Restore {
    int64_t was = ProcessRunTimeBudget();
    ~Restore() { SetProcessRunTimeBudget(was); }
  } restore;
  SetProcessRunTimeBudget(1234);
  auto s = Session::FromGraph(g, {});
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ((*s)->options().max_run_ms, 1234);
  SessionOptions own;
  own.max_run_ms = 99;
  auto t = Session::FromGraph(g, own);
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ((*t)->options().max_run_ms, 99);
}

TEST(RunBudget, CApiSetsTheLimits) {
  RegisterAllOps();
  const std::string path = (std::filesystem::temp_directory_path() / "whittle_run_budget_c.onnx").string();
  ASSERT_TRUE(SaveModel(ConvChain({1, 16, 1024, 1024}), path).ok());
  struct Restore {
    ~Restore() { (void)whittle_set_limits(0, 0); }
  } restore;
  EXPECT_NE(whittle_set_limits(-1, 0), 0);
  EXPECT_NE(std::string(whittle_last_error()).find("budgets must be >= 0"), std::string::npos) << whittle_last_error();
  ASSERT_EQ(whittle_set_limits(0, 30), 0);
  whittle_session* s = nullptr;
  ASSERT_EQ(whittle_session_load(path.c_str(), 1, &s), 0) << whittle_last_error();
  std::vector<float> x(16 * 1024 * 1024, 0.25f);
  const int64_t dims[] = {1, 16, 1024, 1024};
  whittle_tensor* in = nullptr;
  ASSERT_EQ(whittle_tensor_create(1, dims, 4, x.data(), &in), 0) << whittle_last_error();
  const char* names[] = {"x"};
  const whittle_tensor* ins[] = {in};
  whittle_tensor* out = nullptr;
  EXPECT_NE(whittle_session_run(s, names, ins, 1, &out), 0);
  EXPECT_NE(std::string(whittle_last_error()).find("past its time budget of 30 ms"), std::string::npos)
      << whittle_last_error();
  whittle_tensor_free(in);
  whittle_session_free(s);
}

// run-model --max-run-time: parsed, and a run past it is one line and exit code 1.
TEST(RunBudget, RunModelFlag) {
  RegisterAllOps();
  const std::string path = (std::filesystem::temp_directory_path() / "whittle_run_budget_cli.onnx").string();
  ASSERT_TRUE(SaveModel(ConvChain({1, 16, 1024, 1024}), path).ok());
  const std::string run_model = std::string(WHITTLE_BINARY_DIR) + "/bin/run-model " + path;
  const auto bad = testing::RunCommand(run_model + " --bench --max-run-time soon 2>&1");
  EXPECT_EQ(bad.code, 1) << bad.out;
  EXPECT_NE(bad.out.find("--max-run-time expects seconds or a duration"), std::string::npos) << bad.out;
  const auto r = testing::RunCommand(run_model + " --bench --warmup 0 --iterations 1 --min-time 0 --max-run-time 20ms 2>&1");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_EQ(r.out.find('\n'), r.out.size() - 1) << "not one line: " << r.out;
  EXPECT_NE(r.out.find("past its time budget of 20 ms"), std::string::npos) << r.out;
  EXPECT_TRUE(StoppedEarly(r.out)) << r.out;
}

}  // namespace
}  // namespace whittle
