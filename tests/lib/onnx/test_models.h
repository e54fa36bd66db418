// Test helpers for the ONNX I/O tests (header-only: the test build compiles only *_test.cc under
// tests/lib): a scratch folder, onnx.helper-like builders for ModelProto pieces, and a deep
// comparison of two Graphs used by the round-trip tests.
#pragma once

#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>
#include <stdlib.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tests/util/scratch_dir.h"

#include "lib/ir/graph.h"

namespace whittle::testing {

inline void WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(f.good()) << "cannot write " << path;
}

inline std::string ReadBytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

inline std::string Serialize(const onnx::ModelProto& m) {
  std::string s;
  EXPECT_TRUE(m.SerializeToString(&s));
  return s;
}

inline void WriteModel(const std::string& path, const onnx::ModelProto& m) { WriteBytes(path, Serialize(m)); }

// ---- onnx.helper-like builders ----

inline onnx::TensorProto FloatTensorProto(const std::string& name, const std::vector<int64_t>& dims,
                                          const std::vector<float>& values, bool raw = true) {
  onnx::TensorProto t;
  t.set_name(name);
  t.set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : dims) t.add_dims(d);
  if (raw) {
    t.set_raw_data(std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float)));
  } else {
    for (float v : values) t.add_float_data(v);
  }
  return t;
}

// A tensor value_info; dims are known sizes or Dim::Symbol("N"); Dim() means unknown.
inline onnx::ValueInfoProto ValueInfo(const std::string& name, int32_t elem_type, const std::vector<Dim>& dims) {
  onnx::ValueInfoProto vi;
  vi.set_name(name);
  auto* tt = vi.mutable_type()->mutable_tensor_type();
  tt->set_elem_type(elem_type);
  auto* shape = tt->mutable_shape();
  for (const Dim& d : dims) {
    auto* dp = shape->add_dim();
    if (d.known()) dp->set_dim_value(d.value);
    else if (!d.param.empty()) dp->set_dim_param(d.param);
  }
  return vi;
}

inline onnx::NodeProto NodeProto(const std::string& op_type, const std::vector<std::string>& inputs,
                                 const std::vector<std::string>& outputs, const std::string& name = "",
                                 const std::string& domain = "") {
  onnx::NodeProto n;
  n.set_op_type(op_type);
  if (!name.empty()) n.set_name(name);
  if (!domain.empty()) n.set_domain(domain);
  for (const auto& i : inputs) n.add_input(i);
  for (const auto& o : outputs) n.add_output(o);
  return n;
}

inline onnx::AttributeProto AttrInts(const std::string& name, const std::vector<int64_t>& v) {
  onnx::AttributeProto a;
  a.set_name(name);
  a.set_type(onnx::AttributeProto::INTS);
  for (int64_t x : v) a.add_ints(x);
  return a;
}
inline onnx::AttributeProto AttrInt(const std::string& name, int64_t v) {
  onnx::AttributeProto a;
  a.set_name(name);
  a.set_type(onnx::AttributeProto::INT);
  a.set_i(v);
  return a;
}
inline onnx::AttributeProto AttrFloat(const std::string& name, float v) {
  onnx::AttributeProto a;
  a.set_name(name);
  a.set_type(onnx::AttributeProto::FLOAT);
  a.set_f(v);
  return a;
}

inline void AddOpset(onnx::ModelProto* m, const std::string& domain, int64_t version) {
  auto* op = m->add_opset_import();
  op->set_domain(domain);
  op->set_version(version);
}

// x[N,3] -> Add(x, b[3]) -> Relu -> Gemm(·, W[4,3], c[4], transB=1) -> y[N,4], ai.onnx opset 13.
inline onnx::ModelProto SmallModel() {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.set_producer_name("whittle-test");
  m.set_producer_version("0.1");
  m.set_model_version(3);
  AddOpset(&m, "", 13);
  auto* kv = m.add_metadata_props();
  kv->set_key("author");
  kv->set_value("tests");
  auto* g = m.mutable_graph();
  g->set_name("small");
  g->set_doc_string("a small test model");
  *g->add_input() = ValueInfo("x", onnx::TensorProto::FLOAT, {Dim::Symbol("N"), 3});
  *g->add_output() = ValueInfo("y", onnx::TensorProto::FLOAT, {Dim::Symbol("N"), 4});
  *g->add_initializer() = FloatTensorProto("b", {3}, {0.5f, -1.f, 2.f});
  std::vector<float> w(12);
  for (size_t i = 0; i < w.size(); ++i) w[i] = 0.25f * static_cast<float>(i) - 1.f;
  *g->add_initializer() = FloatTensorProto("W", {4, 3}, w);
  *g->add_initializer() = FloatTensorProto("c", {4}, {1.f, 2.f, 3.f, 4.f}, /*raw=*/false);
  *g->add_node() = NodeProto("Add", {"x", "b"}, {"s"}, "add");
  *g->add_node() = NodeProto("Relu", {"s"}, {"r"}, "relu");
  onnx::NodeProto gemm = NodeProto("Gemm", {"r", "W", "c"}, {"y"}, "gemm");
  *gemm.add_attribute() = AttrInt("transB", 1);
  *gemm.add_attribute() = AttrFloat("alpha", 1.5f);
  *g->add_node() = gemm;
  *g->add_value_info() = ValueInfo("s", onnx::TensorProto::FLOAT, {Dim::Symbol("N"), 3});
  return m;
}

