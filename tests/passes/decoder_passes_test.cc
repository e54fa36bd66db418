// The compression passes on the exported Llama-style decoder (tests/corpus/decoder_tiny_op17.onnx,
// random weights): whitened SVD (SVD-LLM) against plain SVD, and MLP pruning of the SwiGLU blocks
// (gate/up columns and down rows as one group, LLM-Pruner style). Calibration and held-out data are
// token ids alone (BatchFeeds makes the mask, positions and empty past), drawn from a seeded rng:
// the weights are random, so random ids are as representative as any text would be.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <string>
#include <vector>

#include "lib/data/dataset.h"
#include "lib/onnx/model_io.h"
#include "passes/cost.h"
#include "passes/pass.h"
#include "runtime/evaluate.h"
#include "tests/passes/pass_test_util.h"
#include "tests/util/test_util.h"
#include "whittle/decoder.h"
#include "whittle/session.h"

namespace whittle {
namespace {

const std::string kDecoder = std::string(WHITTLE_SOURCE_DIR) + "/tests/corpus/decoder_tiny_op17.onnx";

Dataset Ids(int64_t n, int64_t t, uint32_t seed) {
  Dataset d;
  d.inputs = testing::RandomInt64({n, t}, seed, 0, 2047);  // the decoder's 2048-word vocabulary
  d.named = {{"input_ids", d.inputs}};
  d.description = "random ids seed " + std::to_string(seed);
  return d;
}

Tensor Logits(const Graph& g, const Dataset& d) {
  SessionOptions so;
  so.num_threads = 2;
  auto s = Session::FromGraph(g, so);
  EXPECT_TRUE(s.ok()) << s.status().message();
  auto feeds = BatchFeeds(d, (*s)->inputs(), 0, d.size());
  EXPECT_TRUE(feeds.ok()) << feeds.status().message();
  auto y = (*s)->Run(*feeds);
  EXPECT_TRUE(y.ok()) << y.status().message();
  return (*y)[0];
}

struct Closeness {
  double mse = 0, agreement = 0;
};

// Logits MSE and per-position top-1 agreement of `y` with the reference `ref` ([N, T, vocab]).
Closeness Compare(const Tensor& y, const Tensor& ref) {
  EXPECT_EQ(y.dims(), ref.dims());
  const int64_t v = ref.dim(2), rows = ref.numel() / v;
  Closeness c;
  for (int64_t i = 0; i < ref.numel(); ++i) {
    const double e = y.data<float>()[i] - ref.data<float>()[i];
    c.mse += e * e;
  }
  c.mse /= static_cast<double>(ref.numel());
  for (int64_t r = 0; r < rows; ++r) {
    const float* a = y.data<float>() + r * v;
    const float* b = ref.data<float>() + r * v;
    c.agreement += (std::max_element(a, a + v) - a) == (std::max_element(b, b + v) - b);
  }
  c.agreement /= static_cast<double>(rows);
  return c;
}

Graph Load() {
  auto g = LoadModel(kDecoder);
  EXPECT_TRUE(g.ok()) << g.status().message();
  return *g;
}

const Tensor& Weight(const Graph& g, const std::string& node) {
  for (const Node& n : g.nodes())
    if (n.name == node) return *g.value(n.inputs[1]).initializer;
  ADD_FAILURE() << "no node " << node;
  static Tensor none;
  return none;
}

// Greedy decoding of g through whittle::Decoder (prefill of 4 ids, 4 steps with the cache; grown
// in place when in_place) ends with the same logits as the whole 8-token sequence run at once;
// the cache has `kv_heads` heads of 32.
void ExpectCachedDecodingMatchesWholeSequence(const Graph& g, int64_t kv_heads, bool in_place);

// The dims of g's values on the first sample of d, as compress-model observes them before a pass
// (the head analysis needs those inference leaves unknown, such as repeat_kv's Expand).
void ObserveOneSample(Graph& g, const Dataset& d) {
  SessionOptions so;
  so.num_threads = 2;
  auto s = Session::FromGraph(g, so);
  ASSERT_TRUE(s.ok()) << s.status().message();
  auto feeds = BatchFeeds(d, (*s)->inputs(), 0, 1);
  ASSERT_TRUE(feeds.ok()) << feeds.status().message();
  ASSERT_TRUE(ObserveShapes(g, *feeds).ok());
}

// Held out from calibration: other ids, another length.
class DecoderPasses : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    calib_ = new Dataset(Ids(16, 24, 5));
    held_out_ = new Dataset(Ids(8, 16, 9));
    reference_ = new Tensor(Logits(Load(), *held_out_));
  }
  static void TearDownTestSuite() {
    delete calib_;
    delete held_out_;
    delete reference_;
  }
  static Dataset* calib_;
  static Dataset* held_out_;
  static Tensor* reference_;
};
Dataset* DecoderPasses::calib_ = nullptr;
Dataset* DecoderPasses::held_out_ = nullptr;
Tensor* DecoderPasses::reference_ = nullptr;

