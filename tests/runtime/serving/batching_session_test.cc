// BatchingSession (include/whittle/batching_session.h): concurrent requests of mixed row counts on
// the bundled CNN and MLP get the very bytes a Session::Run of each request alone gives; batches
// form and respect max_batch; the bounded queue, deadlines, Swap under load, Shutdown's drain and
// the checks before queueing behave as the header says, under the timeout policy (eager = false,
// pinned by the tests that rely on requests waiting) and the eager one (the default). Small built graphs (Mul, Identity,
// ReduceSum) cover the swap, every fixed-size dtype, incompatible signatures and outputs without
// a batch axis. Each test takes well under two seconds.
//
// Bit-identity holds where Session::Run itself gives a row the same bytes at every batch size.
// Measured here (2026-11-29): the bundled models' 10-class head (a Gemm with N = 10 < 16 columns,
// so not on packed_gemm.h) goes through oneDNN's sgemm, which rounds rows differently from 16 rows
// on (max |diff| 3e-6 .. 6e-6 against the row alone). So the bit-identical checks keep batches
// under 16 rows on the default GEMM policy, or pin packed GEMM (bit-identical at any batch); one
// test checks the larger batches on the default policy within float rounding.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "kernels/cpu/packed_gemm.h"
#include "tests/util/graph_builder.h"
#include "tests/util/test_util.h"
#include "whittle/batching_session.h"
#include "whittle/session.h"

namespace whittle {
namespace {

using Clock = BatchingSession::Clock;
using Feed = std::map<std::string, Tensor>;
using testing::GraphBuilder;
using testing::RandomFloat;

std::shared_ptr<const Session> LoadBundled(const std::string& name, int threads = 1) {
  SessionOptions so;
  so.num_threads = threads;
  auto s = Session::Load(std::string(WHITTLE_SOURCE_DIR) + "/models/" + name + ".onnx", so);
  EXPECT_TRUE(s.ok()) << name << ": " << s.status().message();
  return s.ok() ? std::shared_ptr<const Session>(std::move(*s)) : nullptr;
}

std::shared_ptr<const Session> FromGraph(Graph g) {
  SessionOptions so;
  so.num_threads = 1;
  auto s = Session::FromGraph(std::move(g), so);
  EXPECT_TRUE(s.ok()) << s.status().message();
  return s.ok() ? std::shared_ptr<const Session>(std::move(*s)) : nullptr;
}

// y = x * c for x float32 [batch, 4]: two sessions of one graph that differ only in c.
std::shared_ptr<const Session> ScaleModel(float c) {
  GraphBuilder b;
  b.Input("x", DType::kFloat32, {Dim::Symbol("batch"), 4})
      .Init("c", Tensor::FromVector<float>({4}, {c, c, c, c}))
      .Op("Mul", {"x", "c"}, {"y"})
      .Output("y");
  return FromGraph(b.Build());
}

std::unique_ptr<BatchingSession> MakeBatching(std::shared_ptr<const Session> s, const BatchingOptions& o) {
  auto b = BatchingSession::Make(std::move(s), o);
  EXPECT_TRUE(b.ok()) << b.status().message();
  return b.ok() ? std::move(*b) : nullptr;
}

// Same dtype, dims and bytes (memcmp, not a tolerance).
bool SameBytes(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.dims() == b.dims() && a.nbytes() == b.nbytes() &&
         std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0;
}

bool SameOutputs(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  if (a.size() != b.size()) return false;
  for (size_t k = 0; k < a.size(); ++k)
    if (!SameBytes(a[k], b[k])) return false;
  return true;
}

// Polls until pred holds (false after two seconds).
bool WaitFor(const std::function<bool()>& pred) {
  const auto until = Clock::now() + std::chrono::seconds(2);
  while (Clock::now() < until) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return pred();
}

double MsSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

int64_t Sum(const std::vector<int64_t>& v) {
  int64_t s = 0;
  for (int64_t x : v) s += x;
  return s;
}

// Pins Gemm/MatMul with constant weights to packed GEMM for one test.
struct PackedGemmForTest {
  PackedGemmForTest() { cpu::SetPackedGemmUse(cpu::PackedGemmUse::kAlways); }
  ~PackedGemmForTest() { cpu::SetPackedGemmUse(cpu::PackedGemmUse::kAuto); }
};

// Threads x requests of 1, 2, 3, 5 or 8 rows on one model; every answer must be the bytes the
// session gives the request alone (tolerance 0), or within tolerance of them. Returns the stats
// after Shutdown.
BatchingStats RunConcurrently(const std::string& model, const BatchingOptions& o, int threads, int per_thread,
                              float tolerance = 0.f) {
  auto session = LoadBundled(model);
  if (!session) return {};
  const std::string in = session->inputs()[0].name;
  constexpr int64_t kRows[] = {1, 2, 3, 5, 8};
  const size_t n = static_cast<size_t>(threads * per_thread);
  std::vector<Tensor> inputs(n);
  std::vector<std::vector<Tensor>> want(n);
  for (size_t i = 0; i < n; ++i) {
    inputs[i] = RandomFloat({kRows[i % 5], 1, 28, 28}, static_cast<uint32_t>(i + 1), 0.f, 1.f);
    auto r = session->Run({{in, inputs[i]}});
    EXPECT_TRUE(r.ok()) << r.status().message();
    if (r.ok()) want[i] = *r;
  }
  auto batching = MakeBatching(session, o);
  if (!batching) return {};
  std::atomic<int> ready{0}, failures{0}, mismatches{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      ++ready;
      while (ready.load() < threads) std::this_thread::yield();  // all start together
      for (int j = 0; j < per_thread; ++j) {
        const size_t i = static_cast<size_t>(t * per_thread + j);
        auto r = batching->Run({{in, inputs[i]}});
        if (!r.ok()) {
          ++failures;
          ADD_FAILURE() << "request " << i << ": " << r.status().message();
        } else if (tolerance == 0.f ? !SameOutputs(*r, want[i])
                                    : !(r->size() == 1 && (*r)[0].dims() == want[i][0].dims() &&
                                        testing::MaxAbsDiff((*r)[0], want[i][0]) <= tolerance)) {
          ++mismatches;
        }
      }
    });
  }
  for (std::thread& th : pool) th.join();
  batching->Shutdown();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(mismatches.load(), 0) << "answers that differ from the request run alone";
  BatchingStats s = batching->stats();
  int64_t rows = 0;
  for (size_t i = 0; i < n; ++i) rows += inputs[i].dim(0);
  EXPECT_EQ(s.requests, static_cast<int64_t>(n));
  EXPECT_EQ(s.rows, rows);
  EXPECT_EQ(Sum(s.batch_rows), s.batches);
  EXPECT_EQ(s.failed + s.expired + s.rejected + s.invalid, 0);
  EXPECT_EQ(s.queue_depth, 0);
  return s;
}

