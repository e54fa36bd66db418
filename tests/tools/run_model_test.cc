// End-to-end tests of the run-model CLI: JSON evaluation and benchmark output, NumPy inputs and
// outputs, top-1 agreement with another backend, and one-line errors with a non-zero exit on bad
// input.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "lib/data/npy.h"
#include "lib/data/npz.h"
#include "whittle/session.h"
#include "tests/util/run_command.h"
#include "tests/util/scratch_dir.h"
#include "tests/util/test_util.h"

namespace whittle {
namespace {

using testing::CmdResult;

CmdResult Sh(const std::string& args, bool with_stderr = false) {
  return testing::RunCommand(std::string(WHITTLE_BINARY_DIR) + "/bin/run-model " + args +
                             (with_stderr ? " 2>&1" : " 2>/dev/null"));
}

std::string Model(const std::string& m) { return std::string(WHITTLE_SOURCE_DIR) + "/models/" + m + ".onnx"; }

TEST(RunModelCli, EvalJson) {
  auto r = Sh(Model("mlp") + " --eval-data fashion-mnist:test --limit 500 --json");
  ASSERT_EQ(r.code, 0) << r.out;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["samples"].get<int>(), 500);
  EXPECT_GT(j["accuracy"].get<double>(), 0.8);
  EXPECT_LE(j["accuracy"].get<double>(), 1.0);
}

TEST(RunModelCli, BenchJsonAndProfile) {
  auto r = Sh(Model("cnn") + " --bench --batch 1,4 --threads 2 --warmup 1 --iterations 3 --min-time 0 --profile --json");
  ASSERT_EQ(r.code, 0) << r.out;
  auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["bench"].size(), 2u);
  EXPECT_EQ(j["bench"][1]["batch"].get<int>(), 4);
  for (const auto& b : j["bench"]) {
    EXPECT_GT(b["throughput"].get<double>(), 0);
    EXPECT_LE(b["p50_ms"].get<double>(), b["p99_ms"].get<double>());
  }
  double share = 0;
  for (const auto& e : j["profile"]["by_op_type"]) share += e["share"].get<double>();
  EXPECT_NEAR(share, 1.0, 1e-6);
  EXPECT_FALSE(j["profile"]["by_node"].empty());
}

TEST(RunModelCli, NpyInputsAndOutputs) {
  testing::ScratchDir scratch;
  const std::string dir = scratch.path();
  Tensor x = testing::RandomFloat({3, 1, 28, 28}, 5, 0.f, 1.f);
  ASSERT_TRUE(WriteNpy(dir + "/x.npy", x).ok());
  auto r = Sh(Model("mlp") + " --input image=" + dir + "/x.npy --output-dir " + dir + "/out");
  ASSERT_EQ(r.code, 0) << r.out;
  auto y = ReadNpy(dir + "/out/logits.npy");
  ASSERT_TRUE(y.ok()) << y.status().message();
  auto s = Session::Load(Model("mlp"));
  ASSERT_TRUE(s.ok());
  auto want = (*s)->Run({{"image", x}});
  ASSERT_TRUE(want.ok());
  EXPECT_TRUE((*want)[0].BitwiseEquals(*y));
}

