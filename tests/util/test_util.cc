#include "tests/util/test_util.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>

#include "lib/ir/device.h"
#include "lib/ir/domain.h"
#include "lib/onnx/model_io.h"
#include "lib/ops/op_def.h"
#include "tests/util/graph_builder.h"
#include "whittle/session.h"

namespace whittle::testing {

void LoadMlpAndData(int64_t n_train, int64_t n_eval, std::optional<Graph>* mlp, std::optional<Dataset>* train,
                    std::optional<Dataset>* eval) {
  RegisterAllOps();
  auto m = LoadModel(std::string(WHITTLE_SOURCE_DIR) + "/models/mlp.onnx");
  ASSERT_TRUE(m.ok()) << m.status().message();
  *mlp = std::move(*m);
  auto tr = LoadDataset("fashion-mnist:train", n_train);
  auto ev = LoadDataset("fashion-mnist:test", n_eval);
  ASSERT_TRUE(tr.ok() && ev.ok());
  *train = std::move(*tr);
  *eval = std::move(*ev);
}

Tensor RandomFloat(const Dims& dims, uint32_t seed, float lo, float hi) {
  Tensor t(DType::kFloat32, dims);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = d(rng);
  return t;
}

Tensor RandomInt64(const Dims& dims, uint32_t seed, int64_t lo, int64_t hi) {
  Tensor t(DType::kInt64, dims);
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int64_t> d(lo, hi);
  int64_t* p = t.data<int64_t>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = d(rng);
  return t;
}

Tensor RandomInt8(const Dims& dims, uint32_t seed) {
  Tensor t(DType::kInt8, dims);
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> d(-128, 127);
  int8_t* p = t.data<int8_t>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<int8_t>(d(rng));
  return t;
}

Tensor RandomUInt8(const Dims& dims, uint32_t seed) {
  Tensor t(DType::kUInt8, dims);
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> d(0, 255);
  uint8_t* p = t.data<uint8_t>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<uint8_t>(d(rng));
  return t;
}

Tensor RandomSignBits(int64_t n, int64_t k, uint32_t seed) {
  std::mt19937_64 rng(seed);
  const int64_t words = (k + 63) / 64;
  Tensor t(DType::kUInt64, {n, words});
  for (int64_t r = 0; r < n; ++r)
    for (int64_t w = 0; w < words; ++w) {
      uint64_t v = rng();
      if (w == words - 1 && k % 64) v &= (uint64_t{1} << (k % 64)) - 1;
      t.data<uint64_t>()[r * words + w] = v;
    }
  return t;
}

float MaxAbsDiff(const Tensor& a, const Tensor& b) {
  WH_CHECK(a.dims() == b.dims());
  const float* pa = a.data<float>();
  const float* pb = b.data<float>();
  float m = 0;
  for (int64_t i = 0; i < a.numel(); ++i) m = std::max(m, std::fabs(pa[i] - pb[i]));
  return m;
}

namespace {
template <class T>
::testing::AssertionResult CloseT(const Tensor& a, const Tensor& b, double atol, double rtol) {
  const T* pa = a.data<T>();
  const T* pb = b.data<T>();
  for (int64_t i = 0; i < a.numel(); ++i) {
    double x = static_cast<double>(pa[i]), y = static_cast<double>(pb[i]);
    if (std::isnan(x) && std::isnan(y)) continue;
    if (std::isinf(x) || std::isinf(y)) {
      if (x == y) continue;
    } else if (std::fabs(x - y) <= atol + rtol * std::fabs(y)) {
      continue;
    }
    return ::testing::AssertionFailure() << "element " << i << ": " << x << " vs " << y;
  }
  return ::testing::AssertionSuccess();
}
}  // namespace

::testing::AssertionResult TensorsClose(const Tensor& a, const Tensor& b, float atol, float rtol) {
  if (a.dtype() != b.dtype())
    return ::testing::AssertionFailure() << "dtype " << DTypeName(a.dtype()) << " vs " << DTypeName(b.dtype());
  if (a.dims() != b.dims())
    return ::testing::AssertionFailure() << "dims " << DimsToString(a.dims()) << " vs " << DimsToString(b.dims());
  if (a.dtype() == DType::kFloat32) return CloseT<float>(a, b, atol, rtol);
  if (a.dtype() == DType::kFloat64) return CloseT<double>(a, b, atol, rtol);
  if (a.BitwiseEquals(b)) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "contents differ";
}

Node MakeNode(const std::string& op_type, int num_inputs, int num_outputs, AttributeMap attrs,
              const std::string& domain) {
  Node n;
  n.name = "test_" + op_type;
  n.op_type = op_type;
  n.domain = domain;
  n.attrs = std::move(attrs);
  for (int i = 0; i < num_inputs; ++i) n.inputs.push_back(i);
  for (int i = 0; i < num_outputs; ++i) n.outputs.push_back(num_inputs + i);
  return n;
}

const std::vector<Backend>& TestedBackends() {
  static const std::vector<Backend> tested = [] {
    std::vector<Backend> v;
    for (Backend b : BuiltBackends()) {
      std::string why;
      if (DeviceAvailable(BackendDevice(b), &why)) {
        v.push_back(b);
      } else {  // a built backend without its device (CUDA on a machine without a GPU)
        // Not gtest's "[  SKIPPED ]" (ctest would call the whole test skipped: its other backends ran).
        std::printf("[ NO DEVICE ] the %s backend's kernels are not checked here: %s\n", BackendName(b), why.c_str());
      }
    }
    return v;
  }();
  return tested;
}

std::vector<Tensor> ExpectBackendsMatchReference(const Node& node, const std::vector<Tensor>& inputs, float atol,
                                                 float rtol, int opset, int threads, bool inputs_const) {
  Node n = node;
  for (size_t i = 0; i < inputs.size() && i < n.inputs.size(); ++i)
    if (!inputs[i].defined()) n.inputs[i] = -1;
  auto ref = RunNode(n, opset, inputs, Backend::kReference, 1, inputs_const);
  EXPECT_TRUE(ref.ok()) << ref.status().message();
  if (!ref.ok()) return {};
  for (Backend b : TestedBackends()) {
    if (b == Backend::kReference) continue;
    auto got = RunNode(n, opset, inputs, b, threads, inputs_const);
    EXPECT_TRUE(got.ok()) << BackendName(b) << ": " << got.status().message();
    if (!got.ok()) continue;
    for (size_t i = 0; i < ref->size(); ++i) {
      if (!(*ref)[i].defined()) continue;
      EXPECT_TRUE(TensorsClose((*got)[i], (*ref)[i], atol, rtol))
          << node.op_type << " output " << i << " on backend " << BackendName(b);
    }
  }
  return *ref;
}

int CountOps(const Graph& g, const std::string& op_type) {
  int n = 0;
  for (const Node& node : g.nodes()) n += node.op_type == op_type;
  return n;
}

void ExpectOptimizedMatchesUnoptimized(const Graph& g, const std::map<std::string, Tensor>& inputs) {
  SessionOptions plain;
  plain.optimize = false;
  plain.backend = Backend::kReference;
  auto ref = Session::FromGraph(g, plain);
  ASSERT_TRUE(ref.ok()) << ref.status().message();
  auto want = (*ref)->Run(inputs);
  ASSERT_TRUE(want.ok()) << want.status().message();
  for (int config = 0; config < 3; ++config) {
    SessionOptions so;
    so.backend = config == 0 ? Backend::kReference : Backend::kCpu;
    so.blocked_layout = config != 2;
    so.num_threads = 2;
    const std::string name = config == 0 ? "reference" : config == 1 ? "cpu" : "cpu without the blocked layout";
    auto s = Session::FromGraph(g, so);
    ASSERT_TRUE(s.ok()) << name << ": " << s.status().message();
    auto got = (*s)->Run(inputs);
    ASSERT_TRUE(got.ok()) << name << ": " << got.status().message();
    ASSERT_EQ(got->size(), want->size());
    for (size_t o = 0; o < got->size(); ++o) {
      const Tensor& a = (*got)[o];
      const Tensor& e = (*want)[o];
      ASSERT_EQ(a.dims(), e.dims()) << name << " output " << o;
      for (int64_t i = 0; i < a.numel(); ++i)
        ASSERT_NEAR(a.data<float>()[i], e.data<float>()[i], 1e-4f + 1e-4f * std::fabs(e.data<float>()[i]))
            << name << " output " << o << " element " << i;
    }
  }
}

double OutputMse(const Graph& a, const Graph& b, const std::string& input, const Tensor& x) {
  auto sa = Session::FromGraph(a);
  auto sb = Session::FromGraph(b);
  WH_CHECK(sa.ok() && sb.ok());
  auto ya = (*sa)->Run({{input, x}});
  auto yb = (*sb)->Run({{input, x}});
  WH_CHECK(ya.ok() && yb.ok());
  double s = 0;
  for (int64_t i = 0; i < (*ya)[0].numel(); ++i) {
    const double d = static_cast<double>((*ya)[0].data<float>()[i]) - (*yb)[0].data<float>()[i];
    s += d * d;
  }
  return s / static_cast<double>((*ya)[0].numel());
}

StatusOr<std::unique_ptr<Session>> LoadWhittleOp(const std::string& op_type, int64_t in_features,
                                                 const std::vector<Tensor>& consts, AttributeMap attrs, Backend backend) {
  GraphBuilder b(17);
  b.Input("x", DType::kFloat32, {Dim::Symbol("batch"), in_features});
  std::vector<std::string> in{"x"};
  for (size_t i = 0; i < consts.size(); ++i) {
    if (!consts[i].defined()) break;
    in.push_back("c" + std::to_string(i));
    b.Init(in.back(), consts[i]);
  }
  b.Op(op_type, in, {"y"}, std::move(attrs)).Output("y");
  Graph g = b.Build();
  g.nodes().back().domain = kWhittleDomain;
  g.opset_imports[kWhittleDomain] = 1;
  SessionOptions so;
  so.backend = backend;
  return Session::FromGraph(std::move(g), so);
}

StatusOr<std::vector<Tensor>> RunGraph(const Graph& g, const Tensor& x, Backend backend, int threads) {
  SessionOptions so;
  so.backend = backend;
  so.num_threads = threads;
  WH_ASSIGN_OR_RETURN(auto s, Session::FromGraph(g, so));
  return s->Run({{s->inputs()[0].name, x}});
}

Graph WithDenseWeights(const Graph& original, const std::map<std::string, std::vector<float>>& w_nk) {
  Graph d = original;
  for (Node& o : d.nodes()) {
    auto it = w_nk.find(o.name);
    if (it == w_nk.end()) continue;
    const Tensor& w0 = *d.value(o.inputs[1]).initializer;
    const bool trans = o.op_type == "Conv" || (o.op_type == "Gemm" && o.attrs.GetInt("transB", 0));
    const int64_t N = trans ? w0.dim(0) : w0.dims().back(), K = w0.numel() / N;
    Tensor w(DType::kFloat32, w0.dims());
    for (int64_t r = 0; r < N; ++r)
      for (int64_t c = 0; c < K; ++c) w.data<float>()[trans ? r * K + c : c * N + r] = it->second[static_cast<size_t>(r * K + c)];
    d.value(o.inputs[1]).initializer = w;
  }
  return d;
}

int CountRetrainedWeights(const std::string& a_path, const std::string& b_path) {
  auto a = LoadModel(a_path);
  auto b = LoadModel(b_path);
  EXPECT_TRUE(a.ok() && b.ok());
  if (!a.ok() || !b.ok()) return -1;
  EXPECT_EQ(a->nodes().size(), b->nodes().size());
  for (size_t i = 0; i < a->nodes().size() && i < b->nodes().size(); ++i)
    EXPECT_EQ(a->nodes()[i].op_type, b->nodes()[i].op_type);
  int changed = 0;
  for (const Value& v : a->values()) {
    if (!v.initializer || v.initializer->dtype() != DType::kFloat32) continue;
    const int k = b->FindValue(v.name);
    EXPECT_GE(k, 0) << v.name;
    if (k < 0 || !b->value(k).initializer) continue;
    const Tensor& t = *b->value(k).initializer;
    EXPECT_EQ(t.dims(), v.initializer->dims()) << v.name;
    if (t.dims() != v.initializer->dims()) continue;
    changed += std::memcmp(t.raw_data(), v.initializer->raw_data(), v.initializer->nbytes()) != 0;
  }
  return changed;
}

}  // namespace whittle::testing