TEST(BatchingSession, ConcurrentMixedRowsOnTheCnnWithPackedGemmAreBitIdenticalToRunningAlone) {
  PackedGemmForTest packed;
  BatchingOptions o;
  o.max_batch = 32;
  o.max_delay_ms = 5;
  o.eager = false;  // the timeout policy
  o.workers = 2;
  const BatchingStats s = RunConcurrently("cnn", o, 8, 5);
  EXPECT_LT(s.batches, s.requests) << "no request shared a run";
}

TEST(BatchingSession, LargeBatchesOnTheDefaultGemmAgreeWithRunningAloneWithinRounding) {
  BatchingOptions o;
  o.max_batch = 64;
  o.max_delay_ms = 10;
  o.eager = false;  // the timeout policy
  o.workers = 1;
  const BatchingStats s = RunConcurrently("cnn", o, 10, 4, 1e-4f);
  EXPECT_LT(s.batches, s.requests) << "no request shared a run";
  int64_t over_eight = 0;
  for (size_t k = 4; k < s.batch_rows.size(); ++k) over_eight += s.batch_rows[k];
  EXPECT_GT(over_eight, 0) << "no batch of more than 8 rows formed: the test checked nothing large";
}

// Bit-identical with packed GEMM: the default policy's sgemm path rounds the 10-column head
// differently at other row counts (from 2 rows on, on an AVX2-only CPU: batching_session.h).
TEST(BatchingSession, ConcurrentMixedRowsOnTheMlpAreBitIdenticalAndRespectMaxBatch) {
  PackedGemmForTest packed;
  BatchingOptions o;
  o.max_batch = 8;
  o.max_delay_ms = 10;
  o.eager = false;  // the timeout policy
  o.workers = 1;
  const BatchingStats s = RunConcurrently("mlp", o, 10, 10);
  EXPECT_LT(s.batches, s.requests) << "no request shared a run";
  ASSERT_EQ(s.batch_rows.size(), 16u);
  // (4, 8] is the last bucket a batch of at most 8 rows may land in.
  for (size_t k = 4; k < s.batch_rows.size(); ++k) EXPECT_EQ(s.batch_rows[k], 0) << "bucket " << k;
  EXPECT_GT(s.batch_rows[3], 0);
}