// --agree-with runs the model a second time on another backend: an int8 model from compress-model
// on the CPU's int8 kernels, which are bit-identical to the reference loops, agrees on every
// sample; the float model agrees on nearly all (summation order may flip a near tie).
TEST(RunModelCli, AgreementWithAnotherBackend) {
  testing::ScratchDir scratch;
  const std::string q = scratch.path() + "/cnn_int8.onnx";
  auto c = testing::RunCommand(std::string(WHITTLE_BINARY_DIR) + "/bin/compress-model " + Model("cnn") + " -o " + q +
                               " --int8 --calibration-data fashion-mnist:train --calibration-samples 256 2>&1");
  ASSERT_EQ(c.code, 0) << c.out;
  auto r = Sh(q + " --eval-data fashion-mnist:test --limit 300 --agree-with reference --json");
  ASSERT_EQ(r.code, 0) << r.out;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["agreement"]["with"].get<std::string>(), "reference");
  EXPECT_EQ(j["agreement"]["samples"].get<int>(), 300);
  EXPECT_EQ(j["agreement"]["same"].get<int>(), 300);
  auto f = Sh(Model("mlp") + " --eval-data fashion-mnist:test --limit 300 --agree-with reference --json");
  ASSERT_EQ(f.code, 0) << f.out;
  EXPECT_GE(nlohmann::json::parse(f.out)["agreement"]["share"].get<double>(), 0.99);
  auto t = Sh(Model("mlp") + " --eval-data fashion-mnist:test --limit 50 --agree-with cpu");
  ASSERT_EQ(t.code, 0) << t.out;
  EXPECT_NE(t.out.find("top-1 agreement with cpu: 1.0000 (50/50 samples)"), std::string::npos) << t.out;
}

// The decoder's logits [batch, seq, vocab] are scored per position: run-model takes labels [N, T]
// and counts N*T predictions; its agreement with another backend is per position too; and
// compress-model with unlabelled token ids as --eval-data reports agreement with the original
// (100 % before, by definition). Only input_ids is given: the rest are made (BatchFeeds).
TEST(RunModelCli, DecoderEvaluationIsPerPosition) {
  testing::ScratchDir scratch;
  const std::string decoder = std::string(WHITTLE_SOURCE_DIR) + "/tests/corpus/decoder_tiny_op17.onnx";
  Tensor ids(DType::kInt64, {4, 6}), labels(DType::kInt64, {4, 6});
  for (int64_t i = 0; i < 24; ++i) {
    ids.data<int64_t>()[i] = (i * 7919) % 2048;
    labels.data<int64_t>()[i] = i % 3;
  }
  const std::string labelled = scratch.path() + "/labelled.npz", unlabelled = scratch.path() + "/ids.npz";
  ASSERT_TRUE(WriteNpz(labelled, {{"input_ids", ids}, {"labels", labels}}).ok());
  ASSERT_TRUE(WriteNpz(unlabelled, {{"input_ids", ids}}).ok());
  auto r = Sh(decoder + " --eval-data npz:" + labelled + " --agree-with reference --json");
  ASSERT_EQ(r.code, 0) << r.out;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["samples"].get<int>(), 4);
  EXPECT_EQ(j["predictions"].get<int>(), 24);
  EXPECT_LE(j["correct"].get<int>(), 24);
  EXPECT_EQ(j["agreement"]["samples"].get<int>(), 24);
  EXPECT_EQ(j["agreement"]["same"].get<int>(), 24);
  auto c = testing::RunCommand(std::string(WHITTLE_BINARY_DIR) + "/bin/compress-model " + decoder + " -o " +
                               scratch.path() + "/pruned.onnx --prune ratio=0.5 --eval-data npz:" + unlabelled +
                               " --no-bench --threads 2 2>&1");
  ASSERT_EQ(c.code, 0) << c.out;
  const size_t acc = c.out.find("  accuracy ");
  ASSERT_NE(acc, std::string::npos) << c.out;
  EXPECT_NE(c.out.substr(acc, c.out.find('\n', acc) - acc).find(" 100.00% "), std::string::npos) << c.out;
  EXPECT_NE(c.out.find("agreement with the original model at every position (24 predictions)"), std::string::npos)
      << c.out;
  // The outputs themselves too: cosine and largest difference of the logits, in the tables and JSON.
  EXPECT_NE(c.out.find("outputs vs original"), std::string::npos) << c.out;
  auto js = testing::RunCommand(std::string(WHITTLE_BINARY_DIR) + "/bin/compress-model " + decoder + " -o " +
                                scratch.path() + "/pruned2.onnx --prune ratio=0.5 --eval-data npz:" + unlabelled +
                                " --no-bench --threads 2 --report-json - 2>/dev/null");
  ASSERT_EQ(js.code, 0) << js.out;
  const auto agree = nlohmann::json::parse(js.out)["output_agreement"];
  ASSERT_TRUE(agree.is_object()) << js.out;
  EXPECT_GT(agree["cosine"].get<double>(), 0.0);
  EXPECT_LT(agree["cosine"].get<double>(), 1.0);  // half the MLP units pruned: the logits move
  EXPECT_GT(agree["max_abs"].get<double>(), 0.0);
}

