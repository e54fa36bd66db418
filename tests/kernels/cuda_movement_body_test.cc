// The CUDA data-movement and element-wise kernels' device code, run on the CPU: the bodies of
// kernels/cuda/movement_body.h over their whole ranges, laid out as the factories in
// kernels/cuda/movement.cc lay them out, against the reference Gather, Concat, Cast and Where,
// bit for bit; and kernels/cuda/unary_body.h's per-element function against every unary op it
// serves. The launches themselves run on a GPU only (scripts/cuda-device-check.sh).
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "kernels/cuda/layout.h"
#include "kernels/common/index.h"
#include "kernels/cuda/movement_body.h"
#include "kernels/cuda/resize_body.h"
#include "kernels/cuda/resize_tables.h"
#include "kernels/cuda/unary_body.h"
#include "kernels/common/elementwise_fns.h"
#include "kernels/common/fused_activation.h"
#include "kernels/resample_setup.h"
#include "lib/ops/op_def.h"
#include "runtime/node_runner.h"
#include "tests/util/node_case.h"
#include "tests/util/test_util.h"

namespace whittle::cuda {
namespace {

using ::whittle::testing::MakeNode;
using ::whittle::testing::RandomFloat;

Tensor Reference(const Node& n, const std::vector<Tensor>& in) {
  auto r = RunNode(n, 17, in, Backend::kReference);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? (*r)[0] : Tensor();
}

// The grid of the CUDA Gather on the CPU; `report`: its device check report (kDeviceCheckWords).
template <class W>
Tensor GatherBody(const Tensor& x, const Tensor& idx, int64_t axis, const Dims& out_dims, int64_t* report = nullptr,
                  int64_t tag = 0) {
  Tensor y(x.dtype(), out_dims);
  int64_t outer = 1, inner = 1;
  for (int64_t k = 0; k < axis; ++k) outer *= x.dim(static_cast<int>(k));
  for (int64_t k = axis + 1; k < x.rank(); ++k) inner *= x.dim(static_cast<int>(k));
  const bool i64 = idx.dtype() == DType::kInt64;
  for (int64_t i = 0; i < y.numel(); ++i)
    GatherAt(static_cast<const W*>(x.raw_data()), i64 ? idx.data<int64_t>() : nullptr, i64 ? nullptr : idx.data<int32_t>(),
             static_cast<W*>(y.raw_data()), x.dim(static_cast<int>(axis)), idx.numel(), inner, i, report, tag, axis);
  return y;
}

TEST(CudaMovementBodies, GatherMatchesTheReference) {
  RegisterAllOps();
  const Tensor x = RandomFloat({3, 4, 5}, 1);
  const Tensor i64 = Tensor::FromVector<int64_t>({2, 2}, {0, -1, 2, 1});
  const Tensor i32 = Tensor::FromVector<int32_t>({3}, {1, -2, 0});
  for (int64_t axis : {0, 1, 2, -1})
    for (const Tensor* idx : {&i64, &i32}) {
      SCOPED_TRACE("axis " + std::to_string(axis) + (idx == &i64 ? " int64" : " int32"));
      AttributeMap a;
      a.Set("axis", Attribute::Int(axis));
      const Tensor want = Reference(MakeNode("Gather", 2, 1, a), {x, *idx});
      const Tensor got = GatherBody<uint32_t>(x, *idx, axis < 0 ? axis + 3 : axis, want.dims());
      EXPECT_TRUE(got.BitwiseEquals(want));
    }
  // 8-byte and 1-byte elements, scalar indices (an exported model's "pick token 0").
  const Tensor ids = Tensor::FromVector<int64_t>({2, 3}, {5, -7, 11, 0, 3, -1});
  const Tensor bytes = Tensor::FromVector<uint8_t>({4, 2}, {1, 2, 3, 4, 250, 6, 7, 8});
  AttributeMap a1;
  a1.Set("axis", Attribute::Int(1));
  EXPECT_TRUE(GatherBody<uint64_t>(ids, Tensor::Scalar<int64_t>(2), 1, Dims{2})
                  .BitwiseEquals(Reference(MakeNode("Gather", 2, 1, a1), {ids, Tensor::Scalar<int64_t>(2)})));
  const Tensor rows = Tensor::FromVector<int64_t>({3}, {3, 0, -2});
  EXPECT_TRUE(GatherBody<uint8_t>(bytes, rows, 0, Dims{3, 2}).BitwiseEquals(Reference(MakeNode("Gather", 2, 1), {bytes, rows})));
  // Out of range: zeros on the device, and without a report nothing else.
  const Tensor bad = Tensor::FromVector<int64_t>({1}, {9});
  const Tensor z = GatherBody<uint64_t>(ids, bad, 0, Dims{1, 3});
  for (int64_t i = 0; i < 3; ++i) EXPECT_EQ(z.data<int64_t>()[i], 0);
  EXPECT_FALSE(RunNode(MakeNode("Gather", 2, 1), 17, {ids, bad}, Backend::kReference).ok());
}

// With a device check report, a bad index is reported once, under the kernel's tag, with what the
// CPU's error names: the report turned into that error (GatherIndexOutOfRange, as the CUDA
// Gather's DeviceCheckError does) is the reference kernel's error, word for word. Good indices
// around it are gathered as ever, and a later bad index does not overwrite the first report.
TEST(CudaMovementBodies, GatherReportsAnIndexOutOfRangeAsTheCpuNamesIt) {
  RegisterAllOps();
  const Tensor x = RandomFloat({2, 5, 3}, 7);
  AttributeMap a;
  a.Set("axis", Attribute::Int(1));
  const std::vector<Tensor> cases = {Tensor::FromVector<int64_t>({4}, {0, -5, 5, 2}),
                                     Tensor::FromVector<int64_t>({2, 2}, {1, -6, 4, 3}),
                                     Tensor::FromVector<int32_t>({3}, {7, 0, -1})};
  for (size_t c = 0; c < cases.size(); ++c) {
    const Tensor& idx = cases[c];
    SCOPED_TRACE("case " + std::to_string(c));
    std::vector<int64_t> report(kDeviceCheckWords, 0);
    Dims dims = {2};
    for (int64_t d : idx.dims()) dims.push_back(d);
    dims.push_back(3);
    const Tensor got = GatherBody<uint32_t>(x, idx, 1, dims, report.data(), 42);
    ASSERT_EQ(report[0], 42) << "the tag";
    auto want = RunNode(MakeNode("Gather", 2, 1, a), 17, {x, idx}, Backend::kReference);
    ASSERT_FALSE(want.ok());
    const Status from_report = GatherIndexOutOfRange(report[1], report[2], report[3], report[4]);
    EXPECT_EQ(from_report.code(), want.status().code());
    EXPECT_NE(want.status().message().find(from_report.message()), std::string::npos)
        << "reference: " << want.status().message() << "\nfrom the report: " << from_report.message();
    // Every element of a good index is the reference's (a bad one's are zeros).
    for (int64_t o = 0; o < 2; ++o)
      for (int64_t j = 0; j < idx.numel(); ++j) {
        const int64_t v = idx.dtype() == DType::kInt64 ? idx.data<int64_t>()[j] : idx.data<int32_t>()[j];
        const int64_t r = v < 0 ? v + 5 : v;
        for (int64_t k = 0; k < 3; ++k) {
          const float want_v = r >= 0 && r < 5 ? x.data<float>()[(o * 5 + r) * 3 + k] : 0.f;
          EXPECT_EQ(got.data<float>()[(o * idx.numel() + j) * 3 + k], want_v) << o << " " << j << " " << k;
        }
      }
  }
}

TEST(CudaMovementBodies, ConcatPiecesMatchTheReference) {
  RegisterAllOps();
  const std::vector<Tensor> in = {RandomFloat({2, 3, 4}, 2), RandomFloat({2, 3, 4}, 3), RandomFloat({2, 3, 4}, 4)};
  for (int64_t axis : {0, 1, 2, -2}) {
    SCOPED_TRACE("axis " + std::to_string(axis));
    AttributeMap a;
    a.Set("axis", Attribute::Int(axis));
    // Different sizes along the axis: the first input cut down.
    std::vector<Tensor> pieces = in;
    const int ax = static_cast<int>(axis < 0 ? axis + 3 : axis);
    Dims small = pieces[0].dims();
    small[static_cast<size_t>(ax)] = 1;
    pieces[0] = RandomFloat(small, 9);
    const Tensor want = Reference(MakeNode("Concat", 3, 1, a), pieces);
    Tensor got(DType::kFloat32, want.dims());
    std::memset(got.raw_data(), 0xff, got.nbytes());
    int64_t outer = 1, inner = 1;
    for (int k = 0; k < ax; ++k) outer *= want.dim(k);
    for (int k = ax + 1; k < 3; ++k) inner *= want.dim(k);
    const int64_t out_row = want.dim(ax) * inner;
    int64_t offset = 0;
    for (const Tensor& p : pieces) {
      const int64_t piece_row = p.dim(ax) * inner;
      for (int64_t i = 0; i < outer * piece_row; ++i)
        ConcatPieceAt(static_cast<const uint32_t*>(p.raw_data()), static_cast<uint32_t*>(got.raw_data()), piece_row, out_row,
                      offset, i);
      offset += piece_row;
    }
    EXPECT_EQ(offset, out_row);
    EXPECT_TRUE(got.BitwiseEquals(want));
  }
}

TEST(CudaMovementBodies, CastMatchesTheReferenceForEveryPair) {
  RegisterAllOps();
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> fv = {0.f, -0.f, 1.f, -1.7f, 2.5f, 127.9f, 128.f, -129.f, 255.5f, 300.f, 3e9f, -3e9f,
                                 1e19f, -1e19f, inf, -inf, nan, 9.3e18f, -9.3e18f};
  const int64_t n = static_cast<int64_t>(fv.size());
  std::vector<Tensor> sources = {Tensor::FromVector<float>({n}, fv)};
  std::vector<int64_t> iv = {0, 1, -1, 127, 128, -129, 255, 256, 70000, -70000, INT32_MAX, INT32_MIN, 5000000000LL,
                             -5000000000LL, INT64_MAX, INT64_MIN, 3, 42, -42};
  sources.push_back(Tensor::FromVector<int64_t>({n}, iv));
  std::vector<int32_t> i32;
  std::vector<uint8_t> u8, b8;
  std::vector<int8_t> s8;
  for (int64_t v : iv) {
    i32.push_back(static_cast<int32_t>(v));
    u8.push_back(static_cast<uint8_t>(v));
    s8.push_back(static_cast<int8_t>(v));
    b8.push_back(v % 3 == 0 ? 0 : 1);
  }
  sources.push_back(Tensor::FromVector<int32_t>({n}, i32));
  sources.push_back(Tensor::FromVector<uint8_t>({n}, u8));
  sources.push_back(Tensor::FromVector<int8_t>({n}, s8));
  Tensor b(DType::kBool, {n});
  std::memcpy(b.raw_data(), b8.data(), b8.size());
  sources.push_back(b);
  const std::pair<DType, CastType> types[] = {{DType::kFloat32, CastType::kFloat32}, {DType::kInt32, CastType::kInt32},
                                              {DType::kInt64, CastType::kInt64},     {DType::kUInt8, CastType::kUInt8},
                                              {DType::kInt8, CastType::kInt8},       {DType::kBool, CastType::kBool}};
  auto type_of = [&](DType dt) {
    for (const auto& [d, c] : types)
      if (d == dt) return c;
    return CastType::kFloat32;
  };
  for (const Tensor& x : sources)
    for (const auto& [to_dt, to] : types) {
      SCOPED_TRACE(std::string(DTypeName(x.dtype())) + " -> " + DTypeName(to_dt));
      AttributeMap a;
      a.Set("to", Attribute::Int(static_cast<int64_t>(to_dt)));
      const Tensor want = Reference(MakeNode("Cast", 1, 1, a), {x});
      Tensor got(to_dt, x.dims());
      for (int64_t i = 0; i < n; ++i) CastAt(x.raw_data(), type_of(x.dtype()), got.raw_data(), to, i);
      EXPECT_TRUE(got.BitwiseEquals(want));
    }
}

TEST(CudaMovementBodies, WhereBroadcastsLikeTheReference) {
  RegisterAllOps();
  Tensor cond(DType::kBool, {2, 1, 4});
  for (int64_t i = 0; i < 8; ++i) static_cast<uint8_t*>(cond.raw_data())[i] = (i * 5) % 3 == 0;
  const std::vector<std::pair<Tensor, Tensor>> xy = {
      {RandomFloat({3, 1}, 5), RandomFloat({4}, 6)},
      {Tensor::FromVector<int64_t>({1, 3, 1}, {7, -8, 9}), Tensor::Scalar<int64_t>(-1)}};
  for (const auto& [x, y] : xy) {
    SCOPED_TRACE(DTypeName(x.dtype()));
    const Tensor want = Reference(MakeNode("Where", 3, 1), {cond, x, y});
    ASSERT_EQ(want.dims(), (Dims{2, 3, 4}));
    WhereShape s;
    s.rank = 3;
    for (int d = 0; d < 3; ++d) s.dims[d] = want.dim(d);
    BroadcastStrides(cond.dims(), want.dims(), s.c_strides);  // as kernels/cuda/movement.cc
    BroadcastStrides(x.dims(), want.dims(), s.x_strides);
    BroadcastStrides(y.dims(), want.dims(), s.y_strides);
    Tensor got(x.dtype(), want.dims());
    for (int64_t i = 0; i < got.numel(); ++i) {
      if (x.dtype() == DType::kFloat32)
        WhereAt(static_cast<const uint8_t*>(cond.raw_data()), static_cast<const uint32_t*>(x.raw_data()),
                static_cast<const uint32_t*>(y.raw_data()), static_cast<uint32_t*>(got.raw_data()), s, i);
      else
        WhereAt(static_cast<const uint8_t*>(cond.raw_data()), static_cast<const uint64_t*>(x.raw_data()),
                static_cast<const uint64_t*>(y.raw_data()), static_cast<uint64_t*>(got.raw_data()), s, i);
    }
    EXPECT_TRUE(got.BitwiseEquals(want));
  }
}

// Slice as the CUDA factory lays it out (SliceCopyShape: the first selected element, then x's
// strides times the steps) through the strided-copy body, negative steps and clamped ends included.
TEST(CudaMovementBodies, SliceAsAStridedCopyMatchesTheReference) {
  RegisterAllOps();
  const Tensor x = RandomFloat({4, 5, 6}, 31);
  struct Case {
    std::vector<int64_t> starts, ends, axes, steps;
  } cases[] = {{{1}, {3}, {0}, {1}},
               {{0, 1}, {100, -1}, {1, 2}, {2, 2}},
               {{-1, 4}, {-100, 0}, {0, 2}, {-1, -2}},
               {{2}, {3}, {-2}, {1}},
               {{0, 0, 0}, {4, 5, 6}, {0, 1, 2}, {3, 4, 5}}};
  for (const Case& c : cases) {
    const int64_t n = static_cast<int64_t>(c.starts.size());
    std::vector<Tensor> in = {x, Tensor::FromVector<int64_t>({n}, c.starts), Tensor::FromVector<int64_t>({n}, c.ends),
                              Tensor::FromVector<int64_t>({n}, c.axes), Tensor::FromVector<int64_t>({n}, c.steps)};
    const Tensor want = Reference(MakeNode("Slice", 5, 1), in);
    auto p = ResolveSlice(x.dims(), c.starts, c.ends, c.axes, c.steps);
    ASSERT_TRUE(p.ok()) << p.status().message();
    BroadcastShape s;
    int64_t offset = 0;
    ASSERT_TRUE(SliceCopyShape(x.dims(), *p, want.dims(), &s, &offset));
    Tensor got(DType::kFloat32, want.dims());
    for (int64_t i = 0; i < got.numel(); ++i) StridedCopyAt(x.data<float>() + offset, got.data<float>(), s, i);
    EXPECT_TRUE(got.BitwiseEquals(want));
  }
}

// Split (uneven, along each axis) as the CUDA factory lays it out, through the strided-copy body.
TEST(CudaMovementBodies, SplitAsStridedCopiesMatchesTheReference) {
  RegisterAllOps();
  const Tensor x = RandomFloat({4, 6, 5}, 45);
  for (int64_t axis : {0, 1, 2}) {
    SCOPED_TRACE("axis " + std::to_string(axis));
    const std::vector<int64_t> sizes = axis == 0 ? std::vector<int64_t>{1, 3} : axis == 1 ? std::vector<int64_t>{2, 0, 4}
                                                                                          : std::vector<int64_t>{3, 2};
    AttributeMap a;
    a.Set("axis", Attribute::Int(axis));
    auto want = RunNode(MakeNode("Split", 2, static_cast<int>(sizes.size()), a), 13,
                        {x, Tensor::FromVector<int64_t>({static_cast<int64_t>(sizes.size())}, sizes)}, Backend::kReference);
    ASSERT_TRUE(want.ok()) << want.status().message();
    std::vector<Dims> dims;
    for (const Tensor& t : *want) dims.push_back(t.dims());
    std::vector<std::pair<BroadcastShape, int64_t>> copies;
    ASSERT_TRUE(SplitCopyShapes(x.dims(), axis, dims, &copies));
    for (size_t k = 0; k < copies.size(); ++k) {
      Tensor got(DType::kFloat32, dims[k]);
      for (int64_t i = 0; i < got.numel(); ++i)
        StridedCopyAt(x.data<float>() + copies[k].second, got.data<float>(), copies[k].first, i);
      EXPECT_TRUE(got.BitwiseEquals((*want)[k])) << "output " << k;
    }
  }
  std::vector<std::pair<BroadcastShape, int64_t>> copies;
  EXPECT_FALSE(SplitCopyShapes({4, 6}, 1, {{4, 2}, {4, 3}}, &copies));  // 5 of 6
}

// Pad (every mode; negative pads crop) as the CUDA factory lays it out: the host's index tables
// (PadTables, from the CPU's PadSourceIndex) read by the body.
TEST(CudaMovementBodies, PadMatchesTheReference) {
  RegisterAllOps();
  const Tensor x = RandomFloat({2, 3, 4, 5}, 47);
  const std::vector<std::vector<int64_t>> pad_cases = {{0, 0, 1, 2, 0, 0, 2, 1}, {0, 1, 3, 0, 1, 0, 0, 4},
                                                       {0, 0, -1, 1, 0, 0, 1, -2}};
  for (const char* mode : {"constant", "reflect", "edge", "wrap"})
    for (const auto& pads : pad_cases) {
      SCOPED_TRACE(std::string(mode) + " pads[2] " + std::to_string(pads[2]));
      AttributeMap a;
      a.Set("mode", Attribute::String(mode));
      auto want = RunNode(MakeNode("Pad", 3, 1, a), 19,
                          {x, Tensor::FromVector<int64_t>({8}, pads), Tensor::Scalar<float>(0.75f)}, Backend::kReference);
      ASSERT_TRUE(want.ok()) << want.status().message();
      const Tensor& y = (*want)[0];
      auto m = ParsePadMode(mode);
      ASSERT_TRUE(m.ok());
      std::vector<int32_t> idx;
      int64_t off[kMaxRank] = {};
      ASSERT_TRUE(PadTables(x.dims(), y.dims(), pads, *m, &idx, off));
      PadGeom g;
      g.rank = 4;
      int64_t stride = 1;
      for (int d = 3; d >= 0; --d) {
        g.out_dims[d] = y.dim(d), g.in_strides[d] = stride, g.offset[d] = off[d];
        stride *= x.dim(d);
      }
      g.idx = idx.data();
      Tensor got(DType::kFloat32, y.dims());
      for (int64_t i = 0; i < got.numel(); ++i) PadAt(x.data<float>(), got.data<float>(), 0.75f, g, i);
      EXPECT_TRUE(got.BitwiseEquals(y));
    }
}

// DepthToSpace (DCR and CRD) as the CUDA factory lays it out, through the strided-copy body.
TEST(CudaMovementBodies, DepthToSpaceAsAStridedCopyMatchesTheReference) {
  RegisterAllOps();
  const Tensor x = RandomFloat({2, 12, 3, 4}, 41);
  for (const char* mode : {"DCR", "CRD"}) {
    SCOPED_TRACE(mode);
    AttributeMap a;
    a.Set("blocksize", Attribute::Int(2));
    a.Set("mode", Attribute::String(mode));
    const Tensor want = Reference(MakeNode("DepthToSpace", 1, 1, a), {x});
    BroadcastShape s;
    ASSERT_TRUE(DepthToSpaceCopyShape(x.dims(), 2, std::string(mode) == "CRD", &s));
    Tensor got(DType::kFloat32, want.dims());
    for (int64_t i = 0; i < got.numel(); ++i) StridedCopyAt(x.data<float>(), got.data<float>(), s, i);
    EXPECT_TRUE(got.BitwiseEquals(want));
  }
}

// The ONNX suite's float cases of the unary ops the CUDA kernel applies (every float row of
// kernels/common/elementwise_ops.h's kUnaryOps: the formula the reference and CPU kernels share,
// with the parameters ew::ReadUnaryParams gives the CUDA factory: the node's attributes or ONNX's
// defaults), and of the binary ops (same-shape and broadcast inputs, BroadcastStrides), against
// the suite's outputs.
TEST(CudaUnaryBody, ElementwiseConformanceCases) {
  RegisterAllOps();
  using reference::BinaryOp;
  const std::pair<const char*, BinaryOp> binary[] = {{"add", BinaryOp::kAdd}, {"sub", BinaryOp::kSub},
                                                     {"mul", BinaryOp::kMul}, {"div", BinaryOp::kDiv},
                                                     {"pow", BinaryOp::kPow}, {"prelu", BinaryOp::kPRelu},
                                                     {"max", BinaryOp::kMax}, {"min", BinaryOp::kMin}};
  auto lower = [](std::string t) {
    for (char& c : t) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return t;
  };
  int ran = 0;
  for (const auto& e : std::filesystem::directory_iterator(::whittle::testing::kOnnxNodeCases)) {
    const std::string name = e.path().filename().string();
    std::optional<reference::UnaryOp> u;
    std::optional<BinaryOp> b;
    std::string op_type;
    for (const ew::UnaryOpInfo& info : ew::kUnaryOps) {
      const std::string n = lower(info.name);
      if (info.types != ew::UnaryTypes::kNumeric && info.types != ew::UnaryTypes::kFloat) continue;
      if (name == "test_" + n || name.rfind("test_" + n + "_", 0) == 0) u = info.op, op_type = info.name;
    }
    for (const auto& [n, op] : binary)
      if (name == std::string("test_") + n || name.rfind(std::string("test_") + n + "_", 0) == 0) b = op;
    if (!u && !b) continue;
    auto nc = ::whittle::testing::LoadNodeCase(e.path().string());
    if (!nc.ok() || nc->outputs.size() != 1 || nc->outputs[0].dtype() != DType::kFloat32) continue;
    const std::vector<Tensor>& in = nc->inputs;
    bool floats = true;
    for (const Tensor& t : in) floats &= t.defined() && t.dtype() == DType::kFloat32;
    if (!floats || (u && in.size() != 1) || (b && in.size() != 2)) continue;  // the CUDA factories' conditions
    if (u && nc->node.op_type != op_type) continue;  // an _expanded case (the op's function body)
    if (u == reference::UnaryOp::kGelu && nc->node.attrs.GetString("approximate", "none") == "tanh")
      u = reference::UnaryOp::kGeluTanh;
    SCOPED_TRACE(name);
    const Tensor& want = nc->outputs[0];
    Tensor got(DType::kFloat32, want.dims());
    if (u) {
      const reference::UnaryParams p = ew::ReadUnaryParams(*u, nc->node.attrs);
      for (int64_t i = 0; i < got.numel(); ++i) got.data<float>()[i] = ew::UnaryValue(*u, p, in[0].data<float>()[i]);
    } else {
      Dims out = want.dims();
      if (out.empty()) out = {1};
      int64_t sa[kMaxRank], sb[kMaxRank];
      BroadcastStrides(in[0].dims(), out, sa);
      BroadcastStrides(in[1].dims(), out, sb);
      for (int64_t i = 0; i < got.numel(); ++i) {
        int64_t rem = i, ai = 0, bi = 0;
        for (int d = static_cast<int>(out.size()) - 1; d >= 0; --d) {
          const int64_t c = rem % out[static_cast<size_t>(d)];
          rem /= out[static_cast<size_t>(d)];
          ai += c * sa[d];
          bi += c * sb[d];
        }
        got.data<float>()[i] = ew::FloatBinaryValue(*b, in[0].data<float>()[ai], in[1].data<float>()[bi]);
      }
    }
    EXPECT_TRUE(::whittle::testing::TensorsClose(got, want, 1e-5f, 1e-5f));
    ++ran;
  }
  std::printf("[ eltwise  ] %d element-wise conformance cases through the CUDA bodies\n", ran);
  EXPECT_GE(ran, 60);
}

// The binary element-wise ops and Clip on single values against the reference ops, NaNs included
// (Max/Min keep a NaN first operand; Clip keeps a NaN).
TEST(CudaUnaryBody, BinaryOpsAndClipMatchTheReference) {
  RegisterAllOps();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> av = {-2.5f, -1.f, 0.f, 0.5f, 3.f, nan, 2.f, -0.f}, bv = {1.5f, -2.f, 2.f, 0.5f, nan, 1.f, 3.f, 0.f};
  const Tensor a = Tensor::FromVector<float>({8}, av), b = Tensor::FromVector<float>({8}, bv);
  using reference::BinaryOp;
  const std::pair<const char*, BinaryOp> ops[] = {{"Add", BinaryOp::kAdd}, {"Sub", BinaryOp::kSub},
                                                  {"Mul", BinaryOp::kMul}, {"Div", BinaryOp::kDiv},
                                                  {"Pow", BinaryOp::kPow}, {"Max", BinaryOp::kMax},
                                                  {"Min", BinaryOp::kMin}, {"PRelu", BinaryOp::kPRelu}};
  for (const auto& [name, op] : ops) {
    SCOPED_TRACE(name);
    const Tensor want = Reference(MakeNode(name, 2, 1), {a, b});
    Tensor got(DType::kFloat32, {8});
    for (int64_t i = 0; i < 8; ++i)
      got.data<float>()[i] = ew::FloatBinaryValue(op, av[static_cast<size_t>(i)], bv[static_cast<size_t>(i)]);
    EXPECT_TRUE(got.BitwiseEquals(want));
  }
  const Tensor lo = Tensor::Scalar<float>(-1.f), hi = Tensor::Scalar<float>(2.f);
  const Tensor want = Reference(MakeNode("Clip", 3, 1), {a, lo, hi});
  Tensor got(DType::kFloat32, {8});
  for (int64_t i = 0; i < 8; ++i) got.data<float>()[i] = Apply(Unary::kClip, av[static_cast<size_t>(i)], -1.f, 2.f);
  EXPECT_TRUE(got.BitwiseEquals(want));
}

// InstanceNormalization as the CUDA factory runs it: the LayerNorm kernel's two passes over each
// of the N*C planes (mean, then the deviations' mean square), then NormAffine per plane's channel.
TEST(CudaUnaryBody, InstanceNormAsPlaneRowsMatchesTheReference) {
  RegisterAllOps();
  const int64_t N = 2, C = 3, HW = 20;
  const Tensor x = RandomFloat({N, C, 4, 5}, 51, -2.f, 3.f), scale = RandomFloat({C}, 52), bias = RandomFloat({C}, 53);
  AttributeMap a;
  a.Set("epsilon", Attribute::Float(1e-3f));
  const Tensor want = Reference(MakeNode("InstanceNormalization", 3, 1, a), {x, scale, bias});
  Tensor got(DType::kFloat32, x.dims());
  for (int64_t r = 0; r < N * C; ++r) {
    const float* xr = x.data<float>() + r * HW;
    float s = 0.f, v = 0.f;
    for (int64_t k = 0; k < HW; ++k) s += xr[k];
    const float mean = s / static_cast<float>(HW);
    for (int64_t k = 0; k < HW; ++k) v += (xr[k] - mean) * (xr[k] - mean);
    const float inv = 1.f / std::sqrt(v / static_cast<float>(HW) + 1e-3f);
    for (int64_t k = 0; k < HW; ++k)
      got.data<float>()[r * HW + k] = NormAffine((xr[k] - mean) * inv, scale.data<float>(), bias.data<float>(), C, r, k);
  }
  EXPECT_TRUE(::whittle::testing::TensorsClose(got, want, 1e-5f, 1e-5f));
}

// Resize as the CUDA kernel computes it: tables from the shared axis tables (BuildResizeTables),
// then ResizeAt over every output, against the reference Resize (both sum in double; the
// reference one axis at a time): nearest exactly, linear and cubic to the kernel tests' 1e-6;
// the batch and channel axes resized too.
TEST(CudaMovementBodies, ResizeMatchesTheReference) {
  RegisterAllOps();
  struct Case {
    const char* mode;
    const char* ctm;
    const char* nearest;
    std::vector<float> scales;  // empty: sizes
    std::vector<int64_t> sizes;
  } cases[] = {{"nearest", "asymmetric", "floor", {1, 1, 2, 2}, {}},
               {"nearest", "half_pixel", "round_prefer_floor", {1, 1, 1.5f, 0.5f}, {}},
               {"nearest", "pytorch_half_pixel", "round_prefer_ceil", {}, {2, 3, 9, 4}},
               {"nearest", "asymmetric", "floor", {2, 0.5f, 1, 2}, {}},
               {"linear", "half_pixel", "round_prefer_floor", {1, 1, 2, 2}, {}},
               {"linear", "align_corners", "round_prefer_floor", {}, {2, 3, 7, 11}},
               {"linear", "pytorch_half_pixel", "round_prefer_floor", {1, 1, 0.5f, 3}, {}},
               {"linear", "asymmetric", "round_prefer_floor", {1, 1, 1, 2}, {}},
               {"linear", "half_pixel", "round_prefer_floor", {1, 2, 2, 2}, {}},
               {"cubic", "half_pixel", "round_prefer_floor", {1, 1, 2, 1.5f}, {}}};
  const Tensor x = RandomFloat({2, 3, 6, 5}, 61);
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(c.mode) + " " + c.ctm);
    AttributeMap a;
    a.Set("mode", Attribute::String(c.mode));
    a.Set("coordinate_transformation_mode", Attribute::String(c.ctm));
    a.Set("nearest_mode", Attribute::String(c.nearest));
    Node n = MakeNode("Resize", 4, 1, a);
    n.inputs[1] = -1;  // no roi
    std::vector<Tensor> in = {x, Tensor(), Tensor(), Tensor()};
    if (!c.scales.empty()) {
      in[2] = Tensor::FromVector<float>({4}, c.scales);
      n.inputs[3] = -1;
    } else {
      in[3] = Tensor::FromVector<int64_t>({4}, c.sizes);
      n.inputs[2] = -1;
    }
    auto want = RunNode(n, 13, in, Backend::kReference);
    ASSERT_TRUE(want.ok()) << want.status().message();
    const Tensor& y = (*want)[0];
    // The scales ResolveResize gives: the given ones, or sizes / input dims.
    std::vector<double> scales(4);
    for (int d = 0; d < 4; ++d)
      scales[static_cast<size_t>(d)] = c.scales.empty() ? static_cast<double>(c.sizes[static_cast<size_t>(d)]) / static_cast<double>(x.dim(d))
                                                        : static_cast<double>(c.scales[static_cast<size_t>(d)]);
    ResizeParams p;
    p.mode = std::string(c.mode) == "nearest" ? ResizeMode::kNearest
             : std::string(c.mode) == "linear" ? ResizeMode::kLinear : ResizeMode::kCubic;
    const std::string ctm = c.ctm, nm = c.nearest;
    p.coord = ctm == "asymmetric" ? ResizeCoord::kAsymmetric
              : ctm == "align_corners" ? ResizeCoord::kAlignCorners
              : ctm == "pytorch_half_pixel" ? ResizeCoord::kPytorchHalfPixel : ResizeCoord::kHalfPixel;
    p.nearest = nm == "floor" ? ResizeNearest::kFloor
                : nm == "round_prefer_ceil" ? ResizeNearest::kRoundPreferCeil : ResizeNearest::kRoundPreferFloor;
    auto t = BuildResizeTables(p, x.dims(), y.dims(), scales);
    ASSERT_TRUE(t.ok()) << t.status().message();
    const ResizeGeom g = ResizeGeomOf(*t, x.dims(), y.dims(), t->idx.data(), t->w.data());
    Tensor got(DType::kFloat32, y.dims());
    for (int64_t i = 0; i < got.numel(); ++i) ResizeAt(x.data<float>(), got.data<float>(), g, i);
    if (p.mode == ResizeMode::kNearest) EXPECT_TRUE(got.BitwiseEquals(y));
    else EXPECT_TRUE(::whittle::testing::TensorsClose(got, y, 1e-6f, 1e-6f));  // the kernel tests' tolerance
  }
  ResizeParams crop;
  crop.coord = ResizeCoord::kTfCropAndResize;  // left to the CPU
  EXPECT_FALSE(BuildResizeTables(crop, {2, 3, 4, 4}, {2, 3, 8, 8}, {1, 1, 2, 2}).ok());
}