// Eager policy: an idle worker takes a lone request at once, whatever max_delay_ms says (the
// timeout policy would hold each of these for 5 s).
TEST(BatchingSession, EagerDispatchesALoneRequestWithoutWaitingForTheDelay) {
  auto session = ScaleModel(3.f);
  ASSERT_NE(session, nullptr);
  BatchingOptions o;
  o.max_batch = 32;
  o.max_delay_ms = 5000;
  o.eager = true;
  auto batching = MakeBatching(session, o);
  ASSERT_NE(batching, nullptr);
  const auto t0 = Clock::now();
  for (int i = 0; i < 3; ++i) {
    const Tensor x = RandomFloat({1 + i, 4}, static_cast<uint32_t>(i + 1));
    auto r = batching->Run({{"x", x}});
    ASSERT_TRUE(r.ok()) << r.status().message();
    auto alone = session->Run({{"x", x}});
    ASSERT_TRUE(alone.ok());
    EXPECT_TRUE(SameOutputs(*r, *alone));
  }
  EXPECT_LT(MsSince(t0), 2000.0) << "eager requests waited for company";
  const BatchingStats s = batching->stats();
  EXPECT_EQ(s.requests, 3);
  EXPECT_EQ(s.batches, 3);
  EXPECT_EQ(s.rows, 6);
}

// Eager policy under load: with one worker busy on the CNN, the requests that arrive meanwhile
// are taken together, so batches still form (bit-identical with packed GEMM at any size), and
// nothing waits for the 5 s delay.
TEST(BatchingSession, EagerUnderConcurrencyStillFormsBatchesOnTheCnn) {
  PackedGemmForTest packed;
  BatchingOptions o;
  o.max_batch = 32;
  o.max_delay_ms = 5000;
  o.workers = 1;
  o.eager = true;
  const auto t0 = Clock::now();
  const BatchingStats s = RunConcurrently("cnn", o, 8, 10);
  EXPECT_LT(MsSince(t0), 4000.0) << "eager batches waited for the delay";
  EXPECT_LT(s.batches, s.requests) << "no request shared a run";
  for (size_t k = 6; k < s.batch_rows.size(); ++k) EXPECT_EQ(s.batch_rows[k], 0) << "bucket " << k << " over 32 rows";
}

// Eager policy on the MLP: batches form under load, never pass max_batch, and stay bit-identical
// (with packed GEMM, as above).
TEST(BatchingSession, EagerUnderConcurrencyOnTheMlpIsBitIdenticalAndRespectsMaxBatch) {
  PackedGemmForTest packed;
  BatchingOptions o;
  o.max_batch = 8;
  o.max_delay_ms = 5000;
  o.workers = 1;
  o.eager = true;
  const BatchingStats s = RunConcurrently("mlp", o, 10, 10);
  EXPECT_LT(s.batches, s.requests) << "no request shared a run";
  for (size_t k = 4; k < s.batch_rows.size(); ++k) EXPECT_EQ(s.batch_rows[k], 0) << "bucket " << k;
}

TEST(BatchingSession, ARequestLargerThanMaxBatchRunsAlone) {
  auto session = LoadBundled("mlp");
  ASSERT_NE(session, nullptr);
  const std::string in = session->inputs()[0].name;
  BatchingOptions o;
  o.max_batch = 4;
  o.max_delay_ms = 2000;  // only "full" can start a batch before Shutdown
  o.eager = false;  // the timeout policy
  auto batching = MakeBatching(session, o);
  ASSERT_NE(batching, nullptr);
  const Tensor big = RandomFloat({7, 1, 28, 28}, 7);
  const auto t0 = Clock::now();
  auto r = batching->Run({{in, big}});
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_LT(MsSince(t0), 1000.0) << "a request over max_batch should not wait for company";
  auto alone = session->Run({{in, big}});
  ASSERT_TRUE(alone.ok());
  EXPECT_TRUE(SameOutputs(*r, *alone));
  const BatchingStats s = batching->stats();
  EXPECT_EQ(s.batches, 1);
  EXPECT_EQ(s.batch_rows[3], 1);  // 7 rows: (4, 8]
}