// SVD-LLM's point: truncating the whitened weight (the layer's output error on the data) keeps the
// model far closer than truncating W itself at the same rank. Measured at this commit: logits MSE
// 0.019 whitened vs 0.067 plain, top-1 agreement 32 % vs 6 % (rank 48, lm_head kept).
TEST_F(DecoderPasses, WhitenedSvdStaysCloserThanPlainSvd) {
  PassContext ctx;
  ctx.calibration = calib_;
  ctx.num_threads = 2;
  Closeness c[2];
  for (int whiten = 0; whiten < 2; ++whiten) {
    Graph g = Load();
    auto r = testing::RunPass(g, "svd", "rank=48,exclude=/model/lm_head/MatMul,whiten=" + std::to_string(whiten), ctx);
    ASSERT_TRUE(r.ok()) << r.status().message();
    // The layer is factorized: its node now holds a rank-48 factor, not the 512 x 192 weight.
    EXPECT_LT(Weight(g, "/model/model/layers.0/mlp/down_proj/MatMul").numel(), 512 * 48 + 1);
    c[whiten] = Compare(Logits(g, *held_out_), *reference_);
  }
  EXPECT_LT(c[1].mse, 0.6 * c[0].mse) << "whitened " << c[1].mse << " plain " << c[0].mse;
  std::printf("held-out logits MSE / top-1 agreement: whitened %.4f / %.3f, plain %.4f / %.3f\n", c[1].mse,
              c[1].agreement, c[0].mse, c[0].agreement);
  EXPECT_GT(c[1].agreement, c[0].agreement);
}

// The pass holds the input statistics of one group of layers at a time when they exceed its budget
// (a 1.1B decoder's are ~8 GB): gathered group by group, each layer factorized and mapped back
// before the next group's are gathered, the output is the one of a single pass, bit for bit. A
// 1-byte budget puts each input value (q/k/v together, o, gate/up together, down) in a group of
// its own.
TEST_F(DecoderPasses, WhitenedSvdInStatisticsGroupsEqualsOneGroup) {
  std::vector<Graph> out;
  int64_t factorized = 0;
  for (int64_t budget : {int64_t{0}, int64_t{1}}) {
    PassContext ctx;
    ctx.calibration = calib_;
    ctx.num_threads = 2;
    ctx.statistics_budget_bytes = budget;
    std::vector<std::string> stages;
    ctx.progress = [&](const std::string& stage, int64_t, int64_t) {
      if (stages.empty() || stages.back() != stage) stages.push_back(stage);
    };
    Graph g = Load();
    auto r = testing::RunPass(g, "svd", "rank=48,exclude=/model/lm_head/MatMul", ctx);
    ASSERT_TRUE(r.ok()) << r.status().message();
    const bool grouped = std::any_of(stages.begin(), stages.end(),
                                     [](const std::string& s) { return s.find("layers group 2 of") != std::string::npos; });
    EXPECT_EQ(grouped, budget == 1);
    if (budget == 0)
      for (const LayerReport& l : r->layers) factorized += l.setting > 0 && l.detail.find("whitened") != std::string::npos;
    out.push_back(std::move(g));
  }
  ASSERT_EQ(out[0].nodes().size(), out[1].nodes().size());
  int factors = 0;
  for (const Value& v : out[0].values()) {
    if (!v.initializer || v.name.find("/svd_") == std::string::npos) continue;
    const int other = out[1].FindValue(v.name);
    ASSERT_GE(other, 0) << v.name;
    const Tensor& a = *v.initializer;
    const Tensor& b = *out[1].value(other).initializer;
    ASSERT_EQ(a.dims(), b.dims()) << v.name;
    EXPECT_TRUE(std::equal(a.data<float>(), a.data<float>() + a.numel(), b.data<float>())) << v.name;
    ++factors;
  }
  EXPECT_EQ(factorized, 20) << "q/o/gate/up/down of the 4 layers (k/v: rank 48 is their break-even)";
  EXPECT_EQ(factors, 2 * factorized);
}

