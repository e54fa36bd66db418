// Element-wise kernels: hand-computed values (run on both providers) and the CPU fast paths
// against the reference on random inputs with every broadcast pattern the fast path special-cases.
#include <gtest/gtest.h>

#include <cmath>

#include "kernels/common/dtype_dispatch.h"
#include "tests/util/test_util.h"

namespace whittle {
namespace {

using testing::ExpectBackendsMatchReference;
using testing::MakeNode;
using testing::RandomFloat;
using testing::RandomInt64;

template <class T>
void ExpectValues(const Tensor& t, const Dims& dims, const std::vector<T>& want, double tol = 1e-6) {
  ASSERT_EQ(t.dtype(), DTypeOf<T>());
  ASSERT_EQ(t.dims(), dims);
  const T* p = t.data<T>();
  for (size_t i = 0; i < want.size(); ++i) {
    if constexpr (std::is_floating_point_v<T>) {
      if (p[i] == want[i]) continue;  // also covers infinities
      if (std::isnan(want[i])) {
        EXPECT_TRUE(std::isnan(p[i])) << "element " << i;
        continue;
      }
      EXPECT_NEAR(p[i], want[i], tol) << "element " << i;
    } else {
      EXPECT_EQ(p[i], want[i]) << "element " << i;
    }
  }
}

// Runs both providers (checking they agree) and returns output 0.
Tensor RunBoth(const Node& node, const std::vector<Tensor>& inputs, int opset = 17) {
  auto outs = ExpectBackendsMatchReference(node, inputs, 1e-6f, 1e-6f, opset);
  EXPECT_FALSE(outs.empty());
  return outs.empty() ? Tensor() : outs[0];
}

AttributeMap Alpha(float a) {
  AttributeMap m;
  m.Set("alpha", Attribute::Float(a));
  return m;
}

TEST(ElementwiseKernelsTest, AddBiasAndPerChannel) {
  Tensor x = Tensor::FromVector<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor b = Tensor::FromVector<float>({3}, {10, 20, 30});
  ExpectValues<float>(RunBoth(MakeNode("Add", 2, 1), {x, b}), {2, 3}, {11, 22, 33, 14, 25, 36});
  // [N=1, C=2, H=1, W=2] + [C, 1, 1]
  Tensor img = Tensor::FromVector<float>({1, 2, 1, 2}, {1, 2, 3, 4});
  Tensor ch = Tensor::FromVector<float>({2, 1, 1}, {100, 200});
  ExpectValues<float>(RunBoth(MakeNode("Add", 2, 1), {img, ch}), {1, 2, 1, 2}, {101, 102, 203, 204});
  // Scalar on the left, two-sided broadcast.
  Tensor s = Tensor::Scalar<float>(1.f);
  ExpectValues<float>(RunBoth(MakeNode("Sub", 2, 1), {s, b}), {3}, {-9, -19, -29});
  Tensor col = Tensor::FromVector<float>({2, 1}, {1, 2});
  Tensor row = Tensor::FromVector<float>({1, 3}, {1, 10, 100});
  ExpectValues<float>(RunBoth(MakeNode("Mul", 2, 1), {col, row}), {2, 3}, {1, 10, 100, 2, 20, 200});
}

TEST(ElementwiseKernelsTest, IntegerArithmetic) {
  Tensor a = Tensor::FromVector<int64_t>({4}, {7, -7, 9, -9});
  Tensor b = Tensor::FromVector<int64_t>({4}, {2, 2, -4, -4});
  ExpectValues<int64_t>(RunBoth(MakeNode("Div", 2, 1), {a, b}), {4}, {3, -3, -2, 2});  // truncation
  ExpectValues<int64_t>(RunBoth(MakeNode("Add", 2, 1), {a, b}), {4}, {9, -5, 5, -13});
  ExpectValues<int64_t>(RunBoth(MakeNode("Mul", 2, 1), {a, Tensor::Scalar<int64_t>(3)}), {4}, {21, -21, 27, -27});
  Tensor u = Tensor::FromVector<uint8_t>({2}, {250, 3});
  Tensor v = Tensor::FromVector<uint8_t>({2}, {10, 5});
  ExpectValues<uint8_t>(RunBoth(MakeNode("Add", 2, 1), {u, v}), {2}, {4, 8});  // wraps like numpy
  ExpectValues<uint8_t>(RunBoth(MakeNode("Sub", 2, 1), {u, v}), {2}, {240, 254});
  Tensor zero = Tensor::FromVector<int64_t>({4}, {1, 0, 1, 1});
  auto r = RunNode(MakeNode("Div", 2, 1), 17, {a, zero}, Backend::kCpu);
  EXPECT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("division by zero"), std::string::npos) << r.status().message();
}

TEST(ElementwiseKernelsTest, PowWithMixedTypes) {
  Tensor fi = Tensor::FromVector<float>({3}, {1, 2, 3});
  ExpectValues<float>(RunBoth(MakeNode("Pow", 2, 1), {fi, Tensor::FromVector<int64_t>({3}, {4, 5, 6})}), {3}, {1, 32, 729});
  ExpectValues<int32_t>(RunBoth(MakeNode("Pow", 2, 1), {Tensor::FromVector<int32_t>({3}, {1, 2, 3}),
                                                    Tensor::FromVector<float>({3}, {4, 5, 6})}),
                        {3}, {1, 32, 729});
  ExpectValues<float>(RunBoth(MakeNode("Pow", 2, 1), {fi, Tensor::Scalar<float>(2.f)}), {3}, {1, 4, 9});
  ExpectValues<float>(RunBoth(MakeNode("Pow", 2, 1), {Tensor::FromVector<float>({2}, {4, 9}), Tensor::Scalar<float>(0.5f)}),
                      {2}, {2, 3}, 1e-6);
}

TEST(ElementwiseKernelsTest, ModFollowsFmodAttribute) {
  // The ONNX mixed-sign examples.
  Tensor a = Tensor::FromVector<int32_t>({6}, {-4, 7, 5, 4, -7, 8});
  Tensor b = Tensor::FromVector<int32_t>({6}, {2, -3, 8, -2, 3, 5});
  ExpectValues<int32_t>(RunBoth(MakeNode("Mod", 2, 1), {a, b}), {6}, {0, -2, 5, 0, 2, 3});
  AttributeMap f;
  f.Set("fmod", Attribute::Int(1));
  ExpectValues<int32_t>(RunBoth(MakeNode("Mod", 2, 1, f), {a, b}), {6}, {0, 1, 5, 0, -1, 3});
  Tensor x = Tensor::FromVector<float>({6}, {-4.3f, 7.2f, 5.0f, 4.3f, -7.2f, 8.0f});
  Tensor y = Tensor::FromVector<float>({6}, {2.1f, -3.4f, 8.0f, -2.1f, 3.4f, 5.0f});
  ExpectValues<float>(RunBoth(MakeNode("Mod", 2, 1, f), {x, y}), {6}, {-0.1f, 0.4f, 5.f, 0.1f, -0.4f, 3.f}, 1e-5);
  EXPECT_FALSE(RunNode(MakeNode("Mod", 2, 1), 17, {x, y}, Backend::kReference).ok());
  // Opset 28 defines fmod 0 for floats: A - floor(A / B) * B, a zero taking the divisor's sign.
  ExpectValues<float>(RunBoth(MakeNode("Mod", 2, 1), {x, y}, 28), {6}, {2.f, -3.f, 5.f, -2.f, 3.f, 3.f}, 1e-5);
  const Tensor z = RunBoth(MakeNode("Mod", 2, 1), {Tensor::FromVector<float>({2}, {4.f, -0.f}),
                                                   Tensor::FromVector<float>({2}, {-2.f, 3.f})}, 28);
  ASSERT_EQ(z.numel(), 2);
  EXPECT_TRUE(z.data<float>()[0] == 0.f && std::signbit(z.data<float>()[0]));
  EXPECT_TRUE(z.data<float>()[1] == 0.f && !std::signbit(z.data<float>()[1]));
}

// BitShift as opset 28 defines it for signed types: arithmetic right shifts, and a shift by a
// negative amount or by the width or more gives the sign fill (-1 right of a negative, else 0).
TEST(ElementwiseKernelsTest, BitShiftSignedAndOutOfRange) {
  AttributeMap right, left;
  right.Set("direction", Attribute::String("RIGHT"));
  left.Set("direction", Attribute::String("LEFT"));
  const Tensor x = Tensor::FromVector<int8_t>({5}, {-8, -8, 64, 5, -1});
  const Tensor s = Tensor::FromVector<int8_t>({5}, {1, 9, 1, -1, 8});
  ExpectValues<int8_t>(RunBoth(MakeNode("BitShift", 2, 1, right), {x, s}, 28), {5}, {-4, -1, 32, 0, -1});
  ExpectValues<int8_t>(RunBoth(MakeNode("BitShift", 2, 1, left), {x, s}, 28), {5}, {-16, 0, -128, 0, 0});
  const Tensor big = Tensor::FromVector<int64_t>({2}, {-(int64_t{1} << 40), int64_t{1} << 62});
  const Tensor by = Tensor::FromVector<int64_t>({2}, {38, 64});
  ExpectValues<int64_t>(RunBoth(MakeNode("BitShift", 2, 1, right), {big, by}, 28), {2}, {-4, 0});
  // Unsigned: logical shifts; 64 bits or more give 0.
  const Tensor u = Tensor::FromVector<uint32_t>({3}, {0x80000000u, 6, 1});
  const Tensor us = Tensor::FromVector<uint32_t>({3}, {31, 1, 32});
  ExpectValues<uint32_t>(RunBoth(MakeNode("BitShift", 2, 1, right), {u, us}, 28), {3}, {1, 3, 0});
}

TEST(ElementwiseKernelsTest, ComparisonsAndLogic) {
  Tensor a = Tensor::FromVector<float>({2, 2}, {1, 2, 3, 4});
  Tensor b = Tensor::FromVector<float>({2}, {2, 3});
  ExpectValues<bool>(RunBoth(MakeNode("Equal", 2, 1), {a, b}), {2, 2}, {false, false, false, false});
  ExpectValues<bool>(RunBoth(MakeNode("Greater", 2, 1), {a, b}), {2, 2}, {false, false, true, true});
  ExpectValues<bool>(RunBoth(MakeNode("LessOrEqual", 2, 1), {a, b}), {2, 2}, {true, true, false, false});
  Tensor i = Tensor::FromVector<int32_t>({3}, {1, 5, 3});
  ExpectValues<bool>(RunBoth(MakeNode("Equal", 2, 1), {i, Tensor::Scalar<int32_t>(5)}), {3}, {false, true, false});
  Tensor p = Tensor::FromVector<bool>({4}, {true, true, false, false});
  Tensor q = Tensor::FromVector<bool>({4}, {true, false, true, false});
  ExpectValues<bool>(RunBoth(MakeNode("And", 2, 1), {p, q}), {4}, {true, false, false, false});
  ExpectValues<bool>(RunBoth(MakeNode("Or", 2, 1), {p, q}), {4}, {true, true, true, false});
  ExpectValues<bool>(RunBoth(MakeNode("Xor", 2, 1), {p, q}), {4}, {false, true, true, false});
  ExpectValues<bool>(RunBoth(MakeNode("Not", 1, 1), {p}), {4}, {false, false, true, true});
  Tensor special = Tensor::FromVector<float>({4}, {NAN, INFINITY, -INFINITY, 1.f});
  ExpectValues<bool>(RunBoth(MakeNode("IsNaN", 1, 1), {special}), {4}, {true, false, false, false});
  AttributeMap pos_only;
  pos_only.Set("detect_negative", Attribute::Int(0));
  ExpectValues<bool>(RunBoth(MakeNode("IsInf", 1, 1, pos_only), {special}), {4}, {false, true, false, false});
}

TEST(ElementwiseKernelsTest, VariadicAndWhere) {
  Tensor a = Tensor::FromVector<float>({3}, {3, 2, 1});
  Tensor b = Tensor::FromVector<float>({3}, {1, 4, 4});
  Tensor c = Tensor::FromVector<float>({3}, {2, 5, 3});
  ExpectValues<float>(RunBoth(MakeNode("Max", 3, 1), {a, b, c}), {3}, {3, 5, 4});
  ExpectValues<float>(RunBoth(MakeNode("Min", 3, 1), {a, b, c}), {3}, {1, 2, 1});
  ExpectValues<float>(RunBoth(MakeNode("Sum", 3, 1), {a, b, c}), {3}, {6, 11, 8});
  ExpectValues<float>(RunBoth(MakeNode("Mean", 3, 1), {a, b, c}), {3}, {2, 11.f / 3, 8.f / 3});
  ExpectValues<float>(RunBoth(MakeNode("Sum", 1, 1), {a}), {3}, {3, 2, 1});
  // Broadcasting across inputs: [2,1] with [3].
  Tensor col = Tensor::FromVector<float>({2, 1}, {0, 10});
  ExpectValues<float>(RunBoth(MakeNode("Max", 2, 1), {col, b}), {2, 3}, {1, 4, 4, 10, 10, 10});
  ExpectValues<float>(RunBoth(MakeNode("Mean", 2, 1), {col, b}), {2, 3}, {0.5f, 2, 2, 5.5f, 7, 7});
  ExpectValues<int64_t>(RunBoth(MakeNode("Min", 2, 1), {Tensor::FromVector<int64_t>({2}, {5, -5}), Tensor::Scalar<int64_t>(0)}),
                        {2}, {0, -5});
  Tensor cond = Tensor::FromVector<bool>({2, 1}, {true, false});
  Tensor x = Tensor::FromVector<int64_t>({3}, {1, 2, 3});
  Tensor y = Tensor::Scalar<int64_t>(-1);
  ExpectValues<int64_t>(RunBoth(MakeNode("Where", 3, 1), {cond, x, y}), {2, 3}, {1, 2, 3, -1, -1, -1});
}

TEST(ElementwiseKernelsTest, UnaryMathValues) {
  Tensor x = Tensor::FromVector<float>({5}, {-2.5f, -0.5f, 0.f, 0.5f, 2.5f});
  ExpectValues<float>(RunBoth(MakeNode("Relu", 1, 1), {x}), {5}, {0, 0, 0, 0.5f, 2.5f});
  ExpectValues<float>(RunBoth(MakeNode("Abs", 1, 1), {x}), {5}, {2.5f, 0.5f, 0, 0.5f, 2.5f});
  ExpectValues<float>(RunBoth(MakeNode("Neg", 1, 1), {x}), {5}, {2.5f, 0.5f, 0, -0.5f, -2.5f});
  ExpectValues<float>(RunBoth(MakeNode("Floor", 1, 1), {x}), {5}, {-3, -1, 0, 0, 2});
  ExpectValues<float>(RunBoth(MakeNode("Ceil", 1, 1), {x}), {5}, {-2, 0, 0, 1, 3});
  ExpectValues<float>(RunBoth(MakeNode("Round", 1, 1), {x}), {5}, {-2, 0, 0, 0, 2});  // half to even
  ExpectValues<float>(RunBoth(MakeNode("Sign", 1, 1), {x}), {5}, {-1, -1, 0, 1, 1});
  ExpectValues<float>(RunBoth(MakeNode("Sigmoid", 1, 1), {x}), {5},
                      {1 / (1 + std::exp(2.5f)), 1 / (1 + std::exp(0.5f)), 0.5f, 1 / (1 + std::exp(-0.5f)),
                       1 / (1 + std::exp(-2.5f))}, 1e-6);
  ExpectValues<float>(RunBoth(MakeNode("Tanh", 1, 1), {x}), {5},
                      {std::tanh(-2.5f), std::tanh(-0.5f), 0, std::tanh(0.5f), std::tanh(2.5f)}, 1e-6);
  ExpectValues<float>(RunBoth(MakeNode("Softplus", 1, 1), {Tensor::Scalar<float>(0.f)}), {}, {std::log(2.f)});
  ExpectValues<float>(RunBoth(MakeNode("Softsign", 1, 1), {x}), {5}, {-2.5f / 3.5f, -0.5f / 1.5f, 0, 0.5f / 1.5f, 2.5f / 3.5f});
  ExpectValues<float>(RunBoth(MakeNode("Erf", 1, 1), {Tensor::FromVector<float>({2}, {0.f, 1.f})}), {2}, {0.f, 0.8427007929f});
  Tensor pos = Tensor::FromVector<float>({3}, {1, 4, 0.25f});
  ExpectValues<float>(RunBoth(MakeNode("Sqrt", 1, 1), {pos}), {3}, {1, 2, 0.5f});
  ExpectValues<float>(RunBoth(MakeNode("Log", 1, 1), {pos}), {3}, {0, std::log(4.f), std::log(0.25f)}, 1e-6);
  ExpectValues<float>(RunBoth(MakeNode("Exp", 1, 1), {Tensor::FromVector<float>({2}, {0, 1})}), {2}, {1, std::exp(1.f)}, 1e-6);
  ExpectValues<float>(RunBoth(MakeNode("Reciprocal", 1, 1), {pos}), {3}, {1, 0.25f, 4});
  ExpectValues<float>(RunBoth(MakeNode("Cos", 1, 1), {Tensor::Scalar<float>(0.f)}), {}, {1});
  ExpectValues<int32_t>(RunBoth(MakeNode("Abs", 1, 1), {Tensor::FromVector<int32_t>({2}, {-3, 4})}), {2}, {3, 4});
  ExpectValues<int64_t>(RunBoth(MakeNode("Relu", 1, 1), {Tensor::FromVector<int64_t>({2}, {-3, 4})}), {2}, {0, 4});
}

TEST(ElementwiseKernelsTest, ActivationValues) {
  Tensor x = Tensor::FromVector<float>({4}, {-2, -1, 1, 3});
  ExpectValues<float>(RunBoth(MakeNode("LeakyRelu", 1, 1, Alpha(0.1f)), {x}), {4}, {-0.2f, -0.1f, 1, 3});
  ExpectValues<float>(RunBoth(MakeNode("LeakyRelu", 1, 1), {x}), {4}, {-0.02f, -0.01f, 1, 3});
  ExpectValues<float>(RunBoth(MakeNode("Elu", 1, 1, Alpha(2.f)), {x}), {4},
                      {2 * (std::exp(-2.f) - 1), 2 * (std::exp(-1.f) - 1), 1, 3}, 1e-6);
  ExpectValues<float>(RunBoth(MakeNode("ThresholdedRelu", 1, 1, Alpha(2.f)), {x}), {4}, {0, 0, 0, 3});
  ExpectValues<float>(RunBoth(MakeNode("HardSigmoid", 1, 1), {x}), {4}, {0.1f, 0.3f, 0.7f, 1});
  ExpectValues<float>(RunBoth(MakeNode("HardSwish", 1, 1), {x}), {4}, {-2 * (1 / 6.f), -1 * (2 / 6.f), 1 * (4 / 6.f), 3});
  AttributeMap selu;
  selu.Set("alpha", Attribute::Float(2.f));
  selu.Set("gamma", Attribute::Float(3.f));
  ExpectValues<float>(RunBoth(MakeNode("Selu", 1, 1, selu), {x}), {4},
                      {3 * (2 * std::exp(-2.f) - 2), 3 * (2 * std::exp(-1.f) - 2), 3, 9}, 1e-5);
  ExpectValues<float>(RunBoth(MakeNode("Celu", 1, 1, Alpha(2.f)), {x}), {4},
                      {2 * (std::exp(-1.f) - 1), 2 * (std::exp(-0.5f) - 1), 1, 3}, 1e-6);
  AttributeMap shrink;
  shrink.Set("lambd", Attribute::Float(1.5f));
  shrink.Set("bias", Attribute::Float(1.5f));
  ExpectValues<float>(RunBoth(MakeNode("Shrink", 1, 1, shrink), {x}), {4}, {-0.5f, 0, 0, 1.5f});
  Tensor slope = Tensor::FromVector<float>({2}, {0.5f, 0.25f});
  ExpectValues<float>(RunBoth(MakeNode("PRelu", 2, 1), {Tensor::FromVector<float>({2, 2}, {-2, -2, 2, -4}), slope}), {2, 2},
                      {-1, -0.5f, 2, -1});
}

// Mish (opset 18) on every backend against PyTorch's torch.nn.functional.mish in float64
// (torch 2.15), through the saturating tails and the minimum near x = -1.19.
TEST(ElementwiseKernelsTest, MishMatchesPyTorch) {
  const Tensor x = Tensor::FromVector<float>({10}, {-20.f, -5.f, -1.5f, -0.5f, 0.f, 0.25f, 1.f, 2.5f, 8.f, 30.f});
  ExpectValues<float>(RunBoth(MakeNode("Mish", 1, 1), {x}, 18), {10},
                      {-4.12230724e-08f, -0.0335762377f, -0.298099742f, -0.220743775f, 0.f, 0.16957241f, 0.865098388f,
                       2.4713923f, 7.9999982f, 30.f},
                      2e-6);
}

TEST(ElementwiseKernelsTest, ClipAttributesAndInputs) {
  Tensor x = Tensor::FromVector<float>({4}, {-3, -1, 1, 3});
  AttributeMap attrs;
  attrs.Set("min", Attribute::Float(-2.f));
  attrs.Set("max", Attribute::Float(2.f));
  ExpectValues<float>(RunBoth(MakeNode("Clip", 1, 1, attrs), {x}, 6), {4}, {-2, -1, 1, 2});
  ExpectValues<float>(RunBoth(MakeNode("Clip", 3, 1), {x, Tensor::Scalar<float>(0.f), Tensor()}, 13), {4}, {0, 0, 1, 3});
  ExpectValues<float>(RunBoth(MakeNode("Clip", 3, 1), {x, Tensor(), Tensor::Scalar<float>(0.f)}, 13), {4}, {-3, -1, 0, 0});
  // min > max gives max everywhere.
  ExpectValues<float>(RunBoth(MakeNode("Clip", 3, 1), {x, Tensor::Scalar<float>(2.f), Tensor::Scalar<float>(1.f)}, 13), {4},
                      {1, 1, 1, 1});
  Tensor i8 = Tensor::FromVector<int8_t>({3}, {-128, 0, 127});
  ExpectValues<int8_t>(RunBoth(MakeNode("Clip", 3, 1), {i8, Tensor::Scalar<int8_t>(-5), Tensor::Scalar<int8_t>(5)}, 13),
                       {3}, {-5, 0, 5});
  ExpectValues<int8_t>(RunBoth(MakeNode("Clip", 1, 1), {i8}, 13), {3}, {-128, 0, 127});
}

AttributeMap To(DType t) {
  AttributeMap a;
  a.Set("to", Attribute::Int(static_cast<int64_t>(t)));
  return a;
}

TEST(ElementwiseKernelsTest, CastSemantics) {
  Tensor f = Tensor::FromVector<float>({5}, {2.7f, -2.7f, 0.f, 1e10f, NAN});
  ExpectValues<int32_t>(RunBoth(MakeNode("Cast", 1, 1, To(DType::kInt32)), {f}), {5},
                        {2, -2, 0, 2147483647, 0});  // truncation; out-of-range saturates, NaN -> 0
  ExpectValues<bool>(RunBoth(MakeNode("Cast", 1, 1, To(DType::kBool)), {f}), {5}, {true, true, false, true, true});
  ExpectValues<float>(RunBoth(MakeNode("Cast", 1, 1, To(DType::kFloat32)), {Tensor::FromVector<bool>({2}, {true, false})}),
                      {2}, {1, 0});
  ExpectValues<int32_t>(RunBoth(MakeNode("Cast", 1, 1, To(DType::kInt32)), {Tensor::FromVector<int64_t>({2}, {4294967297LL, -1})}),
                        {2}, {1, -1});  // wraps like numpy
  ExpectValues<double>(RunBoth(MakeNode("Cast", 1, 1, To(DType::kFloat64)), {Tensor::FromVector<int64_t>({1}, {-7})}), {1},
                       {-7.0});

  Tensor h = RunBoth(MakeNode("Cast", 1, 1, To(DType::kFloat16)),
                 {Tensor::FromVector<float>({5}, {1.f, 65504.f, 1e6f, -2.f, 1.f / 3})});
  ASSERT_EQ(h.dtype(), DType::kFloat16);
  const uint16_t* hb = ew::DataAs<uint16_t>(h);
  EXPECT_EQ(hb[0], 0x3C00);
  EXPECT_EQ(hb[1], 0x7BFF);
  EXPECT_EQ(hb[2], 0x7C00);  // overflow -> inf
  EXPECT_EQ(hb[3], 0xC000);
  EXPECT_EQ(hb[4], 0x3555);  // 1/3 rounded to nearest
  ExpectValues<float>(RunBoth(MakeNode("Cast", 1, 1, To(DType::kFloat32)), {h}), {5},
                      {1.f, 65504.f, INFINITY, -2.f, 0.333251953125f});
  Tensor bf = RunBoth(MakeNode("Cast", 1, 1, To(DType::kBFloat16)), {Tensor::FromVector<float>({2}, {1.f, 1.00781238f})});
  EXPECT_EQ(ew::DataAs<uint16_t>(bf)[0], 0x3F80);
  EXPECT_EQ(ew::DataAs<uint16_t>(bf)[1], 0x3F80);  // truncated, as the ONNX 1.12 test data expects

  // CastLike takes the target type from its second input.
  ExpectValues<int64_t>(RunBoth(MakeNode("CastLike", 2, 1), {f, Tensor::Scalar<int64_t>(0)}), {5},
                        {2, -2, 0, 10000000000LL, 0});

  auto bad = RunNode(MakeNode("Cast", 1, 1, To(DType::kString)), 13, {f}, Backend::kCpu);
  EXPECT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kUnimplemented);
}

