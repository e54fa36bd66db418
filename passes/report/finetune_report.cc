#include "passes/report/finetune_report.h"

#include <cmath>
#include <cstdio>
#include <utility>
#include <vector>

#include "passes/report/report_format.h"
#include "passes/report/svg_chart.h"
#include "runtime/training/checkpoint.h"

namespace whittle {

using report::TdHtml;
using report::Fixed;
using report::Grouped;
using report::HtmlEscape;
using training::EpochStats;
using training::FinetuneHistory;
using training::OptimizerKind;
using training::TrainOptions;

namespace {

nlohmann::json OrNull(double v) { return v >= 0 ? nlohmann::json(v) : nlohmann::json(nullptr); }

// Exact value for a data-* attribute (a test or a script reads the figure back unrounded).
std::string Exact(double v) {
  char b[40];
  std::snprintf(b, sizeof b, "%.17g", v);
  return b;
}

std::string Percent(double fraction) { return Fixed(100.0 * fraction, 2) + "%"; }

std::string PointChange(double before, double after) {
  const double pp = 100.0 * (after - before);
  return (pp >= 0 ? "+" : "") + Fixed(pp, 2) + " pp";
}

float EffectiveLr(const TrainOptions& o) {
  return o.scale_lr ? o.lr * static_cast<float>(o.batch) / 256.f : o.lr;
}

float WeightDecay(const TrainOptions& o) {
  return o.weight_decay >= 0 ? o.weight_decay : o.optimizer == OptimizerKind::kAdamW ? 0.01f : 5e-4f;
}

std::string G(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%g", v);
  return b;
}

// (name, value) of every option that shapes the run, in the order the page lists them.
std::vector<std::pair<std::string, std::string>> OptionRows(const TrainOptions& o) {
  std::string lr = G(o.lr);
  if (o.scale_lr && o.batch != 256) lr += " (for batch 256; " + G(EffectiveLr(o)) + " at batch " + std::to_string(o.batch) + ")";
  std::string schedule = "warm-up " + G(100 * o.warmup_fraction) + "% of the steps" + (o.cosine ? ", then cosine decay" : "");
  return {{"optimizer", o.optimizer == OptimizerKind::kAdamW ? "adamw" : (o.nesterov ? "sgd (Nesterov momentum " : "sgd (momentum ") + G(o.momentum) + ")"},
          {"learning rate", lr},
          {"schedule", schedule},
          {"batch", std::to_string(o.batch)},
          {"epochs", std::to_string(o.epochs)},
          {"temperature T", G(o.temperature)},
          {"alpha (distillation weight)", o.use_labels ? G(o.alpha) : "1 (no labels: teacher only)"},
          {"label smoothing", G(o.label_smoothing)},
          {"weight decay", G(WeightDecay(o)) + " (not on biases)"},
          {"gradient clipping", o.clip_norm > 0 ? "global norm " + G(o.clip_norm) : "off"},
          {"seed", std::to_string(o.seed)},
          {"threads", o.threads == 0 ? "all cores" : std::to_string(o.threads)}};
}

const char kSectionCss[] = R"CSS(
tr.best td { font-weight: 600; background: #f0fdf4; }
tr.before td { color: #6b7280; }
svg.line { width: 100%; }
)CSS";

std::string PercentOrDash(double v) { return v >= 0 ? Percent(v) : "—"; }

std::string EpochTableHtml(const FinetuneReport& r) {
  const FinetuneHistory& h = r.history;
  std::string rows;
  if (h.before >= 0)
    rows += "<tr class=\"before\" data-eval-accuracy=\"" + Exact(h.before) + "\">" + TdHtml("", "before fine-tuning") +
            TdHtml("num", "—") + TdHtml("num", "—") + TdHtml("num", Percent(h.before)) + TdHtml("num", "—") + TdHtml("num", "—") +
            TdHtml("num", "—") + "</tr>";
  for (size_t i = 0; i < h.epochs.size(); ++i) {
    const EpochStats& e = h.epochs[i];
    const double acc = h.eval_accuracy[i];
    const bool best = h.best_epoch == e.epoch;
    rows += std::string("<tr class=\"epoch") + (best ? " best" : "") + "\" data-epoch=\"" + std::to_string(e.epoch + 1) +
            "\" data-loss=\"" + Exact(e.loss) + "\"" +
            (e.train_accuracy >= 0 ? " data-train-accuracy=\"" + Exact(e.train_accuracy) + "\"" : "") +
            (acc >= 0 ? " data-eval-accuracy=\"" + Exact(acc) + "\"" : "") + ">" +
            TdHtml("", std::to_string(e.epoch + 1) + (best ? " (best)" : "")) + TdHtml("num", Fixed(e.loss, 4)) +
            TdHtml("num", PercentOrDash(e.train_accuracy)) + TdHtml("num", PercentOrDash(acc)) +
            TdHtml("num", Grouped(static_cast<int64_t>(e.samples_per_s + 0.5))) + TdHtml("num", Fixed(e.seconds, 2)) +
            TdHtml("num", Fixed(e.data_wait_s, 3)) + "</tr>";
  }
  return "<table class=\"epochs\"><thead><tr><th>Epoch</th><th class=\"num\">Loss</th><th class=\"num\">Train accuracy"
         "</th><th class=\"num\">Eval accuracy</th><th class=\"num\">Samples / s</th><th class=\"num\">Seconds</th>"
         "<th class=\"num\">Waited for data (s)</th></tr></thead><tbody>" +
         rows + "</tbody></table>";
}

std::string ChartsHtml(const FinetuneReport& r) {
  const FinetuneHistory& h = r.history;
  report::LineSeries loss{"training loss", {}, false}, train{"train accuracy", {}, false},
      eval{"eval accuracy", {}, false}, teacher{"teacher", {}, true};
  if (h.before >= 0) eval.points.push_back({0, 100 * h.before});
  for (size_t i = 0; i < h.epochs.size(); ++i) {
    const double x = h.epochs[i].epoch + 1;
    loss.points.push_back({x, h.epochs[i].loss});
    if (h.epochs[i].train_accuracy >= 0) train.points.push_back({x, 100 * h.epochs[i].train_accuracy});
    if (h.eval_accuracy[i] >= 0) eval.points.push_back({x, 100 * h.eval_accuracy[i]});
  }
  std::string figures;
  const std::string loss_svg = report::LineChartSvg("loss", "training loss per epoch", "epoch", "loss", {loss}, 4);
  if (!loss_svg.empty()) figures += "<figure><figcaption>Training loss (mean over each epoch)</figcaption>" + loss_svg + "</figure>";
  if (r.teacher_accuracy >= 0 && !eval.points.empty())
    teacher.points = {{eval.points.front().first, 100 * r.teacher_accuracy}, {eval.points.back().first, 100 * r.teacher_accuracy}};
  std::vector<report::LineSeries> acc;
  for (report::LineSeries* s : {&eval, &train, &teacher})
    if (!s->points.empty()) acc.push_back(*s);
  const std::string acc_svg =
      report::LineChartSvg("accuracy", "accuracy per epoch", "epoch", "accuracy (%)", acc, 2);
  if (!acc_svg.empty())
    figures += "<figure><figcaption>Accuracy per epoch" + std::string(h.before >= 0 ? " (epoch 0: before fine-tuning)" : "") +
               (r.teacher_accuracy >= 0 ? ", teacher dashed" : "") + "</figcaption>" + acc_svg + "</figure>";
  return figures.empty() ? "" : "<div class=\"grid\">" + figures + "</div>";
}

std::string AccuracySentence(const FinetuneReport& r) {
  const FinetuneHistory& h = r.history;
  std::string s;
  const double after = r.output_accuracy >= 0 ? r.output_accuracy : h.best;
  if (h.before >= 0 && after >= 0)
    s = "accuracy before fine-tuning " + Percent(h.before) + " → after " + Percent(after) + " (" +
        PointChange(h.before, after) + ")";
  else if (after >= 0)
    s = "accuracy after fine-tuning " + Percent(after);
  if (h.best_epoch >= 0) s += (s.empty() ? "" : ", ") + std::string("best epoch ") + std::to_string(h.best_epoch + 1);
  if (r.teacher_accuracy >= 0) s += (s.empty() ? "" : "; ") + std::string("teacher ") + Percent(r.teacher_accuracy);
  if (!r.eval_data.empty() && !s.empty()) s += " on " + r.eval_data + " (" + Grouped(r.eval_samples) + " samples)";
  return s;
}

std::string Kpi(const std::string& label, const std::string& value, const std::string& cls, const std::string& detail) {
  return "<div class=\"kpi\"><div class=\"label\">" + HtmlEscape(label) + "</div><div class=\"value " + cls + "\">" +
         value + "</div><div class=\"detail\">" + detail + "</div></div>";
}

}  // namespace

std::string FinetuneSectionCss() { return kSectionCss; }

std::string CommandLine(int argc, char** argv) {
  std::string s;
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i];
    if (i) s += ' ';
    if (!a.empty() && a.find_first_of(" \t\n'\"\\$`*?;&|<>()") == std::string::npos) {
      s += a;
      continue;
    }
    s += '\'';
    for (char c : a) s += c == '\'' ? std::string("'\\''") : std::string(1, c);
    s += '\'';
  }
  return s;
}

