// The shared fine-tune driver (runtime/training/finetune.h): the --finetune SPEC parser (values
// and errors that name the key), and the epoch loop's contract — the accuracy before epoch 1,
// one history entry per epoch, the best epoch's model returned, and an EpochDone error stopping
// the run.
#include "runtime/training/finetune.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "lib/data/dataset.h"
#include "lib/onnx/model_io.h"
#include "lib/ops/op_def.h"
#include "tests/util/test_util.h"

namespace whittle::training {
namespace {

TEST(FinetuneSpec, ParsesEveryKeyOverTheDefaults) {
  TrainOptions d;
  d.threads = 3;
  auto o = ParseFinetuneSpec(
      "epochs=3,lr=0.02,batch=16,optimizer=adamw,temperature=2.5,alpha=0.25,no-labels=1,seed=9,sync=average:4", d);
  ASSERT_TRUE(o.ok()) << o.status().message();
  EXPECT_EQ(o->epochs, 3);
  EXPECT_FLOAT_EQ(o->lr, 0.02f);
  EXPECT_EQ(o->batch, 16);
  EXPECT_EQ(o->optimizer, OptimizerKind::kAdamW);
  EXPECT_FLOAT_EQ(o->temperature, 2.5f);
  EXPECT_FLOAT_EQ(o->alpha, 0.25f);
  EXPECT_FALSE(o->use_labels);
  EXPECT_EQ(o->seed, 9u);
  EXPECT_EQ(o->average_every, 4);
  EXPECT_EQ(o->threads, 3);  // untouched defaults stay
  auto empty = ParseFinetuneSpec("", d);
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->epochs, d.epochs);
  EXPECT_TRUE(empty->use_labels);
}

TEST(FinetuneSpec, ErrorsNameTheKey) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"epochs=0", "epochs=0"},        {"epochs=2.5", "epochs='2.5'"},   {"lr=-1", "lr=-1"},
      {"lr=fast", "lr='fast'"},        {"batch=", "batch=''"},            {"optimizer=rmsprop", "optimizer='rmsprop'"},
      {"alpha=1.01", "alpha=1.01"},    {"temperature=0", "temperature=0"}, {"no-labels=yes", "no-labels='yes'"},
      {"epochs=1,speed=2", "'speed'"}, {"epochs=1,,lr=0.1", "not key=value"}, {"=3", "not key=value"},
      {"sync=average:0", "sync='average:0'"}, {"sync=allreduce", "sync='allreduce'"},
  };
  for (const auto& [spec, says] : cases) {
    auto o = ParseFinetuneSpec(spec, TrainOptions{});
    ASSERT_FALSE(o.ok()) << spec;
    EXPECT_NE(o.status().message().find(says), std::string::npos) << spec << ": " << o.status().message();
    EXPECT_EQ(o.status().message().find('\n'), std::string::npos) << spec;
  }
}

class Recorder : public FinetuneObserver {
 public:
  void Line(const std::string& text) override { lines.push_back(text); }
  Status EpochDone(Trainer&, const FinetuneHistory& h, const Graph* best, int epoch) override {
    epochs_seen.push_back(epoch);
    had_best = best != nullptr;
    EXPECT_EQ(h.epochs.size(), epochs_seen.size());
    return epoch == stop_after ? InvalidArgument("disk full") : Status::Ok();
  }
  std::vector<std::string> lines;
  std::vector<int> epochs_seen;
  bool had_best = false;
  int stop_after = -1;
};

// (Inside these tests the fixture's name hides the function: calls are qualified.)
// The bundled MLP as its own teacher, 128 training and 100 eval samples, two epochs of batch 32.
class RunFinetune : public ::testing::Test {
 protected:
  void SetUp() override {
    ::whittle::testing::LoadMlpAndData(128, 100, &mlp, &train, &eval);
    if (HasFatalFailure()) return;
    o.epochs = 2;
    o.batch = 32;
  }
  std::optional<Graph> mlp;
  std::optional<Dataset> train, eval;
  TrainOptions o;
};

