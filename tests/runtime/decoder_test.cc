// whittle::Decoder on the exported Llama-style decoder (tests/corpus/decoder_tiny_op17.onnx:
// Hugging Face through torch.onnx, KV cache as past_key_values.* / present.*): stepping with the
// cache gives the logits of running the whole sequence again, and what is not a decoder, or a
// misuse, is refused with a clear message. Both exports' caches grow in place (KvCache,
// Session::RunWithCaches) with the logits and caches of copying them.
// (Against ONNX Runtime: tests/tools/decoder_generate_check.py.)
#include "whittle/decoder.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <cmath>
#include <string>
#include <vector>

#include "whittle/kv_cache.h"
#include "whittle/session.h"

namespace whittle {
namespace {

const std::string kDecoder = std::string(WHITTLE_SOURCE_DIR) + "/tests/corpus/decoder_tiny_op17.onnx";
const std::string kDecoderOp23 = std::string(WHITTLE_SOURCE_DIR) + "/tests/corpus/decoder_small_op23.onnx";

float MaxRel(const std::vector<float>& a, const std::vector<float>& b) {
  float diff = 0.f, mag = 0.f;
  for (size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, std::fabs(a[i] - b[i]));
    mag = std::max(mag, std::fabs(b[i]));
  }
  return diff / mag;
}

TEST(Decoder, StepsWithTheCacheEqualTheWholeSequenceAgain) {
  SessionOptions so;
  so.num_threads = 2;
  auto s = Session::Load(kDecoder, so);
  ASSERT_TRUE(s.ok()) << s.status().message();
  auto dec = Decoder::Create(**s);
  ASSERT_TRUE(dec.ok()) << dec.status().message();
  EXPECT_EQ((*dec)->num_layers_cached(), 8);  // 4 layers, key and value
  std::vector<int64_t> seq{5, 17, 300, 2, 1999};
  auto logits = (*dec)->Prefill(seq);
  ASSERT_TRUE(logits.ok()) << logits.status().message();
  ASSERT_EQ(static_cast<int64_t>(logits->size()), (*dec)->vocab_size());
  auto full = Decoder::Create(**s);
  ASSERT_TRUE(full.ok());
  for (int step = 0; step < 6; ++step) {
    const int64_t next = std::max_element(logits->begin(), logits->end()) - logits->begin();
    seq.push_back(next);
    logits = (*dec)->Step(next);
    ASSERT_TRUE(logits.ok()) << logits.status().message();
    auto again = (*full)->Prefill(seq);
    ASSERT_TRUE(again.ok()) << again.status().message();
    EXPECT_LT(MaxRel(*logits, *again), 1e-4f) << "step " << step;
    EXPECT_EQ((*dec)->past_length(), static_cast<int64_t>(seq.size()));
  }
}

TEST(Decoder, RefusesWhatIsNotADecoderAndMisuse) {
  auto mlp = Session::Load(std::string(WHITTLE_SOURCE_DIR) + "/models/mlp.onnx");
  ASSERT_TRUE(mlp.ok());
  auto d = Decoder::Create(**mlp);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("input_ids"), std::string::npos) << d.status().message();

  auto s = Session::Load(kDecoder);
  ASSERT_TRUE(s.ok()) << s.status().message();
  auto dec = Decoder::Create(**s);
  ASSERT_TRUE(dec.ok());
  EXPECT_FALSE((*dec)->Step(3).ok());        // before any prefill
  EXPECT_FALSE((*dec)->Prefill({}).ok());    // an empty prompt
  auto out_of_vocab = (*dec)->Prefill({1, (*dec)->vocab_size()});
  ASSERT_FALSE(out_of_vocab.ok());
  EXPECT_NE(out_of_vocab.status().message().find("vocabulary"), std::string::npos) << out_of_vocab.status().message();
}


