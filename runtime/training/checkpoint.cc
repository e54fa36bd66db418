#include "runtime/training/checkpoint.h"

#include <cmath>
#include <filesystem>
#include <utility>

#include <nlohmann/json.hpp>

#include "lib/data/file_util.h"
#include "lib/data/npy.h"
#include "lib/ir/device.h"
#include "lib/onnx/model_io.h"

namespace whittle::training {
namespace {

namespace fs = std::filesystem;

nlohmann::json OrNull(double v) { return v >= 0 ? nlohmann::json(v) : nlohmann::json(nullptr); }
double OrMinusOne(const nlohmann::json& v) { return v.is_number() ? v.get<double>() : -1; }

// The files of param k in a checkpoint folder: its value and the optimizer's two moments.
struct ParamFiles {
  std::string value, m, v;
};
ParamFiles FilesOf(const std::string& folder, size_t k) {
  const std::string ks = std::to_string(k);
  return {folder + "/param_" + ks + ".npy", folder + "/opt_" + ks + "_m.npy", folder + "/opt_" + ks + "_v.npy"};
}

// A loss as state.json holds it: null when not finite (read back as infinity).
nlohmann::json FiniteOrNull(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); }
double FiniteOrInf(const nlohmann::json& v) { return v.is_number() ? v.get<double>() : HUGE_VAL; }

nlohmann::json RollbackJson(const Rollback& r) {
  return {{"epoch", r.epoch + 1},         {"step", r.step},           {"loss", FiniteOrNull(r.loss)},
          {"was", FiniteOrNull(r.was)},   {"to_step", r.to_step},     {"lr_before", r.lr_before},
          {"lr_after", r.lr_after},       {"gave_up", r.gave_up}};
}

Rollback RollbackOf(const nlohmann::json& j) {
  Rollback r;
  r.epoch = j.value("epoch", 1) - 1;
  r.step = j.value("step", int64_t{0});
  r.loss = FiniteOrInf(j.value("loss", nlohmann::json()));
  r.was = FiniteOrInf(j.value("was", nlohmann::json()));
  r.to_step = j.value("to_step", int64_t{0});
  r.lr_before = j.value("lr_before", 0.f);
  r.lr_after = j.value("lr_after", 0.f);
  r.gave_up = j.value("gave_up", false);
  return r;
}

nlohmann::json GroupRateJson(const GroupRate& g) {
  return {{"kind", g.kind},
          {"params", g.params},
          {"lr", g.lr},
          {"lr_at_min", g.lr_at_min},
          {"start_loss", FiniteOrNull(g.start_loss)},
          {"min_loss", FiniteOrNull(g.min_loss)},
          {"steps", g.steps}};
}

GroupRate GroupRateOf(const nlohmann::json& j) {
  GroupRate g;
  g.kind = j.value("kind", std::string());
  g.params = j.value("params", 0);
  g.lr = j.value("lr", 0.f);
  g.lr_at_min = j.value("lr_at_min", 0.f);
  g.start_loss = FiniteOrInf(j.value("start_loss", nlohmann::json()));
  g.min_loss = FiniteOrInf(j.value("min_loss", nlohmann::json()));
  g.steps = j.value("steps", 0);
  return g;
}

// The run's state as state.json holds it, into c. Fields a checkpoint of an older build lacks
// keep their defaults.
Status ReadState(const nlohmann::json& s, Checkpoint* c) {
  c->folder = c->dir + "/" + s.value("folder", std::string());
  c->epoch_done = s.value("epoch_done", -1);
  c->optimizer_steps = s.value("optimizer_steps", int64_t{0});
  FinetuneHistory& h = c->history;
  h.best = s.value("best", -1.0);
  h.best_epoch = s.value("best_epoch", -1);
  if (s.contains("accuracy_before")) h.before = OrMinusOne(s["accuracy_before"]);
  for (const auto& e : s.value("history", nlohmann::json::array())) {
    EpochStats st;
    st.epoch = e.value("epoch", 1) - 1;
    st.loss = e.value("loss", 0.0);
    st.samples_per_s = e.value("samples_per_s", 0.0);
    st.seconds = e.value("seconds", 0.0);
    st.data_wait_s = e.value("data_wait_s", 0.0);
    st.comm_s = e.value("comm_s", 0.0);
    st.buckets = e.value("buckets", int64_t{0});
    st.buckets_overlapped = e.value("buckets_overlapped", int64_t{0});
    st.teacher_cached = e.value("teacher_cached", int64_t{0});
    st.train_accuracy = OrMinusOne(e.value("train_accuracy", nlohmann::json()));
    st.gave_up = e.value("gave_up", false);
    st.lr_end = e.value("lr_end", 0.f);
    h.epochs.push_back(st);
    h.eval_accuracy.push_back(OrMinusOne(e.value("eval_accuracy", nlohmann::json())));
  }
  // The divergence guard's doing: the run's rollbacks (each also in its epoch's stats), the
  // count and the rate's factor they left.
  for (const auto& r : s.value("divergences", nlohmann::json::array())) {
    h.rollbacks.push_back(RollbackOf(r));
    for (EpochStats& st : h.epochs)
      if (st.epoch == h.rollbacks.back().epoch) st.rollbacks.push_back(h.rollbacks.back());
  }
  h.gave_up = s.value("gave_up", false);
  h.lr_final = s.value("lr_final", -1.f);
  c->rollbacks = s.value("rollbacks", 0);
  c->lr_factor = s.value("lr_factor", 1.f);
  if (c->rollbacks < 0 || !(c->lr_factor > 0) || !std::isfinite(c->lr_factor))
    return InvalidArgument("rollbacks " + std::to_string(c->rollbacks) + " or lr_factor " +
                           std::to_string(c->lr_factor) + " out of range");
  // lr=auto: the groups' rates, and the trainer's rate and multipliers they gave.
  for (const auto& g : s.value("lr_auto", nlohmann::json::array())) h.lr_auto.push_back(GroupRateOf(g));
  if (s.contains("lr_auto_rates")) {
    const nlohmann::json& r = s["lr_auto_rates"];
    c->lr_auto_lr = r.at("lr").get<float>();
    c->lr_auto_scales = r.value("scales", std::vector<float>());
  }
  return Status::Ok();
}

nlohmann::json EpochsJson(const FinetuneHistory& h) {
  nlohmann::json a = nlohmann::json::array();
  for (size_t i = 0; i < h.epochs.size(); ++i) {
    const EpochStats& e = h.epochs[i];
    nlohmann::json o{{"epoch", e.epoch + 1}, {"loss", e.loss}, {"samples_per_s", e.samples_per_s},
                     {"seconds", e.seconds}, {"data_wait_s", e.data_wait_s},
                     {"comm_s", e.comm_s}, {"buckets", e.buckets}, {"buckets_overlapped", e.buckets_overlapped},
                     {"teacher_cached", e.teacher_cached}};
    o["train_accuracy"] = OrNull(e.train_accuracy);
    o["eval_accuracy"] = OrNull(i < h.eval_accuracy.size() ? h.eval_accuracy[i] : -1);
    a.push_back(o);
  }
  return a;
}

}  // namespace

