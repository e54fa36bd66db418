#include "whittle/session.h"

#include <gtest/gtest.h>

#include <cstring>
#include <thread>
#include <vector>

#include "runtime/session/arena_pool.h"
#include "runtime/session_internal.h"
#include "tests/util/graph_builder.h"
#include "tests/util/test_util.h"

namespace whittle {
namespace {

using testing::GraphBuilder;
using testing::RandomFloat;
using testing::TensorsClose;

AttributeMap Attrs(std::initializer_list<std::pair<const char*, Attribute>> kv) {
  AttributeMap m;
  for (const auto& [k, v] : kv) m.Set(k, v);
  return m;
}

// hidden_output: the first Gemm's result "h" is a second output.
Graph MakeMlp(bool hidden_output = false) {
  GraphBuilder b;
  b.Input("x", DType::kFloat32, {Dim::Symbol("batch"), 32})
      .Init("w1", RandomFloat({64, 32}, 1)).Init("b1", RandomFloat({64}, 2))
      .Init("w2", RandomFloat({10, 64}, 3)).Init("b2", RandomFloat({10}, 4))
      .Op("Gemm", {"x", "w1", "b1"}, {"h"}, Attrs({{"transB", Attribute::Int(1)}}))
      .Op("Relu", {"h"}, {"hr"})
      .Op("Gemm", {"hr", "w2", "b2"}, {"y"}, Attrs({{"transB", Attribute::Int(1)}}))
      .Output("y");
  if (hidden_output) b.Output("h");
  return b.Build();
}

Graph MakeConvBnRelu() {
  Tensor var = RandomFloat({8}, 15, 0.5f, 2.f);
  return GraphBuilder()
      .Input("x", DType::kFloat32, {Dim::Symbol("batch"), 3, 12, 12})
      .Init("w", RandomFloat({8, 3, 3, 3}, 11)).Init("b", RandomFloat({8}, 12))
      .Init("scale", RandomFloat({8}, 13, 0.5f, 1.5f)).Init("beta", RandomFloat({8}, 14))
      .Init("mean", RandomFloat({8}, 16)).Init("var", var)
      .Op("Conv", {"x", "w", "b"}, {"c"}, Attrs({{"pads", Attribute::Ints({1, 1, 1, 1})}}))
      .Op("BatchNormalization", {"c", "scale", "beta", "mean", "var"}, {"bn"})
      .Op("Relu", {"bn"}, {"y"})
      .Output("y")
      .Build();
}

std::vector<Tensor> RunOnce(const Graph& g, SessionOptions so, const Tensor& x) {
  auto s = Session::FromGraph(g, so);
  EXPECT_TRUE(s.ok()) << s.status().message();
  if (!s.ok()) return {};
  auto r = (*s)->Run({{"x", x}});
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? *r : std::vector<Tensor>{};
}

TEST(SessionTest, OptimizedCpuMatchesUnoptimizedReference) {
  Tensor x = RandomFloat({5, 32}, 7);
  SessionOptions fast;
  fast.num_threads = 2;
  SessionOptions ref;
  ref.backend = Backend::kReference;
  ref.optimize = false;
  auto a = RunOnce(MakeMlp(), fast, x);
  auto b = RunOnce(MakeMlp(), ref, x);
  ASSERT_EQ(a.size(), 1u);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(a[0].dims(), (Dims{5, 10}));
  EXPECT_TRUE(TensorsClose(a[0], b[0], 1e-4f, 1e-4f));
}

TEST(SessionTest, FoldsConvBatchNormAndFusesRelu) {
  SessionOptions nchw;  // the folded graph as such (the blocked layout would wrap it in reorders)
  nchw.blocked_layout = false;
  auto s = Session::FromGraph(MakeConvBnRelu(), nchw);
  ASSERT_TRUE(s.ok()) << s.status().message();
  for (const Node& n : SessionGraph(**s).nodes()) {
    EXPECT_NE(n.op_type, "BatchNormalization");
    EXPECT_NE(n.op_type, "Relu");
  }
  ASSERT_EQ(SessionGraph(**s).nodes().size(), 1u);
  EXPECT_EQ(SessionGraph(**s).nodes()[0].attrs.GetString("_activation", ""), "Relu");
  Tensor x = RandomFloat({2, 3, 12, 12}, 9);
  SessionOptions ref;
  ref.backend = Backend::kReference;
  ref.optimize = false;
  auto want = RunOnce(MakeConvBnRelu(), ref, x);
  auto got = (*s)->Run({{"x", x}});
  ASSERT_TRUE(got.ok()) << got.status().message();
  ASSERT_EQ(want.size(), 1u);
  EXPECT_TRUE(TensorsClose((*got)[0], want[0], 1e-4f, 1e-4f));
}

TEST(SessionTest, ConcurrentRunsAreBitIdentical) {
  SessionOptions so;
  so.num_threads = 2;
  auto s = Session::FromGraph(MakeConvBnRelu(), so);
  ASSERT_TRUE(s.ok()) << s.status().message();
  Tensor x = RandomFloat({4, 3, 12, 12}, 21);
  auto base = (*s)->Run({{"x", x}});
  ASSERT_TRUE(base.ok());
  std::vector<std::thread> threads;
  std::vector<int> mismatches(8, 0), failures(8, 0);
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 25; ++i) {
        auto r = (*s)->Run({{"x", x}});
        if (!r.ok()) {
          ++failures[static_cast<size_t>(t)];
          continue;
        }
        if (!(*r)[0].BitwiseEquals((*base)[0])) ++mismatches[static_cast<size_t>(t)];
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < 8; ++t) {
    EXPECT_EQ(failures[static_cast<size_t>(t)], 0) << "thread " << t;
    EXPECT_EQ(mismatches[static_cast<size_t>(t)], 0) << "thread " << t;
  }
}

TEST(SessionTest, ReusesIntermediateBuffers) {
  GraphBuilder b;
  b.Input("x", DType::kFloat32, {64, 256});
  std::string prev = "x";
  for (int i = 0; i < 6; ++i) {
    std::string next = "t" + std::to_string(i);
    b.Op(i % 2 ? "Sigmoid" : "Tanh", {prev}, {next});
    prev = next;
  }
  b.Output(prev);
  auto s = Session::FromGraph(b.Build());
  ASSERT_TRUE(s.ok()) << s.status().message();
  RunStats st;
  auto r = (*s)->Run({{"x", RandomFloat({64, 256}, 3)}}, &st);
  ASSERT_TRUE(r.ok()) << r.status().message();
  // Six values are produced; liveness lets later ones take earlier buffers.
  EXPECT_LE(st.buffers_allocated, 3);
  EXPECT_GE(st.buffers_reused, 3);
  EXPECT_EQ(st.nodes.size(), 6u);
}

TEST(SessionTest, PlanCacheReusesShapesPerInputSignature) {
  auto s = Session::FromGraph(MakeMlp());
  ASSERT_TRUE(s.ok()) << s.status().message();
  auto reference = Session::FromGraph(MakeMlp());
  ASSERT_TRUE(reference.ok());
  // batch 2, 2, 5, 5, 2: the first run of each batch size plans, the repeats reuse the plan.
  const int batches[] = {2, 2, 5, 5, 2};
  const bool reused[] = {false, true, false, true, true};
  for (int i = 0; i < 5; ++i) {
    Tensor x = RandomFloat({batches[i], 32}, 40 + static_cast<uint64_t>(i));
    RunStats st;
    auto r = (*s)->Run({{"x", x}}, &st);
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(st.plan_reused, reused[i]) << "run " << i;
    ASSERT_EQ((*r)[0].dims(), (Dims{batches[i], 10}));
    // A fresh session per run (never a cached plan) gives the same bits.
    auto fresh = Session::FromGraph(MakeMlp());
    auto e = (*fresh)->Run({{"x", x}});
    ASSERT_TRUE(e.ok());
    EXPECT_TRUE((*r)[0].BitwiseEquals((*e)[0])) << "run " << i;
  }
}

TEST(SessionTest, RunNotifyingReportsEachOutputWhenItsStepRan) {
  // Outputs y (the last step's) and h (the first Gemm's): h is reported first, before y exists,
  // each once, with the bits Run returns.
  auto s = Session::FromGraph(MakeMlp(/*hidden_output=*/true));
  ASSERT_TRUE(s.ok()) << s.status().message();
  const Tensor x = RandomFloat({3, 32}, 9);
  auto plain = (*s)->Run({{"x", x}});
  ASSERT_TRUE(plain.ok());
  for (int run = 0; run < 2; ++run) {  // the first run plans shapes, the second reuses the plan
    std::vector<size_t> order;
    std::vector<Tensor> seen(2);
    auto r = (*s)->RunNotifying({{"x", x}}, [&](size_t i, const Tensor& v) {
      order.push_back(i);
      seen.at(i) = v.Clone();
    });
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(order, (std::vector<size_t>{1, 0})) << "run " << run;
    for (size_t i = 0; i < 2; ++i) {
      EXPECT_TRUE(seen[i].BitwiseEquals((*plain)[i])) << "output " << i << ", run " << run;
      EXPECT_TRUE((*r)[i].BitwiseEquals((*plain)[i])) << "output " << i << ", run " << run;
    }
  }
}

TEST(SessionTest, PlanCacheRechecksShapeDecidingValues) {
  // Reshape's target shape is a graph input: same input signature, different output shapes.
  Graph g = GraphBuilder()
                .Input("x", DType::kFloat32, {12})
                .Input("shape", DType::kInt64, {2})
                .Op("Reshape", {"x", "shape"}, {"r"})
                .Op("Relu", {"r"}, {"y"})
                .Output("y")
                .Build();
  auto s = Session::FromGraph(g);
  ASSERT_TRUE(s.ok()) << s.status().message();
  auto shape = [](int64_t a, int64_t b) {
    Tensor t(DType::kInt64, {2});
    t.data<int64_t>()[0] = a;
    t.data<int64_t>()[1] = b;
    return t;
  };
  Tensor x = RandomFloat({12}, 5);
  const std::pair<int64_t, int64_t> runs[] = {{3, 4}, {2, 6}, {3, 4}, {-1, 3}};
  const bool reused[] = {false, false, true, false};
  for (int i = 0; i < 4; ++i) {
    RunStats st;
    auto r = (*s)->Run({{"x", x}, {"shape", shape(runs[i].first, runs[i].second)}}, &st);
    ASSERT_TRUE(r.ok()) << r.status().message();
    const int64_t rows = runs[i].first < 0 ? 12 / runs[i].second : runs[i].first;
    EXPECT_EQ((*r)[0].dims(), (Dims{rows, runs[i].second})) << "run " << i;
    EXPECT_EQ(st.plan_reused, reused[i]) << "run " << i;
  }

  // NonZero's output length depends on the data itself, small or large.
  for (int64_t n : {6, 4096}) {
    Graph nz = GraphBuilder().Input("x", DType::kFloat32, {n}).Op("NonZero", {"x"}, {"y"}).Output("y").Build();
    auto sn = Session::FromGraph(nz);
    ASSERT_TRUE(sn.ok()) << sn.status().message();
    for (int64_t nonzero : {n / 2, n / 3, n / 2}) {
      Tensor v(DType::kFloat32, {n});
      for (int64_t k = 0; k < n; ++k) v.data<float>()[k] = k < nonzero ? 1.f : 0.f;
      auto r = (*sn)->Run({{"x", v}});
      ASSERT_TRUE(r.ok()) << r.status().message();
      EXPECT_EQ((*r)[0].dims(), (Dims{1, nonzero})) << "n=" << n;
    }
  }
}

TEST(SessionTest, RejectsBadInputs) {
  auto s = Session::FromGraph(MakeMlp());
  ASSERT_TRUE(s.ok()) << s.status().message();
  auto missing = (*s)->Run({});
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("missing input 'x'"), std::string::npos);
  auto wrong_name = (*s)->Run({{"nope", RandomFloat({1, 32}, 1)}});
  ASSERT_FALSE(wrong_name.ok());
  EXPECT_NE(wrong_name.status().message().find("no input named 'nope'"), std::string::npos);
  auto wrong_shape = (*s)->Run({{"x", RandomFloat({1, 31}, 1)}});
  ASSERT_FALSE(wrong_shape.ok());
  EXPECT_NE(wrong_shape.status().message().find("must have shape"), std::string::npos);
  auto wrong_type = (*s)->Run({{"x", Tensor(DType::kInt64, {1, 32})}});
  ASSERT_FALSE(wrong_type.ok());
  EXPECT_NE(wrong_type.status().message().find("must be float32"), std::string::npos);
}

