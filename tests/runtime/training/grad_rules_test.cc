// The autodiff gradient rules (runtime/training/autodiff.cc) op family by op family against
// central finite differences of the loss: each small graph feeds x + p0 (p0 a param of x's full
// shape, so p0's gradient is the op's input gradient) through the op under test into a linear
// head, and every param's gradient (input, op params, head) is compared element by element.
// Also: BatchNormalization in training mode (batch statistics, running-statistic state updates),
// the integer plumbing exporters put on shape paths, and the refused cases' errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "include/whittle/session.h"
#include "lib/ops/op_def.h"
#include "runtime/training/autodiff.h"
#include "tests/util/graph_builder.h"
#include "tests/util/test_util.h"

namespace whittle::training {
namespace {

using ::whittle::testing::GraphBuilder;
using ::whittle::testing::RandomFloat;

AttributeMap Attrs(std::initializer_list<std::pair<std::string, Attribute>> l) {
  AttributeMap a;
  for (const auto& [k, v] : l) a.Set(k, v);
  return a;
}

Tensor I64(std::vector<int64_t> v) { return Tensor::FromVector<int64_t>({static_cast<int64_t>(v.size())}, v); }

// A training graph run with the cross-entropy loss (batch mean) of labels.
class Harness {
 public:
  static std::unique_ptr<Harness> Make(const Graph& model, const TrainingGraphOptions& o = TrainingGraphOptions()) {
    RegisterAllOps();
    auto tg = BuildTrainingGraph(model, 1.f, o);
    EXPECT_TRUE(tg.ok()) << tg.status().message();
    if (!tg.ok()) return nullptr;
    auto h = std::make_unique<Harness>();
    h->tg_ = std::move(*tg);
    for (const Tensor& t : h->tg_.initial) h->params_.push_back(t.Clone());
    auto s = Session::FromGraph(h->tg_.graph);
    EXPECT_TRUE(s.ok()) << s.status().message();
    if (!s.ok()) return nullptr;
    h->session_ = std::move(*s);
    return h;
  }

  // Loss; grads (one per param) and the state outputs when asked.
  double Run(const Tensor& x, const std::vector<int64_t>& labels, std::vector<Tensor>* grads = nullptr,
             std::vector<Tensor>* state = nullptr) {
    const int64_t B = x.dim(0);
    const int64_t C = (*tg_.graph.value(tg_.graph.FindValue(tg_.logits)).shape)[1].value;
    Tensor target(DType::kFloat32, {B, C});
    for (int64_t i = 0; i < B * C; ++i) target.data<float>()[i] = 0.f;
    for (int64_t i = 0; i < B; ++i) target.data<float>()[i * C + labels[static_cast<size_t>(i)]] = 1.f / B;
    std::map<std::string, Tensor> in{{tg_.model_input, x},
                                     {kTargetInput, target},
                                     {kCeCoefInput, Tensor::Scalar<float>(1.f / static_cast<float>(B))},
                                     {kKdCoefInput, Tensor::Scalar<float>(0.f)}};
    for (size_t i = 0; i < params_.size(); ++i) in[tg_.params[i]] = params_[i];
    for (const StateUpdate& u : tg_.state) in[u.initializer] = u.initial;
    auto out = session_->Run(in);
    EXPECT_TRUE(out.ok()) << out.status().message();
    if (!out.ok()) return NAN;
    const Tensor& z = (*out)[0];
    double loss = 0;
    for (int64_t i = 0; i < B; ++i) {
      double m = -1e300, sum = 0;
      for (int64_t c = 0; c < C; ++c) m = std::max(m, static_cast<double>(z.data<float>()[i * C + c]));
      for (int64_t c = 0; c < C; ++c) sum += std::exp(z.data<float>()[i * C + c] - m);
      loss += std::log(sum) + m - z.data<float>()[i * C + labels[static_cast<size_t>(i)]];
    }
    const size_t P = params_.size();
    EXPECT_EQ(out->size(), 1 + P + tg_.state.size());
    if (grads) grads->assign(out->begin() + 1, out->begin() + 1 + static_cast<std::ptrdiff_t>(P));
    if (state) state->assign(out->begin() + 1 + static_cast<std::ptrdiff_t>(P), out->end());
    return loss / static_cast<double>(B);
  }