// The ONNX backend suite's Resize cases (libonnx-testdata) through the CUDA Resize's host side
// (ParseResize, ResolveResize, BuildResizeTables) and its body, against the suite's expected
// outputs: every float case the CUDA kernel takes (all but tf_crop_and_resize) agrees.
TEST(CudaMovementBodies, ResizeConformanceCases) {
  RegisterAllOps();
  int ran = 0, declined = 0;
  for (const auto& e : std::filesystem::directory_iterator(::whittle::testing::kOnnxNodeCases)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("test_resize_", 0) != 0) continue;
    SCOPED_TRACE(name);
    auto nc = ::whittle::testing::LoadNodeCase(e.path().string());
    ASSERT_TRUE(nc.ok()) << nc.status().message();
    const Node& node = nc->node;
    const std::vector<Tensor>& in = nc->inputs;
    const Tensor* want = &nc->outputs[0];
    if (in[0].dtype() != DType::kFloat32) continue;
    std::vector<DType> dts;
    std::vector<const Tensor*> ptrs;
    ::whittle::testing::InputViews(in, &dts, &ptrs);
    const int opset = static_cast<int>(nc->graph.OpsetFor(""));
    KernelInit init{node.attrs, opset, dts, std::vector<const Tensor*>(in.size(), nullptr), 1, name, Backend::kCpu};
    auto setup = ParseResize(init);
    ASSERT_TRUE(setup.ok()) << setup.status().message();
    if (setup->params.coord == ResizeCoord::kTfCropAndResize) {
      ++declined;  // the CUDA factory declines these
      continue;
    }
    Tensor y(DType::kFloat32, want->dims());
    KernelContext ctx{ptrs, {&y}, 1};
    std::vector<double> scales, roi;
    ASSERT_TRUE(ResolveResize(*setup, ctx, &scales, &roi).ok());
    auto t = BuildResizeTables(setup->params, in[0].dims(), y.dims(), scales);
    ASSERT_TRUE(t.ok()) << t.status().message();
    const ResizeGeom geom = ResizeGeomOf(*t, in[0].dims(), y.dims(), t->idx.data(), t->w.data());
    for (int64_t i = 0; i < y.numel(); ++i) ResizeAt(in[0].data<float>(), y.data<float>(), geom, i);
    EXPECT_TRUE(::whittle::testing::TensorsClose(y, *want, 1e-5f, 1e-5f));
    ++ran;
  }
  std::printf("[ resize   ] %d conformance cases through the CUDA Resize's body, %d tf_crop_and_resize left to the CPU\n",
              ran, declined);
  EXPECT_GE(ran, 15);
}

