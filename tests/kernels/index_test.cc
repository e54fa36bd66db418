// Indexing kernels: hand-computed cases for every op (negative indices, exclusive/reverse
// CumSum, DCR vs CRD, TopK ties, batch_dims, scatter reductions), each also run with the CPU
// provider and compared to the reference, plus bad-input errors.
#include <gtest/gtest.h>

#include <limits>
#include <numeric>
#include <vector>

#include "runtime/node_runner.h"
#include "tests/util/test_util.h"

namespace whittle {
namespace {

using ::whittle::testing::ExpectBackendsMatchReference;
using ::whittle::testing::MakeNode;
using ::whittle::testing::TensorsClose;

AttributeMap Attrs(std::initializer_list<std::pair<const std::string, Attribute>> kv) {
  AttributeMap a;
  for (const auto& [k, v] : kv) a.Set(k, v);
  return a;
}

Tensor F(const Dims& dims, std::vector<float> v) { return Tensor::FromVector<float>(dims, v); }
Tensor I64(const Dims& dims, std::vector<int64_t> v) { return Tensor::FromVector<int64_t>(dims, v); }
Tensor Iota(const Dims& dims) {
  Tensor t(DType::kFloat32, dims);
  std::iota(t.data<float>(), t.data<float>() + t.numel(), 0.f);
  return t;
}

std::vector<Tensor> Both(const Node& n, const std::vector<Tensor>& in, int opset = 17) {
  return ExpectBackendsMatchReference(n, in, 0.f, 0.f, opset);
}

TEST(IndexKernelsTest, Size) {
  auto out = Both(MakeNode("Size", 1, 1), {Iota({2, 3, 4})});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(TensorsClose(out[0], Tensor::Scalar<int64_t>(24)));
}

TEST(IndexKernelsTest, GatherElementsWithNegativeIndices) {
  // data [[1,2],[3,4]], axis 1, indices [[0,0],[1,0]] -> [[1,1],[4,3]]
  auto out = Both(MakeNode("GatherElements", 2, 1, Attrs({{"axis", Attribute::Int(1)}})),
                  {F({2, 2}, {1, 2, 3, 4}), I64({2, 2}, {0, 0, -1, 0})});
  EXPECT_TRUE(TensorsClose(out[0], F({2, 2}, {1, 1, 4, 3})));
  // axis 0: out[i][j] = data[idx[i][j]][j]
  auto o0 = Both(MakeNode("GatherElements", 2, 1), {Iota({3, 2}), I64({1, 2}, {2, 0})});
  EXPECT_TRUE(TensorsClose(o0[0], F({1, 2}, {4, 1})));
}

TEST(IndexKernelsTest, TriluUpperLowerWithK) {
  const Tensor x = Iota({3, 3});
  auto up = Both(MakeNode("Trilu", 1, 1), {x});
  EXPECT_TRUE(TensorsClose(up[0], F({3, 3}, {0, 1, 2, 0, 4, 5, 0, 0, 8})));
  auto low = Both(MakeNode("Trilu", 2, 1, Attrs({{"upper", Attribute::Int(0)}})), {x, Tensor::Scalar<int64_t>(-1)});
  EXPECT_TRUE(TensorsClose(low[0], F({3, 3}, {0, 0, 0, 3, 0, 0, 6, 7, 0})));
}

TEST(IndexKernelsTest, CumSumVariants) {
  const Tensor x = F({4}, {1, 2, 3, 4});
  const Tensor axis = Tensor::Scalar<int32_t>(0);
  EXPECT_TRUE(TensorsClose(Both(MakeNode("CumSum", 2, 1), {x, axis})[0], F({4}, {1, 3, 6, 10})));
  auto ex = Both(MakeNode("CumSum", 2, 1, Attrs({{"exclusive", Attribute::Int(1)}})), {x, axis});
  EXPECT_TRUE(TensorsClose(ex[0], F({4}, {0, 1, 3, 6})));
  auto rev = Both(MakeNode("CumSum", 2, 1, Attrs({{"reverse", Attribute::Int(1)}})), {x, axis});
  EXPECT_TRUE(TensorsClose(rev[0], F({4}, {10, 9, 7, 4})));
  auto both = Both(MakeNode("CumSum", 2, 1, Attrs({{"reverse", Attribute::Int(1)}, {"exclusive", Attribute::Int(1)}})),
                   {x, axis});
  EXPECT_TRUE(TensorsClose(both[0], F({4}, {9, 7, 4, 0})));
  auto ax1 = Both(MakeNode("CumSum", 2, 1), {Iota({2, 3}), Tensor::Scalar<int64_t>(-1)});
  EXPECT_TRUE(TensorsClose(ax1[0], F({2, 3}, {0, 1, 3, 3, 7, 12})));
}

TEST(IndexKernelsTest, EyeLikeWithKAndDtype) {
  auto out = Both(MakeNode("EyeLike", 1, 1, Attrs({{"k", Attribute::Int(1)}})), {Iota({2, 3})});
  EXPECT_TRUE(TensorsClose(out[0], F({2, 3}, {0, 1, 0, 0, 0, 1})));
  auto i = Both(MakeNode("EyeLike", 1, 1, Attrs({{"dtype", Attribute::Int(7)}})), {Iota({2, 2})});
  EXPECT_TRUE(TensorsClose(i[0], I64({2, 2}, {1, 0, 0, 1})));
  auto below = Both(MakeNode("EyeLike", 1, 1, Attrs({{"k", Attribute::Int(-1)}})), {Iota({3, 2})});
  EXPECT_TRUE(TensorsClose(below[0], F({3, 2}, {0, 0, 1, 0, 0, 1})));
}

// The fuzzer's find: k = INT64_MAX overflowed i + k. Any k off the matrix is all zeros.
TEST(IndexKernelsTest, EyeLikeKOffTheMatrixIsZero) {
  for (int64_t k : {int64_t{3}, int64_t{-4}, std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min()}) {
    auto out = Both(MakeNode("EyeLike", 1, 1, Attrs({{"k", Attribute::Int(k)}})), {Iota({4, 3})});
    EXPECT_TRUE(TensorsClose(out[0], F({4, 3}, std::vector<float>(12, 0.0f)))) << "k=" << k;
  }
}

TEST(IndexKernelsTest, OneHotAxisAndNegativeIndex) {
  const Tensor idx = I64({2}, {1, -1});
  const Tensor depth = Tensor::Scalar<float>(3);
  const Tensor values = F({2}, {0, 5});
  auto last = Both(MakeNode("OneHot", 3, 1), {idx, depth, values}, 11);
  EXPECT_TRUE(TensorsClose(last[0], F({2, 3}, {0, 5, 0, 0, 0, 5})));
  auto first = Both(MakeNode("OneHot", 3, 1, Attrs({{"axis", Attribute::Int(0)}})), {idx, depth, values}, 11);
  EXPECT_TRUE(TensorsClose(first[0], F({3, 2}, {0, 0, 5, 0, 0, 5})));
}

TEST(IndexKernelsTest, DepthToSpaceModesAndSpaceToDepthInverse) {
  const Tensor x = Iota({1, 4, 1, 1});
  auto dcr = Both(MakeNode("DepthToSpace", 1, 1, Attrs({{"blocksize", Attribute::Int(2)}})), {x});
  EXPECT_TRUE(TensorsClose(dcr[0], F({1, 1, 2, 2}, {0, 1, 2, 3})));
  // 8 channels, b=2: DCR out channel c reads input (by*2+bx)*2+c; CRD reads c*4+by*2+bx.
  const Tensor y = Iota({1, 8, 1, 1});
  auto d = Both(MakeNode("DepthToSpace", 1, 1, Attrs({{"blocksize", Attribute::Int(2)}})), {y});
  EXPECT_TRUE(TensorsClose(d[0], F({1, 2, 2, 2}, {0, 2, 4, 6, 1, 3, 5, 7})));
  auto c = Both(
      MakeNode("DepthToSpace", 1, 1, Attrs({{"blocksize", Attribute::Int(2)}, {"mode", Attribute::String("CRD")}})),
      {y});
  EXPECT_TRUE(TensorsClose(c[0], F({1, 2, 2, 2}, {0, 1, 2, 3, 4, 5, 6, 7})));
  // SpaceToDepth undoes DepthToSpace in DCR mode.
  const Tensor z = Iota({2, 8, 2, 3});
  auto s = Both(MakeNode("DepthToSpace", 1, 1, Attrs({{"blocksize", Attribute::Int(2)}})), {z});
  auto back = Both(MakeNode("SpaceToDepth", 1, 1, Attrs({{"blocksize", Attribute::Int(2)}})), {s[0]});
  EXPECT_TRUE(TensorsClose(back[0], z));
}

TEST(IndexKernelsTest, TopKLargestSmallestAndTies) {
  const Tensor x = F({2, 4}, {1, 3, 3, 2, 4, 0, 4, 1});
  auto big = Both(MakeNode("TopK", 2, 2), {x, I64({1}, {2})});
  ASSERT_EQ(big.size(), 2u);
  EXPECT_TRUE(TensorsClose(big[0], F({2, 2}, {3, 3, 4, 4})));
  EXPECT_TRUE(TensorsClose(big[1], I64({2, 2}, {1, 2, 0, 2})));
  auto small = Both(MakeNode("TopK", 2, 2, Attrs({{"largest", Attribute::Int(0)}, {"axis", Attribute::Int(0)}})),
                    {x, I64({1}, {1})});
  EXPECT_TRUE(TensorsClose(small[0], F({1, 4}, {1, 0, 3, 1})));
  EXPECT_TRUE(TensorsClose(small[1], I64({1, 4}, {0, 1, 0, 1})));
}

TEST(IndexKernelsTest, GatherNDWithBatchDims) {
  auto out = Both(MakeNode("GatherND", 2, 1), {Iota({2, 2}), I64({2, 2}, {0, 0, 1, 1})});
  EXPECT_TRUE(TensorsClose(out[0], F({2}, {0, 3})));
  auto rows = Both(MakeNode("GatherND", 2, 1), {Iota({2, 2}), I64({2, 1}, {1, 0})});
  EXPECT_TRUE(TensorsClose(rows[0], F({2, 2}, {2, 3, 0, 1})));
  // batch_dims 1: data [2,2,2], indices [[1],[0]] -> [data[0][1], data[1][0]]
  auto b = Both(MakeNode("GatherND", 2, 1, Attrs({{"batch_dims", Attribute::Int(1)}})),
                {Iota({2, 2, 2}), I64({2, 1}, {1, 0})});
  EXPECT_TRUE(TensorsClose(b[0], F({2, 2}, {2, 3, 4, 5})));
}

TEST(IndexKernelsTest, ScatterElementsReductions) {
  const Tensor data = F({1, 4}, {1, 2, 3, 4});
  const Tensor idx = I64({1, 2}, {1, -3});  // both hit column 1
  const Tensor upd = F({1, 2}, {10, 5});
  auto none =
      Both(MakeNode("ScatterElements", 3, 1, Attrs({{"axis", Attribute::Int(1)}})), {data, I64({1, 2}, {0, 3}), upd});
  EXPECT_TRUE(TensorsClose(none[0], F({1, 4}, {10, 2, 3, 5})));
  auto add = Both(
      MakeNode("ScatterElements", 3, 1, Attrs({{"axis", Attribute::Int(1)}, {"reduction", Attribute::String("add")}})),
      {data, idx, upd});
  EXPECT_TRUE(TensorsClose(add[0], F({1, 4}, {1, 17, 3, 4})));
  auto mul = Both(
      MakeNode("ScatterElements", 3, 1, Attrs({{"axis", Attribute::Int(1)}, {"reduction", Attribute::String("mul")}})),
      {data, idx, upd});
  EXPECT_TRUE(TensorsClose(mul[0], F({1, 4}, {1, 100, 3, 4})));
}

TEST(IndexKernelsTest, ScatterNDSlicesAndAdd) {
  const Tensor data = Iota({3, 2});
  auto rows = Both(MakeNode("ScatterND", 3, 1), {data, I64({1, 1}, {2}), F({1, 2}, {9, 8})});
  EXPECT_TRUE(TensorsClose(rows[0], F({3, 2}, {0, 1, 2, 3, 9, 8})));
  auto add = Both(MakeNode("ScatterND", 3, 1, Attrs({{"reduction", Attribute::String("add")}})),
                  {data, I64({2, 2}, {0, 1, 0, 1}), F({2}, {10, 20})});
  EXPECT_TRUE(TensorsClose(add[0], F({3, 2}, {0, 31, 2, 3, 4, 5})));
}

TEST(IndexKernelsTest, OutOfRangeIndicesAreErrors) {
  RegisterAllOps();
  RegisterAllKernels();
  const Node g = MakeNode("GatherElements", 2, 1);
  auto r = RunNode(g, 17, {F({2}, {1, 2}), I64({1}, {2})}, Backend::kReference);
  EXPECT_FALSE(r.ok());
  const Node s = MakeNode("ScatterND", 3, 1);
  auto r2 = RunNode(s, 17, {F({2}, {1, 2}), I64({1, 1}, {-3}), F({1}, {0})}, Backend::kReference);
  EXPECT_FALSE(r2.ok());
}

}  // namespace
}  // namespace whittle