TEST(BatchingSession, AFullQueueRefusesAtOnceAndShutdownDrainsIt) {
  auto session = ScaleModel(3.f);
  ASSERT_NE(session, nullptr);
  BatchingOptions o;
  o.max_batch = 64;
  o.max_delay_ms = 60000;  // nothing starts on its own: the two requests stay queued
  o.eager = false;  // the timeout policy
  o.max_queue = 2;
  auto batching = MakeBatching(session, o);
  ASSERT_NE(batching, nullptr);
  std::vector<Tensor> xs = {RandomFloat({1, 4}, 1), RandomFloat({2, 4}, 2)};
  std::vector<std::vector<Tensor>> got(2);
  std::vector<Status> status(2);
  std::vector<std::thread> pool;
  for (size_t i = 0; i < 2; ++i)
    pool.emplace_back([&, i] {
      auto r = batching->Run({{"x", xs[i]}});
      status[i] = r.status();
      if (r.ok()) got[i] = *r;
    });
  ASSERT_TRUE(WaitFor([&] { return batching->stats().queue_depth == 2; }));
  const auto t0 = Clock::now();
  auto refused = batching->Run({{"x", RandomFloat({1, 4}, 3)}});
  EXPECT_LT(MsSince(t0), 200.0);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kResourceExhausted) << refused.status().message();
  EXPECT_NE(refused.status().message().find("queue is full"), std::string::npos) << refused.status().message();

  batching->Shutdown();  // runs the queued two at once, long delay or not
  for (std::thread& th : pool) th.join();
  for (size_t i = 0; i < 2; ++i) {
    ASSERT_TRUE(status[i].ok()) << status[i].message();
    auto alone = session->Run({{"x", xs[i]}});
    ASSERT_TRUE(alone.ok());
    EXPECT_TRUE(SameOutputs(got[i], *alone)) << "request " << i;
  }
  const BatchingStats s = batching->stats();
  EXPECT_EQ(s.requests, 2);
  EXPECT_EQ(s.rejected, 1);
  EXPECT_EQ(s.batches, 1);      // compatible: one run of three rows
  EXPECT_EQ(s.batch_rows[2], 1);  // (2, 4]
  EXPECT_EQ(s.queue_depth, 0);
}