TEST(ElementwiseKernelsTest, HalfInputsComputeInFloat) {
  Tensor a(DType::kFloat16, {2}), b(DType::kFloat16, {2});
  ew::DataAs<uint16_t>(a)[0] = 0x3C00;  // 1
  ew::DataAs<uint16_t>(a)[1] = 0x4000;  // 2
  ew::DataAs<uint16_t>(b)[0] = 0x3800;  // 0.5
  ew::DataAs<uint16_t>(b)[1] = 0x3400;  // 0.25
  Tensor s = RunBoth(MakeNode("Add", 2, 1), {a, b});
  ASSERT_EQ(s.dtype(), DType::kFloat16);
  EXPECT_EQ(ew::DataAs<uint16_t>(s)[0], 0x3E00);  // 1.5
  EXPECT_EQ(ew::DataAs<uint16_t>(s)[1], 0x4080);  // 2.25
  Tensor m = RunBoth(MakeNode("Max", 2, 1), {a, b});
  EXPECT_EQ(ew::DataAs<uint16_t>(m)[1], 0x4000);
}

// Shape pairs covering each fast-path layout: same shape, scalar, bias row, per-channel,
// two-sided, leading broadcast, and sizes past the threading threshold.
const std::vector<std::pair<Dims, Dims>>& BroadcastCases() {
  static const std::vector<std::pair<Dims, Dims>> cases = {
      {{3, 4, 5}, {3, 4, 5}}, {{3, 4, 5}, {}},        {{}, {7}},           {{6, 17}, {17}},
      {{2, 3, 4, 5}, {3, 1, 1}}, {{2, 1, 5}, {1, 4, 1}}, {{4, 1}, {3, 4, 6}}, {{1, 5}, {5, 1}},
      {{2, 8, 64, 80}, {8, 1, 1}}, {{300, 257}, {257}}, {{90000}, {90000}}, {{2, 70000}, {2, 1}},
      {{3, 0, 2}, {2}}};
  return cases;
}

