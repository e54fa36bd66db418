// Evaluation of sequence models (runtime/evaluate.h) on the exported decoder
// (tests/corpus/decoder_tiny_op17.onnx, logits [batch, seq, 2048]): top-1 is counted per position,
// labels [N, T] are compared per position, and data with only token ids feeds the whole decoder
// (mask, positions and empty past made by BatchFeeds), with clear errors where it cannot.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "lib/data/dataset.h"
#include "runtime/evaluate.h"
#include "tests/util/test_util.h"
#include "whittle/session.h"

namespace whittle {
namespace {

const std::string kDecoder = std::string(WHITTLE_SOURCE_DIR) + "/tests/corpus/decoder_tiny_op17.onnx";

// Token ids of the decoder's 2048-word vocabulary.
Tensor RandomIds(int64_t n, int64_t t, uint32_t seed) { return testing::RandomInt64({n, t}, seed, 0, 2047); }

// Every input given by hand, as a user had to before BatchFeeds made them.
std::map<std::string, Tensor> FullFeeds(const Session& s, const Tensor& ids) {
  const int64_t n = ids.dim(0), t = ids.dim(1);
  std::map<std::string, Tensor> f{{"input_ids", ids}};
  Tensor mask(DType::kInt64, {n, t}), pos(DType::kInt64, {n, t});
  for (int64_t i = 0; i < n * t; ++i) {
    mask.data<int64_t>()[i] = 1;
    pos.data<int64_t>()[i] = i % t;
  }
  f["attention_mask"] = mask;
  f["position_ids"] = pos;
  for (const IoInfo& in : s.inputs())
    if (in.name.rfind("past_key_values.", 0) == 0)
      f[in.name] = Tensor(DType::kFloat32, {n, in.shape[1].value, 0, in.shape[3].value});
  return f;
}

TEST(SequenceEval, TokenIdsAloneFeedTheDecoder) {
  SessionOptions so;
  so.num_threads = 2;
  auto s = Session::Load(kDecoder, so);
  ASSERT_TRUE(s.ok()) << s.status().message();
  const Tensor ids = RandomIds(3, 7, 1);
  Dataset d;
  d.named = {{"input_ids", ids}};
  d.inputs = ids;
  d.description = "npz:ids.npz";
  auto feeds = BatchFeeds(d, (*s)->inputs(), 1, 3);
  ASSERT_TRUE(feeds.ok()) << feeds.status().message();
  ASSERT_EQ(feeds->size(), (*s)->inputs().size());
  EXPECT_EQ(feeds->at("attention_mask").dims(), (Dims{2, 7}));
  EXPECT_EQ(feeds->at("position_ids").data<int64_t>()[7 + 6], 6);
  EXPECT_EQ(feeds->at("past_key_values.0.key").dims(), (Dims{2, 2, 0, 32}));
  // The made inputs give the logits of the hand-built ones.
  auto made = (*s)->Run(*feeds);
  ASSERT_TRUE(made.ok()) << made.status().message();
  std::map<std::string, Tensor> full = FullFeeds(**s, RandomIds(3, 7, 1));
  for (auto& [name, t] : full) t = SliceBatch(t, 1, 3);
  auto by_hand = (*s)->Run(full);
  ASSERT_TRUE(by_hand.ok()) << by_hand.status().message();
  ASSERT_EQ((*made)[0].dims(), (*by_hand)[0].dims());
  for (int64_t i = 0; i < (*made)[0].numel(); ++i)
    ASSERT_EQ((*made)[0].data<float>()[i], (*by_hand)[0].data<float>()[i]) << i;

  // One unnamed array (npy:ids.npy) feeds input_ids, the first input.
  Dataset single;
  single.inputs = ids;
  single.description = "npy:ids.npy";
  auto one = BatchFeeds(single, (*s)->inputs(), 0, 3);
  ASSERT_TRUE(one.ok()) << one.status().message();
  EXPECT_EQ(one->size(), (*s)->inputs().size());

  // Ids of rank 3 give no sequence length: a one-line error naming the inputs it cannot make.
  Dataset wrong;
  wrong.named = {{"input_ids", Tensor(DType::kInt64, {2, 3, 4})}};
  wrong.inputs = wrong.named[0].second;
  wrong.description = "npz:bad.npz";
  auto bad = BatchFeeds(wrong, (*s)->inputs(), 0, 2);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'attention_mask'"), std::string::npos) << bad.status().message();
  EXPECT_NE(bad.status().message().find("no token ids"), std::string::npos) << bad.status().message();
  EXPECT_EQ(bad.status().message().find('\n'), std::string::npos);
  // An input that is not a decoder convention stays an error naming it.
  Dataset other;
  other.named = {{"tokens", ids}, {"segments", ids}};  // (a lone array would feed the first input)
  other.inputs = ids;
  other.description = "npz:tokens.npz";
  auto none = BatchFeeds(other, (*s)->inputs(), 0, 2);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("no array for input 'input_ids'"), std::string::npos)
      << none.status().message();
  // Some past given, some not: refused rather than guessed.
  Dataset partial;
  partial.named = {{"input_ids", ids}, {"past_key_values.0.key", Tensor(DType::kFloat32, {3, 2, 4, 32})}};
  partial.inputs = ids;
  partial.description = "npz:partial.npz";
  auto half = BatchFeeds(partial, (*s)->inputs(), 0, 3);
  ASSERT_FALSE(half.ok());
  EXPECT_NE(half.status().message().find("give all of them or none"), std::string::npos) << half.status().message();
}

TEST(SequenceEval, TopOnePerPositionAgainstLabelsAndItself) {
  SessionOptions so;
  so.num_threads = 2;
  auto s = Session::Load(kDecoder, so);
  ASSERT_TRUE(s.ok()) << s.status().message();
  Dataset d;
  d.inputs = RandomIds(5, 6, 2);
  d.named = {{"input_ids", d.inputs}};
  d.description = "ids";
  auto pred = PredictTop1(**s, d, 2);  // batches of 2, 2, 1
  ASSERT_TRUE(pred.ok()) << pred.status().message();
  ASSERT_EQ(pred->dims(), (Dims{5, 6}));
  // Each position's top-1 is the argmax of that position's logits in a single run.
  auto feeds = BatchFeeds(d, (*s)->inputs(), 0, 5);
  ASSERT_TRUE(feeds.ok());
  auto y = (*s)->Run(*feeds);
  ASSERT_TRUE(y.ok());
  const Tensor& logits = (*y)[0];
  ASSERT_EQ(logits.dims(), (Dims{5, 6, 2048}));
  for (int64_t r = 0; r < 30; ++r) {
    const float* row = logits.data<float>() + r * 2048;
    EXPECT_EQ(pred->data<int64_t>()[r], std::max_element(row, row + 2048) - row) << r;
  }
  // Labels [N, T]: the model's own predictions score 1; change 3 of 30 and it scores 27/30.
  d.labels = *pred;
  auto self = EvaluateTop1(**s, d, 4);
  ASSERT_TRUE(self.ok()) << self.status().message();
  EXPECT_EQ(self->samples, 5);
  EXPECT_EQ(self->predictions, 30);
  EXPECT_DOUBLE_EQ(self->accuracy, 1.0);
  Tensor off(DType::kInt64, {5, 6});
  for (int64_t i = 0; i < 30; ++i)
    off.data<int64_t>()[i] = pred->data<int64_t>()[i] + (i % 10 == 3 ? 1 : 0);
  d.labels = off;
  auto some = EvaluateTop1(**s, d, 4);
  ASSERT_TRUE(some.ok()) << some.status().message();
  EXPECT_EQ(some->correct, 27);
  // Labels of the wrong shape per sample are a clear error.
  d.labels = Tensor(DType::kInt64, {5, 4});
  auto mismatch = EvaluateTop1(**s, d, 4);
  ASSERT_FALSE(mismatch.ok());
  EXPECT_NE(mismatch.status().message().find("do not match the predictions"), std::string::npos)
      << mismatch.status().message();
}

}  // namespace
}  // namespace whittle
