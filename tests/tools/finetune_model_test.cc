// End-to-end tests of the finetune-model CLI: help, one-line errors that write nothing, a short
// fine-tune of a compressed student whose output keeps the student's structure and improves its
// accuracy, the JSON history, the HTML report (its epoch rows and charts equal to the JSON), and a
// run killed with SIGKILL mid-epoch that --resume finishes with the same weights as a run that was
// never killed.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <regex>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "lib/onnx/model_io.h"
#include "tests/util/run_command.h"
#include "tests/util/scratch_dir.h"
#include "tests/util/test_util.h"

namespace whittle {
namespace {

using testing::CmdResult;

using testing::ReadFile;

std::string Bin(const std::string& tool) { return std::string(WHITTLE_BINARY_DIR) + "/bin/" + tool; }
std::string Model(const std::string& m) { return std::string(WHITTLE_SOURCE_DIR) + "/models/" + m + ".onnx"; }

CmdResult Tool(const testing::ScratchDir& dir, const std::string& tool, const std::string& args) {
  return testing::RunCapturingStderr(Bin(tool) + " " + args, dir / "stderr.txt");
}

// The MLP with its hidden layers 40 % pruned: a compressed student that has lost accuracy.
std::string PrunedMlp(const testing::ScratchDir& dir) {
  const std::string out = dir / "mlp_pruned.onnx";
  CmdResult r = Tool(dir, "compress-model", Model("mlp") + " -o " + out + " --prune ratio=0.4 --no-bench --quiet");
  EXPECT_EQ(r.code, 0) << r.err;
  return out;
}

const char kData[] = " --train-data fashion-mnist:train --train-limit 512 --eval-data fashion-mnist:test --eval-limit 300 -q";

TEST(FinetuneModelCli, HelpNamesTheFlags) {
  testing::ScratchDir dir;
  CmdResult r = Tool(dir, "finetune-model", "--help");
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* flag : {"--teacher", "--train-data", "--eval-data", "--epochs", "--batch", "--lr", "--optimizer",
                           "--temperature", "--alpha", "--no-labels", "--seed", "--threads", "--checkpoint-dir",
                           "--resume", "--train-limit", "--json", "--report", "--crop-padding", "--hflip",
                           "--no-teacher-cache", "--batchnorm", "--fixed-scales", "--hint", "--hint-weight"})
    EXPECT_NE(r.out.find(flag), std::string::npos) << flag;
}

TEST(FinetuneModelCli, RecoversAPrunedStudentAndKeepsItsStructure) {
  testing::ScratchDir dir;
  const std::string student = PrunedMlp(dir), out = dir / "ft.onnx";
  CmdResult r = Tool(dir, "finetune-model",
                    student + " --teacher " + Model("mlp") + kData + " -o " + out + " --epochs 2 --batch 32 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["epochs"].size(), 2u);
  for (const auto& e : j["epochs"]) {
    EXPECT_GT(e["samples_per_s"].get<double>(), 0);
    EXPECT_TRUE(e["loss"].get<double>() > 0 && std::isfinite(e["loss"].get<double>()));
  }
  // Better than the student was before (measured the same way by run-model).
  CmdResult before = Tool(dir, "run-model", student + " --eval-data fashion-mnist:test --limit 300 --json");
  ASSERT_EQ(before.code, 0) << before.err;
  const double acc0 = nlohmann::json::parse(before.out)["accuracy"].get<double>();
  EXPECT_GT(j["best_eval_accuracy"].get<double>(), acc0 + 0.02) << "before " << acc0;
  // Same ops and weight shapes as the student, new values.
  EXPECT_GE(::whittle::testing::CountRetrainedWeights(student, out), 6);
}

TEST(FinetuneModelCli, ErrorsWriteNothing) {
  testing::ScratchDir dir;
  const std::string out = dir / "out.onnx";
  struct Case {
    std::string args, says;
  };
  std::vector<Case> cases = {
      {Model("mlp") + kData + " -o " + out, "--teacher"},
      {Model("mlp") + " --teacher " + Model("mlp") + " --train-data nonsense:x -o " + out, "--train-data"},
      {Model("mlp") + " --teacher " + Model("mlp") + kData + " -o " + out + " --resume", "--checkpoint-dir"},
      {Model("mlp") + " --teacher " + Model("mlp") + kData + " -o " + out + " --alpha 2", "--alpha"},
      {std::string(WHITTLE_SOURCE_DIR) + "/README.md --teacher " + Model("mlp") + kData + " -o " + out, "README.md"},
      // Before any training: a report that could not be written.
      {Model("mlp") + " --teacher " + Model("mlp") + kData + " -o " + out + " --report " + dir / "no/such/r.html",
       "--report"},
      {Model("mlp") + " --teacher " + Model("mlp") + kData + " -o " + out + " --report " + out, "same file"},
      {Model("mlp") + " --teacher " + Model("mlp") + kData + " -o " + out + " --hint /no/such", "no tensor '/no/such'"},
      {Model("mlp") + " --teacher " + Model("mlp") + kData + " -o " + out + " --hint =x", "--hint"},
      {Model("mlp") + " --teacher " + Model("mlp") + kData + " -o " + out + " --batchnorm sometimes", "--batchnorm"},
      {Model("mlp") + " --teacher " + Model("mlp") + kData + " -o " + out + " --device tpu", "--device"},
      {Model("mlp") + " --teacher " + Model("mlp") + kData + " -o " + out + " --precision bf16", "needs --device cuda"},
      {Model("mlp") + " --teacher " + Model("mlp") + kData + " -o " + out + " --precision fp8", "--precision"},
  };
  const std::vector<Backend>& tested = testing::TestedBackends();
  if (std::find(tested.begin(), tested.end(), Backend::kCuda) == tested.end())  // no GPU here: a clear refusal
    cases.push_back({Model("mlp") + " --teacher " + Model("mlp") + kData + " -o " + out + " --device cuda",
                     "device 'cuda' is not available"});
  for (const Case& c : cases) {
    SCOPED_TRACE(c.args);
    CmdResult r = Tool(dir, "finetune-model", c.args);
    EXPECT_NE(r.code, 0);
    EXPECT_NE(r.err.find(c.says), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_FALSE(std::filesystem::exists(out));
    EXPECT_FALSE(std::filesystem::exists(dir / "no"));
  }
  // Only the captured stderr was ever there: no report, no temporary.
  std::vector<std::string> left;
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) left.push_back(e.path().filename().string());
  EXPECT_TRUE(left.empty()) << left.front();
}

// The value of attribute `name` in an HTML start tag; nullopt when absent.
std::optional<double> Attr(const std::string& tag, const std::string& name) {
  const std::string key = " " + name + "=\"";
  const size_t at = tag.find(key);
  if (at == std::string::npos) return std::nullopt;
  return std::stod(tag.substr(at + key.size()));
}

TEST(FinetuneModelCli, ReportHoldsTheEpochsAndChartsOfTheJsonHistory) {
  testing::ScratchDir dir;
  const std::string student = PrunedMlp(dir), out = dir / "ft.onnx", html = dir / "ft.html";
  CmdResult r = Tool(dir, "finetune-model", student + " --teacher " + Model("mlp") + kData + " -o " + out +
                                                " --epochs 2 --batch 32 --optimizer adamw --lr 0.01 --json --report " + html +
                                                " --external-data-threshold 4K");
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["epochs"].size(), 2u);
  ASSERT_TRUE(j["accuracy_before"].is_number()) << r.out;
  ASSERT_TRUE(j["teacher_accuracy"].is_number()) << r.out;
  const double before = j["accuracy_before"].get<double>();
  // The student measured before epoch 1 is the student run-model measures.
  CmdResult rm = Tool(dir, "run-model", student + " --eval-data fashion-mnist:test --limit 300 --json");
  ASSERT_EQ(rm.code, 0) << rm.err;
  EXPECT_NEAR(before, nlohmann::json::parse(rm.out)["accuracy"].get<double>(), 1e-9);
  EXPECT_GT(j["best_eval_accuracy"].get<double>(), before);
  // Written as ONNX external data (OUT.onnx + OUT.onnx.data), counted with both files.
  ASSERT_TRUE(std::filesystem::exists(out + ".data"));
  EXPECT_EQ(j["output_file_bytes"].get<int64_t>(),
            static_cast<int64_t>(std::filesystem::file_size(out) + std::filesystem::file_size(out + ".data")));
  EXPECT_GT(j["output_params"].get<int64_t>(), 100000);  // the pruned MLP's weights and biases

  const std::string page = ReadFile(html);
  ASSERT_EQ(page.rfind("<!DOCTYPE html>", 0), 0u) << page.substr(0, 200);
  EXPECT_NE(page.find("</html>"), std::string::npos);
  // Self-contained: no scripts, no links or sources, the only URL the SVG namespace.
  for (const char* banned : {"<script", "src=", "href=", "<link", "url("}) EXPECT_EQ(page.find(banned), std::string::npos) << banned;
  const std::regex url("https?://[^\"' <]*");
  for (auto it = std::sregex_iterator(page.begin(), page.end(), url); it != std::sregex_iterator(); ++it)
    EXPECT_EQ(it->str(), "http://www.w3.org/2000/svg");
  // The loss and accuracy charts, each with a point per epoch (plus "before" for accuracy).
  for (const char* chart : {"class=\"chart line loss\"", "class=\"chart line accuracy\""})
    EXPECT_NE(page.find(chart), std::string::npos) << chart;
  const size_t loss_svg = page.find("class=\"chart line loss\""), acc_svg = page.find("class=\"chart line accuracy\"");
  auto circles = [&](size_t from) {
    const std::string svg = page.substr(from, page.find("</svg>", from) - from);
    int n = 0;
    for (size_t p = svg.find("<circle"); p != std::string::npos; p = svg.find("<circle", p + 1)) ++n;
    return n;
  };
  EXPECT_EQ(circles(loss_svg), 2);
  EXPECT_EQ(circles(acc_svg), 3 + 2);  // eval: before + 2 epochs; train: 2 epochs
  // One row per epoch, its figures those of --json.
  std::map<int, std::string> rows;
  for (size_t p = page.find("<tr class=\"epoch"); p != std::string::npos; p = page.find("<tr class=\"epoch", p + 1)) {
    const std::string tag = page.substr(p, page.find('>', p) - p);
    rows[static_cast<int>(Attr(tag, "data-epoch").value_or(-1))] = page.substr(p, page.find("</tr>", p) - p);
  }
  ASSERT_EQ(rows.size(), 2u);
  for (const auto& e : j["epochs"]) {
    const int n = e["epoch"].get<int>();
    ASSERT_TRUE(rows.count(n)) << n;
    const std::string& row = rows[n];
    EXPECT_EQ(Attr(row, "data-loss").value_or(-1), e["loss"].get<double>()) << row;
    EXPECT_EQ(Attr(row, "data-eval-accuracy").value_or(-1), e["eval_accuracy"].get<double>()) << row;
    EXPECT_EQ(Attr(row, "data-train-accuracy").value_or(-1), e["train_accuracy"].get<double>()) << row;
    char loss[32];
    std::snprintf(loss, sizeof loss, ">%.4f<", e["loss"].get<double>());
    EXPECT_NE(row.find(loss), std::string::npos) << loss << " in " << row;
  }
  const size_t before_row = page.find("<tr class=\"before\"");
  ASSERT_NE(before_row, std::string::npos);
  EXPECT_EQ(Attr(page.substr(before_row, page.find('>', before_row) - before_row), "data-eval-accuracy").value_or(-1),
            before);
  EXPECT_NE(rows[j["best_epoch"].get<int>()].find("(best)"), std::string::npos);
  // The command, the options, the teacher's accuracy and the output's size.
  std::string bytes = std::to_string(j["output_file_bytes"].get<int64_t>());  // grouped: 1,234,567
  for (int i = static_cast<int>(bytes.size()) - 3; i > 0; i -= 3) bytes.insert(static_cast<size_t>(i), ",");
  char teacher[32];
  std::snprintf(teacher, sizeof teacher, "%.2f%%", 100 * j["teacher_accuracy"].get<double>());
  for (const std::string& s : {std::string("--report"), std::string("adamw"), std::string("temperature"),
                               std::string(teacher), std::string("output params"),
                               bytes + " bytes"})
    EXPECT_NE(page.find(s), std::string::npos) << s;
}

TEST(FinetuneModelCli, TextOutputGivesTheAccuracyBeforeFineTuning) {
  testing::ScratchDir dir;
  const std::string out = dir / "ft.onnx";
  const std::string data = " --train-data fashion-mnist:train --train-limit 256 --eval-data fashion-mnist:test --eval-limit 200";
  CmdResult r = Tool(dir, "finetune-model", Model("mlp") + " --teacher " + Model("mlp") + data + " -o " + out);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("student before fine-tuning: eval accuracy 0."), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("; before fine-tuning 0."), std::string::npos) << r.err;
}