std::string EpochsJsonText(const FinetuneHistory& h) { return EpochsJson(h).dump(); }

Status SaveCheckpoint(const std::string& dir, Trainer& t, const Graph* best, const FinetuneHistory& h, int epoch_done) {
  const std::string name = "epoch_" + std::to_string(epoch_done + 1), sub = dir + "/" + name;
  std::error_code ec;
  fs::create_directories(sub, ec);
  if (ec) return IoError("cannot create checkpoint folder '" + sub + "': " + ec.message());
  WH_RETURN_IF_ERROR(SaveModel(t.CurrentModel(), sub + "/model.onnx"));
  if (best) WH_RETURN_IF_ERROR(SaveModel(*best, sub + "/best.onnx"));
  for (size_t k = 0; k < t.params().size(); ++k) {
    // The params as trained (a QDQ student's latent weights are finer than model.onnx's integers).
    // On a device they live there: each is downloaded for the file.
    const ParamFiles f = FilesOf(sub, k);
    for (const auto& [file, tensor] : {std::pair{&f.value, &t.param_values()[k]}, std::pair{&f.m, &t.state1()[k]},
                                       std::pair{&f.v, &t.state2()[k]}}) {
      WH_ASSIGN_OR_RETURN(Tensor host, tensor->ToDevice(DeviceType::kCpu));
      WH_RETURN_IF_ERROR(WriteNpy(*file, host));
    }
  }
  // The epochs as the reports give them, and what a resumed history needs besides.
  nlohmann::json epochs = EpochsJson(h);
  for (size_t i = 0; i < h.epochs.size(); ++i) {
    epochs[i]["gave_up"] = h.epochs[i].gave_up;
    epochs[i]["lr_end"] = h.epochs[i].lr_end;
  }
  nlohmann::json divergences = nlohmann::json::array(), groups = nlohmann::json::array();
  for (const Rollback& r : h.rollbacks) divergences.push_back(RollbackJson(r));
  for (const GroupRate& g : h.lr_auto) groups.push_back(GroupRateJson(g));
  nlohmann::json s{{"epoch_done", epoch_done}, {"folder", name},          {"optimizer_steps", t.adam_steps()},
                   {"best", h.best},           {"best_epoch", h.best_epoch}, {"accuracy_before", h.before},
                   {"history", epochs},        {"divergences", divergences}, {"gave_up", h.gave_up},
                   {"lr_final", h.lr_final},   {"rollbacks", t.rollbacks()}, {"lr_factor", t.rollback_lr_factor()},
                   {"lr_auto", groups}};
  // The rates lr=auto chose (the history has its groups once the range test ran): a resumed run
  // takes them instead of testing again.
  if (!h.lr_auto.empty()) s["lr_auto_rates"] = {{"lr", t.lr()}, {"scales", t.lr_scales()}};
  WH_RETURN_IF_ERROR(WriteFileAtomically(dir + "/state.json", s.dump(1)));
  if (epoch_done > 0) fs::remove_all(dir + "/epoch_" + std::to_string(epoch_done), ec);  // the previous one
  return Status::Ok();
}