// The ONNX backend suite's float Slice, Split, Pad and DepthToSpace cases through the CUDA
// kernels' layouts (the same helpers kernels/cuda/movement.cc calls) and the strided-copy and pad
// bodies, against the suite's expected outputs, bit for bit.
TEST(CudaMovementBodies, StridedCopyConformanceCases) {
  RegisterAllOps();
  int ran = 0;
  for (const auto& e : std::filesystem::directory_iterator(::whittle::testing::kOnnxNodeCases)) {
    const std::string name = e.path().filename().string();
    const bool slice = name.rfind("test_slice", 0) == 0, split = name.rfind("test_split_", 0) == 0,
               pad = name == "test_constant_pad" || name == "test_edge_pad" || name == "test_reflect_pad" ||
                     name == "test_wrap_pad",
               d2s = name.rfind("test_depthtospace", 0) == 0;
    if (!slice && !split && !pad && !d2s) continue;
    SCOPED_TRACE(name);
    auto nc = ::whittle::testing::LoadNodeCase(e.path().string());
    ASSERT_TRUE(nc.ok()) << nc.status().message();
    const std::vector<Tensor>& in = nc->inputs;
    if (in[0].dtype() != DType::kFloat32) continue;
    const Tensor& x = in[0];
    auto values = [&](size_t k) {
      std::vector<int64_t> v;
      if (k < in.size() && in[k].defined()) {
        auto r = IndexValues(&in[k], "values");
        if (r.ok()) v = *r;
      }
      return v;
    };
    std::vector<Tensor> got;
    if (slice) {
      auto p = ResolveSlice(x.dims(), values(1), values(2), values(3), values(4));
      ASSERT_TRUE(p.ok()) << p.status().message();
      BroadcastShape bs;
      int64_t offset = 0;
      got.emplace_back(DType::kFloat32, nc->outputs[0].dims());
      ASSERT_TRUE(SliceCopyShape(x.dims(), *p, got[0].dims(), &bs, &offset));
      for (int64_t i = 0; i < got[0].numel(); ++i) StridedCopyAt(x.data<float>() + offset, got[0].data<float>(), bs, i);
    } else if (split) {
      std::vector<Dims> dims;
      for (const Tensor& t : nc->outputs) dims.push_back(t.dims());
      int64_t axis = nc->node.attrs.GetInt("axis", 0);
      if (axis < 0) axis += x.rank();
      std::vector<std::pair<BroadcastShape, int64_t>> copies;
      ASSERT_TRUE(SplitCopyShapes(x.dims(), axis, dims, &copies));
      for (size_t k = 0; k < copies.size(); ++k) {
        got.emplace_back(DType::kFloat32, dims[k]);
        for (int64_t i = 0; i < got[k].numel(); ++i)
          StridedCopyAt(x.data<float>() + copies[k].second, got[k].data<float>(), copies[k].first, i);
      }
    } else if (pad) {
      auto m = ParsePadMode(nc->node.attrs.GetString("mode", "constant"));
      ASSERT_TRUE(m.ok());
      got.emplace_back(DType::kFloat32, nc->outputs[0].dims());
      std::vector<int32_t> idx;
      int64_t off[kMaxRank] = {};
      ASSERT_TRUE(PadTables(x.dims(), got[0].dims(), values(1), *m, &idx, off));
      PadGeom g;
      g.rank = x.rank();
      int64_t stride = 1;
      for (int d = g.rank - 1; d >= 0; --d) {
        g.out_dims[d] = got[0].dim(d), g.in_strides[d] = stride, g.offset[d] = off[d];
        stride *= x.dim(d);
      }
      g.idx = idx.data();
      const float value = in.size() > 2 && in[2].defined() ? in[2].data<float>()[0] : 0.f;
      for (int64_t i = 0; i < got[0].numel(); ++i) PadAt(x.data<float>(), got[0].data<float>(), value, g, i);
    } else {
      BroadcastShape bs;
      ASSERT_TRUE(DepthToSpaceCopyShape(x.dims(), nc->node.attrs.GetInt("blocksize", 0),
                                        nc->node.attrs.GetString("mode", "DCR") == "CRD", &bs));
      got.emplace_back(DType::kFloat32, nc->outputs[0].dims());
      for (int64_t i = 0; i < got[0].numel(); ++i) StridedCopyAt(x.data<float>(), got[0].data<float>(), bs, i);
    }
    ASSERT_EQ(got.size(), nc->outputs.size());
    for (size_t k = 0; k < got.size(); ++k) EXPECT_TRUE(got[k].BitwiseEquals(nc->outputs[k])) << "output " << k;
    ++ran;
  }
  std::printf("[ movement ] %d Slice/Split/Pad/DepthToSpace conformance cases through the CUDA layouts\n", ran);
  EXPECT_GE(ran, 15);
}

