// End-to-end tests of compress-model's accuracy-aware search (--target, --max-drop): a real search
// on the bundled MLP whose chosen model is written, loads, is smaller and stays within the budget
// on the eval data; a second run reuses the sensitivity cache and measures nothing; flag errors
// are one line and write nothing.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "lib/onnx/model_io.h"
#include "tests/util/run_command.h"
#include "tests/util/scratch_dir.h"
#include "tests/util/test_util.h"

namespace whittle {
namespace {

using testing::CmdResult;

CmdResult Cli(const testing::ScratchDir& dir, const std::string& args) {
  return testing::RunCapturingStderr(std::string(WHITTLE_BINARY_DIR) + "/bin/compress-model " + args, dir / "stderr.txt");
}

std::string Model(const std::string& m) { return std::string(WHITTLE_SOURCE_DIR) + "/models/" + m + ".onnx"; }

TEST(CompressModelSearch, FindsASmallerModelWithinTheBudgetAndReusesTheCache) {
  testing::ScratchDir dir;
  const std::string out = dir / "out.onnx", cache = dir / "sens.json", html = dir / "report.html";
  const std::string args = Model("mlp") + " -o " + out +
                           " --target size --passes int8,svd,prune --calibration-data fashion-mnist:train"
                           " --calibration-samples 200 --eval-data fashion-mnist:test --eval-limit 500 --no-bench"
                           " --search-evals 4 --sensitivity-cache " + cache + " --report-json -";
  CmdResult r = Cli(dir, args + " --max-drop 1.5 --report " + html);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("[search] sensitivity:"), std::string::npos) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  ASSERT_TRUE(j["search"].is_object()) << r.out;
  const nlohmann::json& s = j["search"];
  EXPECT_EQ(s["target"], "size");
  EXPECT_EQ(s["metric"], "top1");
  EXPECT_GT(s["measured"].get<int>(), 10);
  EXPECT_EQ(s["cached"].get<int>(), 0);
  int chosen = 0;
  for (const auto& p : s["points"]) {
    EXPECT_GE(p["predicted_drop"].get<double>(), 0);
    if (!p["chosen"].get<bool>()) continue;
    ++chosen;
    EXPECT_TRUE(p["within_budget"].get<bool>());
    EXPECT_TRUE(p["pareto"].get<bool>());
    EXPECT_LE(p["drop"].get<double>(), 1.5);
  }
  EXPECT_EQ(chosen, 1) << s.dump();
  EXPECT_EQ(s["layers"].size(), 3u);
  // The written model: within the budget on the same data, and several times smaller.
  const double before = j["summary"]["before"]["accuracy"], after = j["summary"]["after"]["accuracy"];
  EXPECT_LE(100 * (before - after), 1.5 + 1e-9);
  const int64_t in_bytes = j["summary"]["before"]["file_bytes"], out_bytes = j["summary"]["after"]["file_bytes"];
  EXPECT_EQ(out_bytes, static_cast<int64_t>(std::filesystem::file_size(out)));
  EXPECT_LT(out_bytes * 4, in_bytes) << "before " << in_bytes << " after " << out_bytes;
  EXPECT_FALSE(j["passes"].empty());
  Status checked = CheckModelWithOnnxChecker(out);
  EXPECT_TRUE(checked.ok()) << checked.message();
  const std::string page = testing::ReadFile(html);
  EXPECT_NE(page.find("search"), std::string::npos);