void CheckpointWriter::Progress(const std::string& stage, int64_t step, int64_t steps, const std::string& detail) {
  if (inner_) inner_->Progress(stage, step, steps, detail);
}

void CheckpointWriter::Line(const std::string& text) {
  if (inner_) inner_->Line(text);
}

Status CheckpointWriter::EpochDone(Trainer& t, const FinetuneHistory& h, const Graph* best, int epoch) {
  WH_RETURN_IF_ERROR(SaveCheckpoint(dir_, t, best, h, epoch));
  return inner_ ? inner_->EpochDone(t, h, best, epoch) : Status::Ok();
}

StatusOr<std::optional<Checkpoint>> ReadCheckpoint(const std::string& dir) {
  const std::string state = dir + "/state.json";
  if (!fs::exists(state)) return std::optional<Checkpoint>();
  WH_ASSIGN_OR_RETURN(std::string bytes, ReadFileBytes(state));
  nlohmann::json s;
  try {
    s = nlohmann::json::parse(bytes);
  } catch (const std::exception& ex) {
    return InvalidArgument("checkpoint '" + state + "' is not valid JSON: " + ex.what());
  }
  Checkpoint c;
  c.dir = dir;
  try {
    WH_RETURN_IF_ERROR(ReadState(s, &c));
  } catch (const std::exception& ex) {
    return InvalidArgument("checkpoint '" + state + "' has a field of the wrong type: " + ex.what());
  }
  WH_ASSIGN_OR_RETURN(c.model, LoadModel(c.folder + "/model.onnx"));
  if (fs::exists(c.folder + "/best.onnx")) {
    WH_ASSIGN_OR_RETURN(Graph b, LoadModel(c.folder + "/best.onnx"));
    c.best = std::move(b);
  }
  return std::optional<Checkpoint>(std::move(c));
}

StatusOr<FinetuneRun> ResumeFinetune(Checkpoint c, Trainer& t, int epochs) {
  for (size_t k = 0; k < t.params().size(); ++k) {
    const ParamFiles f = FilesOf(c.folder, k);
    WH_ASSIGN_OR_RETURN(Tensor m, ReadNpy(f.m));
    WH_ASSIGN_OR_RETURN(Tensor v, ReadNpy(f.v));
    if (m.dims() != t.state1()[k].dims() || v.dims() != t.state2()[k].dims())
      return InvalidArgument("checkpoint '" + c.dir +
                             "' does not belong to this student (optimizer state shapes differ)");
    t.state1()[k] = m;
    t.state2()[k] = v;
    WH_ASSIGN_OR_RETURN(Tensor p, ReadNpy(f.value));
    if (p.dims() != t.param_values()[k].dims())
      return InvalidArgument("checkpoint '" + c.dir + "' does not belong to this student (param shapes differ)");
    t.param_values()[k] = p;
  }
  t.adam_steps() = c.optimizer_steps;
  // The rate as the rollbacks left it, and lr=auto's rates as the range test chose them.
  t.SetRollbackState(c.rollbacks, c.lr_factor);
  if (t.options().lr_auto && c.lr_auto_lr) {
    if (!c.lr_auto_scales.empty() && c.lr_auto_scales.size() != t.params().size())
      return InvalidArgument("checkpoint '" + c.dir + "' does not belong to this student (it has lr=auto rates for " +
                             std::to_string(c.lr_auto_scales.size()) + " params, the student " +
                             std::to_string(t.params().size()) + ")");
    t.set_lr(*c.lr_auto_lr);
    t.set_lr_scales(c.lr_auto_scales);
    t.set_lr_auto(false);
  }
  FinetuneRun run;
  run.epochs = epochs;
  run.first_epoch = c.epoch_done + 1;
  run.history = std::move(c.history);
  run.best = std::move(c.best);
  return run;
}

}  // namespace whittle::training
