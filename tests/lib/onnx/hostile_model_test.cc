// Hostile and malformed ONNX files: each must fail with one clear message naming the file and the
// specific reason, never crash, hang or allocate what the file does not contain.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <random>

#include "lib/onnx/model_io.h"
#include "lib/ops/op_def.h"
#include "tests/lib/onnx/test_models.h"

namespace whittle {
namespace {

using testing::ScratchDir;

LoadOptions NoOps() {
  LoadOptions o;
  o.validate_ops = false;
  return o;
}

::testing::AssertionResult LoadFails(const std::string& path, const std::string& reason,
                                     StatusCode code = StatusCode::kInvalidArgument, const LoadOptions& opts = NoOps()) {
  auto g = LoadModel(path, opts);
  if (g.ok()) return ::testing::AssertionFailure() << "loaded although it should fail with: " << reason;
  const std::string msg = g.status().message();
  if (msg.find(reason) == std::string::npos)
    return ::testing::AssertionFailure() << "message lacks '" << reason << "': " << msg;
  if (msg.find(path) == std::string::npos) return ::testing::AssertionFailure() << "message lacks the path: " << msg;
  if (g.status().code() != code)
    return ::testing::AssertionFailure() << "code " << static_cast<int>(g.status().code()) << ", expected "
                                         << static_cast<int>(code) << ": " << msg;
  return ::testing::AssertionSuccess();
}

// Writes m into dir and expects LoadModel to fail for `reason`.
::testing::AssertionResult ModelFails(const ScratchDir& dir, const onnx::ModelProto& m, const std::string& reason,
                                      StatusCode code = StatusCode::kInvalidArgument, const LoadOptions& opts = NoOps()) {
  testing::WriteModel(dir / "model.onnx", m);
  return LoadFails(dir / "model.onnx", reason, code, opts);
}

onnx::TensorProto* Initializer(onnx::ModelProto* m, const std::string& name) {
  for (auto& t : *m->mutable_graph()->mutable_initializer())
    if (t.name() == name) return &t;
  return nullptr;
}

// SmallModel with W (12 floats, 48 bytes) moved to external data file `location`.
onnx::ModelProto ExternalModel(const std::string& location, const std::string& offset = "",
                               const std::string& length = "") {
  onnx::ModelProto m = testing::SmallModel();
  onnx::TensorProto* w = Initializer(&m, "W");
  w->clear_raw_data();
  w->set_data_location(onnx::TensorProto::EXTERNAL);
  auto add = [&](const char* k, const std::string& v) {
    auto* e = w->add_external_data();
    e->set_key(k);
    e->set_value(v);
  };
  add("location", location);
  if (!offset.empty()) add("offset", offset);
  if (!length.empty()) add("length", length);
  return m;
}

// ---- the file itself ----

TEST(HostileModelTest, MissingFile) {
  ScratchDir dir;
  EXPECT_TRUE(LoadFails(dir / "absent.onnx", "does not exist", StatusCode::kNotFound));
}

TEST(HostileModelTest, FolderInsteadOfFile) {
  ScratchDir dir;
  EXPECT_TRUE(LoadFails(dir.path(), "not a regular file"));
}

TEST(HostileModelTest, TruncatedProtobuf) {
  ScratchDir dir;
  const std::string bytes = testing::Serialize(testing::SmallModel());
  // Cut inside the graph message (it holds almost all the bytes).
  testing::WriteBytes(dir / "model.onnx", bytes.substr(0, bytes.size() / 2));
  EXPECT_TRUE(LoadFails(dir / "model.onnx", "cannot parse the ONNX protobuf"));
}

TEST(HostileModelTest, GarbageBytes) {
  ScratchDir dir;
  testing::WriteBytes(dir / "model.onnx", "this is not an onnx model at all");
  EXPECT_TRUE(LoadFails(dir / "model.onnx", "cannot parse the ONNX protobuf"));
  testing::WriteBytes(dir / "model.onnx", std::string(16, '\xff'));
  EXPECT_TRUE(LoadFails(dir / "model.onnx", "cannot parse the ONNX protobuf"));
}

TEST(HostileModelTest, EmptyFileIsNotAModel) {
  ScratchDir dir;
  testing::WriteBytes(dir / "model.onnx", "");
  EXPECT_TRUE(LoadFails(dir / "model.onnx", "ir_version is missing"));
}

TEST(HostileModelTest, FieldLengthPastEndOfFile) {
  ScratchDir dir;
  // ir_version = 8, then field 7 (graph) claiming 4 GiB and 1000 bytes of payload respectively.
  testing::WriteBytes(dir / "model.onnx", std::string("\x08\x08\x3a\xff\xff\xff\xff\x0f\x0a\x01", 10));
  EXPECT_TRUE(LoadFails(dir / "model.onnx", "cannot parse the ONNX protobuf"));
  testing::WriteBytes(dir / "model.onnx", std::string("\x08\x08\x3a\xe8\x07\x0a\x01", 7) + std::string(10, 'a'));
  EXPECT_TRUE(LoadFails(dir / "model.onnx", "cannot parse the ONNX protobuf"));
}

TEST(HostileModelTest, ModelWithoutGraph) {
  ScratchDir dir;
  onnx::ModelProto m;
  m.set_ir_version(8);
  EXPECT_TRUE(ModelFails(dir, m, "it has no graph"));
}

// ---- tensor data ----

TEST(HostileModelTest, RawDataSizeMismatch) {
  ScratchDir dir;
  onnx::ModelProto m = testing::SmallModel();
  Initializer(&m, "b")->set_raw_data(std::string(8, '\0'));  // 3 floats need 12 bytes
  EXPECT_TRUE(ModelFails(dir, m, "initializer 'b': raw_data has 8 bytes, expected 12"));
}

TEST(HostileModelTest, HugeShapeWithTinyRawDataDoesNotAllocate) {
  ScratchDir dir;
  onnx::ModelProto m = testing::SmallModel();
  onnx::TensorProto* b = Initializer(&m, "b");
  b->clear_dims();
  b->add_dims(int64_t{1} << 40);  // 4 TiB of floats claimed
  EXPECT_TRUE(ModelFails(dir, m, "raw_data has 12 bytes, expected 4398046511104"));
}

TEST(HostileModelTest, TypedDataCountMismatch) {
  ScratchDir dir;
  onnx::ModelProto m = testing::SmallModel();
  Initializer(&m, "c")->mutable_float_data()->RemoveLast();  // 3 values for shape [4]
  EXPECT_TRUE(ModelFails(dir, m, "initializer 'c': float_data has 3 values, expected 4"));
}

TEST(HostileModelTest, TypedDataInTheWrongField) {
  ScratchDir dir;
  onnx::ModelProto m = testing::SmallModel();
  onnx::TensorProto* c = Initializer(&m, "c");
  c->clear_float_data();
  for (int i = 0; i < 4; ++i) c->add_int64_data(i);
  EXPECT_TRUE(ModelFails(dir, m, "a float32 tensor stores values in int64_data"));
}

TEST(HostileModelTest, TypedValueOutOfRange) {
  ScratchDir dir;
  onnx::ModelProto m = testing::SmallModel();
  onnx::TensorProto* t = m.mutable_graph()->add_initializer();
  t->set_name("q");
  t->set_data_type(onnx::TensorProto::INT8);
  t->add_dims(1);
  t->add_int32_data(300);
  EXPECT_TRUE(ModelFails(dir, m, "int32_data[0] = 300 does not fit in int8"));
}

TEST(HostileModelTest, NegativeDims) {
  ScratchDir dir;
  onnx::ModelProto m = testing::SmallModel();
  Initializer(&m, "b")->set_dims(0, -3);
  EXPECT_TRUE(ModelFails(dir, m, "negative dimension -3"));
}

TEST(HostileModelTest, NegativeAndZeroDeclaredDimsAreDynamic) {
  // Paddle2ONNX declares dynamic dims as -1, some exporters as 0; ONNX Runtime accepts both.
  ScratchDir dir;
  onnx::ModelProto m = testing::SmallModel();
  auto* shape = m.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape();
  shape->mutable_dim(0)->set_dim_value(-1);
  m.mutable_graph()->mutable_output(0)->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(0)->set_dim_value(-1);
  testing::WriteModel(dir / "model.onnx", m);
  auto g = LoadModel(dir / "model.onnx");
  ASSERT_TRUE(g.ok()) << g.status().message();
  const Value& x = g->value(g->inputs()[0]);
  ASSERT_TRUE(x.shape.has_value());
  EXPECT_FALSE((*x.shape)[0].known());
  EXPECT_EQ((*x.shape)[1].value, 3);
  shape->mutable_dim(0)->set_dim_value(0);
  testing::WriteModel(dir / "model.onnx", m);
  g = LoadModel(dir / "model.onnx");
  ASSERT_TRUE(g.ok()) << g.status().message();
  EXPECT_FALSE((*g->value(g->inputs()[0]).shape)[0].known());
}

TEST(HostileModelTest, OverflowingDims) {
  ScratchDir dir;
  onnx::ModelProto m = testing::SmallModel();
  onnx::TensorProto* b = Initializer(&m, "b");
  b->clear_dims();
  for (int i = 0; i < 4; ++i) b->add_dims(int64_t{1} << 20);  // 2^80 elements
  EXPECT_TRUE(ModelFails(dir, m, "too many elements (overflow)"));
}

TEST(HostileModelTest, UnknownDType) {
  ScratchDir dir;
  onnx::ModelProto m = testing::SmallModel();
  Initializer(&m, "b")->set_data_type(99);
  EXPECT_TRUE(ModelFails(dir, m, "unknown data type 99"));
  Initializer(&m, "b")->set_data_type(0);
  EXPECT_TRUE(ModelFails(dir, m, "data type is UNDEFINED"));
  m = testing::SmallModel();
  m.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->set_elem_type(42);
  EXPECT_TRUE(ModelFails(dir, m, "graph input 'x': unknown data type 42"));
}

TEST(HostileModelTest, StringTensorIsUnsupported) {
  ScratchDir dir;
  onnx::ModelProto m = testing::SmallModel();
  onnx::TensorProto* t = m.mutable_graph()->add_initializer();
  t->set_name("names");
  t->set_data_type(onnx::TensorProto::STRING);
  t->add_dims(1);
  t->add_string_data("hello");
  EXPECT_TRUE(ModelFails(dir, m, "initializer 'names': string tensors are not supported", StatusCode::kUnimplemented));
}

// ---- external data ----

TEST(HostileModelTest, ExternalDataAbsolutePath) {
  ScratchDir dir;
  EXPECT_TRUE(ModelFails(dir, ExternalModel("/etc/passwd"), "'/etc/passwd' is an absolute path"));
}

TEST(HostileModelTest, ExternalDataDotDotPath) {
  ScratchDir dir;
  EXPECT_TRUE(ModelFails(dir, ExternalModel("../secret.bin"), "contains '..'"));
  EXPECT_TRUE(ModelFails(dir, ExternalModel("sub/../../secret.bin"), "contains '..'"));
}

TEST(HostileModelTest, ExternalDataSymlink) {
  ScratchDir dir, outside;
  testing::WriteBytes(outside / "w.bin", std::string(48, '\0'));
  ASSERT_EQ(::symlink((outside / "w.bin").c_str(), (dir / "w.bin").c_str()), 0);
  EXPECT_TRUE(ModelFails(dir, ExternalModel("w.bin"), "is a symlink"));
  // A symlinked folder on the way is refused as well.
  ASSERT_EQ(::symlink(outside.path().c_str(), (dir / "sub").c_str()), 0);
  EXPECT_TRUE(ModelFails(dir, ExternalModel("sub/w.bin"), "is a symlink"));
}

TEST(HostileModelTest, ExternalDataNotARegularFile) {
  ScratchDir dir;
  ASSERT_EQ(::mkdir((dir / "w.bin").c_str(), 0755), 0);
  EXPECT_TRUE(ModelFails(dir, ExternalModel("w.bin"), "is not a regular file"));
}

TEST(HostileModelTest, ExternalDataMissingFile) {
  ScratchDir dir;
  EXPECT_TRUE(ModelFails(dir, ExternalModel("w.bin"), "does not exist", StatusCode::kNotFound));
}

TEST(HostileModelTest, ExternalDataOffsetPastEnd) {
  ScratchDir dir;
  testing::WriteBytes(dir / "w.bin", std::string(48, '\0'));
  EXPECT_TRUE(ModelFails(dir, ExternalModel("w.bin", "100"), "offset 100 is past the end"));
}

TEST(HostileModelTest, ExternalDataRangePastEnd) {
  ScratchDir dir;
  testing::WriteBytes(dir / "w.bin", std::string(60, '\0'));
  EXPECT_TRUE(ModelFails(dir, ExternalModel("w.bin", "16", "48"), "is past the end"));
}

TEST(HostileModelTest, ExternalDataLengthMismatch) {
  ScratchDir dir;
  testing::WriteBytes(dir / "w.bin", std::string(48, '\0'));
  EXPECT_TRUE(ModelFails(dir, ExternalModel("w.bin", "0", "40"), "length is 40 bytes, expected 48"));
  // No length: the rest of the file is the tensor, and it is too short.
  testing::WriteBytes(dir / "w.bin", std::string(47, '\0'));
  EXPECT_TRUE(ModelFails(dir, ExternalModel("w.bin"), "length is 47 bytes, expected 48"));
}

TEST(HostileModelTest, ExternalDataNegativeOrGarbageOffset) {
  ScratchDir dir;
  testing::WriteBytes(dir / "w.bin", std::string(48, '\0'));
  EXPECT_TRUE(ModelFails(dir, ExternalModel("w.bin", "-8"), "offset '-8' is not a non-negative integer"));
  EXPECT_TRUE(ModelFails(dir, ExternalModel("w.bin", "0", "-48"), "length '-48' is not a non-negative integer"));
  EXPECT_TRUE(ModelFails(dir, ExternalModel("w.bin", "12abc"), "offset '12abc' is not a non-negative integer"));
  // 19 digits past 2^63 - 1 (a fuzzing finding: the parse overflowed, UBSan).
  EXPECT_TRUE(ModelFails(dir, ExternalModel("w.bin", "9999999999999999999"),
                         "offset '9999999999999999999' is not a non-negative integer"));
}

TEST(HostileModelTest, ExternalDataValidFileLoads) {
  // The control case for the tests above: the same model with a sound data file loads.
  ScratchDir dir;
  std::vector<float> w(12);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i);
  testing::WriteBytes(dir / "w.bin", std::string(16, 'x') + std::string(reinterpret_cast<char*>(w.data()), 48));
  testing::WriteModel(dir / "model.onnx", ExternalModel("w.bin", "16", "48"));
  auto g = LoadModel(dir / "model.onnx", NoOps());
  ASSERT_TRUE(g.ok()) << g.status().message();
  EXPECT_EQ(g->value(g->FindValue("W")).initializer->data<float>()[11], 11.f);
}

// ---- graph structure ----

TEST(HostileModelTest, DanglingNodeInput) {
  ScratchDir dir;
  onnx::ModelProto m = testing::SmallModel();
  m.mutable_graph()->mutable_node(1)->set_input(0, "nowhere");
  EXPECT_TRUE(ModelFails(dir, m, "node 'relu' (Relu): input 0 'nowhere' is not produced by any node"));
}

TEST(HostileModelTest, DanglingGraphOutput) {
  ScratchDir dir;
  onnx::ModelProto m = testing::SmallModel();
  *m.mutable_graph()->add_output() = testing::ValueInfo("ghost", onnx::TensorProto::FLOAT, {1});
  EXPECT_TRUE(ModelFails(dir, m, "graph output 'ghost' is not produced by any node"));
}

TEST(HostileModelTest, DuplicateOutputName) {
  ScratchDir dir;
  onnx::ModelProto m = testing::SmallModel();
  m.mutable_graph()->mutable_node(1)->set_output(0, "s");  // Relu also writes Add's output
  EXPECT_TRUE(ModelFails(dir, m, "node 'relu' (Relu) outputs 's', which node 'add' also defines"));
}

TEST(HostileModelTest, NodeOutputShadowsInitializerOrInput) {
  ScratchDir dir;
  onnx::ModelProto m = testing::SmallModel();
  m.mutable_graph()->mutable_node(1)->set_output(0, "W");
  EXPECT_TRUE(ModelFails(dir, m, "outputs 'W', which an initializer also defines"));
  m = testing::SmallModel();
  m.mutable_graph()->mutable_node(1)->set_output(0, "x");
  EXPECT_TRUE(ModelFails(dir, m, "outputs 'x', which a graph input also defines"));
}

TEST(HostileModelTest, DuplicateInitializer) {
  ScratchDir dir;
  onnx::ModelProto m = testing::SmallModel();
  *m.mutable_graph()->add_initializer() = testing::FloatTensorProto("b", {1}, {0.f});
  EXPECT_TRUE(ModelFails(dir, m, "initializer 'b' is defined twice"));
}

TEST(HostileModelTest, DuplicateGraphInput) {
  ScratchDir dir;
  onnx::ModelProto m = testing::SmallModel();
  *m.mutable_graph()->add_input() = testing::ValueInfo("x", onnx::TensorProto::FLOAT, {1});
  EXPECT_TRUE(ModelFails(dir, m, "graph input 'x' is listed twice"));
}

TEST(HostileModelTest, DuplicateAttribute) {
  ScratchDir dir;
  onnx::ModelProto m = testing::SmallModel();
  *m.mutable_graph()->mutable_node(2)->add_attribute() = testing::AttrInt("transB", 0);
  EXPECT_TRUE(ModelFails(dir, m, "node 'gemm' (Gemm): attribute 'transB' appears twice"));
}

TEST(HostileModelTest, Cycle) {
  ScratchDir dir;
  onnx::ModelProto m = testing::SmallModel();
  auto* g = m.mutable_graph();
  *g->add_node() = testing::NodeProto("Relu", {"q"}, {"p"}, "p_node");
  *g->add_node() = testing::NodeProto("Relu", {"p"}, {"q"}, "q_node");
  *g->add_output() = testing::ValueInfo("q", onnx::TensorProto::FLOAT, {1});
  EXPECT_TRUE(ModelFails(dir, m, "graph has a cycle through node 'p_node' (Relu)"));
}

// ---- ops, domains, opsets, attributes ----

TEST(HostileModelTest, UnknownOp) {
  ScratchDir dir;
  onnx::ModelProto m = testing::SmallModel();
  m.mutable_graph()->mutable_node(1)->set_op_type("NoSuchOp");
  EXPECT_TRUE(ModelFails(dir, m, "node 'relu' (NoSuchOp): unsupported op 'NoSuchOp'", StatusCode::kUnimplemented,
                         LoadOptions{}));
}

TEST(HostileModelTest, UnknownDomain) {
  ScratchDir dir;
  onnx::ModelProto m = testing::SmallModel();
  testing::AddOpset(&m, "com.example", 1);
  m.mutable_graph()->mutable_node(1)->set_domain("com.example");
  EXPECT_TRUE(ModelFails(dir, m, "unsupported op 'Relu' in domain 'com.example'", StatusCode::kUnimplemented,
                         LoadOptions{}));
}

TEST(HostileModelTest, DomainNotImported) {
  ScratchDir dir;
  onnx::ModelProto m = testing::SmallModel();
  m.mutable_graph()->mutable_node(1)->set_domain("com.example");
  EXPECT_TRUE(ModelFails(dir, m, "uses domain 'com.example', which the model does not import"));
}

TEST(HostileModelTest, UnsupportedOpset) {
  ScratchDir dir;
  for (int64_t v : {6, 99}) {
    onnx::ModelProto m = testing::SmallModel();
    m.mutable_opset_import(0)->set_version(v);
    EXPECT_TRUE(ModelFails(dir, m, "ai.onnx opset " + std::to_string(v) + " is not supported; Whittle supports opsets 7 to 28",
                           StatusCode::kUnimplemented, LoadOptions{}));
  }
  onnx::ModelProto m = testing::SmallModel();
  m.mutable_opset_import(0)->set_version(-1);
  EXPECT_TRUE(ModelFails(dir, m, "has version -1"));
}

TEST(HostileModelTest, AttributeTypeDisagreesWithItsValue) {
  ScratchDir dir;
  onnx::ModelProto m = testing::SmallModel();
  onnx::AttributeProto* a = m.mutable_graph()->mutable_node(2)->mutable_attribute(0);  // transB INT
  a->clear_i();
  a->add_floats(1.f);
  EXPECT_TRUE(ModelFails(dir, m, "attribute 'transB' declares type INT but holds a FLOATS value"));
}

TEST(HostileModelTest, WrongAttributeTypeForOp) {
  RegisterAllOps();
  if (!OpRegistry::Global().Find("", "Conv")) GTEST_SKIP() << "OpDef for Conv not registered yet";
  ScratchDir dir;
  onnx::ModelProto m = testing::SmallModel();
  auto* g = m.mutable_graph();
  g->clear_node();
  g->clear_value_info();
  *g->mutable_input(0) = testing::ValueInfo("x", onnx::TensorProto::FLOAT, {1, 1, 5, 5});
  *g->mutable_output(0) = testing::ValueInfo("y", onnx::TensorProto::FLOAT, {});
  g->mutable_output(0)->mutable_type()->mutable_tensor_type()->clear_shape();
  *g->add_initializer() = testing::FloatTensorProto("K", {1, 1, 3, 3}, std::vector<float>(9, 1.f));
  onnx::NodeProto conv = testing::NodeProto("Conv", {"x", "K"}, {"y"}, "conv");
  *conv.add_attribute() = testing::AttrFloat("strides", 2.f);
  *g->add_node() = conv;
  EXPECT_TRUE(ModelFails(dir, m, "attribute 'strides' must be ints, got float", StatusCode::kInvalidArgument,
                         LoadOptions{}));
}

// Subgraphs are read (If/Loop/Scan, tests/runtime/control_flow_test.cc); one on an op that takes
// none is refused by the op check.
TEST(HostileModelTest, SubgraphOnAnOpWithoutOneIsRefused) {
  ScratchDir dir;
  onnx::ModelProto m = testing::SmallModel();
  onnx::AttributeProto* a = m.mutable_graph()->mutable_node(2)->add_attribute();
  a->set_name("then_branch");
  a->set_type(onnx::AttributeProto::GRAPH);
  a->mutable_g()->set_name("sub");
  EXPECT_TRUE(ModelFails(dir, m, "unknown attribute 'then_branch'", StatusCode::kInvalidArgument, LoadOptions{}));
}

// A sequence is read now (ONNX's sequence ops take it), but an op that takes tensors refuses one,
// naming the value and the op.
TEST(HostileModelTest, SequenceIntoATensorOpIsRefused) {
  ScratchDir dir;
  onnx::ModelProto m = testing::SmallModel();
  auto* t = m.mutable_graph()->mutable_input(0)->mutable_type();
  t->Clear();
  t->mutable_sequence_type()->mutable_elem_type()->mutable_tensor_type()->set_elem_type(1);
  EXPECT_TRUE(ModelFails(dir, m, "input 'x' is a sequence; ", StatusCode::kInvalidArgument, LoadOptions{}));
  EXPECT_TRUE(ModelFails(dir, m, "takes tensors", StatusCode::kInvalidArgument, LoadOptions{}));
}

TEST(HostileModelTest, MapTypedInputAndSequenceOfSequencesAreUnsupported) {
  ScratchDir dir;
  onnx::ModelProto m = testing::SmallModel();
  auto* t = m.mutable_graph()->mutable_input(0)->mutable_type();
  t->Clear();
  t->mutable_map_type()->set_key_type(7);
  EXPECT_TRUE(ModelFails(dir, m, "graph input 'x' is a map", StatusCode::kUnimplemented));
  t->Clear();
  t->mutable_sequence_type()->mutable_elem_type()->mutable_sequence_type()->mutable_elem_type()->mutable_tensor_type()
      ->set_elem_type(1);
  EXPECT_TRUE(ModelFails(dir, m, "graph input 'x' is a sequence of non-tensors", StatusCode::kUnimplemented));
}

TEST(HostileModelTest, TensorProtoFileIsValidatedToo) {
  ScratchDir dir;
  onnx::TensorProto t = testing::FloatTensorProto("x", {2, 2}, {1.f, 2.f, 3.f, 4.f});
  t.set_raw_data(std::string(15, '\0'));
  std::string bytes;
  ASSERT_TRUE(t.SerializeToString(&bytes));
  testing::WriteBytes(dir / "input_0.pb", bytes);
  auto r = LoadTensorProtoFile(dir / "input_0.pb");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("raw_data has 15 bytes, expected 16"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find(dir / "input_0.pb"), std::string::npos);
  testing::WriteBytes(dir / "input_1.pb", bytes.substr(0, bytes.size() - 3));
  EXPECT_FALSE(LoadTensorProtoFile(dir / "input_1.pb").ok());
  EXPECT_EQ(LoadTensorProtoFile(dir / "absent.pb").status().code(), StatusCode::kNotFound);
}

// Every prefix and many random byte corruptions of a valid model: loading may fail, but must
// return (no crash, no abort, no huge allocation).
TEST(HostileModelTest, CorruptedBytesNeverCrash) {
  ScratchDir dir;
  const std::string good = testing::Serialize(testing::SmallModel());
  int failures = 0;
  for (size_t n = 0; n < good.size(); ++n) {
    auto g = ParseModel(good.substr(0, n), dir.path(), NoOps());
    failures += !g.ok();
  }
  EXPECT_GT(failures, static_cast<int>(good.size()) / 2);
  std::mt19937 rng(1234);
  for (int iter = 0; iter < 3000; ++iter) {
    std::string bad = good;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < flips; ++k) bad[rng() % bad.size()] = static_cast<char>(rng() & 0xff);
    auto g = ParseModel(bad, dir.path(), NoOps());
    if (g.ok()) { EXPECT_TRUE(g->Verify().ok()); }
  }
}

}  // namespace
}  // namespace whittle
