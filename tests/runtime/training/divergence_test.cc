// Fine-tuning that never silently makes things worse (issue 45): the divergence guard
// (runtime/training/divergence.h) and the Trainer's rollback — a rate far too high is detected,
// rolled back to the last healthy state at a tenth of the rate, reported, and the run gives back
// a model no worse than the student; one past the rollback limit gives up — and lr=auto's range
// test (runtime/training/lr_finder.h): the param groups of a compressed student, a rate per group
// within the sweep, the state restored, and a fine-tune at the rates it picked that does not
// diverge.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "lib/data/dataset.h"
#include "lib/onnx/model_io.h"
#include "lib/ops/op_def.h"
#include "passes/cluster/cluster_pass.h"
#include "passes/svd/svd_pass.h"
#include "runtime/training/divergence.h"
#include "runtime/training/finetune.h"
#include "runtime/training/lr_finder.h"
#include "runtime/training/trainer.h"
#include "tests/util/test_util.h"

namespace whittle::training {
namespace {

TEST(DivergenceGuard, AClimbingOrNonFiniteLossIsDivergenceNoiseIsNot) {
  DivergenceGuard g(4.0);
  // A noisy but steady loss: batches from half to twice the level never trip it.
  const double noisy[] = {0.4, 0.2, 0.8, 0.3, 0.5, 0.25, 0.7, 0.4, 0.35, 0.6, 0.2, 0.8, 0.45};
  for (double l : noisy) EXPECT_FALSE(g.Diverged(l)) << l;
  EXPECT_TRUE(g.Healthy());
  const double ema = g.smoothed(), ref = g.reference();
  EXPECT_GT(ref, 0.1);
  EXPECT_LE(ref, 0.4);
  // Not finite, either way: divergence, and the guard's state stays as it was.
  EXPECT_TRUE(g.Diverged(std::numeric_limits<double>::quiet_NaN()));
  EXPECT_TRUE(g.Diverged(0.3, /*finite=*/false));
  EXPECT_TRUE(g.Diverged(HUGE_VAL));
  EXPECT_DOUBLE_EQ(g.smoothed(), ema);
  // A climb of 25 % a step: the average crosses 4x its lowest within a dozen steps, and the
  // steps just before the crossing were no longer healthy (no snapshot there).
  int steps = 0;
  for (double l = 0.45; !g.Diverged(l) && steps < 50; l *= 1.25) ++steps;
  EXPECT_GT(steps, 3);
  EXPECT_LT(steps, 20);
  EXPECT_GT(g.last_seen(), 4 * g.reference());
  EXPECT_FALSE(g.Healthy());
  // A jump: at once.
  DivergenceGuard jump(4.0);
  EXPECT_FALSE(jump.Diverged(0.3));
  EXPECT_TRUE(jump.Diverged(20.0));
  // A loss near zero may double with the batch: not divergence below the absolute margin.
  DivergenceGuard small(4.0);
  for (double l : {0.01, 0.02, 0.005, 0.06, 0.08, 0.07, 0.06}) EXPECT_FALSE(small.Diverged(l)) << l;
}

TEST(DivergenceGuard, RollbackLineSaysWhatHappened) {
  Rollback r;
  r.epoch = 0;
  r.step = 312;
  r.loss = 9.9;
  r.was = 0.41;
  r.to_step = 256;
  r.lr_before = 0.05f;
  r.lr_after = 0.005f;
  EXPECT_EQ(RollbackLine(r), "diverged at step 312 of epoch 1 (loss 9.9, was 0.41): rolled back to step 256, lr 0.05 -> 0.005");
  r.loss = std::numeric_limits<double>::quiet_NaN();
  r.gave_up = true;
  const std::string s = RollbackLine(r);
  EXPECT_NE(s.find("loss not finite"), std::string::npos) << s;
  EXPECT_NE(s.find("gave up"), std::string::npos) << s;
}

class Recorder : public FinetuneObserver {
 public:
  void Line(const std::string& text) override { lines.push_back(text); }
  int Count(const std::string& prefix) const {
    int n = 0;
    for (const std::string& l : lines) n += l.rfind(prefix, 0) == 0;
    return n;
  }
  std::vector<std::string> lines;
};

// The bundled MLP as its own teacher, 384 training and 200 eval samples, batch 32.
class Guarded : public ::testing::Test {
 protected:
  void SetUp() override {
    ::whittle::testing::LoadMlpAndData(384, 200, &mlp, &train, &eval);
    if (HasFatalFailure()) return;
    o.epochs = 2;
    o.batch = 32;
  }
  // Every initializer of `out` equals the MLP's, bit for bit.
  void ExpectTheStudent(const Graph& out) {
    size_t compared = 0;
    for (const Value& v : mlp->values()) {
      if (!v.initializer) continue;
      const int w = out.FindValue(v.name);
      ASSERT_GE(w, 0) << v.name;
      EXPECT_TRUE(out.value(w).initializer->BitwiseEquals(*v.initializer)) << v.name;
      ++compared;
    }
    EXPECT_GT(compared, 0u);
  }
  std::optional<Graph> mlp;
  std::optional<Dataset> train, eval;
  TrainOptions o;
};

// lr=50: every step of about 30 (clipped to norm 5) wrecks the MLP. The guard sees the loss
// climb, rolls back at a tenth of the rate until the rate trains, says so, and the run's model
// is finite and no worse than the student.
TEST_F(Guarded, AnAbsurdRateRollsBackAndTrainsAtALowerOne) {
  o.lr = 50.f;
  auto t = Trainer::Create(*mlp, &*mlp, o);
  ASSERT_TRUE(t.ok()) << t.status().message();
  Recorder rec;
  FinetuneRun run;
  run.epochs = 2;
  FinetuneHistory h;
  auto out = RunFinetune(**t, *train, &*eval, run, &h, &rec);
  ASSERT_TRUE(out.ok()) << out.status().message();
  ASSERT_FALSE(h.rollbacks.empty());
  EXPECT_FALSE(h.gave_up);
  const Rollback& first = h.rollbacks[0];
  EXPECT_EQ(first.epoch, 0);
  EXPECT_FLOAT_EQ(first.lr_before, 50.f);
  EXPECT_FLOAT_EQ(first.lr_after, 5.f);
  EXPECT_LT(first.to_step, first.step);
  EXPECT_GT(first.loss, 4 * first.was);
  EXPECT_LT(h.lr_final, 1.f);  // at least two rollbacks: 50 -> 5 -> 0.5 or lower
  EXPECT_FLOAT_EQ(h.lr_final, (*t)->peak_lr());
  EXPECT_EQ(rec.Count("diverged at step "), static_cast<int>(h.rollbacks.size()));
  EXPECT_EQ(rec.lines[1], RollbackLine(first));  // after the accuracy before
  ASSERT_EQ(h.epochs.size(), 2u);
  size_t in_epochs = 0;
  for (const EpochStats& e : h.epochs) {
    EXPECT_TRUE(std::isfinite(e.loss));
    EXPECT_LT(e.loss, 3.0) << "the rolled-back epoch's loss counts only the steps kept";
    in_epochs += e.rollbacks.size();
  }
  EXPECT_EQ(in_epochs, h.rollbacks.size());
  ASSERT_GE(h.before, 0);
  EXPECT_GE(h.result_accuracy(), h.before);
  // The guard earned its keep: the last epoch trained at the lowered rate is close to the
  // student (without the guard, lr=50 ends near chance: AFineTuneThatOnlyLosesGivesBackTheStudent).
  EXPECT_GT(h.eval_accuracy.back(), h.before - 0.1);
  auto check = Trainer::Create(*out, &*mlp, o);
  ASSERT_TRUE(check.ok());
  EXPECT_GE(*(*check)->Evaluate(*eval), h.before);
}

// Non-finite losses (lr 1e30): every rollback diverges again; past max_rollbacks the run gives
// up at the snapshot and gives back the student unchanged. Without the guard it is an error.
TEST_F(Guarded, NonFiniteStepsGiveUpAfterTheLimitOrFailWithoutTheGuard) {
  o.lr = 1e30f;
  o.max_rollbacks = 2;
  o.rollback_lr_factor = 0.5f;  // 1e30 -> 5e29 -> 2.5e29: still absurd
  auto t = Trainer::Create(*mlp, &*mlp, o);
  ASSERT_TRUE(t.ok()) << t.status().message();
  Recorder rec;
  FinetuneRun run;
  run.epochs = 2;
  FinetuneHistory h;
  auto out = RunFinetune(**t, *train, &*eval, run, &h, &rec);
  ASSERT_TRUE(out.ok()) << out.status().message();
  ASSERT_EQ(h.rollbacks.size(), 3u);
  EXPECT_FALSE(h.rollbacks[1].gave_up);
  EXPECT_TRUE(h.rollbacks[2].gave_up);
  EXPECT_FALSE(std::isfinite(h.rollbacks[0].loss));
  EXPECT_TRUE(h.gave_up);
  EXPECT_EQ(h.epochs.size(), 1u) << "no epoch after giving up";
  EXPECT_TRUE(h.epochs[0].gave_up);
  EXPECT_FLOAT_EQ(h.lr_final, 2.5e29f);
  EXPECT_EQ(rec.Count("training stopped after 2 rollback(s)"), 1);
  EXPECT_TRUE(h.kept_student);
  ExpectTheStudent(*out);

  o.divergence_guard = false;
  auto t2 = Trainer::Create(*mlp, &*mlp, o);
  ASSERT_TRUE(t2.ok());
  FinetuneHistory h2;
  auto failed = RunFinetune(**t2, *train, &*eval, run, &h2);
  ASSERT_FALSE(failed.ok());
  EXPECT_NE(failed.status().message().find("not finite"), std::string::npos) << failed.status().message();
}

// The MLP factorized (--svd rank=32, plain) and weight-shared (--cluster k=16): codebooks whose
// entries each sum the gradients of hundreds of weights, and the biases.
Graph CompressedMlp(const Graph& mlp, bool cluster) {
  Graph g = mlp;
  PassContext ctx;
  auto svd = MakeSvdPass(*PassOptions::Parse("svd", "rank=32,whiten=0"));
  EXPECT_TRUE(svd.ok());
  EXPECT_TRUE((*svd)->Run(g, ctx).ok());
  if (cluster) {
    auto cl = MakeClusterPass(*PassOptions::Parse("cluster", "k=16"));
    EXPECT_TRUE(cl.ok());
    EXPECT_TRUE((*cl)->Run(g, ctx).ok());
  }
  return g;
}

TEST_F(Guarded, ParamKindsNameTheCompressedForms) {
  auto plain = Trainer::Create(*mlp, &*mlp, o);
  ASSERT_TRUE(plain.ok());
  for (const std::string& k : (*plain)->param_kinds()) EXPECT_EQ(k, "dense");
  auto svd = Trainer::Create(CompressedMlp(*mlp, false), &*mlp, o);
  ASSERT_TRUE(svd.ok()) << svd.status().message();
  int low_rank = 0;
  for (size_t k = 0; k < (*svd)->params().size(); ++k) {
    const bool factor = (*svd)->params()[k].find("/svd_") != std::string::npos;  // fc3 stays whole
    EXPECT_EQ((*svd)->param_kinds()[k], factor ? "low-rank" : "dense") << (*svd)->params()[k];
    low_rank += factor;
  }
  EXPECT_GE(low_rank, 4);  // two factors of each factorized layer
  auto cb = Trainer::Create(CompressedMlp(*mlp, true), &*mlp, o);
  ASSERT_TRUE(cb.ok()) << cb.status().message();
  int codebooks = 0;
  for (size_t k = 0; k < (*cb)->params().size(); ++k) {
    const bool is_codebook = (*cb)->params()[k].find("codebook") != std::string::npos;
    EXPECT_EQ((*cb)->param_kinds()[k], is_codebook ? "codebook" : "dense") << (*cb)->params()[k];
    codebooks += is_codebook;
  }
  EXPECT_GE(codebooks, 3);
}

// lr=auto on the clustered MLP: a finite rate per group within the sweep, the codebooks' well
// below the biases' (the reason for groups), the trainer's state as it was, and a fine-tune at
// those rates without a divergence — where the default rate diverges on the same student.
TEST_F(Guarded, LrAutoPicksARatePerGroupThatDoesNotDiverge) {
  const Graph student = CompressedMlp(*mlp, true);
  auto t = Trainer::Create(student, &*mlp, o);
  ASSERT_TRUE(t.ok()) << t.status().message();
  const Trainer::State before = (*t)->Snapshot();
  LrFinderOptions lo;
  lo.steps = 60;
  auto found = FindLearningRates(**t, *train, lo);
  ASSERT_TRUE(found.ok()) << found.status().message();
  ASSERT_EQ(found->groups.size(), 2u);
  EXPECT_EQ(found->groups[0].kind, "dense");
  EXPECT_EQ(found->groups[1].kind, "codebook");
  for (const GroupRate& g : found->groups) {
    EXPECT_TRUE(std::isfinite(g.lr)) << g.kind;
    EXPECT_GE(g.lr, 1e-5f) << g.kind;
    EXPECT_LE(g.lr, 1.f) << g.kind;
    EXPECT_GT(g.steps, 1) << g.kind;
    EXPECT_LE(g.min_loss, g.start_loss) << g.kind;
  }
  EXPECT_LT(found->groups[1].lr, found->groups[0].lr / 10) << "codebooks train at a far lower rate";
  EXPECT_FLOAT_EQ((*t)->lr(), found->lr);
  ASSERT_EQ((*t)->lr_scales().size(), (*t)->params().size());
  for (size_t k = 0; k < (*t)->params().size(); ++k)
    EXPECT_FLOAT_EQ((*t)->lr_scales()[k] * found->lr,
                    (*t)->param_kinds()[k] == "codebook" ? found->groups[1].lr : found->groups[0].lr);
  const Trainer::State after = (*t)->Snapshot();
  EXPECT_EQ(after.adam_steps, before.adam_steps);
  for (size_t k = 0; k < before.values.size(); ++k) {
    EXPECT_TRUE(after.values[k].BitwiseEquals(before.values[k])) << (*t)->params()[k];
    EXPECT_TRUE(after.m[k].BitwiseEquals(before.m[k])) << (*t)->params()[k];
  }

  // Through RunFinetune (lr=auto in the options): the line, the history, no rollback.
  o.lr_auto = true;
  o.epochs = 1;
  auto t2 = Trainer::Create(student, &*mlp, o);
  ASSERT_TRUE(t2.ok());
  Recorder rec;
  FinetuneRun run;
  run.epochs = 1;
  FinetuneHistory h;
  auto out = RunFinetune(**t2, *train, &*eval, run, &h, &rec);
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(h.lr_auto.size(), 2u);
  EXPECT_EQ(rec.Count("lr=auto (range test"), 1);
  EXPECT_TRUE(h.rollbacks.empty());
  ASSERT_EQ(h.epochs.size(), 1u);
  EXPECT_TRUE(std::isfinite(h.epochs[0].loss));
  EXPECT_GE(h.eval_accuracy[0], h.before - 0.02);

  // The default rate on the same student: the codebooks' summed gradients make it diverge.
  o.lr_auto = false;
  auto t3 = Trainer::Create(student, &*mlp, o);
  ASSERT_TRUE(t3.ok());
  FinetuneHistory h3;
  ASSERT_TRUE(RunFinetune(**t3, *train, &*eval, run, &h3).ok());
  EXPECT_FALSE(h3.rollbacks.empty());
}

TEST(FinetuneSpecLr, AcceptsAutoAndRejectsWords) {
  auto a = ParseFinetuneSpec("epochs=2,lr=auto", TrainOptions{});
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_TRUE(a->lr_auto);
  EXPECT_EQ(a->epochs, 2);
  auto n = ParseFinetuneSpec("lr=auto,lr=0.01", TrainOptions{});  // the last one wins
  ASSERT_TRUE(n.ok());
  EXPECT_FALSE(n->lr_auto);
  EXPECT_FLOAT_EQ(n->lr, 0.01f);
  EXPECT_FALSE(ParseFinetuneSpec("lr=0.01", TrainOptions{})->lr_auto);
  for (const std::string bad : {"lr=abc", "lr=Auto", "lr=auto1", "lr="}) {
    auto o = ParseFinetuneSpec(bad, TrainOptions{});
    ASSERT_FALSE(o.ok()) << bad;
    EXPECT_NE(o.status().message().find("lr="), std::string::npos) << o.status().message();
  }
  EXPECT_NE(FinetuneSpecHelp(TrainOptions{}).find("lr=X|auto"), std::string::npos);
}

}  // namespace
}  // namespace whittle::training
