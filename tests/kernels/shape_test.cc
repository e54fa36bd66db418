// Shape-op kernels run end to end through RunNode: aliasing ops share the input buffer and
// relabel dims, Shape/Constant/ConstantOfShape/Dropout write hand-checked values, and the CPU
// provider matches the reference.
#include <gtest/gtest.h>

#include <vector>

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

Tensor I64(std::vector<int64_t> v) { return Tensor::FromVector<int64_t>({static_cast<int64_t>(v.size())}, v); }

std::vector<Tensor> RunRef(const Node& n, int opset, const std::vector<Tensor>& in, Backend p = Backend::kReference) {
  auto r = RunNode(n, opset, in, p);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? *r : std::vector<Tensor>();
}

TEST(ShapeKernelsTest, ReshapeAliasesInput) {
  Tensor x = Tensor::FromVector<int64_t>({2, 3}, {1, 2, 3, 4, 5, 6});
  for (Backend p : ::whittle::testing::TestedBackends()) {
    auto out = RunRef(MakeNode("Reshape", 2, 1), 14, {x, I64({3, -1})}, p);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].dims(), (Dims{3, 2}));
    EXPECT_EQ(out[0].buffer(), x.buffer());  // zero copy
    EXPECT_EQ(out[0].data<int64_t>()[5], 6);
  }
}

TEST(ShapeKernelsTest, ReshapeElementCountMismatchIsAnError) {
  Tensor x = Tensor::FromVector<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  auto r = RunNode(MakeNode("Reshape", 2, 1), 14, {x, I64({4, 2})}, Backend::kCpu);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("elements"), std::string::npos) << r.status().message();
}

TEST(ShapeKernelsTest, AliasOpsOnSeveralDtypes) {
  Tensor b = Tensor::FromVector<bool>({1, 2, 1, 2}, {true, false, false, true});
  auto sq = RunRef(MakeNode("Squeeze", 2, 1), 13, {b, I64({0, 2})});
  EXPECT_TRUE(TensorsClose(sq[0], Tensor::FromVector<bool>({2, 2}, {true, false, false, true})));
  auto un = RunRef(MakeNode("Unsqueeze", 1, 1, Attrs({{"axes", Attribute::Ints({-1})}})), 11,
                {Tensor::FromVector<int32_t>({2}, {7, 8})});
  EXPECT_TRUE(TensorsClose(un[0], Tensor::FromVector<int32_t>({2, 1}, {7, 8})));
  auto fl = RunRef(MakeNode("Flatten", 1, 1, Attrs({{"axis", Attribute::Int(2)}})), 13,
                {Tensor::FromVector<double>({1, 2, 2}, {1, 2, 3, 4})});
  EXPECT_TRUE(TensorsClose(fl[0], Tensor::FromVector<double>({2, 2}, {1, 2, 3, 4})));
  Tensor u8 = Tensor::FromVector<uint8_t>({3}, {1, 2, 255});
  auto id = RunRef(MakeNode("Identity", 1, 1), 16, {u8});
  EXPECT_TRUE(TensorsClose(id[0], u8));
}

TEST(ShapeKernelsTest, DropoutInference) {
  Tensor x = Tensor::FromVector<float>({2, 2}, {1, -2, 3, -4});
  auto y = RunRef(MakeNode("Dropout", 1, 1), 13, {x});
  EXPECT_TRUE(TensorsClose(y[0], x));
  auto ym = ExpectBackendsMatchReference(MakeNode("Dropout", 2, 2), {x, Tensor::Scalar<float>(0.5f)}, 0, 0, 13);
  ASSERT_EQ(ym.size(), 2u);
  EXPECT_TRUE(TensorsClose(ym[0], x));
  EXPECT_TRUE(TensorsClose(ym[1], Tensor::FromVector<bool>({2, 2}, {true, true, true, true})));
  // Opset 9: the mask has the input's type.
  auto old = RunRef(MakeNode("Dropout", 1, 2, Attrs({{"ratio", Attribute::Float(0.2f)}})), 9, {x});
  EXPECT_TRUE(TensorsClose(old[1], Tensor::FromVector<float>({2, 2}, {1, 1, 1, 1})));
  // Training with a zero ratio is still the identity.
  auto t0 = RunRef(MakeNode("Dropout", 3, 2), 13, {x, Tensor::Scalar<float>(0.f), Tensor::Scalar<bool>(true)});
  EXPECT_TRUE(TensorsClose(t0[0], x));
}

TEST(ShapeKernelsTest, ShapeWithStartEnd) {
  Tensor x(DType::kFloat32, {3, 4, 5});
  auto all = RunRef(MakeNode("Shape", 1, 1), 15, {x});
  EXPECT_TRUE(TensorsClose(all[0], I64({3, 4, 5})));
  auto mid = RunRef(MakeNode("Shape", 1, 1, Attrs({{"start", Attribute::Int(-2)}, {"end", Attribute::Int(-1)}})), 15, {x});
  EXPECT_TRUE(TensorsClose(mid[0], I64({4})));
  auto tail = ExpectBackendsMatchReference(MakeNode("Shape", 1, 1, Attrs({{"start", Attribute::Int(1)}})), {x}, 0, 0, 15);
  EXPECT_TRUE(TensorsClose(tail[0], I64({4, 5})));
}

TEST(ShapeKernelsTest, Constant) {
  auto f = RunRef(MakeNode("Constant", 0, 1, Attrs({{"value_floats", Attribute::Floats({1.5f, -2.f})}})), 13, {});
  EXPECT_TRUE(TensorsClose(f[0], Tensor::FromVector<float>({2}, {1.5f, -2.f})));
  auto i = RunRef(MakeNode("Constant", 0, 1, Attrs({{"value_int", Attribute::Int(-7)}})), 13, {});
  EXPECT_TRUE(TensorsClose(i[0], Tensor::Scalar<int64_t>(-7)));
  Tensor v = Tensor::FromVector<int8_t>({2, 2}, {1, -2, 3, -4});
  auto t = ExpectBackendsMatchReference(MakeNode("Constant", 0, 1, Attrs({{"value", Attribute::TensorValue(v)}})), {}, 0,
                                     0, 13);
  EXPECT_TRUE(TensorsClose(t[0], v));
  EXPECT_NE(t[0].buffer(), v.buffer());  // the output is a copy the caller may write
}

TEST(ShapeKernelsTest, ConstantOfShape) {
  auto z = RunRef(MakeNode("ConstantOfShape", 1, 1), 9, {I64({2, 2})});
  EXPECT_TRUE(TensorsClose(z[0], Tensor::FromVector<float>({2, 2}, {0, 0, 0, 0})));
  Node n = MakeNode("ConstantOfShape", 1, 1,
                    Attrs({{"value", Attribute::TensorValue(Tensor::FromVector<int32_t>({1}, {5}))}}));
  auto f = ExpectBackendsMatchReference(n, {I64({3})}, 0, 0, 9);
  EXPECT_TRUE(TensorsClose(f[0], Tensor::FromVector<int32_t>({3}, {5, 5, 5})));
  auto empty = RunRef(n, 9, {I64({0})});
  EXPECT_EQ(empty[0].dims(), (Dims{0}));
}

}  // namespace
}  // namespace whittle