TEST(ElementwiseKernelsTest, CpuMatchesReferenceOnBroadcasts) {
  uint32_t seed = 1;
  for (const auto& [da, db] : BroadcastCases()) {
    SCOPED_TRACE(DimsToString(da) + " with " + DimsToString(db));
    Tensor a = RandomFloat(da, seed++, -2.f, 2.f);
    Tensor b = RandomFloat(db, seed++, 0.5f, 2.f);  // positive: Div and Pow stay finite
    const bool large = a.numel() > 50000;  // threaded paths: a few ops are enough
    for (const char* op : {"Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Equal", "Greater", "Less",
                           "GreaterOrEqual", "LessOrEqual"}) {
      SCOPED_TRACE(op);
      if (large && std::string(op) != "Add" && std::string(op) != "Mul" && std::string(op) != "Greater") continue;
      ExpectBackendsMatchReference(MakeNode(op, 2, 1), {std::string(op) == "Pow" ? b : a, std::string(op) == "Pow" ? a : b},
                                1e-6f, 1e-6f);
      ExpectBackendsMatchReference(MakeNode(op, 2, 1), {b, a}, 1e-6f, 1e-6f);
    }
    Tensor ia = RandomInt64(da, seed++, -50, 50), ib = RandomInt64(db, seed++, 1, 9);
    for (const char* op : {"Add", "Sub", "Mul", "Div", "Mod", "Max", "Min", "Equal", "Greater"})
      ExpectBackendsMatchReference(MakeNode(op, 2, 1), {ia, ib});
  }
}