// ratio=0.5 removes 256 of each SwiGLU's 512 neurons: the ones with the smallest l1 of their gate
// and up columns, computed here independently; the pruned model runs, and Decoder generation on it
// matches a whole-sequence run (KV shapes unchanged).
TEST_F(DecoderPasses, MlpPruningRemovesTheExpectedNeuronsAndStillDecodes) {
  const Graph original = Load();
  Graph g = original;
  auto r = testing::RunPass(g, "prune", "ratio=0.5,criterion=l1");
  ASSERT_TRUE(r.ok()) << r.status().message();
  for (int layer = 0; layer < 4; ++layer) {
    const std::string mlp = "/model/model/layers." + std::to_string(layer) + "/mlp/";
    const Tensor& gate0 = Weight(original, mlp + "gate_proj/MatMul");
    const Tensor& up0 = Weight(original, mlp + "up_proj/MatMul");
    const Tensor& down0 = Weight(original, mlp + "down_proj/MatMul");
    ASSERT_EQ(gate0.dims(), (Dims{192, 512}));
    std::vector<double> score(512, 0.0);
    for (int64_t i = 0; i < 192; ++i)
      for (int64_t j = 0; j < 512; ++j)
        score[j] += std::fabs(gate0.data<float>()[i * 512 + j]) + std::fabs(up0.data<float>()[i * 512 + j]);
    std::vector<int64_t> idx(512);
    std::iota(idx.begin(), idx.end(), 0);
    std::stable_sort(idx.begin(), idx.end(), [&](int64_t a, int64_t b) { return score[a] > score[b]; });
    std::vector<int64_t> kept(idx.begin(), idx.begin() + 256);
    std::sort(kept.begin(), kept.end());
    const Tensor& gate = Weight(g, mlp + "gate_proj/MatMul");
    const Tensor& up = Weight(g, mlp + "up_proj/MatMul");
    const Tensor& down = Weight(g, mlp + "down_proj/MatMul");
    ASSERT_EQ(gate.dims(), (Dims{192, 256})) << mlp;
    ASSERT_EQ(up.dims(), (Dims{192, 256})) << mlp;
    ASSERT_EQ(down.dims(), (Dims{256, 192})) << mlp;
    for (int64_t k = 0; k < 256; ++k) {
      const int64_t j = kept[k];
      for (int64_t i = 0; i < 192; i += 37) {
        ASSERT_EQ(gate.data<float>()[i * 256 + k], gate0.data<float>()[i * 512 + j]) << mlp << " neuron " << j;
        ASSERT_EQ(up.data<float>()[i * 256 + k], up0.data<float>()[i * 512 + j]) << mlp << " neuron " << j;
        ASSERT_EQ(down.data<float>()[k * 192 + i], down0.data<float>()[j * 192 + i]) << mlp << " neuron " << j;
      }
    }
  }
  // Attention projections and the LM head are untouched.
  EXPECT_EQ(Weight(g, "/model/model/layers.0/self_attn/k_proj/MatMul").dims(), (Dims{192, 64}));
  EXPECT_EQ(Weight(g, "/model/lm_head/MatMul").dims(), (Dims{192, 2048}));

  // Generation: prefill + steps with the cache give the whole sequence's last logits.
  ExpectCachedDecodingMatchesWholeSequence(g, 2, false);
}