TEST(SessionTest, RejectsInvalidGraph) {
  Graph g = GraphBuilder()
                .Input("x", DType::kFloat32, {2, 2})
                .Op("Relu", {"x", "x"}, {"y"})
                .Output("y")
                .Build();
  auto s = Session::FromGraph(g);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("inputs, expected"), std::string::npos);
}

// A caller's memory fed through Buffer::Wrap, at an address aligned only to its element size (as
// a NumPy array's is): the run reads it in place and gives what a Whittle buffer gives, never
// writes it, hands out no output over it (an output that is the input is a copy), and keeps it no
// longer than the last tensor on it: the owner is released then.
TEST(SessionTest, ReadsAWrappedCallerBufferInPlace) {
  const Tensor x = RandomFloat({4, 3, 12, 12}, 21);
  std::vector<float> memory(static_cast<size_t>(x.numel()) + 1);
  float* data = memory.data() + 1;  // 4-byte aligned, not 64
  std::memcpy(data, x.raw_data(), x.nbytes());
  const std::vector<float> before = memory;
  bool released = false;
  std::shared_ptr<const void> owner(&released, [](bool* r) { *r = true; });
  GraphBuilder b;
  b.Input("x", DType::kFloat32, {Dim::Symbol("batch"), 3, 12, 12})
      .Init("w", RandomFloat({8, 3, 3, 3}, 11)).Init("shape", Tensor::FromVector<int64_t>({2}, {-1, 432}))
      .Op("Conv", {"x", "w"}, {"c"}, Attrs({{"pads", Attribute::Ints({1, 1, 1, 1})}}))
      .Op("Relu", {"c"}, {"y"})
      .Op("Reshape", {"x", "shape"}, {"flat"})
      .Op("Tanh", {"flat"}, {"t"})
      .Op("Identity", {"x"}, {"same"})
      .Output("y").Output("t").Output("same");
  const Graph g = b.Build();
  for (const bool optimize : {true, false}) {
    SessionOptions so;
    so.optimize = optimize;
    const std::vector<Tensor> expected = RunOnce(g, so, x);
    ASSERT_EQ(expected.size(), 3u);
    auto s = Session::FromGraph(g, so);
    ASSERT_TRUE(s.ok()) << s.status().message();
    {
      const Tensor wrapped(DType::kFloat32, x.dims(), Buffer::Wrap(data, x.nbytes(), owner));
      ASSERT_TRUE(wrapped.buffer()->external());
      for (int run = 0; run < 2; ++run) {
        auto r = (*s)->Run({{"x", wrapped}});
        ASSERT_TRUE(r.ok()) << r.status().message();
        ASSERT_EQ(r->size(), 3u);
        for (size_t i = 0; i < 3; ++i) {
          EXPECT_TRUE((*r)[i].BitwiseEquals(expected[i])) << "output " << i;
          EXPECT_NE((*r)[i].buffer(), wrapped.buffer()) << "output " << i << " hands out the caller's memory";
        }
      }
      EXPECT_FALSE(released);
    }
    EXPECT_EQ(memory, before) << "the run wrote into the caller's memory";
  }
  owner.reset();
  EXPECT_TRUE(released) << "a session kept the caller's buffer after its runs";
}

// A run's arena never takes a wrapped buffer into its free list (it would write another value
// there), even when it holds the last reference.
TEST(SessionTest, ArenaNeverRecyclesAWrappedBuffer) {
  std::vector<float> memory(64);
  RunArena arena;
  Tensor t(DType::kFloat32, {64}, Buffer::Wrap(memory.data(), 256, nullptr));
  ASSERT_TRUE(t.buffer()->external());
  arena.Release(t);
  EXPECT_TRUE(arena.free.empty());
  Tensor own(DType::kFloat32, {64});
  arena.Release(own);
  EXPECT_EQ(arena.free.size(), 1u);
}

}  // namespace
}  // namespace whittle