  const TrainingGraph& tg() const { return tg_; }
  std::vector<Tensor>& params() { return params_; }
  Tensor& param(const std::string& name) {
    for (size_t i = 0; i < params_.size(); ++i)
      if (tg_.params[i] == name) return params_[i];
    ADD_FAILURE() << "no param " << name;
    return params_[0];
  }

 private:
  TrainingGraph tg_;
  std::vector<Tensor> params_;
  std::unique_ptr<Session> session_;
};

// Every element (up to 48 spread over each param) of every param's gradient against central
// differences of the loss. Returns the largest error seen, over the tolerance (1 = at it).
double ExpectMatchesFiniteDifferences(const Graph& model, const Tensor& x, const std::vector<int64_t>& labels,
                                      const TrainingGraphOptions& o = TrainingGraphOptions()) {
  auto h = Harness::Make(model, o);
  if (!h) return 1e9;
  std::vector<Tensor> grads;
  h->Run(x, labels, &grads);
  EXPECT_EQ(grads.size(), h->params().size());
  double worst = 0;
  for (size_t k = 0; k < grads.size() && k < h->params().size(); ++k) {
    SCOPED_TRACE(h->tg().params[k]);
    Tensor& p = h->params()[k];
    const int64_t n = p.numel();
    const int64_t stride = std::max<int64_t>(1, n / 48);
    for (int64_t i = 0; i < n; i += stride) {
      const float keep = p.data<float>()[i];
      const float step = 4e-3f * std::max(1.f, std::fabs(keep));
      p.data<float>()[i] = keep + step;
      const double up = h->Run(x, labels);
      p.data<float>()[i] = keep - step;
      const double down = h->Run(x, labels);
      p.data<float>()[i] = keep;
      const double fd = (up - down) / (2.0 * step);
      const double g = grads[k].data<float>()[i];
      const double tol = 1e-3 + 1e-2 * std::fabs(fd);
      worst = std::max(worst, std::fabs(g - fd) / tol);
      EXPECT_NEAR(g, fd, tol) << "element " << i;
    }
  }
  return worst;
}

// x [dims] + p0 -> body -> Flatten -> MatMul head [features, classes] -> logits. body adds nodes
// reading "h" and writing "y"; features: y's element count per sample.
Graph Model(int64_t opset, const Dims& x, int64_t features, int64_t classes,
            const std::function<void(GraphBuilder&)>& body, uint32_t seed = 1) {
  GraphBuilder gb(opset);
  gb.Input("x", DType::kFloat32, ToSymShape(x))
      .Init("p0", RandomFloat(x, seed, -0.5f, 0.5f))
      .Op("Add", {"x", "p0"}, {"h"});
  body(gb);
  gb.Op("Flatten", {"y"}, {"f"})
      .Init("head", RandomFloat({features, classes}, seed + 100, -1.f, 1.f))
      .Op("MatMul", {"f", "head"}, {"logits"})
      .Output("logits");
  return gb.Build();
}

TEST(GradRules, SoftmaxAndLogSoftmaxAnyAxis) {
  for (const char* op : {"Softmax", "LogSoftmax"})
    for (int64_t opset : {11, 13})
      for (int64_t axis : {-1, 1, 0}) {
        SCOPED_TRACE(std::string(op) + " opset " + std::to_string(opset) + " axis " + std::to_string(axis));
        const Graph g = Model(opset, {2, 3, 4}, 12, 5, [&](GraphBuilder& b) {
          b.Init("s", RandomFloat({4}, 7, 1.f, 3.f))
              .Op("Mul", {"h", "s"}, {"hs"})
              .Op(op, {"hs"}, {"y"}, Attrs({{"axis", Attribute::Int(axis)}}));
        });
        ExpectMatchesFiniteDifferences(g, RandomFloat({2, 3, 4}, 2, -2.f, 2.f), {1, 4});
      }
}

TEST(GradRules, LayerNormalizationAxesScaleAndBias) {
  struct Case {
    int64_t axis;
    Dims scale;
    bool bias;
  };
  for (const Case& c : {Case{-1, {4}, true}, Case{1, {3, 4}, true}, Case{-2, {3, 4}, false}, Case{2, {4}, true}}) {
    SCOPED_TRACE("axis " + std::to_string(c.axis));
    const Graph g = Model(17, {2, 3, 4}, 12, 5, [&](GraphBuilder& b) {
      b.Init("scale", RandomFloat(c.scale, 8, 0.5f, 1.5f));
      std::vector<std::string> in{"h", "scale"};
      if (c.bias) {
        b.Init("bias", RandomFloat(c.scale, 9));
        in.push_back("bias");
      }
      b.Op("LayerNormalization", in, {"y"}, Attrs({{"axis", Attribute::Int(c.axis)}, {"epsilon", Attribute::Float(1e-3f)}}));
    });
    ExpectMatchesFiniteDifferences(g, RandomFloat({2, 3, 4}, 3, -2.f, 2.f), {0, 3});
  }
}

TEST(GradRules, GeluAsPyTorchExportsItSqrtAndPow) {
  // gelu(h) = h * 0.5 * (1 + erf(h / sqrt 2)); then sqrt(gelu^2 + 1) and pow(., [2, 3, 1.5, 0.5])
  // with a broadcast constant exponent, and pow(., 2) with a scalar one.
  const Graph g = Model(13, {3, 4}, 4, 3, [](GraphBuilder& b) {
    b.Init("sqrt2", Tensor::Scalar<float>(1.41421356f))
        .Init("one", Tensor::Scalar<float>(1.f))
        .Init("half", Tensor::Scalar<float>(0.5f))
        .Init("two", Tensor::Scalar<float>(2.f))
        .Init("expo", Tensor::FromVector<float>({4}, {2.f, 3.f, 1.5f, 0.5f}))
        .Op("Div", {"h", "sqrt2"}, {"d"})
        .Op("Erf", {"d"}, {"e"})
        .Op("Add", {"e", "one"}, {"e1"})
        .Op("Mul", {"h", "e1"}, {"m"})
        .Op("Mul", {"m", "half"}, {"gelu"})
        .Op("Pow", {"gelu", "two"}, {"sq"})
        .Op("Add", {"sq", "one"}, {"sq1"})
        .Op("Sqrt", {"sq1"}, {"r"})
        .Op("Pow", {"r", "expo"}, {"y"});
  });
  ExpectMatchesFiniteDifferences(g, RandomFloat({3, 4}, 4, -2.f, 2.f), {0, 2, 1});
}

TEST(GradRules, ReduceSumAndReduceMeanEveryForm) {
  struct Case {
    std::string op;
    int64_t opset;
    std::vector<int64_t> axes;  // empty: none given
    int64_t keepdims, noop;
    int64_t features;
  };
  // x [2, 3, 4]; the reduced value is added back onto h (broadcast) so the head sees [2, 12].
  for (const Case& c : {Case{"ReduceSum", 13, {-1}, 1, 0, 12}, Case{"ReduceSum", 13, {1, -1}, 0, 0, 12},
                        Case{"ReduceSum", 11, {2}, 1, 0, 12}, Case{"ReduceMean", 13, {-2}, 1, 0, 12},
                        Case{"ReduceMean", 17, {1}, 0, 0, 12}, Case{"ReduceMean", 18, {0, 2}, 1, 0, 12},
                        Case{"ReduceSum", 13, {}, 1, 1, 12}, Case{"ReduceSum", 13, {}, 1, 0, 12},
                        Case{"ReduceMean", 18, {}, 0, 0, 12}}) {
    SCOPED_TRACE(c.op + " opset " + std::to_string(c.opset) + " keepdims " + std::to_string(c.keepdims) + " noop " +
                 std::to_string(c.noop) + " axes " + std::to_string(c.axes.size()));
    const Graph g = Model(c.opset, {2, 3, 4}, c.features, 5, [&](GraphBuilder& b) {
      AttributeMap a = Attrs({{"keepdims", Attribute::Int(c.keepdims)}});
      if (c.noop) a.Set("noop_with_empty_axes", Attribute::Int(1));
      const bool axes_input = c.op == "ReduceSum" ? c.opset >= 13 : c.opset >= 18;
      std::vector<std::string> in{"sq"};
      if (!c.axes.empty() && axes_input) {
        b.Init("axes", I64(c.axes));
        in.push_back("axes");
      } else if (!c.axes.empty()) {
        a.Set("axes", Attribute::Ints(c.axes));
      }
      b.Op("Mul", {"h", "h"}, {"sq"}).Op(c.op, in, {"red"}, a);
      if (c.keepdims || c.axes.empty()) {
        b.Op("Add", {"h", "red"}, {"y"});
      } else {
        // keepdims 0: put the reduced axes back as 1s so it broadcasts onto h.
        std::vector<int64_t> back;
        for (int64_t ax : c.axes) back.push_back(ax < 0 ? ax + 3 : ax);
        std::sort(back.begin(), back.end());
        b.Init("uaxes", I64(back)).Op("Unsqueeze", {"red", "uaxes"}, {"redk"}).Op("Add", {"h", "redk"}, {"y"});
      }
    });
    ExpectMatchesFiniteDifferences(g, RandomFloat({2, 3, 4}, 5), {1, 4});
  }
}

TEST(GradRules, ReduceMeanOverASymbolicBatchDim) {
  // The divisor comes from the sizes at run time: h - mean over the batch.
  for (int64_t keepdims : {0, 1}) {
    SCOPED_TRACE(keepdims);
    GraphBuilder gb(13);
    gb.Input("x", DType::kFloat32, {Dim::Symbol("batch"), 4})
        .Init("p0", RandomFloat({4}, 1))
        .Op("Add", {"x", "p0"}, {"h"})
        .Op("Mul", {"h", "h"}, {"sq"})
        .Op("ReduceMean", {"sq"}, {"m"}, Attrs({{"axes", Attribute::Ints({0})}, {"keepdims", Attribute::Int(keepdims)}}))
        .Op("Sub", {"h", "m"}, {"y"})
        .Init("head", RandomFloat({4, 3}, 2))
        .Op("MatMul", {"y", "head"}, {"logits"})
        .Output("logits");
    ExpectMatchesFiniteDifferences(gb.Build(), RandomFloat({3, 4}, 3), {0, 2, 1});
  }
}

TEST(GradRules, ConcatWithALearnedTokenAndSplitEveryForm) {
  // Concat(h, token) on axis -2, then Split into parts (one part unused), then the used parts
  // concatenated again.
  struct Case {
    int64_t opset;
    std::string form;  // "attr", "input", "num_outputs", "equal"
  };
  for (const Case& c : {Case{11, "attr"}, Case{13, "input"}, Case{18, "num_outputs"}, Case{13, "equal"}}) {
    SCOPED_TRACE(c.form);
    const Graph g = Model(c.opset, {2, 3, 4}, 16, 5, [&](GraphBuilder& b) {
      b.Init("token", RandomFloat({2, 2, 4}, 11))
          .Op("Concat", {"h", "token"}, {"cat"}, Attrs({{"axis", Attribute::Int(-2)}}));  // [2, 5, 4]
      AttributeMap a = Attrs({{"axis", Attribute::Int(1)}});
      std::vector<std::string> in{"cat"};
      std::vector<std::string> outs{"s0", "s1", "s2"};
      if (c.form == "attr") {
        a.Set("split", Attribute::Ints({1, 2, 2}));
      } else if (c.form == "input") {
        b.Init("split", I64({1, 2, 2}));
        in.push_back("split");
      } else if (c.form == "num_outputs") {
        a.Set("num_outputs", Attribute::Int(3));  // sizes 2, 2, 1
      } else {
        outs = {"s0", "s1", "s2", "s3", "s4"};
      }
      b.Op("Split", in, outs, a);
      // s0 unused; s1 and s2 (and s4) used.
      std::vector<std::string> used{"s1", "s2"};
      if (c.form == "equal") used = {"s2", "s4", "s1"};
      b.Op("Concat", used, {"y0"}, Attrs({{"axis", Attribute::Int(1)}}));
      // Pad the feature count to a fixed 16 whatever the parts' sizes: sum over axis 1 (keepdims)
      // times 4 columns gives [2, 1, 4]; concatenate with the first 3 rows of h.
      if (c.opset >= 13)
        b.Init("ax1", I64({1})).Op("ReduceSum", {"y0", "ax1"}, {"y1"}, Attrs({{"keepdims", Attribute::Int(1)}}));
      else
        b.Op("ReduceSum", {"y0"}, {"y1"}, Attrs({{"keepdims", Attribute::Int(1)}, {"axes", Attribute::Ints({1})}}));
      b
          .Op("Concat", {"h", "y1"}, {"y"}, Attrs({{"axis", Attribute::Int(1)}}));
    });
    ExpectMatchesFiniteDifferences(g, RandomFloat({2, 3, 4}, 6), {2, 0});
  }
}

TEST(GradRules, SliceNegativeAndClampedIndices) {
  // x [2, 5, 6]: h[:, -4:MAX, 1:-1] (axes given negative), then [:, -100:2, 2:100] (clamped); the
  // opset 9 attribute form too.
  for (int64_t opset : {9, 13}) {
    SCOPED_TRACE(opset);
    const Graph g = Model(opset, {2, 5, 6}, 4, 3, [&](GraphBuilder& b) {
      const int64_t big = std::numeric_limits<int64_t>::max();
      if (opset < 10) {
        b.Op("Slice", {"h"}, {"a"},
             Attrs({{"starts", Attribute::Ints({-4, 1})}, {"ends", Attribute::Ints({big, -1})},
                    {"axes", Attribute::Ints({1, 2})}}))
            .Op("Slice", {"a"}, {"y"}, Attrs({{"starts", Attribute::Ints({0, -100})}, {"ends", Attribute::Ints({1, 2})}}));
      } else {
        b.Init("st", I64({-4, 1})).Init("en", I64({big, -1})).Init("ax", I64({-2, -1})).Init("sp", I64({1, 1}));
        b.Op("Slice", {"h", "st", "en", "ax", "sp"}, {"a"});  // [2, 4, 4]
        b.Init("st2", I64({0, -100})).Init("en2", I64({1, 2}));
        b.Op("Slice", {"a", "st2", "en2"}, {"y"});  // [1, 2, 4]... axes 0 and 1
      }
    });
    // The second slice keeps sample 0 only: logits need the batch, so slice axes 1, 2 instead.
    (void)g;
  }
  for (int64_t opset : {9, 13}) {
    SCOPED_TRACE(opset);
    const Graph g = Model(opset, {2, 5, 6}, 4, 3, [&](GraphBuilder& b) {
      const int64_t big = std::numeric_limits<int64_t>::max();
      if (opset < 10) {
        b.Op("Slice", {"h"}, {"a"},
             Attrs({{"starts", Attribute::Ints({-4, 1})}, {"ends", Attribute::Ints({big, -1})},
                    {"axes", Attribute::Ints({1, 2})}}))
            .Op("Slice", {"a"}, {"y"},
                Attrs({{"starts", Attribute::Ints({-100, 2})}, {"ends", Attribute::Ints({2, 100})},
                       {"axes", Attribute::Ints({1, 2})}}));
      } else {
        b.Init("st", I64({-4, 1})).Init("en", I64({big, -1})).Init("ax", I64({-2, -1})).Init("sp", I64({1, 1}));
        b.Op("Slice", {"h", "st", "en", "ax", "sp"}, {"a"});  // [2, 4, 4]
        b.Init("st2", I64({0, -100, 2})).Init("en2", I64({big, 2, 100}));
        b.Op("Slice", {"a", "st2", "en2"}, {"y"});  // [2, 2, 2]
      }
    });
    ExpectMatchesFiniteDifferences(g, RandomFloat({2, 5, 6}, 7), {1, 2});
  }
}

TEST(GradRules, GatherEmbeddingTableAndActivations) {
  // An embedding table (a param) gathered with repeated and negative indices, plus a Gather of
  // the activations along axis -1.
  GraphBuilder gb(13);
  gb.Input("x", DType::kFloat32, {2, 3, 4})
      .Init("p0", RandomFloat({2, 3, 4}, 1, -0.5f, 0.5f))
      .Init("table", RandomFloat({6, 4}, 2))
      .Init("tok", Tensor::FromVector<int64_t>({2, 3}, {0, 2, 2, 5, -1, 3}))
      .Init("cols", Tensor::FromVector<int64_t>({3}, {3, -4, 3}))
      .Op("Add", {"x", "p0"}, {"h"})
      .Op("Gather", {"table", "tok"}, {"emb"}, Attrs({{"axis", Attribute::Int(0)}}))  // [2, 3, 4]
      .Op("Mul", {"h", "emb"}, {"he"})
      .Op("Gather", {"he", "cols"}, {"y"}, Attrs({{"axis", Attribute::Int(-1)}}))  // [2, 3, 3]
      .Op("Flatten", {"y"}, {"f"})
      .Init("head", RandomFloat({9, 4}, 3))
      .Op("MatMul", {"f", "head"}, {"logits"})
      .Output("logits");
  ExpectMatchesFiniteDifferences(gb.Build(), RandomFloat({2, 3, 4}, 4), {3, 1});
}

TEST(GradRules, AveragePoolPadsStridesCeilAndCountIncludePad) {
  using A = Attribute;
  for (int64_t include : {0, 1})
    for (int64_t ceil : {0, 1}) {
      SCOPED_TRACE("count_include_pad " + std::to_string(include) + " ceil_mode " + std::to_string(ceil));
      const int64_t out = ceil ? 3 : 2;  // (5 + 1 + 0 - 3) / 2 + 1, rounded
      const Graph g = Model(13, {2, 2, 5, 5}, 2 * out * out, 3, [&](GraphBuilder& b) {
        b.Op("AveragePool", {"h"}, {"y"},
             Attrs({{"kernel_shape", A::Ints({3, 3})}, {"strides", A::Ints({2, 2})}, {"pads", A::Ints({1, 1, 0, 0})},
                    {"ceil_mode", A::Int(ceil)}, {"count_include_pad", A::Int(include)}}));
      });
      ExpectMatchesFiniteDifferences(g, RandomFloat({2, 2, 5, 5}, 8), {0, 2});
    }
}

TEST(GradRules, BatchedMatMulBothOperandsAndBroadcastWeights) {
  // Attention-like: h [2, 3, 4]; scores = h @ h^T [2, 3, 3]; out = scores @ h; then a broadcast
  // batched weight [1, 4, 2].
  const Graph g = Model(13, {2, 3, 4}, 6, 3, [](GraphBuilder& b) {
    b.Op("Transpose", {"h"}, {"ht"}, Attrs({{"perm", Attribute::Ints({0, 2, 1})}}))
        .Op("MatMul", {"h", "ht"}, {"s"})
        .Op("MatMul", {"s", "h"}, {"o"})
        .Init("w3", RandomFloat({1, 4, 2}, 21))
        .Op("MatMul", {"o", "w3"}, {"y"});
  });
  ExpectMatchesFiniteDifferences(g, RandomFloat({2, 3, 4}, 9), {2, 1});
}

TEST(GradRules, ElementwiseExtrasWhereExpandExpLogNegReciprocalCast) {
  const Graph g = Model(13, {2, 4}, 4, 3, [](GraphBuilder& b) {
    b.Init("zero", Tensor::Scalar<float>(0.f))
        .Init("two", Tensor::Scalar<float>(2.f))
        .Init("alt", RandomFloat({4}, 30))
        .Init("shape", I64({2, 4}))
        .Op("Greater", {"h", "zero"}, {"pos"})
        .Op("Expand", {"alt", "shape"}, {"altx"})
        .Op("Where", {"pos", "h", "altx"}, {"w"})
        .Op("Exp", {"w"}, {"ex"})
        .Op("Add", {"ex", "two"}, {"ex2"})
        .Op("Log", {"ex2"}, {"lg"})
        .Op("Reciprocal", {"ex2"}, {"rc"})
        .Op("Neg", {"rc"}, {"nr"})
        .Op("Add", {"lg", "nr"}, {"s"})
        .Op("Cast", {"s"}, {"y"}, Attrs({{"to", Attribute::Int(1)}}));  // float to float
  });
  ExpectMatchesFiniteDifferences(g, RandomFloat({2, 4}, 10, -1.f, 1.f), {0, 2});
}

// Mish (opset 18): its rule is built from Softplus, Tanh and Sigmoid; inputs across its minimum
// and both tails.
TEST(GradRules, MishMatchesFiniteDifferences) {
  const Graph g = Model(18, {2, 6}, 6, 3, [](GraphBuilder& b) { b.Op("Mish", {"h"}, {"y"}); });
  ExpectMatchesFiniteDifferences(g, RandomFloat({2, 6}, 12, -4.f, 4.f), {1, 2});
}

TEST(GradRules, IntegerShapePlumbingNeedsNoGradient) {
  // What exporters put on shape paths: Shape, Gather of a shape, Cast of integers, Range,
  // ConstantOfShape, Equal, Where's condition, integer Unsqueeze/Concat feeding a Reshape.
  GraphBuilder gb(13);
  gb.Input("x", DType::kFloat32, {2, 3, 4})
      .Init("p0", RandomFloat({2, 3, 4}, 1, -0.5f, 0.5f))
      .Init("i1", Tensor::Scalar<int64_t>(1))
      .Init("i2", Tensor::Scalar<int64_t>(2))
      .Init("zero_i", Tensor::Scalar<int64_t>(0))
      .Init("one_i", Tensor::Scalar<int64_t>(1))
      .Init("ax0", I64({0}))
      .Init("ax2", I64({4}))
      .Op("Add", {"x", "p0"}, {"h"})
      .Op("Shape", {"h"}, {"sh"})
      .Op("Gather", {"sh", "i1"}, {"n1"}, Attrs({{"axis", Attribute::Int(0)}}))
      .Op("Gather", {"sh", "i2"}, {"n2"}, Attrs({{"axis", Attribute::Int(0)}}))
      .Op("Cast", {"n2"}, {"n2f"}, Attrs({{"to", Attribute::Int(1)}}))
      .Op("Div", {"h", "n2f"}, {"hd"})
      .Op("Range", {"zero_i", "n2", "one_i"}, {"r"})
      .Op("Cast", {"r"}, {"rf"}, Attrs({{"to", Attribute::Int(1)}}))  // [0, 1, 2, 3]
      .Op("Mul", {"hd", "rf"}, {"hr"})
      .Op("Unsqueeze", {"n1", "ax0"}, {"n1u"})
      .Op("Concat", {"n1u", "ax2"}, {"shp"}, Attrs({{"axis", Attribute::Int(0)}}))
      .Op("ConstantOfShape", {"shp"}, {"zeros"}, Attrs({{"value", Attribute::TensorValue(Tensor::FromVector<int64_t>({1}, {0}))}}))
      .Op("Cast", {"zeros"}, {"zf"}, Attrs({{"to", Attribute::Int(1)}}))  // [3, 4] float zeros
      .Op("Add", {"hr", "zf"}, {"hz"})
      .Op("Equal", {"rf", "rf"}, {"all"})
      .Op("Where", {"all", "hz", "hd"}, {"y"})
      .Op("Flatten", {"y"}, {"f"})
      .Init("head", RandomFloat({12, 3}, 3))
      .Op("MatMul", {"f", "head"}, {"logits"})
      .Output("logits");
  ExpectMatchesFiniteDifferences(gb.Build(), RandomFloat({2, 3, 4}, 4), {0, 2});
}

// BatchNormalization with bn_training: the batch's statistics in the forward and the gradient,
// running statistics updated as ONNX's training mode does.
Graph BnModel(float momentum) {
  GraphBuilder gb(15);
  gb.Input("x", DType::kFloat32, {4, 3, 2, 2})
      .Init("p0", RandomFloat({4, 3, 2, 2}, 1, -0.5f, 0.5f))
      .Init("scale", RandomFloat({3}, 2, 0.5f, 1.5f))
      .Init("bias", RandomFloat({3}, 3))
      .Init("rmean", RandomFloat({3}, 4))
      .Init("rvar", RandomFloat({3}, 5, 0.5f, 2.f))
      .Op("Add", {"x", "p0"}, {"h"})
      .Op("BatchNormalization", {"h", "scale", "bias", "rmean", "rvar"}, {"bn"},
          Attrs({{"epsilon", Attribute::Float(1e-3f)}, {"momentum", Attribute::Float(momentum)}}))
      .Op("Tanh", {"bn"}, {"t"})
      .Op("Flatten", {"t"}, {"f"})
      .Init("head", RandomFloat({12, 5}, 6))
      .Op("MatMul", {"f", "head"}, {"logits"})
      .Output("logits");
  return gb.Build();
}

TEST(GradRules, BatchNormalizationTrainingModeMatchesFiniteDifferences) {
  TrainingGraphOptions o;
  o.bn_training = true;
  ExpectMatchesFiniteDifferences(BnModel(0.8f), RandomFloat({4, 3, 2, 2}, 7, -2.f, 2.f), {0, 4, 2, 1}, o);
}

TEST(GradRules, BatchNormalizationTrainingModeUpdatesRunningStatistics) {
  TrainingGraphOptions o;
  o.bn_training = true;
  const float momentum = 0.8f;
  const Graph model = BnModel(momentum);
  auto h = Harness::Make(model, o);
  ASSERT_TRUE(h);
  ASSERT_EQ(h->tg().state.size(), 2u);
  EXPECT_EQ(h->tg().state[0].initializer, "rmean");
  EXPECT_EQ(h->tg().state[1].initializer, "rvar");
  for (const std::string& p : h->tg().params) EXPECT_TRUE(p != "rmean" && p != "rvar") << p;
  const Tensor x = RandomFloat({4, 3, 2, 2}, 7, -2.f, 2.f);
  std::vector<Tensor> grads, state;
  h->Run(x, {0, 4, 2, 1}, &grads, &state);
  ASSERT_EQ(state.size(), 2u);
  const Tensor& p0 = h->param("p0");
  const Tensor& rm = h->tg().state[0].initial;
  const Tensor& rv = h->tg().state[1].initial;
  for (int64_t c = 0; c < 3; ++c) {
    double sum = 0, sq = 0;
    for (int64_t n = 0; n < 4; ++n)
      for (int64_t k = 0; k < 4; ++k) {
        const int64_t i = (n * 3 + c) * 4 + k;
        const double v = static_cast<double>(x.data<float>()[i]) + p0.data<float>()[i];
        sum += v;
        sq += v * v;
      }
    const double mean = sum / 16, var = sq / 16 - mean * mean;  // biased, as ONNX's reference
    EXPECT_NEAR(state[0].data<float>()[c], rm.data<float>()[c] * momentum + mean * (1 - momentum), 1e-5) << c;
    EXPECT_NEAR(state[1].data<float>()[c], rv.data<float>()[c] * momentum + var * (1 - momentum), 1e-5) << c;
  }
  // Without the flag: inference semantics, no state, the running statistics stay constants.
  auto frozen = BuildTrainingGraph(model, 1.f);
  ASSERT_TRUE(frozen.ok()) << frozen.status().message();
  EXPECT_TRUE(frozen->state.empty());
  EXPECT_EQ(frozen->graph.outputs().size(), 1 + frozen->params.size());
}

TEST(GradRules, BatchNormalizationInferenceFormStillMatches) {
  ExpectMatchesFiniteDifferences(BnModel(0.9f), RandomFloat({4, 3, 2, 2}, 7, -2.f, 2.f), {0, 4, 2, 1});
}

// Unimplemented, naming the node and what is missing.
void ExpectRefused(const Graph& g, const std::string& what, const TrainingGraphOptions& o = TrainingGraphOptions()) {
  RegisterAllOps();
  auto tg = BuildTrainingGraph(g, 1.f, o);
  ASSERT_FALSE(tg.ok()) << what;
  EXPECT_EQ(tg.status().code(), StatusCode::kUnimplemented) << tg.status().message();
  EXPECT_NE(tg.status().message().find(what), std::string::npos) << tg.status().message();
}

TEST(GradRules, RefusedCasesSayWhy) {
  // Slice with step 2.
  ExpectRefused(Model(13, {2, 6}, 3, 2,
                      [](GraphBuilder& b) {
                        b.Init("st", I64({0})).Init("en", I64({6})).Init("ax", I64({1})).Init("sp", I64({2}));
                        b.Op("Slice", {"h", "st", "en", "ax", "sp"}, {"y"});
                      }),
                "step other than 1");
  // A trained exponent (the exponent depends on a param).
  ExpectRefused(Model(13, {2, 3}, 3, 2,
                      [](GraphBuilder& b) {
                        b.Init("e0", RandomFloat({3}, 5, 1.f, 2.f)).Init("one", Tensor::FromVector<float>({3}, {1, 1, 1}));
                        b.Op("Mul", {"e0", "one"}, {"ex"}).Op("Pow", {"h", "ex"}, {"y"});
                      }),
                "exponent");
  // Slice with non-constant starts.
  ExpectRefused(Model(13, {2, 6}, 4, 2,
                      [](GraphBuilder& b) {
                        b.Init("ax", I64({1})).Init("z", I64({0})).Init("en", I64({6}))
                            .Op("Shape", {"h"}, {"sh"})
                            .Op("Slice", {"sh", "z", "ax"}, {"st"})  // [2]
                            .Op("Slice", {"h", "st", "en", "ax"}, {"y"});
                      }),
                "constant starts");
  // A model already in training mode (BatchNormalization with the extra outputs).
  GraphBuilder gb(15);
  gb.Input("x", DType::kFloat32, {4, 3})
      .Init("scale", RandomFloat({3}, 2)).Init("bias", RandomFloat({3}, 3))
      .Init("rmean", RandomFloat({3}, 4)).Init("rvar", RandomFloat({3}, 5, 0.5f, 2.f))
      .Op("BatchNormalization", {"x", "scale", "bias", "rmean", "rvar"}, {"logits", "om", "ov"},
          Attrs({{"training_mode", Attribute::Int(1)}}))
      .Output("logits");
  TrainingGraphOptions o;
  o.bn_training = true;
  ExpectRefused(gb.Build(), "training mode", o);
  // An op without a rule names itself.
  ExpectRefused(Model(13, {2, 3}, 3, 2, [](GraphBuilder& b) { b.Op("Sin", {"h"}, {"y"}); }), "Sin");
}

}  // namespace
}  // namespace whittle::training
