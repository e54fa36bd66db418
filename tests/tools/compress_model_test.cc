// End-to-end tests of the compress-model CLI: help, one-line errors that leave -o untouched,
// a real run whose output loads and passes the ONNX checker, the JSON/HTML reports, pass order
// and merging of repeated flags, --stop-after, a tiny benchmark, and --finetune (distillation after
// the passes, with its section in the reports).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "lib/onnx/model_io.h"
#include "passes/pass_registry.h"
#include "tests/util/graph_builder.h"
#include "tests/util/run_command.h"
#include "tests/util/scratch_dir.h"
#include "tests/util/test_util.h"

namespace whittle {
namespace {

using testing::CmdResult;

std::string ReadAll(const std::string& path) { return testing::ReadFile(path); }

// Runs compress-model with args; stdout and stderr come back separately.
CmdResult Cli(const testing::ScratchDir& dir, const std::string& args) {
  return testing::RunCapturingStderr(std::string(WHITTLE_BINARY_DIR) + "/bin/compress-model " + args, dir / "stderr.txt");
}

std::string Model(const std::string& m) { return std::string(WHITTLE_SOURCE_DIR) + "/models/" + m + ".onnx"; }

std::vector<std::string> Files(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

const char kFast[] = " --no-bench --quiet";

TEST(CompressModelCli, HelpListsEveryPassFlagAndOption) {
  testing::ScratchDir dir;
  auto r = Cli(dir, "--help");
  ASSERT_EQ(r.code, 0) << r.err;
  for (const std::string& name : PassNames()) {
    EXPECT_NE(r.out.find("--" + name + " "), std::string::npos) << name;
    // And the pass's own option paragraph.
    EXPECT_NE(r.out.find(PassHelp(name)), std::string::npos) << name;
  }
  for (const char* opt : {"-o,--output", "--eval-data", "--eval-limit", "--calibration-data", "--calibration-samples",
                          "--threads", "--seed", "--bench-batch", "--no-bench", "--report-json", "--report ",
                          "--stop-after", "--quiet", "--finetune", "--train-data", "--train-limit", "epochs=N", "lr=X",
                          "batch=B", "optimizer=NAME", "temperature=T", "alpha=A", "no-labels=1", "seed=N"})
    EXPECT_NE(r.out.find(opt), std::string::npos) << opt;
}

TEST(CompressModelCli, ErrorsAreOneLineAndLeaveOutputUntouched) {
  testing::ScratchDir dir;
  const std::string out = dir / "out.onnx";
  {
    // Random bytes, not an ONNX model.
    std::mt19937 rng(7);
    std::string junk(4096, '\0');
    for (char& c : junk) c = static_cast<char>(rng());
    std::ofstream(dir / "junk.onnx", std::ios::binary) << junk;
    std::ofstream(dir / "notes.txt") << "not a directory";
  }
  const std::string mlp = Model("mlp");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {mlp + " --svd rank=64", "--output is required"},
      {mlp + " -o " + out, "no pass given"},
      {mlp + " -o " + out + " --svd typo=1", "unknown option 'typo'"},
      {mlp + " -o " + out + " --svd rank=abc", "not an integer"},
      {mlp + " -o " + out + " --svd rank", "not key=value"},
      {mlp + " -o " + out + " --prune ratio=1.5", "out of range"},
      {mlp + " -o " + out + " --bogus-flag", "bogus"},
      {dir / "missing.onnx" + " -o " + out + " --svd rank=64", "missing.onnx"},
      {dir / "junk.onnx" + " -o " + out + " --svd rank=64", "junk.onnx"},
      {"--svd " + mlp + " -o " + out, "took"},
      {mlp + " -o " + out + " --svd rank=64 --eval-data nosuch:spec", "--eval-data"},
      {mlp + " -o " + out + " --svd rank=64 --calibration-data fashion-mnist:nope", "--calibration-data"},
      {mlp + " -o " + dir / "no/such/dir/out.onnx" + " --svd rank=64", "does not exist"},
      {mlp + " -o " + out + " --svd rank=64 --report-json " + dir / "notes.txt/r.json", "--report-json"},
      {mlp + " -o " + out + " --svd rank=64 --report " + dir.path(), "is a directory"},
      {mlp + " -o " + out + " --svd rank=64 --threads -2", "--threads"},
      {mlp + " -o " + out + " --int8", "needs --calibration-data"},
      {mlp + " -o " + out + " --int8 calibration=bogus --calibration-data fashion-mnist:train", "calibration='bogus'"},
      {mlp + " -o " + out + " --int8 mode=dynamic,calibration=mse", "mode=dynamic"},
      {mlp + " -o " + out + " --int8 op-types=Relu --calibration-data fashion-mnist:train", "op-types='Relu'"},
      {mlp + " -o " + out + " --int8 exclude=nosuch --calibration-data fashion-mnist:train", "'nosuch'"},
      // Fails only at the very end, after the model was saved to its temporary file.
      {mlp + " -o " + out + " --svd rank=64 --report " + dir / (std::string(300, 'r') + ".html"), "too long"},
      {mlp + " -o " + out + " --svd rank=64 --finetune epochs=1", "--finetune needs --train-data"},
      {mlp + " -o " + out + " --svd rank=64 --finetune epochs=1,bogus=2 --train-data fashion-mnist:train",
       "unknown option 'bogus'"},
      {mlp + " -o " + out + " --svd rank=64 --finetune epochs=abc --train-data fashion-mnist:train", "epochs='abc'"},
      {mlp + " -o " + out + " --svd rank=64 --finetune optimizer=rmsprop --train-data fashion-mnist:train",
       "optimizer='rmsprop'"},
      {mlp + " -o " + out + " --svd rank=64 --finetune alpha=1.5 --train-data fashion-mnist:train", "alpha=1.5"},
      {mlp + " -o " + out + " --svd rank=64 --finetune epochs --train-data fashion-mnist:train", "not key=value"},
      {mlp + " -o " + out + " --svd rank=64 --train-data fashion-mnist:train", "only used with --finetune"},
      {mlp + " -o " + out + " --svd rank=64 --finetune epochs=1 --train-data nosuch:x", "--train-data"},
      {mlp + " -o " + out + " --svd rank=64 --finetune epochs=1 --train-data fashion-mnist:train --report " +
           dir / "no/such/r.html",
       "--report"},
      // Fails after the fine-tuning, when the report is written: the temporary model goes too.
      {mlp + " -o " + out + " --svd rank=64 --finetune epochs=1 --train-data fashion-mnist:train --train-limit 64 " +
           "--report " + dir / (std::string(300, 'r') + ".html"),
       "too long"},
  };
  for (bool existing : {false, true}) {
    if (existing) std::ofstream(out) << "keep me";
    const std::vector<std::string> before = Files(dir.path());
    for (const auto& [args, expect] : cases) {
      auto r = Cli(dir, args + kFast);
      EXPECT_NE(r.code, 0) << args;
      EXPECT_TRUE(r.out.empty()) << args << ": " << r.out;
      std::string body = r.err;
      while (!body.empty() && body.back() == '\n') body.pop_back();
      EXPECT_EQ(body.find('\n'), std::string::npos) << args << ":\n" << r.err;
      EXPECT_EQ(body.rfind("compress-model: error: ", 0), 0u) << args << ": " << r.err;
      EXPECT_NE(body.find(expect), std::string::npos) << args << ": " << r.err;
      // Nothing new in the folder (no output, no temporary), and an existing output unchanged.
      EXPECT_EQ(Files(dir.path()), before) << args;
      if (existing) {
        EXPECT_EQ(ReadAll(out), "keep me") << args;
      }
    }
  }
}

TEST(CompressModelCli, SvdRunWritesCheckedModelTablesAndReports) {
  testing::ScratchDir dir;
  const std::string out = dir / "out.onnx", json = dir / "report.json", html = dir / "report.html";
  std::ofstream(out) << "replaced on success";
  auto r = Cli(dir, Model("mlp") + " -o " + out + " --svd rank=64 --eval-data fashion-mnist:test --eval-limit 200" +
                        " --no-bench --report-json " + json + " --report " + html);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(Files(dir.path()), (std::vector<std::string>{"out.onnx", "report.html", "report.json"}));

  auto g = LoadModel(out);
  ASSERT_TRUE(g.ok()) << g.status().message();
  Status checked = CheckModelWithOnnxChecker(out);
  EXPECT_TRUE(checked.ok()) << checked.message();

  // Tables: the pass with its layers, then the summary.
  for (const char* s : {"pass 1: svd rank=64", "/fc1/Gemm", "64/256", "params", "MACs", "summary:", "file bytes",
                        "MACs/sample", "accuracy", "wrote " })
    EXPECT_NE(r.out.find(s), std::string::npos) << s << "\n" << r.out;
  EXPECT_LT(r.out.find("pass 1: svd"), r.out.find("summary:"));

  const nlohmann::json j = nlohmann::json::parse(ReadAll(json));
  EXPECT_EQ(j["output"], out);
  ASSERT_EQ(j["passes"].size(), 1u);
  EXPECT_EQ(j["passes"][0]["pass"], "svd");
  EXPECT_EQ(j["passes"][0]["config"], "rank=64");
  bool fc1 = false;
  for (const auto& l : j["passes"][0]["layers"]) {
    for (const char* key : {"node", "op_type", "action", "params_before", "params_after", "macs_before", "macs_after",
                            "setting", "full_setting", "spectrum", "sensitivity"})
      EXPECT_TRUE(l.contains(key)) << key;
    if (l["node"] == "/fc1/Gemm") {
      fc1 = true;
      EXPECT_EQ(l["action"], "svd");
      EXPECT_EQ(l["setting"].get<int64_t>(), 64);
      EXPECT_EQ(l["macs_before"].get<int64_t>(), 784 * 256);
      EXPECT_EQ(l["spectrum"].size(), 256u);
    }
  }
  EXPECT_TRUE(fc1);
  const auto& before = j["summary"]["before"];
  const auto& after = j["summary"]["after"];
  EXPECT_EQ(before["file_bytes"].get<int64_t>(), static_cast<int64_t>(std::filesystem::file_size(Model("mlp"))));
  EXPECT_EQ(after["file_bytes"].get<int64_t>(), static_cast<int64_t>(std::filesystem::file_size(out)));
  EXPECT_LT(after["macs"].get<int64_t>(), before["macs"].get<int64_t>());
  EXPECT_LT(after["params"].get<int64_t>(), before["params"].get<int64_t>());
  EXPECT_GT(after["accuracy"].get<double>(), 0.75);
  EXPECT_EQ(j["eval_samples"].get<int64_t>(), 200);
  EXPECT_TRUE(after["latency_p50_ms"].is_null());  // --no-bench

  const std::string page = ReadAll(html);
  EXPECT_EQ(page.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_NE(page.find("class=\"chart spectrum\""), std::string::npos);
  EXPECT_NE(page.find(">rank 64</text>"), std::string::npos);
}

// --prune, --svd and --int8 in one run: calibration progress on stderr, the passes in order in
// the report, and an output that passes the ONNX checker, is >= 3.5x smaller than the pruned and
// factorized float model would be, holds Q/DQ pairs around every layer and still classifies.
TEST(CompressModelCli, Int8ComposesWithPruneAndSvd) {
  testing::ScratchDir dir;
  const std::string out = dir / "out.onnx", json = dir / "report.json";
  auto r = Cli(dir, Model("cnn") + " -o " + out + " --prune ratio=0.25,round=1 --svd energy=0.95 --int8" +
                        " --calibration-data fashion-mnist:train --calibration-samples 200" +
                        " --eval-data fashion-mnist:test --eval-limit 300 --no-bench --report-json " + json);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("[int8] calibration (min/max) 200/200"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("[int8] calibration (histograms) 200/200"), std::string::npos) << r.err;
  Status checked = CheckModelWithOnnxChecker(out);
  EXPECT_TRUE(checked.ok()) << checked.message();

  const nlohmann::json j = nlohmann::json::parse(ReadAll(json));
  ASSERT_EQ(j["passes"].size(), 3u);
  EXPECT_EQ(j["passes"][0]["pass"], "prune");
  EXPECT_EQ(j["passes"][1]["pass"], "svd");
  EXPECT_EQ(j["passes"][2]["pass"], "int8");
  int quantized = 0;
  for (const auto& l : j["passes"][2]["layers"]) quantized += l["action"] == "int8";
  EXPECT_GE(quantized, 5) << j["passes"][2]["layers"].dump();  // 2 convs + the factorized fc layers

  auto g = LoadModel(out);
  ASSERT_TRUE(g.ok()) << g.status().message();
  int q = 0, dq = 0;
  for (const Node& n : g->nodes()) {
    q += n.op_type == "QuantizeLinear";
    dq += n.op_type == "DequantizeLinear";
  }
  EXPECT_GE(q, 1);
  EXPECT_GE(dq, 2 * quantized);  // each layer's weight and input
  const auto& before = j["summary"]["before"];
  const auto& after = j["summary"]["after"];
  EXPECT_GT(before["file_bytes"].get<double>() / after["file_bytes"].get<double>(), 3.5 * 1.5);
  EXPECT_GT(after["accuracy"].get<double>(), 0.75);
}

std::vector<std::string> PassOrder(const nlohmann::json& j) {
  std::vector<std::string> order;
  for (const auto& p : j["passes"]) order.push_back(p["pass"].get<std::string>() + " " + p["config"].get<std::string>());
  return order;
}

// External data end to end (issue 42): a model whose weights live in a .data file beside it is
// read, its size counted with that file; --external-data-threshold writes the output the same way
// (OUT.onnx + OUT.onnx.data), which the ONNX checker, Whittle and the size figures all see.
TEST(CompressModelCli, ExternalDataInAndOutCountsBothFiles) {
  testing::ScratchDir dir;
  const std::string in = dir / "mlp_ext.onnx";
  auto mlp = LoadModel(Model("mlp"));
  ASSERT_TRUE(mlp.ok()) << mlp.status().message();
  SaveOptions ext;
  ext.external_data_threshold = 1024;
  ASSERT_TRUE(SaveModel(*mlp, in, ext).ok());
  ASSERT_TRUE(std::filesystem::exists(in + ".data"));
  const int64_t in_bytes = static_cast<int64_t>(std::filesystem::file_size(in) + std::filesystem::file_size(in + ".data"));
  auto on_disk = ModelBytesOnDisk(in);
  ASSERT_TRUE(on_disk.ok()) << on_disk.status().message();
  EXPECT_EQ(*on_disk, in_bytes);
  EXPECT_GT(in_bytes, 20 * static_cast<int64_t>(std::filesystem::file_size(in)));  // the weights are outside

  const std::string out = dir / "small.onnx", json = dir / "report.json";
  auto r = Cli(dir, in + " -o " + out + " --int8 mode=dynamic --external-data-threshold 1K --report-json " + json + kFast);
  ASSERT_EQ(r.code, 0) << r.err;
  ASSERT_TRUE(std::filesystem::exists(out + ".data"));
  const int64_t out_bytes = static_cast<int64_t>(std::filesystem::file_size(out) + std::filesystem::file_size(out + ".data"));
  Status checked = CheckModelWithOnnxChecker(out);
  EXPECT_TRUE(checked.ok()) << checked.message();
  auto g = LoadModel(out);
  ASSERT_TRUE(g.ok()) << g.status().message();
  const nlohmann::json j = nlohmann::json::parse(ReadAll(json));
  EXPECT_EQ(j["summary"]["before"]["file_bytes"].get<int64_t>(), in_bytes);
  EXPECT_EQ(j["summary"]["after"]["file_bytes"].get<int64_t>(), out_bytes);
  EXPECT_GT(static_cast<double>(in_bytes) / static_cast<double>(out_bytes), 3.0);

  // Without the flag the output keeps the input's form: external data in, external data out (so
  // it is memory-mapped when loaded), with a note; a threshold above every tensor writes it inline.
  const std::string same_out = dir / "same.onnx";
  r = Cli(dir, in + " -o " + same_out + " --int8 mode=dynamic --no-bench");  // not --quiet: the summary has the note
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(std::filesystem::exists(same_out + ".data"));
  EXPECT_NE(r.out.find("the input keeps its tensors in external data, so the output does too"), std::string::npos)
      << r.out;
  const std::string inline_out = dir / "inline.onnx";
  r = Cli(dir, in + " -o " + inline_out + " --int8 mode=dynamic --external-data-threshold 1G" + kFast);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_FALSE(std::filesystem::exists(inline_out + ".data"));
  const std::string plain_out = dir / "plain.onnx";
  r = Cli(dir, Model("mlp") + " -o " + plain_out + " --int8 mode=dynamic" + kFast);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_FALSE(std::filesystem::exists(plain_out + ".data")) << "an inline input gives an inline output";

  r = Cli(dir, in + " -o " + dir / "bad.onnx" + " --int8 --external-data-threshold lots" + kFast);
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("--external-data-threshold expects bytes or a size"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir / "bad.onnx"));
}

TEST(CompressModelCli, PassesRunInTheOrderGivenAndRepeatsMerge) {
  testing::ScratchDir dir;
  const std::string base = Model("mlp") + " -o " + dir / "out.onnx" + " --no-bench --report-json - ";
  {
    auto r = Cli(dir, base + "--prune ratio=0.25 --svd rank=32");
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(PassOrder(nlohmann::json::parse(r.out)), (std::vector<std::string>{"prune ratio=0.25", "svd rank=32"}));
  }
  {
    auto r = Cli(dir, base + "--svd rank=32 --prune ratio=0.25 --svd rank=16");
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(PassOrder(nlohmann::json::parse(r.out)),
              (std::vector<std::string>{"svd rank=32", "prune ratio=0.25", "svd rank=16"}));
  }
  {
    // Consecutive repeats are one pass with merged options: fc1 gets its own rank.
    auto r = Cli(dir, base + "--svd rank=64 --svd layer=/fc1/Gemm:rank=16");
    ASSERT_EQ(r.code, 0) << r.err;
    const nlohmann::json j = nlohmann::json::parse(r.out);
    ASSERT_EQ(j["passes"].size(), 1u) << r.out;
    for (const auto& l : j["passes"][0]["layers"]) {
      if (l["node"] == "/fc1/Gemm") {
        EXPECT_EQ(l["setting"].get<int64_t>(), 16);
      }
      if (l["node"] == "/fc2/Gemm") {
        EXPECT_EQ(l["setting"].get<int64_t>(), 64);
      }
    }
  }
  {
    // --stop-after runs only the first N passes.
    auto r = Cli(dir, base + "--prune ratio=0.25 --svd rank=32 --stop-after 1");
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(PassOrder(nlohmann::json::parse(r.out)), (std::vector<std::string>{"prune ratio=0.25"}));
  }
  {
    // A pass flag without a spec runs the pass with its defaults.
    auto r = Cli(dir, base + "--svd");
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(PassOrder(nlohmann::json::parse(r.out)), (std::vector<std::string>{"svd "}));
  }
}

TEST(CompressModelCli, QuietPrintsNothingAndTinyBenchMeasuresBoth) {
  testing::ScratchDir dir;
  {
    auto r = Cli(dir, Model("mlp") + " -o " + dir / "q.onnx" + " --svd rank=64" + kFast);
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
    EXPECT_TRUE(r.err.empty()) << r.err;
  }
  {
    // The fine-tuning too.
    auto r = Cli(dir, Model("mlp") + " -o " + dir / "qf.onnx" +
                          " --svd rank=64 --finetune epochs=1 --train-data fashion-mnist:train --train-limit 64" + kFast);
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
    EXPECT_TRUE(r.err.empty()) << r.err;
  }
  auto r = Cli(dir, Model("mlp") + " -o " + dir / "b.onnx" +
                        " --svd rank=64 --bench-batch 8 --bench-time 0 --bench-iterations 3 --bench-rounds 1"
                        " --threads 1 --report-json -");
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["bench_batch"].get<int64_t>(), 8);
  for (const char* side : {"before", "after"}) {
    EXPECT_GT(j["summary"][side]["latency_p50_ms"].get<double>(), 0) << side;
    EXPECT_GT(j["summary"][side]["throughput"].get<double>(), 0) << side;
  }
  // Progress went to stderr, not into the JSON on stdout.
  EXPECT_NE(r.err.find("[bench]"), std::string::npos) << r.err;
}

// --svd, then --finetune with the original as the teacher: the fine-tuned model differs from the
// one the same command writes without --finetune only in its weights, is more accurate, loads in
// run-model with the accuracy the report gives, and the text, JSON and HTML reports carry a
// fine-tune section after the passes.
TEST(CompressModelCli, FinetuneAfterThePassesRecoversAccuracy) {
  testing::ScratchDir dir;
  const std::string plain = dir / "plain.onnx", out = dir / "out.onnx", json = dir / "report.json",
                    html = dir / "report.html";
  const std::string base = Model("mlp") + " --svd rank=6 --eval-data fashion-mnist:test --eval-limit 300 --no-bench";
  auto p = Cli(dir, base + " -o " + plain + " --report-json -");
  ASSERT_EQ(p.code, 0) << p.err;
  const double compressed = nlohmann::json::parse(p.out)["summary"]["after"]["accuracy"].get<double>();

  auto r = Cli(dir, base + " -o " + out + " --finetune epochs=1,batch=32,lr=0.05 --train-data fashion-mnist:train" +
                        " --train-limit 512 --report-json " + json + " --report " + html);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(Files(dir.path()), (std::vector<std::string>{"out.onnx", "plain.onnx", "report.html", "report.json"}));
  EXPECT_NE(r.err.find("[finetune] [epoch 1/1]"), std::string::npos) << r.err;

  const nlohmann::json j = nlohmann::json::parse(ReadAll(json));
  EXPECT_EQ(j["output"], out);
  ASSERT_TRUE(j.contains("finetune")) << j.dump();
  const nlohmann::json& ft = j["finetune"];
  EXPECT_EQ(ft["spec"], "epochs=1,batch=32,lr=0.05");
  EXPECT_EQ(ft["epochs"].size(), 1u);
  EXPECT_EQ(ft["train_samples"].get<int64_t>(), 512);
  EXPECT_EQ(ft["options"]["batch"].get<int64_t>(), 32);
  EXPECT_DOUBLE_EQ(ft["accuracy_before"].get<double>(), compressed);
  const double after = ft["accuracy_after"].get<double>();
  EXPECT_GT(after, compressed + 0.01) << "before " << compressed;
  EXPECT_DOUBLE_EQ(j["summary"]["after"]["accuracy"].get<double>(), after);
  EXPECT_DOUBLE_EQ(ft["teacher_accuracy"].get<double>(), j["summary"]["before"]["accuracy"].get<double>());
  EXPECT_EQ(j["summary"]["after"]["file_bytes"].get<int64_t>(), static_cast<int64_t>(std::filesystem::file_size(out)));

  // run-model loads it and measures what the report says.
  CmdResult rm = testing::RunCapturingStderr(std::string(WHITTLE_BINARY_DIR) + "/bin/run-model " + out +
                                                 " --eval-data fashion-mnist:test --limit 300 --json",
                                             dir / "stderr.txt");
  ASSERT_EQ(rm.code, 0) << rm.err;
  EXPECT_NEAR(nlohmann::json::parse(rm.out)["accuracy"].get<double>(), after, 1e-9);
  Status checked = CheckModelWithOnnxChecker(out);
  EXPECT_TRUE(checked.ok()) << checked.message();

  // Same graph as without --finetune, other weights.
  EXPECT_GE(::whittle::testing::CountRetrainedWeights(plain, out), 4);

  // Text: the passes, then the fine-tune section, then the summary with the fine-tuned accuracy.
  const size_t pass1 = r.out.find("pass 1: svd rank=6"), pass2 = r.out.find("pass 2: finetune epochs=1,batch=32,lr=0.05"),
               summary = r.out.find("summary:");
  ASSERT_NE(pass1, std::string::npos) << r.out;
  ASSERT_NE(pass2, std::string::npos) << r.out;
  EXPECT_LT(pass1, pass2);
  EXPECT_LT(pass2, summary);
  char before_after[96];
  std::snprintf(before_after, sizeof before_after, "accuracy before fine-tuning %.2f%% → after %.2f%%", 100 * compressed,
                100 * after);
  EXPECT_NE(r.out.find(before_after), std::string::npos) << before_after << "\n" << r.out;

  // HTML: the fine-tune section after the passes, with its epoch row and charts.
  const std::string page = ReadAll(html);
  const size_t section = page.find("class=\"card pass finetune\"");
  ASSERT_NE(section, std::string::npos);
  EXPECT_LT(page.find("class=\"chart spectrum\""), section);
  EXPECT_LT(section, page.find("<footer>"));
  EXPECT_NE(page.find("class=\"chart line loss\"", section), std::string::npos);
  EXPECT_NE(page.find("<tr class=\"epoch best\" data-epoch=\"1\"", section), std::string::npos);
  EXPECT_NE(page.find(before_after), std::string::npos);
}

// Ctrl-C (SIGINT) or SIGTERM while compress-model writes its output leaves no temporary file: a
// 64 MiB model takes long enough to write that the signal is sent while a temporary exists.
TEST(CompressModelCli, SignalWhileWritingLeavesNoTemporary) {
  testing::ScratchDir dir;
  const std::string in = dir / "big.onnx";
  Graph g = testing::GraphBuilder()
                .Input("x", DType::kFloat32, {Dim(1), Dim(4096)})
                .Init("w", testing::RandomFloat({4096, 4096}, 3))
                .Op("MatMul", {"x", "w"}, {"y"})
                .Output("y")
                .Build();
  ASSERT_TRUE(SaveModel(g, in).ok());
  const std::string work = dir / "work";
  std::filesystem::create_directory(work);
  auto temporaries = [&] {
    std::vector<std::string> t;
    for (const std::string& f : Files(work))
      if (f.find("tmp") != std::string::npos) t.push_back(f);
    return t;
  };
  int interrupted = 0;
  for (int attempt = 0; attempt < 6 && interrupted < 2; ++attempt) {
    const int sig = attempt % 2 ? SIGTERM : SIGINT;
    const std::string out = work + "/out.onnx", bin = std::string(WHITTLE_BINARY_DIR) + "/bin/compress-model";
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      execl(bin.c_str(), bin.c_str(), in.c_str(), "-o", out.c_str(), "--svd", "energy=0.9", "--stop-after", "0",
            "--no-bench", "-q", static_cast<char*>(nullptr));
      _exit(127);
    }
    int st = 0;
    bool sent = false;
    while (waitpid(pid, &st, WNOHANG) == 0) {
      if (!temporaries().empty()) {  // a temporary is there: the write is under way
        kill(pid, sig);
        sent = true;
        break;
      }
    }
    if (sent) waitpid(pid, &st, 0);
    if (sent && WIFSIGNALED(st)) {
      ++interrupted;
      EXPECT_EQ(WTERMSIG(st), sig);
      EXPECT_EQ(temporaries(), std::vector<std::string>{}) << "signal " << sig;  // out.onnx: there or not, whole
    }
    std::filesystem::remove(out);
  }
  if (interrupted == 0) GTEST_SKIP() << "compress-model finished each time before a signal reached its write";
}

}  // namespace
}  // namespace whittle
