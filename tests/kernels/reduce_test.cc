// Reduction kernels: hand-computed values on both providers, and the CPU fast paths (row,
// column and blocked reductions; row and strided softmax) against the reference.
#include <gtest/gtest.h>

#include <cmath>

#include "tests/util/test_util.h"

namespace whittle {
namespace {

using testing::ExpectBackendsMatchReference;
using testing::MakeNode;
using testing::RandomFloat;

template <class T>
void ExpectValues(const Tensor& t, const Dims& dims, const std::vector<T>& want, double tol = 1e-6) {
  ASSERT_EQ(t.dtype(), DTypeOf<T>());
  ASSERT_EQ(t.dims(), dims);
  for (size_t i = 0; i < want.size(); ++i) {
    if constexpr (std::is_floating_point_v<T>) EXPECT_NEAR(t.data<T>()[i], want[i], tol) << "element " << i;
    else EXPECT_EQ(t.data<T>()[i], want[i]) << "element " << i;
  }
}

Tensor RunBoth(const Node& node, const std::vector<Tensor>& inputs, int opset = 17) {
  auto outs = ExpectBackendsMatchReference(node, inputs, 1e-6f, 1e-6f, opset);
  EXPECT_FALSE(outs.empty());
  return outs.empty() ? Tensor() : outs[0];
}

AttributeMap Axes(std::vector<int64_t> axes, int64_t keepdims) {
  AttributeMap a;
  if (!axes.empty()) a.Set("axes", Attribute::Ints(std::move(axes)));
  a.Set("keepdims", Attribute::Int(keepdims));
  return a;
}

AttributeMap Axis(int64_t axis) {
  AttributeMap a;
  a.Set("axis", Attribute::Int(axis));
  return a;
}

TEST(ReduceKernelsTest, ReduceValues) {
  const Tensor x = Tensor::FromVector<float>({2, 2}, {1, 2, 3, 4});
  const int o = 11;  // axes as an attribute for every op
  ExpectValues<float>(RunBoth(MakeNode("ReduceSum", 1, 1, Axes({0}, 0)), {x}, o), {2}, {4, 6});
  ExpectValues<float>(RunBoth(MakeNode("ReduceSum", 1, 1, Axes({1}, 1)), {x}, o), {2, 1}, {3, 7});
  ExpectValues<float>(RunBoth(MakeNode("ReduceSum", 1, 1, Axes({}, 1)), {x}, o), {1, 1}, {10});
  ExpectValues<float>(RunBoth(MakeNode("ReduceMean", 1, 1, Axes({-1}, 0)), {x}, o), {2}, {1.5f, 3.5f});
  ExpectValues<float>(RunBoth(MakeNode("ReduceMax", 1, 1, Axes({}, 0)), {x}, o), {}, {4});
  ExpectValues<float>(RunBoth(MakeNode("ReduceMin", 1, 1, Axes({0}, 0)), {x}, o), {2}, {1, 2});
  ExpectValues<float>(RunBoth(MakeNode("ReduceProd", 1, 1, Axes({1}, 0)), {x}, o), {2}, {2, 12});
  ExpectValues<float>(RunBoth(MakeNode("ReduceSumSquare", 1, 1, Axes({1}, 0)), {x}, o), {2}, {5, 25});
  ExpectValues<float>(RunBoth(MakeNode("ReduceLogSum", 1, 1, Axes({1}, 0)), {x}, o), {2}, {std::log(3.f), std::log(7.f)});
  const Tensor s = Tensor::FromVector<float>({2, 2}, {-1, 2, 3, -4});
  ExpectValues<float>(RunBoth(MakeNode("ReduceL1", 1, 1, Axes({1}, 0)), {s}, o), {2}, {3, 7});
  const Tensor t = Tensor::FromVector<float>({2, 2}, {3, 4, 6, 8});
  ExpectValues<float>(RunBoth(MakeNode("ReduceL2", 1, 1, Axes({1}, 0)), {t}, o), {2}, {5, 10});
  const Tensor d = Tensor::FromVector<double>({2, 2}, {1, 2, 3, 4});
  ExpectValues<double>(RunBoth(MakeNode("ReduceLogSumExp", 1, 1, Axes({1}, 0)), {d}, o), {2},
                       {std::log(std::exp(1.0) + std::exp(2.0)), std::log(std::exp(3.0) + std::exp(4.0))}, 1e-12);
  // Large values stay finite thanks to the max shift.
  const Tensor big = Tensor::FromVector<float>({2}, {1000, 1000});
  ExpectValues<float>(RunBoth(MakeNode("ReduceLogSumExp", 1, 1, Axes({}, 0)), {big}, o), {}, {1000 + std::log(2.f)}, 1e-3);
}

TEST(ReduceKernelsTest, IntegerReductions) {
  const Tensor x = Tensor::FromVector<int64_t>({2, 3}, {1, 2, 3, 4, 5, 6});
  ExpectValues<int64_t>(RunBoth(MakeNode("ReduceSum", 1, 1, Axes({}, 0)), {x}, 11), {}, {21});
  ExpectValues<int64_t>(RunBoth(MakeNode("ReduceProd", 1, 1, Axes({0}, 0)), {x}, 11), {3}, {4, 10, 18});
  const Tensor y = Tensor::FromVector<int32_t>({2, 3}, {1, -2, 3, -4, 5, -6});
  ExpectValues<int32_t>(RunBoth(MakeNode("ReduceMax", 1, 1, Axes({1}, 0)), {y}), {2}, {3, 5});
  ExpectValues<int32_t>(RunBoth(MakeNode("ReduceMin", 1, 1, Axes({1}, 0)), {y}), {2}, {-2, -6});
}

TEST(ReduceKernelsTest, ReduceSumAxesInput) {
  const Tensor x = Tensor::FromVector<float>({2, 2}, {1, 2, 3, 4});
  AttributeMap keep0;
  keep0.Set("keepdims", Attribute::Int(0));
  ExpectValues<float>(RunBoth(MakeNode("ReduceSum", 2, 1, keep0), {x, Tensor::FromVector<int64_t>({1}, {-1})}, 13), {2},
                      {3, 7});
  const Tensor empty(DType::kInt64, {0});
  ExpectValues<float>(RunBoth(MakeNode("ReduceSum", 2, 1), {x, empty}, 13), {1, 1}, {10});
  ExpectValues<float>(RunBoth(MakeNode("ReduceSum", 1, 1), {x}, 13), {1, 1}, {10});
  AttributeMap noop;
  noop.Set("noop_with_empty_axes", Attribute::Int(1));
  ExpectValues<float>(RunBoth(MakeNode("ReduceSum", 2, 1, noop), {x, empty}, 13), {2, 2}, {1, 2, 3, 4});
  auto bad = RunNode(MakeNode("ReduceSum", 2, 1), 13, {x, Tensor::FromVector<int64_t>({1}, {2})}, Backend::kCpu);
  EXPECT_FALSE(bad.ok());
}

TEST(ReduceKernelsTest, ArgMaxArgMin) {
  const Tensor x = Tensor::FromVector<float>({2, 2}, {2, 1, 3, 10});
  ExpectValues<int64_t>(RunBoth(MakeNode("ArgMax", 1, 1, Axis(1)), {x}), {2, 1}, {0, 1});
  AttributeMap a = Axis(0);
  a.Set("keepdims", Attribute::Int(0));
  ExpectValues<int64_t>(RunBoth(MakeNode("ArgMin", 1, 1, a), {x}), {2}, {0, 0});
  const Tensor ties = Tensor::FromVector<float>({2, 2}, {2, 2, 3, 10});
  ExpectValues<int64_t>(RunBoth(MakeNode("ArgMax", 1, 1, Axis(1)), {ties}), {2, 1}, {0, 1});
  AttributeMap last = Axis(1);
  last.Set("select_last_index", Attribute::Int(1));
  ExpectValues<int64_t>(RunBoth(MakeNode("ArgMax", 1, 1, last), {ties}), {2, 1}, {1, 1});
}

TEST(ReduceKernelsTest, SoftmaxValues) {
  const Tensor x = Tensor::FromVector<float>({1, 3}, {1, 2, 3});
  ExpectValues<float>(RunBoth(MakeNode("Softmax", 1, 1), {x}), {1, 3}, {0.09003057f, 0.24472847f, 0.66524096f});
  ExpectValues<float>(RunBoth(MakeNode("LogSoftmax", 1, 1), {x}), {1, 3}, {-2.40760596f, -1.40760596f, -0.40760596f}, 1e-6);
  const Tensor h = Tensor::FromVector<float>({2, 3}, {1, 3, 2, 4, 4, 0});
  ExpectValues<float>(RunBoth(MakeNode("Hardmax", 1, 1), {h}), {2, 3}, {0, 1, 0, 1, 0, 0});
  // Large logits: the max shift keeps every row equal to the small one.
  const Tensor big = Tensor::FromVector<float>({2, 3}, {1, 2, 3, 10001, 10002, 10003});
  ExpectValues<float>(RunBoth(MakeNode("Softmax", 1, 1), {big}), {2, 3},
                      {0.09003057f, 0.24472847f, 0.66524096f, 0.09003057f, 0.24472847f, 0.66524096f});
}

TEST(ReduceKernelsTest, SoftmaxAxisSemanticsDependOnOpset) {
  const Tensor x = Tensor::FromVector<float>({1, 2, 2}, {1, 2, 3, 4});
  // Opset 11: coerced to [1, 4] at axis 1, one softmax over all four values.
  const float z = std::exp(1.f) + std::exp(2.f) + std::exp(3.f) + std::exp(4.f);
  ExpectValues<float>(RunBoth(MakeNode("Softmax", 1, 1, Axis(1)), {x}, 11), {1, 2, 2},
                      {std::exp(1.f) / z, std::exp(2.f) / z, std::exp(3.f) / z, std::exp(4.f) / z});
  // Opset 13: along axis 1 only, pairing (1, 3) and (2, 4).
  const float p = 1 / (1 + std::exp(2.f));
  ExpectValues<float>(RunBoth(MakeNode("Softmax", 1, 1, Axis(1)), {x}, 13), {1, 2, 2}, {p, p, 1 - p, 1 - p});
  auto bad = RunNode(MakeNode("Softmax", 1, 1, Axis(3)), 13, {x}, Backend::kCpu);
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("out of range"), std::string::npos) << bad.status().message();
}

TEST(ReduceKernelsTest, CpuMatchesReferenceOnReductions) {
  const Tensor small = RandomFloat({4, 5, 6}, 11);
  const Tensor big = RandomFloat({64, 32, 40}, 12);  // > 64K elements: threaded paths
  const std::vector<std::vector<int64_t>> axes_cases = {{0}, {1}, {2}, {0, 1}, {1, 2}, {0, 2}, {}, {-1}};
  for (const char* op : {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceL1", "ReduceL2",
                         "ReduceSumSquare", "ReduceLogSumExp", "ReduceProd"}) {
    for (const auto& axes : axes_cases) {
      for (int keep : {0, 1}) {
        SCOPED_TRACE(std::string(op) + " axes " + DimsToString(axes) + " keepdims " + std::to_string(keep));
        ExpectBackendsMatchReference(MakeNode(op, 1, 1, Axes(axes, keep)), {small}, 1e-5f, 1e-5f, 11);
        if (std::string(op) != "ReduceProd")
          ExpectBackendsMatchReference(MakeNode(op, 1, 1, Axes(axes, keep)), {big}, 1e-4f, 1e-4f, 11);
      }
    }
  }
  const Tensor pos = RandomFloat({64, 32, 40}, 13, 0.1f, 1.f);
  ExpectBackendsMatchReference(MakeNode("ReduceLogSum", 1, 1, Axes({1}, 1)), {pos}, 1e-5f, 1e-5f, 11);
}

TEST(ReduceKernelsTest, CpuMatchesReferenceOnSoftmax) {
  const Tensor logits = RandomFloat({128, 1000}, 21, -8.f, 8.f);  // batch of logits, threaded rows
  const Tensor cube = RandomFloat({3, 4, 5}, 22, -3.f, 3.f);
  const Tensor wide = RandomFloat({16, 80, 64}, 23, -3.f, 3.f);  // strided axis, threaded blocks
  for (const char* op : {"Softmax", "LogSoftmax", "Hardmax"}) {
    SCOPED_TRACE(op);
    ExpectBackendsMatchReference(MakeNode(op, 1, 1), {logits}, 1e-6f, 1e-5f);
    ExpectBackendsMatchReference(MakeNode(op, 1, 1, Axis(1)), {wide}, 1e-6f, 1e-5f);
    for (int axis : {0, 1, 2, -1}) {
      ExpectBackendsMatchReference(MakeNode(op, 1, 1, Axis(axis)), {cube}, 1e-6f, 1e-5f, 13);
      ExpectBackendsMatchReference(MakeNode(op, 1, 1, Axis(axis)), {cube}, 1e-6f, 1e-5f, 11);
    }
  }
}

}  // namespace
}  // namespace whittle