// ---- graph comparison ----

inline void ExpectAttributesEqual(const Attribute& a, const Attribute& b, const std::string& where) {
  ASSERT_EQ(a.type, b.type) << where;
  switch (a.type) {
    case AttrType::kFloat: EXPECT_EQ(0, std::memcmp(&a.f, &b.f, sizeof(float))) << where; break;
    case AttrType::kInt: EXPECT_EQ(a.i, b.i) << where; break;
    case AttrType::kString: EXPECT_EQ(a.s, b.s) << where; break;
    case AttrType::kFloats: EXPECT_EQ(a.floats, b.floats) << where; break;
    case AttrType::kInts: EXPECT_EQ(a.ints, b.ints) << where; break;
    case AttrType::kStrings: EXPECT_EQ(a.strings, b.strings) << where; break;
    case AttrType::kTensor: EXPECT_TRUE(a.t.BitwiseEquals(b.t)) << where; break;
    default: ADD_FAILURE() << where << ": unexpected attribute type";
  }
}

inline std::vector<std::string> Names(const Graph& g, const std::vector<int>& ids) {
  std::vector<std::string> r;
  for (int id : ids) r.push_back(id < 0 ? std::string() : g.value(id).name);
  return r;
}

// Everything a save/load round trip must preserve.
inline void ExpectGraphsEqual(const Graph& a, const Graph& b) {
  EXPECT_EQ(a.ir_version, b.ir_version);
  EXPECT_EQ(a.producer_name, b.producer_name);
  EXPECT_EQ(a.producer_version, b.producer_version);
  EXPECT_EQ(a.model_version, b.model_version);
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.doc_string, b.doc_string);
  EXPECT_EQ(a.metadata, b.metadata);
  EXPECT_EQ(a.opset_imports, b.opset_imports);
  EXPECT_EQ(Names(a, a.inputs()), Names(b, b.inputs()));
  EXPECT_EQ(Names(a, a.outputs()), Names(b, b.outputs()));
  ASSERT_EQ(a.values().size(), b.values().size());
  for (const Value& va : a.values()) {
    const int id = b.FindValue(va.name);
    ASSERT_GE(id, 0) << "value '" << va.name << "' lost";
    const Value& vb = b.value(id);
    EXPECT_EQ(va.dtype, vb.dtype) << va.name;
    EXPECT_EQ(va.shape.has_value(), vb.shape.has_value()) << va.name;
    if (va.shape && vb.shape) {
      EXPECT_EQ(SymShapeToString(*va.shape), SymShapeToString(*vb.shape)) << va.name;
      EXPECT_TRUE(*va.shape == *vb.shape) << va.name;
    }
    ASSERT_EQ(va.is_constant(), vb.is_constant()) << va.name;
    if (va.is_constant()) { EXPECT_TRUE(va.initializer->BitwiseEquals(*vb.initializer)) << va.name; }
  }
  ASSERT_EQ(a.nodes().size(), b.nodes().size());
  for (size_t i = 0; i < a.nodes().size(); ++i) {
    const Node& na = a.nodes()[i];
    const Node& nb = b.nodes()[i];
    EXPECT_EQ(na.name, nb.name);
    EXPECT_EQ(na.op_type, nb.op_type);
    EXPECT_EQ(na.domain, nb.domain);
    EXPECT_EQ(Names(a, na.inputs), Names(b, nb.inputs)) << na.name;
    EXPECT_EQ(Names(a, na.outputs), Names(b, nb.outputs)) << na.name;
    ASSERT_EQ(na.attrs.all().size(), nb.attrs.all().size()) << na.name;
    for (const auto& [k, attr] : na.attrs.all()) {
      const Attribute* other = nb.attrs.Find(k);
      ASSERT_NE(other, nullptr) << na.name << " lost attribute " << k;
      ExpectAttributesEqual(attr, *other, na.name + "." + k);
    }
  }
}

}  // namespace whittle::testing