TEST(BatchingSession, ShutdownFinishesEveryAcceptedRequestThenRefuses) {
  PackedGemmForTest packed;  // the answers are compared bit for bit
  auto session = LoadBundled("mlp");
  ASSERT_NE(session, nullptr);
  const std::string in = session->inputs()[0].name;
  BatchingOptions o;
  o.max_batch = 64;
  o.max_delay_ms = 60000;
  o.eager = false;  // the timeout policy
  auto batching = MakeBatching(session, o);
  ASSERT_NE(batching, nullptr);
  constexpr int kThreads = 6;
  std::vector<Tensor> xs;
  for (int i = 0; i < kThreads; ++i) xs.push_back(RandomFloat({1 + i % 3, 1, 28, 28}, static_cast<uint32_t>(40 + i)));
  std::atomic<int> ok{0}, same{0};
  std::vector<std::thread> pool;
  for (int i = 0; i < kThreads; ++i)
    pool.emplace_back([&, i] {
      auto r = batching->Run({{in, xs[static_cast<size_t>(i)]}});
      if (!r.ok()) return;
      ++ok;
      auto alone = session->Run({{in, xs[static_cast<size_t>(i)]}});
      if (alone.ok() && SameOutputs(*r, *alone)) ++same;
    });
  ASSERT_TRUE(WaitFor([&] { return batching->stats().queue_depth == kThreads; }));
  batching->Shutdown();
  EXPECT_EQ(batching->stats().queue_depth, 0);  // drained before Shutdown returned
  for (std::thread& th : pool) th.join();
  EXPECT_EQ(ok.load(), kThreads);
  EXPECT_EQ(same.load(), kThreads);
  EXPECT_EQ(batching->stats().batches, 1);

  auto late = batching->Run({{in, xs[0]}});
  ASSERT_FALSE(late.ok());
  EXPECT_EQ(late.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(late.status().message().find("shutting down"), std::string::npos) << late.status().message();
  batching->Shutdown();  // idempotent
  EXPECT_EQ(batching->stats().rejected, 1);
}

// The destructor is Shutdown: it returns once the queued requests ran and their callers left Run.
TEST(BatchingSession, DestroyingItWithCallersWaitingAnswersThemFirst) {
  auto session = ScaleModel(5.f);
  ASSERT_NE(session, nullptr);
  BatchingOptions o;
  o.max_batch = 64;
  o.max_delay_ms = 60000;
  o.eager = false;  // the timeout policy
  o.workers = 2;
  auto batching = MakeBatching(session, o);
  ASSERT_NE(batching, nullptr);
  BatchingSession* raw = batching.get();
  constexpr int kThreads = 4;
  std::atomic<int> ok{0};
  std::vector<std::thread> pool;
  for (int i = 0; i < kThreads; ++i)
    pool.emplace_back([&, i] {
      const Tensor x = RandomFloat({1, 4}, static_cast<uint32_t>(i + 1));
      auto r = raw->Run({{"x", x}});
      if (r.ok() && (*r)[0].data<float>()[0] == 5.f * x.data<float>()[0]) ++ok;
    });
  ASSERT_TRUE(WaitFor([&] { return raw->stats().queue_depth == kThreads; }));
  const auto t0 = Clock::now();
  batching.reset();
  EXPECT_LT(MsSince(t0), 1000.0);
  for (std::thread& th : pool) th.join();
  EXPECT_EQ(ok.load(), kThreads);
}

TEST(BatchingSession, ARequestQueuedPastItsDeadlineFailsAndNeverRuns) {
  auto session = ScaleModel(2.f);
  ASSERT_NE(session, nullptr);
  BatchingOptions o;
  o.max_batch = 64;
  o.max_delay_ms = 60000;
  o.eager = false;  // the timeout policy
  auto batching = MakeBatching(session, o);
  ASSERT_NE(batching, nullptr);
  const auto t0 = Clock::now();
  auto r = batching->Run({{"x", RandomFloat({2, 4}, 1)}}, t0 + std::chrono::milliseconds(30));
  const double waited = MsSince(t0);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kDeadlineExceeded) << r.status().message();
  EXPECT_GE(waited, 29.0);
  EXPECT_LT(waited, 1000.0);
  // A deadline already past fails too, without running.
  auto late = batching->Run({{"x", RandomFloat({1, 4}, 2)}}, Clock::now() - std::chrono::milliseconds(1));
  ASSERT_FALSE(late.ok());
  EXPECT_EQ(late.status().code(), StatusCode::kDeadlineExceeded);
  batching->Shutdown();
  const BatchingStats s = batching->stats();
  EXPECT_EQ(s.requests, 2);
  EXPECT_EQ(s.expired, 2);
  EXPECT_EQ(s.batches, 0) << "an expired request ran";
  EXPECT_EQ(s.queue_depth, 0);
}

TEST(BatchingSession, SwapUnderLoadDropsNothingAndLaterRequestsUseTheNewSession) {
  std::shared_ptr<const Session> a = ScaleModel(1.f), b = ScaleModel(2.f);
  ASSERT_TRUE(a && b);
  BatchingOptions o;
  o.max_batch = 8;
  o.max_delay_ms = 1;
  o.workers = 2;
  auto batching = MakeBatching(a, o);
  ASSERT_NE(batching, nullptr);
  const Session* old_session = a.get();
  a.reset();  // the batching session (and each batch) keeps the old one alive now
  constexpr int kThreads = 6, kRuns = 40;
  std::atomic<bool> swapped{false};
  std::atomic<int> done{0}, failures{0}, wrong{0}, old_after_swap{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < kThreads; ++t)
    pool.emplace_back([&, t] {
      for (int i = 0; i < kRuns; ++i) {
        const Tensor x = RandomFloat({1 + (t + i) % 3, 4}, static_cast<uint32_t>(100 * t + i + 1));
        const bool after = swapped.load();  // Swap had returned before this request was made
        auto r = batching->Run({{"x", x}});
        ++done;
        if (!r.ok()) {
          ++failures;
          continue;
        }
        // c = 1 or 2: each row element is x or 2x exactly.
        const float* y = (*r)[0].data<float>();
        const float* px = x.data<float>();
        bool by1 = true, by2 = true;
        for (int64_t k = 0; k < x.numel(); ++k) {
          by1 = by1 && y[k] == px[k];
          by2 = by2 && y[k] == 2.f * px[k];
        }
        if (!by1 && !by2) ++wrong;
        if (after && !by2) ++old_after_swap;
      }
    });
  ASSERT_TRUE(WaitFor([&] { return done.load() >= kThreads * kRuns / 3; }));
  ASSERT_TRUE(batching->Swap(b).ok());
  swapped = true;
  EXPECT_EQ(batching->session().get(), b.get());
  EXPECT_NE(batching->session().get(), old_session);
  for (std::thread& th : pool) th.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(old_after_swap.load(), 0) << "requests made after Swap ran on the old session";
  EXPECT_FALSE(batching->Swap(nullptr).ok());
}

