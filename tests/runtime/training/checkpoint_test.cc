// Checkpoint and resume of fine-tuning as a library call (runtime/training/checkpoint.h): a run
// checkpointed after its first epoch and resumed by a fresh Trainer ends with the same weights,
// history and best epoch as a run that was never interrupted — a run the divergence guard rolled
// back in epoch 1 goes on at the lowered rate, and an lr=auto run at the rates its range test
// chose, without testing again; a checkpoint of another student is refused, a directory without
// one resumes nothing, and a checkpoint without the guard's and lr=auto's fields still loads.
#include "runtime/training/checkpoint.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "lib/data/dataset.h"
#include "lib/data/file_util.h"
#include "lib/onnx/model_io.h"
#include "lib/ops/op_def.h"
#include "tests/util/scratch_dir.h"
#include "tests/util/test_util.h"

namespace whittle::training {
namespace {

// Stops the run (as a kill would) once epoch `stop_after` is done and checkpointed (-1: never),
// and keeps the run's lines.
class StopAfter : public FinetuneObserver {
 public:
  explicit StopAfter(int epoch) : epoch_(epoch) {}
  void Line(const std::string& text) override { lines.push_back(text); }
  Status EpochDone(Trainer&, const FinetuneHistory&, const Graph*, int epoch) override {
    return epoch == epoch_ ? Internal("stopped") : Status::Ok();
  }
  int Count(const std::string& prefix) const {
    int n = 0;
    for (const std::string& l : lines) n += l.rfind(prefix, 0) == 0;
    return n;
  }
  std::vector<std::string> lines;

 private:
  int epoch_;
};

void ExpectSameWeights(const Graph& a, const Graph& b) {
  int compared = 0;
  for (const Value& v : b.values()) {
    if (!v.initializer || v.initializer->dtype() != DType::kFloat32) continue;
    const int k = a.FindValue(v.name);
    ASSERT_GE(k, 0) << v.name;
    ASSERT_TRUE(a.value(k).initializer->BitwiseEquals(*v.initializer)) << v.name;
    ++compared;
  }
  EXPECT_GT(compared, 0);
}

TEST(Checkpoint, SaveThenResumeEqualsAnUninterruptedRun) {
  RegisterAllOps();
  auto mlp = LoadModel(std::string(WHITTLE_SOURCE_DIR) + "/models/mlp.onnx");
  ASSERT_TRUE(mlp.ok()) << mlp.status().message();
  auto train = LoadDataset("fashion-mnist:train", 256);
  auto eval = LoadDataset("fashion-mnist:test", 100);
  ASSERT_TRUE(train.ok() && eval.ok());
  TrainOptions o;
  o.epochs = 3;
  o.batch = 32;
  o.optimizer = OptimizerKind::kAdamW;  // both optimizer moments matter
  // (AdamW at this rate diverges early in epoch 1 on the MLP: the checkpoint carries the lowered
  // rate the guard's rollback left.)

  // Uninterrupted.
  auto clean_t = Trainer::Create(*mlp, &*mlp, o);
  ASSERT_TRUE(clean_t.ok()) << clean_t.status().message();
  FinetuneRun run;
  run.epochs = o.epochs;
  FinetuneHistory clean_h;
  auto clean = RunFinetune(**clean_t, *train, &*eval, run, &clean_h);
  ASSERT_TRUE(clean.ok()) << clean.status().message();

  // Checkpointed after every epoch, stopped after the first.
  testing::ScratchDir dir;
  const std::string ckpt = dir / "ckpt";
  {
    auto t = Trainer::Create(*mlp, &*mlp, o);
    ASSERT_TRUE(t.ok());
    StopAfter stop(0);
    CheckpointWriter writer(ckpt, &stop);
    FinetuneHistory h;
    auto r = RunFinetune(**t, *train, &*eval, run, &h, &writer);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().message(), "stopped");
  }
  EXPECT_TRUE(std::filesystem::exists(ckpt + "/state.json"));
  EXPECT_TRUE(std::filesystem::exists(ckpt + "/epoch_1/model.onnx"));

  // Resumed by a fresh Trainer from the checkpoint's student.
  auto c = ReadCheckpoint(ckpt);
  ASSERT_TRUE(c.ok()) << c.status().message();
  ASSERT_TRUE(c->has_value());
  EXPECT_EQ((*c)->epoch_done, 0);
  auto t = Trainer::Create((*c)->model, &*mlp, o);
  ASSERT_TRUE(t.ok()) << t.status().message();
  auto resumed_run = ResumeFinetune(std::move(**c), **t, o.epochs);
  ASSERT_TRUE(resumed_run.ok()) << resumed_run.status().message();
  EXPECT_EQ(resumed_run->first_epoch, 1);
  FinetuneHistory h;
  CheckpointWriter writer(ckpt, nullptr);
  auto resumed = RunFinetune(**t, *train, &*eval, std::move(*resumed_run), &h, &writer);
  ASSERT_TRUE(resumed.ok()) << resumed.status().message();