TEST_F(RunFinetune, MeasuresBeforeKeepsTheBestAndStopsOnAHookError) {
  auto t = Trainer::Create(*mlp, &*mlp, o);
  ASSERT_TRUE(t.ok()) << t.status().message();
  const double before = *(*t)->Evaluate(*eval);

  Recorder rec;
  FinetuneRun run;
  run.epochs = 2;
  FinetuneHistory h;
  auto out = ::whittle::training::RunFinetune(**t, *train, &*eval, run, &h, &rec);
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_DOUBLE_EQ(h.before, before);
  ASSERT_EQ(h.epochs.size(), 2u);
  ASSERT_EQ(h.eval_accuracy.size(), 2u);
  EXPECT_EQ(rec.epochs_seen, (std::vector<int>{0, 1}));
  EXPECT_TRUE(rec.had_best);
  ASSERT_GE(h.best_epoch, 0);
  EXPECT_DOUBLE_EQ(h.best, h.eval_accuracy[static_cast<size_t>(h.best_epoch)]);
  EXPECT_GE(h.best, std::max(h.eval_accuracy[0], h.eval_accuracy[1]));
  ASSERT_EQ(rec.lines.size(), 3u);  // before, then one line per epoch
  EXPECT_EQ(rec.lines[0].rfind("student before fine-tuning: eval accuracy ", 0), 0u) << rec.lines[0];
  EXPECT_EQ(rec.lines[2], EpochLine(h.epochs[1], 2, h.eval_accuracy[1]));
  EXPECT_EQ(rec.lines[1].rfind("[epoch 1/2] loss ", 0), 0u) << rec.lines[1];

  // Without eval data: no "before", the last epoch's model; a hook error ends the run.
  Recorder stop;
  stop.stop_after = 0;
  FinetuneHistory h2;
  auto t2 = Trainer::Create(*mlp, &*mlp, o);
  ASSERT_TRUE(t2.ok());
  auto failed = ::whittle::training::RunFinetune(**t2, *train, nullptr, run, &h2, &stop);
  ASSERT_FALSE(failed.ok());
  EXPECT_NE(failed.status().message().find("disk full"), std::string::npos);
  EXPECT_EQ(stop.epochs_seen, (std::vector<int>{0}));
  EXPECT_LT(h2.before, 0);
  EXPECT_FALSE(stop.had_best);
}

// No silent failure (issue 41): a learning rate far too high makes every epoch worse than the
// student it started from; the run gives back the student itself, bit for bit, and says so
// (kept_student), instead of the best of the worse epochs.
TEST_F(RunFinetune, AFineTuneThatOnlyLosesGivesBackTheStudent) {
  o.lr = 50.f;  // with the default clipping (norm 5): steps of about 30, finite but ruinous
  o.divergence_guard = false;  // the guard would roll it back to a rate that trains (divergence_test.cc)
  auto t = Trainer::Create(*mlp, &*mlp, o);
  ASSERT_TRUE(t.ok()) << t.status().message();
  FinetuneRun run;
  run.epochs = 2;
  FinetuneHistory h;
  auto out = ::whittle::training::RunFinetune(**t, *train, &*eval, run, &h);
  ASSERT_TRUE(out.ok()) << out.status().message();
  ASSERT_GE(h.before, 0);
  EXPECT_LT(h.best, h.before) << "the high rate was meant to lose accuracy";
  EXPECT_TRUE(h.kept_student);
  EXPECT_DOUBLE_EQ(h.result_accuracy(), h.before);
  size_t compared = 0;
  for (const Value& v : mlp->values()) {
    if (!v.initializer) continue;
    const int w = out->FindValue(v.name);
    ASSERT_GE(w, 0) << v.name;
    ASSERT_TRUE(out->value(w).initializer) << v.name;
    EXPECT_TRUE(out->value(w).initializer->BitwiseEquals(*v.initializer)) << v.name;
    ++compared;
  }
  EXPECT_GT(compared, 0u);
}

}  // namespace
}  // namespace whittle::training