TEST(ElementwiseKernelsTest, CpuMatchesReferenceOnUnaryOps) {
  Tensor x = RandomFloat({3, 100, 250}, 7, -4.f, 4.f);  // > 64K elements: threaded path
  Tensor pos = RandomFloat({3, 100, 250}, 8, 0.01f, 4.f);
  for (const char* op : {"Relu", "Neg", "Abs", "Floor", "Ceil", "Exp", "Tanh", "Sigmoid", "Softsign", "Erf",
                         "HardSigmoid", "HardSwish", "Softplus", "Sign", "Round", "Sin"}) {
    SCOPED_TRACE(op);
    ExpectBackendsMatchReference(MakeNode(op, 1, 1), {x}, 1e-6f, 2e-6f);
  }
  for (const char* op : {"Sqrt", "Log", "Reciprocal"}) ExpectBackendsMatchReference(MakeNode(op, 1, 1), {pos}, 1e-6f, 2e-6f);
  ExpectBackendsMatchReference(MakeNode("LeakyRelu", 1, 1, Alpha(0.2f)), {x});
  ExpectBackendsMatchReference(MakeNode("Elu", 1, 1, Alpha(1.5f)), {x}, 1e-6f, 2e-6f);
  ExpectBackendsMatchReference(MakeNode("Clip", 3, 1), {x, Tensor::Scalar<float>(-1.f), Tensor::Scalar<float>(2.f)});
  ExpectBackendsMatchReference(MakeNode("Sum", 3, 1), {x, pos, x});
  ExpectBackendsMatchReference(MakeNode("Mean", 2, 1), {x, pos});
  ExpectBackendsMatchReference(MakeNode("Max", 3, 1), {x, pos, Tensor::Scalar<float>(0.f)});
  ExpectBackendsMatchReference(MakeNode("Where", 3, 1),
                            {RunNode(MakeNode("Greater", 2, 1), 17, {x, pos}, Backend::kCpu).value()[0], x, pos});
}

}  // namespace
}  // namespace whittle