  ExpectSameWeights(*resumed, *clean);
  ExpectSameWeights((*t)->CurrentModel(), (*clean_t)->CurrentModel());
  ASSERT_EQ(h.epochs.size(), clean_h.epochs.size());
  for (size_t i = 0; i < h.epochs.size(); ++i) {
    EXPECT_EQ(h.epochs[i].epoch, clean_h.epochs[i].epoch);
    EXPECT_DOUBLE_EQ(h.epochs[i].loss, clean_h.epochs[i].loss) << i;
    EXPECT_DOUBLE_EQ(h.eval_accuracy[i], clean_h.eval_accuracy[i]) << i;
  }
  EXPECT_EQ(h.best_epoch, clean_h.best_epoch);
  EXPECT_DOUBLE_EQ(h.before, clean_h.before);
  // The last checkpoint is the run's end; the folders before it are gone.
  EXPECT_TRUE(std::filesystem::exists(ckpt + "/epoch_3/model.onnx"));
  EXPECT_FALSE(std::filesystem::exists(ckpt + "/epoch_1"));
}

// The bundled MLP as its own teacher, 384 training and 200 eval samples, batch 32, 2 epochs; a
// run uninterrupted and the same run stopped after epoch 1 and resumed from its checkpoint.
class CheckpointResume : public ::testing::Test {
 protected:
  void SetUp() override {
    ::whittle::testing::LoadMlpAndData(384, 200, &mlp, &train, &eval);
    if (HasFatalFailure()) return;
    o.epochs = 2;
    o.batch = 32;
  }

  // The run of o, uninterrupted: clean_t, clean_h, clean (the model it gives back), clean_obs.
  void RunClean() {
    auto t = Trainer::Create(*mlp, &*mlp, o);
    ASSERT_TRUE(t.ok()) << t.status().message();
    clean_t = std::move(*t);
    FinetuneRun run;
    run.epochs = o.epochs;
    auto out = RunFinetune(*clean_t, *train, &*eval, run, &clean_h, &clean_obs);
    ASSERT_TRUE(out.ok()) << out.status().message();
    clean = std::move(*out);
  }

  // The run of o checkpointed after every epoch and stopped after the first (first_obs), then
  // resumed by a fresh Trainer from the checkpoint (t, h, out, obs).
  void RunResumed() {
    const std::string ckpt = dir / "ckpt";
    {
      auto t1 = Trainer::Create(*mlp, &*mlp, o);
      ASSERT_TRUE(t1.ok()) << t1.status().message();
      CheckpointWriter writer(ckpt, &first_obs);
      FinetuneRun run;
      run.epochs = o.epochs;
      FinetuneHistory h1;
      auto r = RunFinetune(**t1, *train, &*eval, run, &h1, &writer);
      ASSERT_FALSE(r.ok());
      EXPECT_EQ(r.status().message(), "stopped");
    }
    auto c = ReadCheckpoint(ckpt);
    ASSERT_TRUE(c.ok()) << c.status().message();
    ASSERT_TRUE(c->has_value());
    EXPECT_EQ((*c)->epoch_done, 0);
    checkpoint = **c;
    auto t2 = Trainer::Create((*c)->model, &*mlp, o);
    ASSERT_TRUE(t2.ok()) << t2.status().message();
    t = std::move(*t2);
    auto run = ResumeFinetune(std::move(**c), *t, o.epochs);
    ASSERT_TRUE(run.ok()) << run.status().message();
    EXPECT_EQ(run->first_epoch, 1);
    resumed_peak_lr = t->peak_lr();
    CheckpointWriter writer(ckpt, &obs);
    auto r = RunFinetune(*t, *train, &*eval, std::move(*run), &h, &writer);
    ASSERT_TRUE(r.ok()) << r.status().message();
    out = std::move(*r);
  }

