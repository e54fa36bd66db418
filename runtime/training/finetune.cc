#include "runtime/training/finetune.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include "lib/ir/format.h"

namespace whittle::training {
namespace {

std::string Stage(int epoch, int epochs) {
  return "[epoch " + std::to_string(epoch + 1) + "/" + std::to_string(epochs) + "]";
}

StatusOr<double> ParseNumber(const std::string& key, const std::string& v) {
  errno = 0;
  char* end = nullptr;
  const double d = v.empty() ? 0 : std::strtod(v.c_str(), &end);
  if (v.empty() || end != v.c_str() + v.size() || errno == ERANGE || !std::isfinite(d))
    return InvalidArgument("--finetune: " + key + "='" + v + "' is not a number");
  return d;
}

StatusOr<int64_t> ParseCount(const std::string& key, const std::string& v) {
  errno = 0;
  char* end = nullptr;
  const long long n = v.empty() ? 0 : std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || end != v.c_str() + v.size() || errno == ERANGE)
    return InvalidArgument("--finetune: " + key + "='" + v + "' is not an integer");
  return static_cast<int64_t>(n);
}

}  // namespace

std::string EpochLine(const EpochStats& e, int epochs, double eval_accuracy) {
  std::string line = Stage(e.epoch, epochs) + " loss " + Fmt("%.4f", e.loss);
  if (e.train_accuracy >= 0) line += " train acc " + Fmt("%.4f", e.train_accuracy);
  if (eval_accuracy >= 0) line += " eval acc " + Fmt("%.4f", eval_accuracy);
  return line + " " + Fmt("%.0f", e.samples_per_s) + " samples/s " + Fmt("%.1f", e.seconds) + " s (waited " +
         Fmt("%.3f", e.data_wait_s) + " s for data" +
         (e.comm_s > 0 ? ", " + Fmt("%.3f", e.comm_s) + " s in collectives" : std::string()) + ")";
}

StatusOr<Graph> RunFinetune(Trainer& t, const Dataset& train, const Dataset* eval, FinetuneRun run,
                            FinetuneHistory* history, FinetuneObserver* observer) {
  FinetuneObserver none;
  FinetuneObserver& obs = observer ? *observer : none;
  FinetuneHistory& h = *history;
  h = std::move(run.history);
  std::optional<Graph>& best = run.best;
  const int epochs = run.epochs;
  if (eval && run.first_epoch == 0 && run.evaluate_before) {
    WH_ASSIGN_OR_RETURN(h.before, t.Evaluate(*eval));
    obs.Line("student before fine-tuning: eval accuracy " + Fmt("%.4f", h.before));
  }
  // No silent failure (issue 41): the student before fine-tuning is the model to beat. `best`
  // starts as it (so checkpoints keep it), and an epoch replaces it only when its accuracy beats
  // it; a fine-tune whose every epoch is worse gives back the student unchanged (kept_student).
  if (eval && h.before >= 0 && run.first_epoch == 0 && !best) best = t.CurrentModel();
  if (t.options().lr_auto) {
    WH_ASSIGN_OR_RETURN(LrFinderResult found, FindLearningRates(t, train));
    h.lr_auto = found.groups;
    obs.Line(LrFinderLine(found, t.options().scale_lr));
  }
  for (int epoch = run.first_epoch; epoch < epochs; ++epoch) {
    const std::string stage = Stage(epoch, epochs);
    auto st = t.TrainEpoch(
        train, epoch,
        [&](const Progress& p) {
          std::string s = "loss " + Fmt("%.4f", p.loss);
          if (p.accuracy >= 0) s += " acc " + Fmt("%.4f", p.accuracy);
          s += " " + Fmt("%.0f", p.samples_per_s) + " samples/s ETA " + Fmt("%.0f", p.eta_s) + " s";
          obs.Progress(stage, p.step, p.steps, s);
        },
        [&](const Rollback& r) { obs.Line(RollbackLine(r)); });
    if (!st.ok()) return st.status().WithContext("fine-tuning epoch " + std::to_string(epoch + 1));
    double acc = -1;
    if (eval) {
      WH_ASSIGN_OR_RETURN(acc, t.Evaluate(*eval));
      if (acc > h.best) {
        h.best = acc;
        h.best_epoch = epoch;
        if (!(h.before >= 0) || acc > h.before) best = t.CurrentModel();
      }
    }
    h.epochs.push_back(*st);
    h.eval_accuracy.push_back(acc);
    h.rollbacks.insert(h.rollbacks.end(), st->rollbacks.begin(), st->rollbacks.end());
    h.lr_final = st->lr_end;
    obs.Line(EpochLine(*st, epochs, acc));
    WH_RETURN_IF_ERROR(obs.EpochDone(t, h, best ? &*best : nullptr, epoch));
    if (st->gave_up) {
      h.gave_up = true;
      obs.Line("training stopped after " + std::to_string(t.rollbacks()) + " rollback(s): the loss diverged again at lr " +
               Fmt("%g", st->lr_end) + "; the best of the student before and the epochs is kept");
      break;
    }
  }
  if (h.lr_final < 0) h.lr_final = t.peak_lr();
  h.kept_student = eval && h.before >= 0 && !(h.best > h.before);
  return best ? std::move(*best) : t.CurrentModel();
}