TEST(KvCache, GrowsKeepingItsRowsAndCommitsOnlyWhatWasWritten) {
  KvCache c(2, 3);
  EXPECT_EQ(c.length(), 0);
  EXPECT_EQ(c.capacity(), 0);
  ASSERT_TRUE(c.Reserve(5).ok());
  EXPECT_GE(c.capacity(), 5);
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t p = 0; p < 5; ++p)
      for (int64_t t = 0; t < 3; ++t) c.row(h, p)[t] = static_cast<float>(100 * h + 10 * p + t);
  ASSERT_TRUE(c.Commit(5).ok());
  const int64_t cap = c.capacity();
  ASSERT_TRUE(c.Reserve(cap + 1).ok());  // moves: at least doubles, rows kept
  EXPECT_GE(c.capacity(), 2 * cap);
  Tensor d = c.Dense();
  ASSERT_EQ(d.dims(), (Dims{1, 2, 5, 3}));
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t p = 0; p < 5; ++p)
      for (int64_t t = 0; t < 3; ++t)
        EXPECT_EQ(d.data<float>()[(h * 5 + p) * 3 + t], static_cast<float>(100 * h + 10 * p + t));
  EXPECT_FALSE(c.Commit(4).ok());               // never shrinks by a commit
  EXPECT_FALSE(c.Commit(c.capacity() + 1).ok());  // nor past what it holds
  EXPECT_FALSE(c.Truncate(6).ok());
  ASSERT_TRUE(c.Truncate(2).ok());
  EXPECT_EQ(c.ShapeView().dims(), (Dims{1, 2, 2, 3}));
  EXPECT_FALSE(KvCache(0, 4).Reserve(1).ok());
  EXPECT_FALSE(KvCache(4, 4).Reserve(int64_t{1} << 50).ok());
}

TEST(Decoder, Op23CachesGrowInPlaceWithTheLogitsOfCopyingThem) {
  SessionOptions so;
  so.num_threads = 2;
  auto s = Session::Load(kDecoderOp23, so);
  ASSERT_TRUE(s.ok()) << s.status().message();
  auto grown = Decoder::Create(**s);
  auto copied = Decoder::Create(**s, /*in_place=*/false);
  ASSERT_TRUE(grown.ok() && copied.ok());
  EXPECT_TRUE((*grown)->cache_in_place()) << (*grown)->cache_copied_why();
  EXPECT_FALSE((*copied)->cache_in_place());
  std::vector<int64_t> prompt{3, 141, 59, 26, 35};
  auto a = (*grown)->Prefill(prompt);
  auto b = (*copied)->Prefill(prompt);
  ASSERT_TRUE(a.ok() && b.ok()) << a.status().message() << b.status().message();
  std::vector<int64_t> seq = prompt;
  for (int step = 0; step < 40; ++step) {  // the caches' capacity doubles a few times on the way
    ASSERT_EQ(a->size(), b->size());
    EXPECT_LT(MaxRel(*a, *b), 1e-6f) << "step " << step;
    const int64_t next = std::max_element(b->begin(), b->end()) - b->begin();
    seq.push_back(next);
    a = (*grown)->Step(next);
    b = (*copied)->Step(next);
    ASSERT_TRUE(a.ok() && b.ok()) << a.status().message() << b.status().message();
  }
  for (int i = 0; i < (*grown)->num_layers_cached(); ++i) {
    const Tensor x = (*grown)->cache(i), y = (*copied)->cache(i);
    ASSERT_EQ(x.dims(), y.dims());
    EXPECT_EQ(x.dim(2), static_cast<int64_t>(seq.size()));
    EXPECT_TRUE(x.BitwiseEquals(y)) << "cache " << i;
  }
  // And both equal running the whole sequence again from an empty cache.
  auto full = Decoder::Create(**s);
  ASSERT_TRUE(full.ok());
  auto again = (*full)->Prefill(seq);
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_LT(MaxRel(*a, *again), 1e-4f);
  // A failed step leaves the caches as they were, and the sequence goes on.
  const int64_t before = (*grown)->past_length();
  EXPECT_FALSE((*grown)->Step((*grown)->vocab_size()).ok());
  EXPECT_EQ((*grown)->past_length(), before);
  EXPECT_EQ((*grown)->cache(0).dim(2), before);
  auto c = (*grown)->Step(7);
  auto d = (*copied)->Step(7);
  ASSERT_TRUE(c.ok() && d.ok());
  EXPECT_LT(MaxRel(*c, *d), 1e-6f);
}