  void ExpectSameRun() {
    ExpectSameWeights(*out, *clean);
    ExpectSameWeights(t->CurrentModel(), clean_t->CurrentModel());
    EXPECT_EQ(t->rollbacks(), clean_t->rollbacks());
    EXPECT_EQ(t->rollback_lr_factor(), clean_t->rollback_lr_factor());
    EXPECT_EQ(t->peak_lr(), clean_t->peak_lr());
    EXPECT_EQ(t->lr_scales(), clean_t->lr_scales());
    ASSERT_EQ(h.epochs.size(), clean_h.epochs.size());
    for (size_t i = 0; i < h.epochs.size(); ++i) {
      EXPECT_DOUBLE_EQ(h.epochs[i].loss, clean_h.epochs[i].loss) << i;
      EXPECT_DOUBLE_EQ(h.eval_accuracy[i], clean_h.eval_accuracy[i]) << i;
      EXPECT_EQ(h.epochs[i].rollbacks.size(), clean_h.epochs[i].rollbacks.size()) << i;
      EXPECT_EQ(h.epochs[i].lr_end, clean_h.epochs[i].lr_end) << i;
      EXPECT_EQ(h.epochs[i].gave_up, clean_h.epochs[i].gave_up) << i;
    }
    ASSERT_EQ(h.rollbacks.size(), clean_h.rollbacks.size());
    for (size_t i = 0; i < h.rollbacks.size(); ++i) EXPECT_EQ(RollbackLine(h.rollbacks[i]), RollbackLine(clean_h.rollbacks[i]));
    EXPECT_EQ(h.gave_up, clean_h.gave_up);
    EXPECT_EQ(h.lr_final, clean_h.lr_final);
    EXPECT_EQ(h.best_epoch, clean_h.best_epoch);
    ASSERT_EQ(h.lr_auto.size(), clean_h.lr_auto.size());
    for (size_t i = 0; i < h.lr_auto.size(); ++i) {
      EXPECT_EQ(h.lr_auto[i].kind, clean_h.lr_auto[i].kind);
      EXPECT_EQ(h.lr_auto[i].lr, clean_h.lr_auto[i].lr);
      EXPECT_EQ(h.lr_auto[i].params, clean_h.lr_auto[i].params);
      EXPECT_EQ(h.lr_auto[i].steps, clean_h.lr_auto[i].steps);
    }
  }