StatusOr<int> ParseSync(const std::string& v) {
  if (v == "ssgd") return 0;
  if (v.rfind("average:", 0) == 0) {
    char* end = nullptr;
    errno = 0;
    const long k = std::strtol(v.c_str() + 8, &end, 10);
    if (end != v.c_str() + 8 && *end == '\0' && errno != ERANGE && k >= 1 && k <= 1000000) return static_cast<int>(k);
    return InvalidArgument("'" + v + "': expected average:K with K a step count of at least 1");
  }
  return InvalidArgument("'" + v + "': expected ssgd or average:K");
}

StatusOr<TrainOptions> ParseFinetuneSpec(const std::string& spec, const TrainOptions& defaults) {
  TrainOptions o = defaults;
  size_t pos = 0;
  while (pos <= spec.size() && !spec.empty()) {
    const size_t comma = std::min(spec.find(',', pos), spec.size());
    const std::string item = spec.substr(pos, comma - pos);
    pos = comma + 1;
    const size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0)
      return InvalidArgument("--finetune: '" + item + "' is not key=value (keys: epochs, lr, batch, optimizer, "
                             "temperature, alpha, no-labels, seed, sync)");
    const std::string key = item.substr(0, eq), v = item.substr(eq + 1);
    if (key == "epochs" || key == "batch") {
      WH_ASSIGN_OR_RETURN(int64_t n, ParseCount(key, v));
      if (n < 1 || (key == "epochs" && n > 1000000))
        return InvalidArgument("--finetune: " + key + "=" + v + " is out of range (at least 1)");
      if (key == "epochs") o.epochs = static_cast<int>(n);
      else o.batch = n;
    } else if (key == "lr" && v == "auto") {
      o.lr_auto = true;
    } else if (key == "lr" || key == "temperature") {
      WH_ASSIGN_OR_RETURN(double d, ParseNumber(key, v));
      if (d <= 0) return InvalidArgument("--finetune: " + key + "=" + v + " is out of range (must be > 0)");
      (key == "lr" ? o.lr : o.temperature) = static_cast<float>(d);
      if (key == "lr") o.lr_auto = false;
    } else if (key == "alpha") {
      WH_ASSIGN_OR_RETURN(double d, ParseNumber(key, v));
      if (d < 0 || d > 1) return InvalidArgument("--finetune: alpha=" + v + " is out of range (0..1)");
      o.alpha = static_cast<float>(d);
    } else if (key == "optimizer") {
      if (v != "sgd" && v != "adamw") return InvalidArgument("--finetune: optimizer='" + v + "' is not sgd or adamw");
      o.optimizer = v == "adamw" ? OptimizerKind::kAdamW : OptimizerKind::kSgd;
    } else if (key == "no-labels") {
      if (v != "0" && v != "1") return InvalidArgument("--finetune: no-labels='" + v + "' is not 0 or 1");
      o.use_labels = v == "0";
    } else if (key == "seed") {
      WH_ASSIGN_OR_RETURN(int64_t n, ParseCount(key, v));
      if (n < 0) return InvalidArgument("--finetune: seed=" + v + " is out of range (must be >= 0)");
      o.seed = static_cast<uint64_t>(n);
    } else if (key == "sync") {
      auto k = ParseSync(v);
      if (!k.ok()) return InvalidArgument("--finetune: sync=" + k.status().message());
      o.average_every = *k;
    } else {
      return InvalidArgument("--finetune: unknown option '" + key +
                             "' (keys: epochs, lr, batch, optimizer, temperature, alpha, no-labels, seed, sync)");
    }
    if (comma == spec.size()) break;
  }
  return o;
}

std::string FinetuneSpecHelp(const TrainOptions& d) {
  return "Fine-tune options (--finetune SPEC, comma-separated key=value; the original model is the teacher):\n"
         "  epochs=N        epochs over --train-data (default " + std::to_string(d.epochs) + ")\n"
         "  lr=X|auto       learning rate for batch 256, scaled with the batch (default " + Fmt("%g", d.lr) + "); auto:\n"
         "                  a range test per group of params (codebooks, low-rank factors, ...) picks each rate\n"
         "  batch=B         batch size (default " + std::to_string(d.batch) + ")\n"
         "  optimizer=NAME  sgd (momentum 0.9) or adamw (default " +
         (d.optimizer == OptimizerKind::kAdamW ? "adamw" : "sgd") + ")\n"
         "  temperature=T   distillation temperature (default " + Fmt("%g", d.temperature) + ")\n"
         "  alpha=A         weight of the distillation term, 0..1 (default " + Fmt("%g", d.alpha) + ")\n"
         "  no-labels=1     learn from the teacher alone (alpha 1; --train-data needs no labels)\n"
         "  seed=N          seed of the data order (default " + std::to_string(d.seed) + ")\n"
         "  sync=MODE       under mpirun: ssgd (gradients summed every step) or average:K (models averaged\n"
         "                  every K steps) (default ssgd)\n"
         "The loss is (1 - alpha) * cross-entropy(labels) + alpha * T^2 * KL(teacher || student); warm-up, cosine\n"
         "decay and gradient clipping as in finetune-model. With --eval-data the best epoch's weights are kept.\n"
         "A divergence (a loss that is not finite or climbs to 4x its lowest) rolls training back to its last\n"
         "healthy state at a tenth of the rate, at most " + std::to_string(d.max_rollbacks) + " times.\n";
}

}  // namespace whittle::training