TEST(BatchingSession, InvalidInputsFailBeforeQueueingNamingTheInput) {
  auto session = LoadBundled("mlp");
  ASSERT_NE(session, nullptr);
  const std::string in = session->inputs()[0].name;
  auto batching = MakeBatching(session, {});
  ASSERT_NE(batching, nullptr);
  const Tensor good = RandomFloat({2, 1, 28, 28}, 1);
  struct Case {
    const char* what;
    Feed feed;
    std::string named;
  };
  const std::vector<Case> cases = {
      {"unknown name", {{in, good}, {"bogus", good}}, "'bogus'"},
      {"missing input", {}, "'" + in + "'"},
      {"wrong dtype", {{in, Tensor(DType::kInt64, {2, 1, 28, 28})}}, "'" + in + "'"},
      {"wrong rank", {{in, RandomFloat({2, 784}, 2)}}, "'" + in + "'"},
      {"wrong inner dims", {{in, RandomFloat({2, 1, 28, 27}, 3)}}, "'" + in + "'"},
      {"scalar", {{in, Tensor::Scalar<float>(1.f)}}, "'" + in + "'"},
      {"no rows", {{in, Tensor(DType::kFloat32, {0, 1, 28, 28})}}, "'" + in + "'"},
      {"undefined", {{in, Tensor()}}, "'" + in + "'"},
  };
  for (const Case& c : cases) {
    auto r = batching->Run(c.feed);
    ASSERT_FALSE(r.ok()) << c.what;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << c.what << ": " << r.status().message();
    EXPECT_NE(r.status().message().find(c.named), std::string::npos) << c.what << ": " << r.status().message();
  }
  // Nothing was queued or run, and a good request still goes through.
  BatchingStats s = batching->stats();
  EXPECT_EQ(s.invalid, static_cast<int64_t>(cases.size()));
  EXPECT_EQ(s.requests, 0);
  EXPECT_EQ(s.batches, 0);
  auto r = batching->Run({{in, good}});
  ASSERT_TRUE(r.ok()) << r.status().message();
  auto alone = session->Run({{in, good}});
  ASSERT_TRUE(alone.ok());
  EXPECT_TRUE(SameOutputs(*r, *alone));
}