nlohmann::json EpochsJson(const FinetuneHistory& h) { return nlohmann::json::parse(training::EpochsJsonText(h)); }

nlohmann::json FinetuneJson(const FinetuneReport& r) {
  const TrainOptions& o = r.options;
  nlohmann::json opts{{"optimizer", o.optimizer == OptimizerKind::kAdamW ? "adamw" : "sgd"},
                      {"lr", o.lr},
                      {"lr_scaled_for_batch", o.scale_lr},
                      {"effective_lr", EffectiveLr(o)},
                      {"batch", o.batch},
                      {"epochs", o.epochs},
                      {"temperature", o.temperature},
                      {"alpha", o.use_labels ? o.alpha : 1.f},
                      {"labels", o.use_labels},
                      {"weight_decay", WeightDecay(o)},
                      {"seed", o.seed},
                      {"threads", o.threads}};
  nlohmann::json j{{"epochs", EpochsJson(r.history)},  {"options", opts},
                   {"train_data", r.train_data},      {"train_samples", r.train_samples},
                   {"seconds", r.seconds}};
  if (!r.spec.empty()) j["spec"] = r.spec;
  j["eval_data"] = r.eval_data.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.eval_data);
  j["eval_samples"] = r.eval_samples;
  j["accuracy_before"] = OrNull(r.history.before);
  j["best_eval_accuracy"] = OrNull(r.history.best);
  j["best_epoch"] = r.history.best_epoch >= 0 ? nlohmann::json(r.history.best_epoch + 1) : nlohmann::json(nullptr);
  j["accuracy_after"] = OrNull(r.output_accuracy);
  j["kept_student"] = r.history.kept_student;  // no epoch beat the student: it was written unchanged
  nlohmann::json rollbacks = nlohmann::json::array();
  for (const training::Rollback& b : r.history.rollbacks)
    rollbacks.push_back({{"epoch", b.epoch + 1},
                         {"step", b.step},
                         {"loss", std::isfinite(b.loss) ? nlohmann::json(b.loss) : nlohmann::json(nullptr)},
                         {"was", b.was},
                         {"to_step", b.to_step},
                         {"lr_before", b.lr_before},
                         {"lr_after", b.lr_after},
                         {"gave_up", b.gave_up}});
  j["rollbacks"] = rollbacks;
  j["gave_up"] = r.history.gave_up;
  j["lr_final"] = r.history.lr_final >= 0 ? nlohmann::json(r.history.lr_final) : nlohmann::json(nullptr);
  nlohmann::json rates = nlohmann::json::array();
  for (const training::GroupRate& g : r.history.lr_auto)
    rates.push_back({{"kind", g.kind}, {"params", g.params}, {"lr", g.lr}, {"steps", g.steps}});
  j["lr_auto"] = rates;
  j["teacher_accuracy"] = OrNull(r.teacher_accuracy);
  j["output_params"] = r.output_params >= 0 ? nlohmann::json(r.output_params) : nlohmann::json(nullptr);
  j["output_file_bytes"] = r.output_file_bytes >= 0 ? nlohmann::json(r.output_file_bytes) : nlohmann::json(nullptr);
  return j;
}