// One backend knob: --device cpu|cuda|reference, all three in --help; the deprecated --provider
// is hidden and means the same as --device, and the two may be given together only if they agree.
TEST(RunModelCli, DeviceIsTheOneBackendKnob) {
  auto help = Sh("--help");
  ASSERT_EQ(help.code, 0);
  EXPECT_NE(help.out.find("--device"), std::string::npos);
  EXPECT_NE(help.out.find("{cpu,cuda,reference}"), std::string::npos) << help.out;
  EXPECT_EQ(help.out.find("--provider"), std::string::npos) << help.out;
  const std::string eval = Model("mlp") + " --eval-data fashion-mnist:test --limit 100 --json";
  auto ref = Sh(eval + " --device reference");
  ASSERT_EQ(ref.code, 0) << ref.out;
  for (const char* same : {" --provider reference", " --provider reference --device reference"}) {
    auto r = Sh(eval + same);
    ASSERT_EQ(r.code, 0) << same;
    EXPECT_EQ(nlohmann::json::parse(r.out)["correct"], nlohmann::json::parse(ref.out)["correct"]) << same;
  }
  auto clash = Sh(eval + " --device cpu --provider reference", true);
  EXPECT_EQ(clash.code, 1);
  EXPECT_NE(clash.out.find("--provider reference and --device cpu disagree"), std::string::npos) << clash.out;
}

TEST(RunModelCli, ErrorsAreOneLineAndNonZero) {
  testing::ScratchDir scratch;
  const std::string dir = scratch.path();
  {
    std::ofstream(dir + "/garbage.onnx") << "this is not a protobuf model at all";
  }
  const std::vector<std::string> bad = {
      dir + "/garbage.onnx",
      dir + "/missing.onnx",
      Model("mlp") + " --bogus-flag",
      Model("mlp") + " --bench --batch 1,x",
      Model("mlp") + " --eval-data nosuch:spec",
      Model("mlp") + " --input image=" + dir + "/missing.npy",
      Model("mlp") + " --threads -3",
      Model("mlp") + " --agree-with cpu",
      Model("mlp") + " --eval-data fashion-mnist:test --agree-with tpu",
      Model("mlp") + " --precision bf16",
      Model("mlp") + " --device cuda --precision int4",
      Model("mlp") + " --bench --cuda-graphs",  // graphs are a CUDA device's
      Model("mlp") + " --bench --page-locked-input",  // page-locked memory is for a device's uploads
      Model("mlp") + " --bench --page-locked-output",  // and its downloads
      Model("mlp") + " --device tpu",
      Model("mlp") + " --device cuda --provider reference",  // the old alias may not contradict --device
      Model("mlp") + " --provider cuda",  // the old alias only ever named cpu and reference
  };
  for (const std::string& args : bad) {
    auto r = Sh(args, true);
    EXPECT_NE(r.code, 0) << args;
    ASSERT_FALSE(r.out.empty()) << args;
    std::string body = r.out;
    while (!body.empty() && body.back() == '\n') body.pop_back();
    EXPECT_EQ(body.find('\n'), std::string::npos) << args << ":\n" << r.out;
    EXPECT_NE(body.find("error"), std::string::npos) << args << ": " << r.out;
  }
}

}  // namespace
}  // namespace whittle