// Grouped-query attention as Hugging Face writes it (6 query heads sharing 2 key/value heads through
// repeat_kv, rotary embeddings, a KV cache whose Shape the export reads) loses whole key/value
// groups: a group's 3 query heads' q_proj columns, its k_proj/v_proj columns, the o_proj rows of
// its query heads, and the cache inputs/outputs' declared head dim. The pruned model then decodes
// with its cache grown in place, equal to recomputing the whole sequence. (Its logits equal the
// original's with the removed o_proj rows zeroed, in ONNX Runtime: ctest decoder_generate_check.)
TEST_F(DecoderPasses, HeadPruningRemovesKeyValueGroupsAndTheCacheFollows) {
  const Graph original = Load();
  Graph g = original;
  ObserveOneSample(g, *calib_);
  if (HasFatalFailure()) return;
  auto r = testing::RunPass(g, "prune", "ratio=0,heads=0.5,criterion=l1");
  ASSERT_TRUE(r.ok()) << r.status().message();
  for (int layer = 0; layer < 4; ++layer) {
    const std::string at = "/model/model/layers." + std::to_string(layer) + "/self_attn/";
    const Tensor& k0 = Weight(original, at + "k_proj/MatMul");
    const Tensor& q0 = Weight(original, at + "q_proj/MatMul");
    const Tensor& o0 = Weight(original, at + "o_proj/MatMul");
    const Tensor& k = Weight(g, at + "k_proj/MatMul");
    const Tensor& q = Weight(g, at + "q_proj/MatMul");
    const Tensor& o = Weight(g, at + "o_proj/MatMul");
    ASSERT_EQ(k.dims(), (Dims{192, 32})) << at;
    ASSERT_EQ(Weight(g, at + "v_proj/MatMul").dims(), (Dims{192, 32})) << at;
    ASSERT_EQ(q.dims(), (Dims{192, 96})) << at;
    ASSERT_EQ(o.dims(), (Dims{96, 192})) << at;
    // Which group stayed: k's columns are one of the two original heads'; q's and o's are that
    // group's three query heads (columns/rows 96 g .. 96 g + 95), in order.
    int kept = -1;
    for (int grp = 0; grp < 2 && kept < 0; ++grp) {
      bool same = true;
      for (int64_t i = 0; i < 192 && same; ++i)
        for (int64_t j = 0; j < 32 && same; ++j) same = k.data<float>()[i * 32 + j] == k0.data<float>()[i * 64 + grp * 32 + j];
      if (same) kept = grp;
    }
    ASSERT_GE(kept, 0) << at << " k_proj's columns are neither key/value head";
    for (int64_t i = 0; i < 192; i += 17)
      for (int64_t j = 0; j < 96; j += 5) {
        ASSERT_EQ(q.data<float>()[i * 96 + j], q0.data<float>()[i * 192 + kept * 96 + j]) << at;
        ASSERT_EQ(o.data<float>()[j * 192 + i], o0.data<float>()[(kept * 96 + j) * 192 + i]) << at;
      }
  }
  for (int id : g.inputs())
    if (g.value(id).name.rfind("past_key_values.", 0) == 0) {
      EXPECT_EQ((*g.value(id).shape)[1], Dim(1)) << g.value(id).name;
    }
  for (int id : g.outputs())
    if (g.value(id).name.rfind("present.", 0) == 0) {
      EXPECT_EQ((*g.value(id).shape)[1], Dim(1)) << g.value(id).name;
    }

  ExpectCachedDecodingMatchesWholeSequence(g, 1, true);
}

// A repeat_kv Reshape whose head count is a constant (6) would not follow a pruned cache: that
// layer's heads stay, with the reason; the other layers still lose theirs.
TEST_F(DecoderPasses, HeadPruningRefusesAHardCodedRepeatCount) {
  Graph g = Load();
  for (Node& n : g.nodes())
    if (n.name == "/model/model/layers.1/self_attn/Reshape_4") {
      Tensor t = Tensor::FromVector<int64_t>({4}, {0, 6, -1, 32});
      n.inputs[1] = g.AddInitializer(g.UniqueName("hard_coded_repeat"), std::move(t));
    }
  ObserveOneSample(g, *calib_);
  if (HasFatalFailure()) return;
  auto r = testing::RunPass(g, "prune", "ratio=0,heads=0.5");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(Weight(g, "/model/model/layers.1/self_attn/k_proj/MatMul").dims(), (Dims{192, 64}));
  EXPECT_EQ(Weight(g, "/model/model/layers.1/self_attn/q_proj/MatMul").dims(), (Dims{192, 192}));
  EXPECT_EQ(Weight(g, "/model/model/layers.2/self_attn/k_proj/MatMul").dims(), (Dims{192, 32}));
  std::string why;
  for (const auto& l : r->layers)
    if (l.node == "/model/model/layers.1/self_attn/k_proj/MatMul") why = l.reason;
  EXPECT_NE(why.find("Reshape_4"), std::string::npos) << "[" << why << "]";
  // The caches keep one declared head count for all layers: layer 1's stays 2, the others' 1.
  for (int id : g.inputs()) {
    const std::string& name = g.value(id).name;
    if (name.rfind("past_key_values.", 0) == 0) {
      EXPECT_EQ((*g.value(id).shape)[1], Dim(name.rfind("past_key_values.1.", 0) == 0 ? 2 : 1)) << name;
    }
  }
}