std::string FinetuneSectionHtml(const FinetuneReport& r, int index) {
  std::string s = "<section class=\"card pass finetune\"><h2><span class=\"badge\">" + std::to_string(index) +
                  "</span>finetune" + (r.spec.empty() ? "" : " <code>" + HtmlEscape(r.spec) + "</code>") +
                  " <span class=\"meta\">" + Fixed(r.seconds, 2) + " s</span></h2>";
  std::vector<std::string> notes;
  const std::string acc = AccuracySentence(r);
  if (!acc.empty()) notes.push_back(acc);
  notes.push_back("distilled from " + r.teacher + " on " + r.train_data + " (" + Grouped(r.train_samples) + " samples)");
  std::string opts;
  for (const auto& [k, v] : OptionRows(r.options)) opts += (opts.empty() ? "" : " · ") + k + " " + v;
  notes.push_back(opts);
  s += "<ul class=\"notes\">";
  for (const std::string& n : notes) s += "<li>" + HtmlEscape(n) + "</li>";
  s += "</ul>" + EpochTableHtml(r);
  const std::string charts = ChartsHtml(r);
  if (!charts.empty()) s += "<h3>Loss and accuracy per epoch</h3>" + charts;
  return s + "</section>";
}

std::string FinetuneText(const FinetuneReport& r, int index) {
  std::string out = "pass " + std::to_string(index) + ": finetune";
  if (!r.spec.empty()) out += " " + r.spec;
  out += "  (" + Fixed(r.seconds, 2) + " s)\n";
  report::TextTable t;
  t.Columns({"epoch", "loss", "train acc", "eval acc", "samples/s", "seconds"},
            {report::TextTable::kLeft, report::TextTable::kRight, report::TextTable::kRight, report::TextTable::kRight,
             report::TextTable::kRight, report::TextTable::kRight});
  const FinetuneHistory& h = r.history;
  if (h.before >= 0) t.Row({"before", "", "", Percent(h.before), "", ""});
  for (size_t i = 0; i < h.epochs.size(); ++i) {
    const EpochStats& e = h.epochs[i];
    t.Row({std::to_string(e.epoch + 1) + (h.best_epoch == e.epoch ? " (best)" : ""), Fixed(e.loss, 4),
           e.train_accuracy >= 0 ? Percent(e.train_accuracy) : "", h.eval_accuracy[i] >= 0 ? Percent(h.eval_accuracy[i]) : "",
           Grouped(static_cast<int64_t>(e.samples_per_s + 0.5)), Fixed(e.seconds, 2)});
  }
  out += t.Render("  ");
  const std::string acc = AccuracySentence(r);
  if (!acc.empty()) out += "  note: " + acc + "\n";
  out += "  note: distilled from " + r.teacher + " on " + r.train_data + " (" + Grouped(r.train_samples) + " samples)\n";
  for (const training::GroupRate& g : h.lr_auto)
    out += "  note: lr=auto: " + g.kind + " parameters (" + std::to_string(g.params) + ") at " + report::Sig(g.lr) + "\n";
  for (const training::Rollback& b : h.rollbacks)
    out += "  note: diverged at step " + std::to_string(b.step) + " of epoch " + std::to_string(b.epoch + 1) +
           (b.gave_up ? ": training stopped there (rollback limit)"
                      : ": rolled back to step " + std::to_string(b.to_step) + ", lr " + report::Sig(b.lr_before) + " -> " +
                            report::Sig(b.lr_after)) +
           "\n";
  return out;
}