// The epilogues' activations (Apply) against the CPU's fused activation (kernels/common/
// fused_activation.h): both are built from the shared formulas, so this checks that each kind
// and its parameters (LeakyRelu's slope, HardSigmoid's alpha and beta, Clip's bounds) map one to
// one, on values across each one's kinks and saturation, NaN included. The formulas themselves
// meet the ONNX suite's outputs in ElementwiseConformanceCases.
TEST(CudaUnaryBody, EpilogueActivationsMatchTheCpusFusedActivation) {
  struct Case {
    FusedActivation::Kind kind;
    Unary act;
    float alpha, beta;  // Clip: the bounds
  } cases[] = {{FusedActivation::kRelu, Unary::kRelu, 0, 0},
               {FusedActivation::kLeakyRelu, Unary::kLeakyRelu, 0.1f, 0},
               {FusedActivation::kSigmoid, Unary::kSigmoid, 0, 0},
               {FusedActivation::kTanh, Unary::kTanh, 0, 0},
               {FusedActivation::kHardSigmoid, Unary::kHardSigmoid, 0.3f, 0.4f},
               {FusedActivation::kHardSwish, Unary::kHardSwish, 0, 0},
               {FusedActivation::kClip, Unary::kClip, -1.f, 2.f},
               {FusedActivation::kSilu, Unary::kSilu, 0, 0}};
  std::vector<float> xs = {std::numeric_limits<float>::quiet_NaN(), -100.f, 100.f, -3.f, 3.f, 0.f, -0.f};
  const Tensor r = RandomFloat({200}, 22, -8.f, 8.f);
  xs.insert(xs.end(), r.data<float>(), r.data<float>() + r.numel());
  for (const Case& c : cases) {
    FusedActivation f;
    f.kind = c.kind;
    f.alpha = c.alpha;
    f.beta = c.beta;
    if (c.kind == FusedActivation::kClip) f.min = c.alpha, f.max = c.beta;
    for (float x : xs) {
      float want = x;
      f.Apply(&want, 1);
      const float got = Apply(c.act, x, c.alpha, c.beta);
      if (std::isnan(want)) {
        EXPECT_EQ(std::isnan(got), true) << static_cast<int>(c.kind) << " at " << x;
        continue;
      }
      EXPECT_NEAR(got, want, 2e-6f * (1.f + std::fabs(want))) << static_cast<int>(c.kind) << " at " << x;
    }
  }
}

}  // namespace
}  // namespace whittle::cuda
