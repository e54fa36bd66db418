// whittle::Decoder on the exported Llama-style decoder (tests/corpus/decoder_tiny_op17.onnx:
// Hugging Face through torch.onnx, KV cache as past_key_values.* / present.*): stepping with the
// cache gives the logits of running the whole sequence again, and what is not a decoder, or a
// misuse, is refused with a clear message. (Against ONNX Runtime: tests/tools/decoder_generate_check.py.)
#include "whittle/decoder.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "whittle/session.h"

namespace whittle {
namespace {

const std::string kDecoder = std::string(WHITTLE_SOURCE_DIR) + "/tests/corpus/decoder_tiny_op17.onnx";

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

}  // namespace
}  // namespace whittle
