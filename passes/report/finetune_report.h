// FinetuneReport: what a distillation fine-tuning run did — its inputs, the options it ran with,
// the per-epoch history (runtime/training/finetune.h) and the figures of the model it wrote — and
// its renderings: the JSON history, one self-contained HTML page for finetune-model --report
// (inline CSS and SVG charts, no scripts, no network references), and the fine-tune section that
// compress-model --finetune adds to its text, JSON and HTML reports. Renderers only format; a
// figure left at -1 is "not measured" (omitted, null in JSON). Every path and spec is escaped.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "passes/report/report.h"
#include "runtime/training/finetune.h"

namespace whittle {

struct FinetuneReport {
  std::string command_line;  // as typed (argv joined, quoted where needed)
  std::string spec;          // compress-model's --finetune SPEC ("" from finetune-model)
  std::string student, teacher, output;
  std::string train_data, eval_data;  // specs ("" = none)
  int64_t train_samples = 0, eval_samples = 0;
  training::TrainOptions options;
  training::FinetuneHistory history;
  double teacher_accuracy = -1;  // the teacher on the eval data
  double output_accuracy = -1;   // the written model on the eval data (the best epoch's)
  int64_t output_params = -1;    // elements of all initializers of the written model
  int64_t output_file_bytes = -1;
  double seconds = 0;  // wall time of the whole run
};

// argv as one line a shell would read back (arguments with spaces or quotes single-quoted).
std::string CommandLine(int argc, char** argv);

// [{epoch (1-based), loss, train_accuracy, eval_accuracy, samples_per_s, seconds, data_wait_s}],
// unmeasured accuracies null.
nlohmann::json EpochsJson(const training::FinetuneHistory& h);
// {epochs: EpochsJson, accuracy_before, best_eval_accuracy, best_epoch (1-based), teacher_accuracy,
//  accuracy_after, options: {...}, train_data, eval_data, ...}: the fine-tune part of the reports.
nlohmann::json FinetuneJson(const FinetuneReport& r);

// The whole page of finetune-model --report.
std::string FinetuneHtml(const FinetuneReport& r);
// One <section> (options, accuracy before/after, the epoch table, loss and accuracy charts) for
// another report's page; `index` is its badge number (after the passes).
std::string FinetuneSectionHtml(const FinetuneReport& r, int index);
// The CSS rules the section needs beyond compress-model's page's own (for its <style>).
std::string FinetuneSectionCss();
// Text for compress-model's tables: "finetune epochs=1 (12.3 s)" then the epoch table and the
// accuracy before → after; `index` numbers it after the passes.
std::string FinetuneText(const FinetuneReport& r, int index);

// compress-model's three reports with the fine-tune section after the passes' (ft null: without
// it, the same as ToText/ToJson/ToHtml of the report alone).
std::string ToText(const CompressionReport& r, const FinetuneReport* ft);
nlohmann::json ToJson(const CompressionReport& r, const FinetuneReport* ft);
std::string ToHtml(const CompressionReport& r, const FinetuneReport* ft);

}  // namespace whittle