// With calibration data, the activation-aware criterion (wanda: |W_down row| times the neuron's
// RMS on the data) keeps the model closer on held-out ids than weight magnitude at the same
// ratio. Measured at this commit, held-out logits MSE: wanda 0.0064, l1 0.0075 (64 x 32 calibration
// ids); here 16 x 24. Agreement at 50 % pruning is near 56 % for every criterion on this random
// model, within the noise of 128 positions, so the logits error decides.
TEST_F(DecoderPasses, ActivationAwareMlpPruningBeatsMagnitude) {
  PassContext ctx;
  ctx.calibration = calib_;
  ctx.num_threads = 2;
  Closeness c[2];
  const char* criteria[2] = {"l1", "wanda"};
  for (int k = 0; k < 2; ++k) {
    Graph g = Load();
    auto r = testing::RunPass(g, "prune", std::string("ratio=0.5,compensate=0,criterion=") + criteria[k], ctx);
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(Weight(g, "/model/model/layers.2/mlp/down_proj/MatMul").dims(), (Dims{256, 192}));
    c[k] = Compare(Logits(g, *held_out_), *reference_);
  }
  EXPECT_LT(c[1].mse, c[0].mse) << "wanda " << c[1].mse << " l1 " << c[0].mse;
  std::printf("held-out logits MSE / top-1 agreement: wanda %.5f / %.3f, l1 %.5f / %.3f\n", c[1].mse, c[1].agreement,
              c[0].mse, c[0].agreement);
  EXPECT_GT(c[1].agreement, 0.4);
}

void ExpectCachedDecodingMatchesWholeSequence(const Graph& g, int64_t kv_heads, bool in_place) {
  SessionOptions so;
  so.num_threads = 2;
  auto s = Session::FromGraph(g, so);
  ASSERT_TRUE(s.ok()) << s.status().message();
  auto dec = Decoder::Create(**s);
  ASSERT_TRUE(dec.ok()) << dec.status().message();
  if (in_place) {
    EXPECT_TRUE((*dec)->cache_in_place()) << (*dec)->cache_copied_why();
  }
  std::vector<int64_t> ids = {5, 77, 1200, 3};
  auto logits = (*dec)->Prefill(ids);
  ASSERT_TRUE(logits.ok()) << logits.status().message();
  for (int step = 0; step < 4; ++step) {
    const int64_t next = std::max_element(logits->begin(), logits->end()) - logits->begin();
    ids.push_back(next);
    logits = (*dec)->Step(next);
    ASSERT_TRUE(logits.ok()) << logits.status().message();
  }
  EXPECT_EQ((*dec)->past_length(), 8);
  EXPECT_EQ((*dec)->cache(0).dim(1), kv_heads);
  EXPECT_EQ((*dec)->cache(0).dim(3), 32);
  Dataset whole;
  whole.inputs = Tensor::FromVector<int64_t>({1, 8}, ids);
  whole.named = {{"input_ids", whole.inputs}};
  whole.description = "generated";
  const Tensor all = Logits(g, whole);
  float diff = 0, mag = 0;
  for (int64_t v = 0; v < 2048; ++v) {
    diff = std::max(diff, std::fabs(all.data<float>()[7 * 2048 + v] - (*logits)[static_cast<size_t>(v)]));
    mag = std::max(mag, std::fabs(all.data<float>()[7 * 2048 + v]));
  }
  EXPECT_LT(diff, 1e-4f * mag + 1e-5f);
}

}  // namespace
}  // namespace whittle