std::string FinetuneHtml(const FinetuneReport& r) {
  const FinetuneHistory& h = r.history;
  auto base = [](const std::string& p) {
    const size_t slash = p.find_last_of('/');
    return slash == std::string::npos ? p : p.substr(slash + 1);
  };
  std::string page = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
                     "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>Fine-tuning report: " +
                     HtmlEscape(base(r.student)) + " → " + HtmlEscape(base(r.output)) + "</title>\n<style>" + report::PageCss() +
                     "svg.chart { width: 100%; }\n" +
                     FinetuneSectionCss() + "</style>\n</head>\n<body>\n<main>\n";
  page += "<header><div class=\"eyebrow\">Whittle · fine-tuning report</div><h1 title=\"" + HtmlEscape(r.student) +
          " → " + HtmlEscape(r.output) + "\">" + HtmlEscape(base(r.student)) + "<span class=\"arrow\">→</span>" +
          HtmlEscape(base(r.output)) + "</h1><p class=\"sub\"><code class=\"command\">" + HtmlEscape(r.command_line) +
          "</code></p></header>\n";

  std::string kpis;
  const double after = r.output_accuracy >= 0 ? r.output_accuracy : h.best;
  if (after >= 0) {
    const std::string cls = h.before < 0 ? "" : after > h.before ? "good" : after < h.before ? "bad" : "";
    kpis += Kpi("Eval accuracy", Percent(after), cls,
                h.before >= 0 ? "before " + Percent(h.before) + " · " + PointChange(h.before, after) : "after fine-tuning");
  }
  if (r.teacher_accuracy >= 0)
    kpis += Kpi("Teacher accuracy", Percent(r.teacher_accuracy), "",
                after >= 0 ? "gap " + PointChange(r.teacher_accuracy, after) : "on the eval data");
  if (h.best_epoch >= 0)
    kpis += Kpi("Best epoch", std::to_string(h.best_epoch + 1), "", "of " + std::to_string(h.epochs.size()) + " run");
  if (!h.epochs.empty())
    kpis += Kpi("Final loss", Fixed(h.epochs.back().loss, 4), "",
                Grouped(static_cast<int64_t>(h.epochs.back().samples_per_s + 0.5)) + " samples/s");
  if (r.output_params >= 0)
    kpis += Kpi("Output", Grouped(r.output_params) + " params", "",
                r.output_file_bytes >= 0 ? report::HumanBytes(r.output_file_bytes) + " file" : "");
  page += "<div class=\"kpis\">" + kpis + "</div>\n";

  std::string inputs;
  auto row = [&](const std::string& k, const std::string& v) {
    inputs += "<tr><th scope=\"row\">" + HtmlEscape(k) + "</th><td>" + HtmlEscape(v) + "</td></tr>";
  };
  row("student", r.student);
  row("teacher", r.teacher.empty() ? "none (labels only)" : r.teacher);
  row("training data", r.train_data + " (" + Grouped(r.train_samples) + " samples)");
  row("eval data", r.eval_data.empty() ? "none" : r.eval_data + " (" + Grouped(r.eval_samples) + " samples)");
  row("output", r.output);
  if (r.output_params >= 0) row("output params", Grouped(r.output_params));
  if (r.output_file_bytes >= 0)
    row("output file size", Grouped(r.output_file_bytes) + " bytes (" + report::HumanBytes(r.output_file_bytes) + ")");
  row("wall time", Fixed(r.seconds, 1) + " s");
  page += "<section class=\"card\"><h2>Run</h2><table class=\"run\"><tbody>" + inputs + "</tbody></table></section>\n";

  std::string opts;
  for (const auto& [k, v] : OptionRows(r.options))
    opts += "<tr><th scope=\"row\">" + HtmlEscape(k) + "</th><td>" + HtmlEscape(v) + "</td></tr>";
  page += "<section class=\"card\"><h2>Options</h2><table class=\"options\"><tbody>" + opts + "</tbody></table></section>\n";

  std::string epochs = "<section class=\"card\"><h2>Epochs</h2>";
  const std::string acc = AccuracySentence(r);
  if (!acc.empty()) epochs += "<p class=\"sub\">" + HtmlEscape(acc) + "</p>";
  epochs += EpochTableHtml(r);
  const std::string charts = ChartsHtml(r);
  if (!charts.empty()) epochs += "<h3>Loss and accuracy per epoch</h3>" + charts;
  page += epochs + "</section>\n";
  page += "<footer>Generated by Whittle finetune-model. This page is self-contained: no scripts and no external "
          "resources.</footer>\n</main>\n</body>\n</html>\n";
  return page;
}

std::string ToText(const CompressionReport& r, const FinetuneReport* ft) {
  if (!ft) return ToText(r);
  std::string text;
  for (size_t i = 0; i < r.passes.size(); ++i) text += PassTableText(r.passes[i], static_cast<int>(i) + 1) + "\n";
  return text + FinetuneText(*ft, static_cast<int>(r.passes.size()) + 1) + "\n" + SummaryText(r);
}

nlohmann::json ToJson(const CompressionReport& r, const FinetuneReport* ft) {
  nlohmann::json j = ToJson(r);
  if (ft) j["finetune"] = FinetuneJson(*ft);
  return j;
}

std::string ToHtml(const CompressionReport& r, const FinetuneReport* ft) {
  std::string page = ToHtml(r);
  if (!ft) return page;
  const size_t style_end = page.find("</style>");
  if (style_end != std::string::npos) page.insert(style_end, FinetuneSectionCss());
  const size_t footer = page.rfind("<footer>");
  page.insert(footer == std::string::npos ? page.size() : footer,
              FinetuneSectionHtml(*ft, static_cast<int>(r.passes.size()) + 1) + "\n");
  return page;
}

}  // namespace whittle