// Starts finetune-model with args in a child process; returns its pid.
pid_t Spawn(const std::vector<std::string>& args) {
  const pid_t pid = fork();
  if (pid == 0) {
    std::vector<char*> argv;
    const std::string bin = Bin("finetune-model");
    argv.push_back(const_cast<char*>(bin.c_str()));
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(bin.c_str(), argv.data());
    _exit(127);
  }
  return pid;
}

TEST(FinetuneModelCli, KilledRunResumesToTheSameWeights) {
  testing::ScratchDir dir;
  const std::string ckpt = dir / "ckpt", killed_out = dir / "killed.onnx", clean_out = dir / "clean.onnx";
  auto args = [&](const std::string& out, const std::string& ck) {
    return std::vector<std::string>{Model("cnn"), "--teacher", Model("cnn"), "--train-data", "fashion-mnist:train",
                                    "--train-limit", "3072", "--epochs", "3", "--batch", "64", "--threads", "1",
                                    "--seed", "7", "-q", "-o", out, "--checkpoint-dir", ck};
  };
  // Kill it as soon as the first epoch's checkpoint is complete: it is then inside epoch 2.
  const pid_t pid = Spawn(args(killed_out, ckpt));
  ASSERT_GT(pid, 0);
  bool killed_mid_run = false;
  for (int i = 0; i < 6000; ++i) {
    int st = 0;
    if (waitpid(pid, &st, WNOHANG) == pid) break;  // finished before the checkpoint appeared (fails below)
    if (std::filesystem::exists(ckpt + "/state.json")) {
      kill(pid, SIGKILL);
      waitpid(pid, &st, 0);
      killed_mid_run = WIFSIGNALED(st);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_TRUE(killed_mid_run);
  EXPECT_FALSE(std::filesystem::exists(killed_out));  // nothing half-written
  const nlohmann::json state = nlohmann::json::parse(ReadFile(ckpt + "/state.json"));
  EXPECT_LT(state["epoch_done"].get<int>(), 2);
  // Resume, and a run that was never killed.
  std::vector<std::string> resume = args(killed_out, ckpt);
  resume.push_back("--resume");
  std::string cmd_resume = Bin("finetune-model"), cmd_clean = Bin("finetune-model");
  for (size_t i = 0; i < resume.size(); ++i) cmd_resume += " " + resume[i];
  const std::vector<std::string> clean = args(clean_out, dir / "ckpt_clean");
  for (const std::string& a : clean) cmd_clean += " " + a;
  ASSERT_EQ(testing::RunCommand(cmd_resume + " 2>&1").code, 0);
  ASSERT_EQ(testing::RunCommand(cmd_clean + " 2>&1").code, 0);
  auto a = LoadModel(killed_out);
  auto b = LoadModel(clean_out);
  ASSERT_TRUE(a.ok() && b.ok());
  int compared = 0;
  for (const Value& v : b->values()) {
    if (!v.initializer || v.initializer->dtype() != DType::kFloat32) continue;
    const int k = a->FindValue(v.name);
    ASSERT_GE(k, 0);
    const Tensor& x = *a->value(k).initializer;
    const Tensor& y = *v.initializer;
    ASSERT_EQ(x.dims(), y.dims());
    for (int64_t i = 0; i < y.numel(); ++i) ASSERT_NEAR(x.data<float>()[i], y.data<float>()[i], 1e-6f) << v.name;
    ++compared;
  }
  EXPECT_EQ(compared, 8);
}

}  // namespace
}  // namespace whittle