  std::optional<Graph> mlp;
  std::optional<Dataset> train, eval;
  TrainOptions o;
  testing::ScratchDir dir;
  std::unique_ptr<Trainer> clean_t, t;
  FinetuneHistory clean_h, h;
  std::optional<Graph> clean, out;
  std::optional<Checkpoint> checkpoint;  // as read after epoch 1
  float resumed_peak_lr = 0;             // t's right after ResumeFinetune
  StopAfter clean_obs{-1}, first_obs{0}, obs{-1};
};

// lr=50 diverges within epoch 1 (AnAbsurdRateRollsBackAndTrainsAtALowerOne): the checkpoint
// after it holds the rollbacks and the lowered rate's factor, and the resumed epoch 2 trains at
// that rate, as the uninterrupted run's does.
TEST_F(CheckpointResume, AfterARollbackGoesOnAtTheLoweredRate) {
  o.lr = 50.f;
  RunClean();
  ASSERT_FALSE(clean_h.epochs.empty());
  ASSERT_FALSE(clean_h.epochs[0].rollbacks.empty()) << "the rate should diverge in epoch 1";
  ASSERT_LT(clean_h.epochs[0].lr_end, o.lr);
  RunResumed();
  ASSERT_TRUE(checkpoint);
  EXPECT_EQ(checkpoint->rollbacks, static_cast<int>(clean_h.epochs[0].rollbacks.size()));
  EXPECT_FLOAT_EQ(checkpoint->lr_factor * o.lr, clean_h.epochs[0].lr_end);
  EXPECT_EQ(checkpoint->history.rollbacks.size(), clean_h.epochs[0].rollbacks.size());
  EXPECT_FALSE(checkpoint->lr_auto_lr) << "no lr=auto, no saved rates";
  EXPECT_EQ(resumed_peak_lr, clean_h.epochs[0].lr_end);
  EXPECT_EQ(first_obs.Count("diverged at step "), static_cast<int>(clean_h.epochs[0].rollbacks.size()));
  ExpectSameRun();
}

// lr=auto: the range test runs once, before epoch 1; the resumed run takes the checkpoint's rates
// (the base rate and the multipliers) and does not test again.
TEST_F(CheckpointResume, LrAutoDoesNotRunTheRangeTestAgain) {
  o.lr_auto = true;
  o.lr = 123.f;  // ignored with lr=auto: a resumed run that used it would diverge
  RunClean();
  EXPECT_EQ(clean_obs.Count("lr=auto (range test"), 1);
  ASSERT_FALSE(clean_h.lr_auto.empty());
  RunResumed();
  EXPECT_EQ(first_obs.Count("lr=auto (range test"), 1);
  EXPECT_EQ(obs.Count("lr=auto (range test"), 0) << "the resumed run tested again";
  ASSERT_TRUE(checkpoint && checkpoint->lr_auto_lr);
  EXPECT_EQ(*checkpoint->lr_auto_lr, clean_t->lr());
  EXPECT_EQ(checkpoint->lr_auto_scales, clean_t->lr_scales());
  EXPECT_EQ(t->lr(), clean_t->lr());
  EXPECT_EQ(resumed_peak_lr, clean_t->lr());
  EXPECT_FALSE(t->options().lr_auto) << "the rates are set";
  ExpectSameRun();
}

// A checkpoint written before the guard's and lr=auto's fields: it loads, and resumes with no
// rollback, the full rate and (with lr=auto) a fresh range test.
TEST_F(CheckpointResume, AnOlderCheckpointLoadsWithDefaults) {
  o.epochs = 1;
  o.lr_auto = true;
  auto t1 = Trainer::Create(*mlp, &*mlp, o);
  ASSERT_TRUE(t1.ok());
  FinetuneHistory h1;
  h1.lr_auto.push_back(GroupRate{"dense", 6, 0.01f, 0.1f, 2.0, 1.0, 50});
  (*t1)->SetRollbackState(1, 0.1f);
  const std::string ckpt = dir / "ckpt";
  ASSERT_TRUE(SaveCheckpoint(ckpt, **t1, nullptr, h1, 0).ok());
  auto bytes = ReadFileBytes(ckpt + "/state.json");
  ASSERT_TRUE(bytes.ok());
  nlohmann::json s = nlohmann::json::parse(*bytes);
  for (const char* k : {"rollbacks", "lr_factor", "lr_auto", "lr_auto_rates", "divergences", "gave_up", "lr_final"}) {
    EXPECT_TRUE(s.contains(k)) << k;
    s.erase(k);
  }
  ASSERT_TRUE(WriteFileAtomically(ckpt + "/state.json", s.dump(1)).ok());
  auto c = ReadCheckpoint(ckpt);
  ASSERT_TRUE(c.ok() && c->has_value()) << c.status().message();
  EXPECT_EQ((*c)->rollbacks, 0);
  EXPECT_EQ((*c)->lr_factor, 1.f);
  EXPECT_FALSE((*c)->lr_auto_lr);
  EXPECT_TRUE((*c)->history.rollbacks.empty());
  EXPECT_TRUE((*c)->history.lr_auto.empty());
  EXPECT_EQ((*c)->history.lr_final, -1.f);
  auto t2 = Trainer::Create((*c)->model, &*mlp, o);
  ASSERT_TRUE(t2.ok());
  auto run = ResumeFinetune(std::move(**c), **t2, 2);
  ASSERT_TRUE(run.ok()) << run.status().message();
  EXPECT_EQ((*t2)->rollbacks(), 0);
  EXPECT_EQ((*t2)->rollback_lr_factor(), 1.f);
  EXPECT_TRUE((*t2)->options().lr_auto) << "no saved rates: the range test runs";
}

TEST(Checkpoint, NoneOrAnotherStudents) {
  RegisterAllOps();
  testing::ScratchDir dir;
  auto none = ReadCheckpoint(dir / "empty");
  ASSERT_TRUE(none.ok()) << none.status().message();
  EXPECT_FALSE(none->has_value());

  auto mlp = LoadModel(std::string(WHITTLE_SOURCE_DIR) + "/models/mlp.onnx");
  auto cnn = LoadModel(std::string(WHITTLE_SOURCE_DIR) + "/models/cnn.onnx");
  auto train = LoadDataset("fashion-mnist:train", 64);
  ASSERT_TRUE(mlp.ok() && cnn.ok() && train.ok());
  TrainOptions o;
  o.epochs = 1;
  o.batch = 32;
  auto t = Trainer::Create(*mlp, &*mlp, o);
  ASSERT_TRUE(t.ok());
  FinetuneHistory h;
  ASSERT_TRUE(SaveCheckpoint(dir / "ckpt", **t, nullptr, h, 0).ok());
  auto c = ReadCheckpoint(dir / "ckpt");
  ASSERT_TRUE(c.ok() && c->has_value()) << c.status().message();
  auto other = Trainer::Create(*cnn, &*cnn, o);
  ASSERT_TRUE(other.ok());
  auto r = ResumeFinetune(std::move(**c), **other, 1);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("does not belong to this student"), std::string::npos) << r.status().message();
}

}  // namespace
}  // namespace whittle::training