  // Another budget: every sensitivity comes from the cache.
  CmdResult again = Cli(dir, args + " --max-drop 0.5");
  ASSERT_EQ(again.code, 0) << again.err;
  const nlohmann::json k = nlohmann::json::parse(again.out);
  EXPECT_EQ(k["search"]["measured"].get<int>(), 0);
  EXPECT_EQ(k["search"]["cached"], s["measured"]);
  EXPECT_LE(100 * (k["summary"]["before"]["accuracy"].get<double>() - k["summary"]["after"]["accuracy"].get<double>()),
            0.5 + 1e-9);
  // Another model with the same cache file: measured again (the fingerprint differs).
  CmdResult other = Cli(dir, Model("cnn") + " -o " + (dir / "cnn.onnx") +
                                 " --target size --max-drop 3 --passes int8 --calibration-data fashion-mnist:train"
                                 " --calibration-samples 50 --eval-data fashion-mnist:test --eval-limit 100 --no-bench"
                                 " --search-evals 2 --sensitivity-cache " + cache + " --report-json -");
  ASSERT_EQ(other.code, 0) << other.err;
  const nlohmann::json o = nlohmann::json::parse(other.out);
  EXPECT_GT(o["search"]["measured"].get<int>(), 0);
  EXPECT_EQ(o["search"]["cached"].get<int>(), 0);
}

// --finetune with --target: every candidate is fine-tuned before it is evaluated (or evaluated as
// compressed, with a note, when the trainer cannot train its form), and the chosen one's
// fine-tuning is the report's.
TEST(CompressModelSearch, FinetuneInsideTheLoop) {
  testing::ScratchDir dir;
  const std::string out = dir / "out.onnx";
  CmdResult r = Cli(dir, Model("mlp") + " -o " + out +
                             " --target size --max-drop 2 --passes int8,int4,svd --calibration-data fashion-mnist:train"
                             " --calibration-samples 100 --eval-data fashion-mnist:test --eval-limit 300 --no-bench"
                             " --search-evals 3 --finetune epochs=1,batch=32 --train-data fashion-mnist:train"
                             " --train-limit 256 --report-json -");
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  const nlohmann::json& s = j["search"];
  int tuned = 0, refused = 0;
  for (const auto& n : s["notes"]) refused += n.get<std::string>().find("not fine-tuned") != std::string::npos;
  bool chosen_tuned = false;
  for (const auto& p : s["points"]) {
    tuned += p["finetuned"].get<bool>();
    if (p["chosen"].get<bool>()) chosen_tuned = p["finetuned"].get<bool>();
    if (p["config"] != "float (nothing compressed)") {
      EXPECT_TRUE(p["finetuned"].get<bool>() || refused > 0) << p.dump();
    }
  }
  EXPECT_GT(tuned + refused, 0) << s.dump();
  EXPECT_EQ(j["finetune"].is_object(), chosen_tuned) << j.dump();
  EXPECT_NE(r.err.find("[search] configuration 1: fine-tuning"), std::string::npos) << r.err;
  EXPECT_TRUE(std::filesystem::exists(out));
}

TEST(CompressModelSearch, FlagErrorsAreOneLineAndWriteNothing) {
  testing::ScratchDir dir;
  const std::string out = dir / "out.onnx";
  const std::string base = Model("mlp") + " -o " + out + " --calibration-data fashion-mnist:train --calibration-samples 20"
                                                        " --eval-data fashion-mnist:test --eval-limit 20 --no-bench";
  const std::pair<std::string, std::string> cases[] = {
      {" --target size", "--target needs --max-drop"},
      {" --max-drop 1", "--max-drop is only used with --target"},
      {" --target size --max-drop 1 --passes int8,bogus", "unknown pass 'bogus'"},
      {" --target size --max-drop 1 --int8 calibration=nope", "calibration"},
      {" --target size --max-drop 1 --passes svd --int8", "--int8 is given but --passes svd leaves it out"},
      {" --target fastest --max-drop 1", "--target"},
      {" --target size --max-drop -1", "--max-drop"},
  };
  for (const auto& [flags, want] : cases) {
    CmdResult r = Cli(dir, base + flags);
    EXPECT_NE(r.code, 0) << flags;
    EXPECT_NE(r.err.find(want), std::string::npos) << flags << "\n" << r.err;
    EXPECT_FALSE(std::filesystem::exists(out)) << flags;
  }
  // Without calibration data the search cannot measure sensitivities.
  CmdResult r = Cli(dir, Model("mlp") + " -o " + out + " --target size --max-drop 1 --eval-data fashion-mnist:test"
                                                      " --eval-limit 20 --no-bench");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("--target needs --calibration-data"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(out));
}

}  // namespace
}  // namespace whittle