TEST(BatchingSession, InputsOfDifferentRowCountsAreRefusedByName) {
  GraphBuilder g;
  g.Input("a", DType::kFloat32, {Dim::Symbol("batch"), 2})
      .Input("b", DType::kFloat32, {Dim::Symbol("batch"), 2})
      .Op("Add", {"a", "b"}, {"y"})
      .Output("y");
  auto batching = MakeBatching(FromGraph(g.Build()), {});
  ASSERT_NE(batching, nullptr);
  auto r = batching->Run({{"a", RandomFloat({2, 2}, 1)}, {"b", RandomFloat({3, 2}, 2)}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("'b' has 3 rows"), std::string::npos) << r.status().message();
}

// Identity on int64 [batch, 3], uint8 [batch, 2, 2], bool [batch], float64 [batch, 1], uint16
// [batch, 5]: stacked and split byte for byte, every answer equal to its own inputs.
TEST(BatchingSession, EveryFixedSizeDtypeIsStackedAndSplitByteForByte) {
  const Dim n = Dim::Symbol("batch");
  GraphBuilder g;
  g.Input("i64", DType::kInt64, {n, 3}).Input("u8", DType::kUInt8, {n, 2, 2}).Input("flag", DType::kBool, {n});
  g.Input("f64", DType::kFloat64, {n, 1}).Input("u16", DType::kUInt16, {n, 5});
  for (const char* v : {"i64", "u8", "flag", "f64", "u16"}) g.Op("Identity", {v}, {std::string(v) + "_out"});
  for (const char* v : {"i64", "u8", "flag", "f64", "u16"}) g.Output(std::string(v) + "_out");
  auto session = FromGraph(g.Build());
  ASSERT_NE(session, nullptr);
  BatchingOptions o;
  o.max_batch = 32;
  o.max_delay_ms = 20;
  o.eager = false;  // the timeout policy
  auto batching = MakeBatching(session, o);
  ASSERT_NE(batching, nullptr);
  constexpr int kThreads = 6;
  std::atomic<int> mismatches{0}, failures{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < kThreads; ++t)
    pool.emplace_back([&, t] {
      const int64_t rows = 1 + t % 3;
      const uint32_t seed = static_cast<uint32_t>(t + 1);
      Tensor flag(DType::kBool, {rows});
      for (int64_t r = 0; r < rows; ++r) flag.data<bool>()[r] = (t + r) % 2 == 0;
      Tensor f64(DType::kFloat64, {rows, 1});
      for (int64_t r = 0; r < rows; ++r) f64.data<double>()[r] = std::ldexp(1.0 + t, -static_cast<int>(r));
      Tensor u16(DType::kUInt16, {rows, 5});
      for (int64_t k = 0; k < rows * 5; ++k) u16.data<uint16_t>()[k] = static_cast<uint16_t>(1000 * t + k);
      const Feed feed = {{"i64", testing::RandomInt64({rows, 3}, seed, -1000, 1000)},
                         {"u8", testing::RandomUInt8({rows, 2, 2}, seed)},
                         {"flag", flag},
                         {"f64", f64},
                         {"u16", u16}};
      auto r = batching->Run(feed);
      if (!r.ok()) {
        ++failures;
        ADD_FAILURE() << r.status().message();
        return;
      }
      const char* order[] = {"i64", "u8", "flag", "f64", "u16"};
      for (size_t k = 0; k < 5; ++k)
        if (k >= r->size() || !SameBytes((*r)[k], feed.at(order[k]))) ++mismatches;
    });
  for (std::thread& th : pool) th.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(mismatches.load(), 0);
  EXPECT_LT(batching->stats().batches, kThreads) << "no request shared a run";
}

// x float32 [batch, feat] with feat free: requests of feat 3 and feat 5 cannot share a run, and
// neither kind holds the other up for longer than a delay.
TEST(BatchingSession, IncompatibleRequestsDoNotBlockEachOther) {
  GraphBuilder g;
  g.Input("x", DType::kFloat32, {Dim::Symbol("batch"), Dim::Symbol("feat")}).Op("Mul", {"x", "x"}, {"y"}).Output("y");
  auto session = FromGraph(g.Build());
  ASSERT_NE(session, nullptr);
  BatchingOptions o;
  o.max_batch = 16;
  o.max_delay_ms = 20;
  o.eager = false;  // the timeout policy
  auto batching = MakeBatching(session, o);
  ASSERT_NE(batching, nullptr);
  constexpr int kThreads = 8;
  std::atomic<int> bad{0};
  const auto t0 = Clock::now();
  std::vector<std::thread> pool;
  for (int t = 0; t < kThreads; ++t)
    pool.emplace_back([&, t] {
      for (int i = 0; i < 3; ++i) {
        const Tensor x = RandomFloat({1 + i, t % 2 == 0 ? 3 : 5}, static_cast<uint32_t>(10 * t + i + 1));
        auto r = batching->Run({{"x", x}});
        auto alone = session->Run({{"x", x}});
        if (!r.ok() || !alone.ok() || !SameOutputs(*r, *alone)) ++bad;
      }
    });
  for (std::thread& th : pool) th.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_LT(MsSince(t0), 1500.0);
  const BatchingStats s = batching->stats();
  EXPECT_EQ(s.requests, 3 * kThreads);
  EXPECT_GE(s.batches, 2);  // at least one run per signature
}

// y = ReduceSum(x) over every axis: a scalar, not the batch's rows. Alone it comes back whole;
// two requests in one run both fail, naming y.
TEST(BatchingSession, AnOutputWithoutTheBatchAxisFailsTheWholeBatchNamingIt) {
  GraphBuilder g;
  AttributeMap keep;
  keep.Set("keepdims", Attribute::Int(0));
  g.Input("x", DType::kFloat32, {Dim::Symbol("batch"), 4}).Op("ReduceSum", {"x"}, {"y"}, keep).Output("y");
  auto session = FromGraph(g.Build());
  ASSERT_NE(session, nullptr);
  {
    BatchingOptions o;
    o.max_batch = 1;
    auto alone = MakeBatching(session, o);
    ASSERT_NE(alone, nullptr);
    auto r = alone->Run({{"x", Tensor::FromVector<float>({2, 4}, {1, 2, 3, 4, 5, 6, 7, 8})}});
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ((*r)[0].rank(), 0);
    EXPECT_EQ((*r)[0].data<float>()[0], 36.f);
  }
  BatchingOptions o;
  o.max_batch = 2;  // the two one-row requests fill it
  o.max_delay_ms = 60000;
  o.eager = false;  // the timeout policy
  auto batching = MakeBatching(session, o);
  ASSERT_NE(batching, nullptr);
  std::vector<Status> status(2);
  std::vector<std::thread> pool;
  for (size_t i = 0; i < 2; ++i)
    pool.emplace_back([&, i] { status[i] = batching->Run({{"x", RandomFloat({1, 4}, static_cast<uint32_t>(i + 1))}}).status(); });
  for (std::thread& th : pool) th.join();
  for (const Status& st : status) {
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.message();
    EXPECT_NE(st.message().find("output 'y'"), std::string::npos) << st.message();
  }
  const BatchingStats s = batching->stats();
  EXPECT_EQ(s.batches, 1);
  EXPECT_EQ(s.failed, 2);
}

// An input whose batch axis is fixed (an export at batch 1): requests are never stacked.
TEST(BatchingSession, AModelWithAFixedBatchRunsEachRequestAlone) {
  GraphBuilder g;
  g.Input("x", DType::kFloat32, {1, 4}).Op("Mul", {"x", "x"}, {"y"}).Output("y");
  auto session = FromGraph(g.Build());
  ASSERT_NE(session, nullptr);
  BatchingOptions o;
  o.max_delay_ms = 5;
  auto batching = MakeBatching(session, o);
  ASSERT_NE(batching, nullptr);
  std::atomic<int> bad{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < 4; ++t)
    pool.emplace_back([&, t] {
      const Tensor x = RandomFloat({1, 4}, static_cast<uint32_t>(t + 1));
      auto r = batching->Run({{"x", x}});
      auto alone = session->Run({{"x", x}});
      if (!r.ok() || !alone.ok() || !SameOutputs(*r, *alone)) ++bad;
    });
  for (std::thread& th : pool) th.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_EQ(batching->stats().batches, 4);
  auto two = batching->Run({{"x", RandomFloat({2, 4}, 9)}});
  ASSERT_FALSE(two.ok());
  EXPECT_EQ(two.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(two.status().message().find("'x'"), std::string::npos) << two.status().message();
}

TEST(BatchingSession, MakeRefusesBadOptions) {
  auto session = ScaleModel(1.f);
  ASSERT_NE(session, nullptr);
  EXPECT_EQ(BatchingSession::Make(nullptr).status().code(), StatusCode::kInvalidArgument);
  auto refused = [&](const std::function<void(BatchingOptions&)>& edit, const std::string& names) {
    BatchingOptions o;
    edit(o);
    auto b = BatchingSession::Make(session, o);
    if (b.ok()) return ::testing::AssertionFailure() << names << " accepted";
    if (b.status().code() != StatusCode::kInvalidArgument || b.status().message().find(names) == std::string::npos)
      return ::testing::AssertionFailure() << b.status().message();
    return ::testing::AssertionSuccess();
  };
  EXPECT_TRUE(refused([](BatchingOptions& o) { o.max_batch = 0; }, "max_batch"));
  EXPECT_TRUE(refused([](BatchingOptions& o) { o.max_delay_ms = -1; }, "max_delay_ms"));
  EXPECT_TRUE(refused([](BatchingOptions& o) { o.max_delay_ms = std::nan(""); }, "max_delay_ms"));
  EXPECT_TRUE(refused([](BatchingOptions& o) { o.max_queue = 0; }, "max_queue"));
  EXPECT_TRUE(refused([](BatchingOptions& o) { o.workers = 0; }, "workers"));
  BatchingOptions o;
  o.max_delay_ms = 0;
  o.workers = 3;
  auto b = BatchingSession::Make(session, o);
  ASSERT_TRUE(b.ok()) << b.status().message();
  EXPECT_EQ((*b)->options().workers, 3);
  EXPECT_EQ((*b)->session().get(), session.get());
}

}  // namespace
}  // namespace whittle