TEST(Decoder, Op17AttentionIsFusedAndGrowsItsCachesInPlace) {
  // The TorchScript export's MatMul/Softmax attention becomes ai.whittle GroupedAttention
  // (runtime/rewrite/fuse_cache_attention.h): the caches grow in place, with the logits of the
  // unfused graph (optimize off: every node as exported, the past concatenated per step).
  SessionOptions fused_opts, plain_opts;
  plain_opts.optimize = false;
  auto fused = Session::Load(kDecoder, fused_opts);
  auto plain = Session::Load(kDecoder, plain_opts);
  ASSERT_TRUE(fused.ok() && plain.ok());
  auto grown = Decoder::Create(**fused);
  auto copied = Decoder::Create(**plain);
  ASSERT_TRUE(grown.ok() && copied.ok());
  EXPECT_TRUE((*grown)->cache_in_place()) << (*grown)->cache_copied_why();
  EXPECT_FALSE((*copied)->cache_in_place());
  EXPECT_NE((*copied)->cache_copied_why().find("Concat"), std::string::npos) << (*copied)->cache_copied_why();
  auto a = (*grown)->Prefill({5, 17, 300, 2, 1999});
  auto b = (*copied)->Prefill({5, 17, 300, 2, 1999});
  for (int step = 0; step < 24; ++step) {
    ASSERT_TRUE(a.ok() && b.ok()) << a.status().message() << b.status().message();
    EXPECT_LT(MaxRel(*a, *b), 1e-4f) << "step " << step;
    const int64_t next = std::max_element(b->begin(), b->end()) - b->begin();
    a = (*grown)->Step(next);
    b = (*copied)->Step(next);
  }
  ASSERT_TRUE(a.ok() && b.ok());
  for (int i = 0; i < (*grown)->num_layers_cached(); ++i) {
    const Tensor x = (*grown)->cache(i), y = (*copied)->cache(i);
    ASSERT_EQ(x.dims(), y.dims());
    float diff = 0.f, mag = 0.f;
    for (int64_t e = 0; e < x.numel(); ++e) {
      diff = std::max(diff, std::fabs(x.data<float>()[e] - y.data<float>()[e]));
      mag = std::max(mag, std::fabs(y.data<float>()[e]));
    }
    EXPECT_LE(diff, 1e-4f * mag) << "cache " << i;
  }
}

TEST(Session, RunWithCachesRefusesWhatCannotGrowInPlace) {
  auto s = Session::Load(kDecoderOp23);
  ASSERT_TRUE(s.ok()) << s.status().message();
  const Session& sess = **s;
  const std::string past = sess.inputs().back().name;  // a past_key_values.* input
  ASSERT_EQ(past.rfind("past_key_values.", 0), 0u) << past;
  const std::string present = "present" + past.substr(std::string("past_key_values").size());
  EXPECT_TRUE(sess.CheckCacheBindings({{past, present}}).ok()) << sess.CheckCacheBindings({{past, present}}).message();
  EXPECT_FALSE(sess.CheckCacheBindings({{"input_ids", present}}).ok());  // read as a dense tensor
  EXPECT_FALSE(sess.CheckCacheBindings({{past, "logits"}}).ok());        // not its present output
  EXPECT_FALSE(sess.CheckCacheBindings({{"nope", present}}).ok());
  EXPECT_FALSE(sess.CheckCacheBindings({{past, present}, {past, present}}).ok());
  KvCache kv(2, 2);
  std::map<std::string, Tensor> feed{{past, kv.ShapeView()}};
  auto both = sess.RunWithCaches(feed, {{past, present, &kv}});
  ASSERT_FALSE(both.ok());
  EXPECT_NE(both.status().message().find("fed both"), std::string::npos) << both.status().message();
  EXPECT_FALSE(sess.RunWithCaches({}, {{past, present, nullptr}}).ok());
}

}  // namespace
}  // namespace whittle
