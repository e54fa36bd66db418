#include "runtime/evaluate.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <map>

#include "kernels/common/index.h"
#include "kernels/kernel.h"
#include "lib/data/dataset.h"
#include "lib/ir/memory_meter.h"
#include "lib/ir/device.h"

namespace whittle {
double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t k = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(v.size())));
  k = std::min(std::max<size_t>(k, 1), v.size());
  return v[k - 1];
}

namespace {

bool IsIntegerType(DType t) {
  switch (t) {
    case DType::kInt8: case DType::kInt16: case DType::kInt32: case DType::kInt64:
    case DType::kUInt8: case DType::kUInt16: case DType::kUInt32: case DType::kUInt64: return true;
    default: return false;
  }
}

}  // namespace

StatusOr<Tensor> ConformToInput(const Tensor& t, const IoInfo& in) {
  if (in.dtype == DType::kUndefined || t.dtype() == in.dtype) return t;
  const bool to_int = in.dtype == DType::kInt32 || in.dtype == DType::kInt64;
  if (IsIntegerType(t.dtype()) && (to_int || in.dtype == DType::kFloat32)) {
    Tensor out(in.dtype, t.dims());
    for (int64_t i = 0; i < t.numel(); ++i) {
      const int64_t v = ReadIndexElement(t, i);
      if (in.dtype == DType::kInt64) {
        out.data<int64_t>()[i] = v;
      } else if (in.dtype == DType::kInt32) {
        if (v < INT32_MIN || v > INT32_MAX)
          return InvalidArgument("input '" + in.name + "' takes int32, and the data holds " + std::to_string(v) +
                                 ", which does not fit");
        out.data<int32_t>()[i] = static_cast<int32_t>(v);
      } else {
        out.data<float>()[i] = static_cast<float>(v);
      }
    }
    return out;
  }
  return InvalidArgument("input '" + in.name + "' takes " + DTypeName(in.dtype) + ", and the data is " +
                         DTypeName(t.dtype()));
}

namespace {

bool StartsWith(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

// A decoder-convention input that BatchFeeds can make when the data has none for it.
enum class DecoderInput { kNone, kAttentionMask, kPositionIds, kPast };

DecoderInput ClassifyDecoderInput(const std::string& name) {
  if (name == "attention_mask") return DecoderInput::kAttentionMask;
  if (name == "position_ids") return DecoderInput::kPositionIds;
  if (StartsWith(name, "past_key_values.") || StartsWith(name, "past.") || StartsWith(name, "past_key.") ||
      StartsWith(name, "past_value."))
    return DecoderInput::kPast;
  return DecoderInput::kNone;
}

// The sequence length T and past length P of the given feeds: T from input_ids (else the first
// given rank-2 integer array), P from any given past array's dim 2 (0 when none is given).
Status SequenceOf(const std::map<std::string, Tensor>& given, int64_t* t, int64_t* p) {
  *t = -1;
  *p = 0;
  const auto ids = given.find("input_ids");
  if (ids != given.end() && ids->second.rank() == 2) *t = ids->second.dim(1);
  for (const auto& [name, x] : given) {
    if (*t < 0 && x.rank() == 2 && IsIntegerType(x.dtype()) && ClassifyDecoderInput(name) == DecoderInput::kNone)
      *t = x.dim(1);
    if (ClassifyDecoderInput(name) == DecoderInput::kPast && x.rank() == 4) *p = x.dim(2);
  }
  if (*t < 0) return InvalidArgument("no token ids [N, T] in the data to size them from");
  return Status::Ok();
}

// attention_mask (ones [N, P+T]), position_ids (P..P+T-1 per row) or an empty past
// [N, heads, 0, head_dim] from the input's declared dims, in the input's element type.
StatusOr<Tensor> SynthesizeDecoderInput(const IoInfo& in, DecoderInput kind, int64_t n, int64_t t, int64_t p) {
  if (kind == DecoderInput::kPast) {
    if (in.shape.size() != 4 || !in.shape[1].known() || !in.shape[3].known())
      return InvalidArgument("input '" + in.name + "' " + SymShapeToString(in.shape) +
                             " is a past key/value, but not [batch, heads, past, head_dim] with known heads and "
                             "head_dim; give it in the data");
    if (in.dtype != DType::kFloat32)
      return InvalidArgument("input '" + in.name + "' is a past key/value of type " + DTypeName(in.dtype) +
                             "; only float32 ones are made empty; give it in the data");
    if (p > 0)
      return InvalidArgument("the data gives some past key/values of length " + std::to_string(p) + " but not '" +
                             in.name + "'; give all of them or none");
    return Tensor(DType::kFloat32, {n, in.shape[1].value, 0, in.shape[3].value});
  }
  const int64_t cols = kind == DecoderInput::kAttentionMask ? p + t : t;
  Tensor v(DType::kInt64, {n, cols});
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < cols; ++c)
      v.data<int64_t>()[r * cols + c] = kind == DecoderInput::kAttentionMask ? 1 : p + c;
  if (in.dtype == DType::kBool) {
    Tensor b(DType::kBool, v.dims());
    for (int64_t i = 0; i < v.numel(); ++i) b.data<bool>()[i] = v.data<int64_t>()[i] != 0;
    return b;
  }
  return ConformToInput(v, in);
}

// calls: data: call `begin` as stored (its feedback inputs too: calibration follows the calls the
// data recorded). One call per run.
StatusOr<std::map<std::string, Tensor>> CallFeeds(const Dataset& data, const std::vector<IoInfo>& inputs,
                                                  int64_t begin, int64_t end) {
  if (end - begin != 1)
    return InvalidArgument("the data '" + data.description + "' is a sequence of calls, run one per batch; asked for " +
                           std::to_string(end - begin));
  std::map<std::string, Tensor> feeds;
  for (const IoInfo& in : inputs) {
    WH_ASSIGN_OR_RETURN(Tensor t, data.CallInput(in.name, begin));
    WH_ASSIGN_OR_RETURN(feeds[in.name], ConformToInput(t, in));
  }
  return feeds;
}

}  // namespace

int64_t FixedBatch(const std::vector<IoInfo>& inputs) {
  int64_t fixed = 0;
  for (const IoInfo& in : inputs) {
    if (in.shape.empty()) continue;
    if (!in.shape[0].known()) return 0;
    if (fixed && in.shape[0].value != fixed) return 0;
    fixed = in.shape[0].value;
  }
  return fixed;
}

namespace {

// Rows [begin, end) of t; for a fixed-batch model (fixed > 0) whose last batch is partial, those
// rows repeated cyclically to its batch (the caller reads the first end - begin rows of each
// output).
Tensor BatchRows(const Tensor& t, int64_t begin, int64_t end, int64_t fixed) {
  Tensor rows = SliceBatch(t, begin, end);
  const int64_t n0 = end - begin;
  if (fixed <= n0 || n0 <= 0 || rows.rank() < 1 || rows.dim(0) != n0) return rows;
  Dims d = rows.dims();
  d[0] = fixed;
  Tensor out(rows.dtype(), d);
  const size_t row = rows.nbytes() / static_cast<size_t>(n0);
  for (int64_t i = 0; i < fixed; ++i)
    std::memcpy(static_cast<char*>(out.raw_data()) + static_cast<size_t>(i) * row,
                static_cast<const char*>(rows.raw_data()) + static_cast<size_t>(i % n0) * row, row);
  return out;
}

// y's first `rows` rows when a fixed-batch model padded its last batch (BatchFeeds), else y.
Tensor SampleRows(const Tensor& y, int64_t rows, const std::vector<IoInfo>& inputs) {
  return y.rank() >= 1 && y.dim(0) > rows && y.dim(0) == FixedBatch(inputs) ? SliceBatch(y, 0, rows) : y;
}

}  // namespace

StatusOr<std::map<std::string, Tensor>> BatchFeeds(const Dataset& data, const std::vector<IoInfo>& inputs,
                                                   int64_t begin, int64_t end) {
  if (inputs.empty()) return InvalidArgument("the model has no inputs");
  if (data.calls) return CallFeeds(data, inputs, begin, end);
  const int64_t fixed = FixedBatch(inputs);
  std::map<std::string, Tensor> feeds;
  std::vector<size_t> missing;
  for (size_t k = 0; k < inputs.size(); ++k) {
    const Tensor* t = data.named.empty() && k > 0 ? nullptr : data.ForInput(inputs[k].name, k);
    if (!t) {
      missing.push_back(k);
      continue;
    }
    WH_ASSIGN_OR_RETURN(feeds[inputs[k].name], ConformToInput(BatchRows(*t, begin, end, fixed), inputs[k]));
  }
  if (missing.empty()) return feeds;
  // A decoder's mask, positions and empty past follow from the token ids: data with only the ids
  // (npz: input_ids, or npy: ids [N, T]) feeds the whole model. Only a model with a past input
  // counts as a decoder: an encoder's missing mask stays an error rather than a guess.
  bool decoder = false;
  for (const IoInfo& in : inputs) decoder |= ClassifyDecoderInput(in.name) == DecoderInput::kPast;
  std::string names;
  for (size_t k : missing) {
    names += (names.empty() ? "'" : ", '") + inputs[k].name + "'";
    if (decoder && ClassifyDecoderInput(inputs[k].name) != DecoderInput::kNone) continue;
    if (data.named.empty())
      return InvalidArgument("the model has " + std::to_string(inputs.size()) + " inputs and the data '" +
                             data.description + "' one array, which feeds '" + inputs[0].name +
                             "'; nothing feeds '" + inputs[k].name +
                             "' (give an npz: archive with one array per input, by name)");
    return InvalidArgument("the data '" + data.description + "' has no array for input '" + inputs[k].name +
                           "' (it holds " + data.ArrayNames() + ")");
  }
  int64_t seq = 0, past = 0;
  Status sized = SequenceOf(feeds, &seq, &past);
  if (!sized.ok())
    return InvalidArgument("the data '" + data.description + "' has no array for " + names +
                           ", and they cannot be made: " + sized.message());
  for (size_t k : missing) {
    auto made = SynthesizeDecoderInput(inputs[k], ClassifyDecoderInput(inputs[k].name), end - begin, seq, past);
    if (!made.ok()) return made.status();
    feeds[inputs[k].name] = std::move(*made);
  }
  return feeds;
}

namespace {

// The decision of one row of k scores: the top class, or for a one-wide output (a probability, a
// VAD's speech score) whether it is above 0.5.
int64_t Decide(const float* row, int64_t k) {
  if (k == 1) return row[0] > 0.5f ? 1 : 0;
  return std::max_element(row, row + k) - row;
}

// pred ([n, positions...]) made on the first batch, or a later batch's positions checked against it
// (`where`: "call 3", "samples 256..."; `hint`: appended to the error).
Status TrackPositions(const Dims& here, int64_t n, const std::string& output, const std::string& where,
                      const std::string& hint, Tensor* pred, Dims* positions) {
  if (!pred->defined()) {
    *positions = here;
    Dims pd{n};
    pd.insert(pd.end(), positions->begin(), positions->end());
    *pred = Tensor(DType::kInt64, pd);
    return Status::Ok();
  }
  if (here != *positions)
    return InvalidArgument("output '" + output + "' has positions " + DimsToString(here) + " in " + where + ", and " +
                           DimsToString(*positions) + " before" + hint);
  return Status::Ok();
}

// calls: data, run in order: from the second call on, each feedback input takes the previous call's
// output. Decisions per call: the first output's rows (its last axis is the class axis; a 0-d or
// one-wide output is thresholded).
StatusOr<Tensor> PredictCalls(const Session& session, const Dataset& data, const ProgressFn& progress) {
  const int64_t n = data.size();
  std::map<std::string, Tensor> prev;
  Tensor pred;
  Dims positions;
  for (int64_t c = 0; c < n; ++c) {
    WH_ASSIGN_OR_RETURN(auto feeds, CallFeeds(data, session.inputs(), c, c + 1));
    for (const auto& [in, out] : data.feedback) {
      if (c == 0) continue;
      auto it = prev.find(out);
      if (it == prev.end()) return InvalidArgument("feedback " + in + "=" + out + ": the model has no output '" + out + "'");
      auto f = feeds.find(in);
      if (f == feeds.end()) return InvalidArgument("feedback " + in + "=" + out + ": the model has no input '" + in + "'");
      if (it->second.dims() != f->second.dims() || it->second.dtype() != f->second.dtype())
        return InvalidArgument("feedback " + in + "=" + out + ": output " + DimsToString(it->second.dims()) +
                               " does not fit input " + DimsToString(f->second.dims()));
      f->second = it->second;
    }
    WH_ASSIGN_OR_RETURN(std::vector<Tensor> outs, session.Run(feeds));
    prev.clear();
    for (size_t o = 0; o < outs.size(); ++o) prev[session.outputs()[o].name] = outs[o];
    const Tensor& y = outs[0];
    if (y.dtype() != DType::kFloat32)
      return InvalidArgument("output '" + session.outputs()[0].name + "' must be float32 for decisions, got " +
                             DTypeName(y.dtype()));
    const int64_t k = y.rank() == 0 ? 1 : y.dim(y.rank() - 1);
    const Dims here = y.rank() == 0 ? Dims{} : Dims(y.dims().begin(), y.dims().end() - 1);
    if (k < 1) return InvalidArgument("output '" + session.outputs()[0].name + "' is empty");
    WH_RETURN_IF_ERROR(TrackPositions(here, n, session.outputs()[0].name, "call " + std::to_string(c), "", &pred,
                                      &positions));
    const int64_t rows = y.numel() / k;
    for (int64_t i = 0; i < rows; ++i) pred.data<int64_t>()[c * rows + i] = Decide(y.data<float>() + i * k, k);
    if (progress) progress(c + 1, n);
  }
  return pred;
}

}  // namespace

StatusOr<Tensor> PredictTop1(const Session& session, const Dataset& data, int64_t batch_size,
                             const ProgressFn& progress) {
  if (session.inputs().empty() || session.outputs().empty()) return InvalidArgument("the model has no inputs or outputs");
  if (data.calls) return PredictCalls(session, data, progress);
  if (data.size() < 0 || !data.inputs.defined() || data.inputs.rank() < 1)
    return InvalidArgument("inputs must have a batch dimension");
  if (batch_size <= 0) return InvalidArgument("batch size must be positive, got " + std::to_string(batch_size));
  batch_size = DataBatch(data, batch_size, &session.inputs());  // a fixed-batch model: its batch
  const int64_t n = data.size();
  Tensor pred;
  Dims positions;  // the output's dims between the batch and the class axis ([] for [batch, classes])
  for (int64_t b = 0; b < n; b += batch_size) {
    const int64_t e = std::min(n, b + batch_size);
    WH_ASSIGN_OR_RETURN(auto feeds, BatchFeeds(data, session.inputs(), b, e));
    WH_ASSIGN_OR_RETURN(std::vector<Tensor> outs, session.Run(feeds));
    // A fixed-batch model's padded last batch: its first e - b rows are the samples'.
    const Tensor logits = SampleRows(outs[0], e - b, session.inputs());
    if (logits.dtype() != DType::kFloat32 || logits.rank() < 2 || logits.dim(0) != e - b || logits.dim(logits.rank() - 1) < 1)
      return InvalidArgument("output '" + session.outputs()[0].name +
                             "' must be float32 [batch, classes] or [batch, positions..., classes] for accuracy, got " +
                             DTypeName(logits.dtype()) + " " + DimsToString(logits.dims()));
    const Dims here(logits.dims().begin() + 1, logits.dims().end() - 1);
    WH_RETURN_IF_ERROR(TrackPositions(here, n, session.outputs()[0].name, "samples " + std::to_string(b) + "...",
                                      "; give sequences of one length", &pred, &positions));
    const int64_t k = logits.dim(logits.rank() - 1);
    const int64_t rows = logits.numel() / k;  // (e - b) × positions
    const int64_t per = rows / (e - b);
    for (int64_t i = 0; i < rows; ++i) {
      pred.data<int64_t>()[b * per + i] = Decide(logits.data<float>() + i * k, k);
    }
    if (progress) progress(e, n);
  }
  if (!pred.defined()) pred = Tensor(DType::kInt64, {0});
  return pred;
}

namespace {
Dataset Unnamed(const Tensor& inputs, const Tensor& labels = Tensor()) {
  Dataset d;
  d.inputs = inputs;
  d.labels = labels;
  d.description = "inputs " + std::string(DTypeName(inputs.dtype())) + " " + DimsToString(inputs.dims());
  return d;
}
}  // namespace

StatusOr<Tensor> PredictTop1(const Session& session, const Tensor& inputs, int64_t batch_size,
                             const ProgressFn& progress) {
  if (inputs.rank() < 1) return InvalidArgument("inputs must have a batch dimension");
  return PredictTop1(session, Unnamed(inputs), batch_size, progress);
}

StatusOr<OutputAgreement> CompareOutputs(const Session& a, const Session& b, const Dataset& data,
                                         int64_t batch_size) {
  OutputAgreement r;
  if (data.calls || data.size() <= 0) return r;
  if (batch_size <= 0) return InvalidArgument("batch size must be positive, got " + std::to_string(batch_size));
  // Each model at its own batch: a fixed-batch one pads its last batch (BatchFeeds).
  const int64_t step = std::min(DataBatch(data, batch_size, &a.inputs()), DataBatch(data, batch_size, &b.inputs()));
  double dot = 0, na = 0, nb = 0, worst = 0;
  const int64_t n = data.size();
  for (int64_t s = 0; s < n; s += step) {
    const int64_t e = std::min(n, s + step);
    WH_ASSIGN_OR_RETURN(auto fa, BatchFeeds(data, a.inputs(), s, e));
    WH_ASSIGN_OR_RETURN(auto fb, BatchFeeds(data, b.inputs(), s, e));
    WH_ASSIGN_OR_RETURN(std::vector<Tensor> ya, a.Run(fa));
    WH_ASSIGN_OR_RETURN(std::vector<Tensor> yb, b.Run(fb));
    for (size_t i = 0; i < a.outputs().size() && i < ya.size(); ++i) {
      for (size_t j = 0; j < b.outputs().size() && j < yb.size(); ++j) {
        if (a.outputs()[i].name != b.outputs()[j].name) continue;
        // A padded batch's extra rows are not samples.
        const Tensor x = SampleRows(ya[i], e - s, a.inputs()), y = SampleRows(yb[j], e - s, b.inputs());
        if (x.dtype() != DType::kFloat32 || y.dtype() != DType::kFloat32) continue;
        if (x.dims() != y.dims()) continue;  // e.g. a pruned decoder's KV cache: fewer heads
        const float* p = x.data<float>();
        const float* q = y.data<float>();
        for (int64_t k = 0; k < x.numel(); ++k) {
          dot += static_cast<double>(p[k]) * q[k];
          na += static_cast<double>(p[k]) * p[k];
          nb += static_cast<double>(q[k]) * q[k];
          worst = std::max(worst, std::fabs(static_cast<double>(p[k]) - q[k]));
        }
        r.values += x.numel();
      }
    }
  }
  if (r.values == 0) return r;
  r.max_abs = worst;
  r.cosine = na > 0 && nb > 0 ? dot / std::sqrt(na * nb) : (na == nb ? 1.0 : 0.0);
  return r;
}

StatusOr<EvalResult> EvaluateTop1(const Session& session, const Dataset& data, int64_t batch_size,
                                  const ProgressFn& progress) {
  const Tensor& labels = data.labels;
  if (!labels.defined()) return InvalidArgument("evaluation needs labels");
  if (labels.dtype() != DType::kInt64 || labels.rank() < 1 || labels.dim(0) != data.size())
    return InvalidArgument("labels must be int64 [N] (or [N, positions]) matching " + std::to_string(data.size()) +
                           " inputs");
  const auto t0 = std::chrono::steady_clock::now();
  WH_ASSIGN_OR_RETURN(Tensor pred, PredictTop1(session, data, batch_size, progress));
  WH_ASSIGN_OR_RETURN(EvalResult r, CompareTop1(pred, labels));
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

StatusOr<EvalResult> CompareTop1(const Tensor& pred, const Tensor& labels) {
  // [N, 1] labels were flattened to [N] on load: equal counts per sample are enough.
  if (pred.dtype() != DType::kInt64 || labels.dtype() != DType::kInt64 || pred.rank() < 1 || labels.rank() < 1 ||
      pred.dim(0) != labels.dim(0) || pred.numel() != labels.numel())
    return InvalidArgument("labels " + DimsToString(labels.dims()) + " do not match the predictions " +
                           DimsToString(pred.dims()) + " (one label per sample, or per position of a sequence output)");
  EvalResult r;
  r.samples = pred.dim(0);
  r.predictions = pred.numel();
  for (int64_t i = 0; i < r.predictions; ++i) r.correct += pred.data<int64_t>()[i] == labels.data<int64_t>()[i];
  r.accuracy = r.predictions ? static_cast<double>(r.correct) / static_cast<double>(r.predictions) : 0;
  return r;
}

StatusOr<EvalResult> EvaluateTop1(const Session& session, const Tensor& inputs, const Tensor& labels,
                                  int64_t batch_size, const ProgressFn& progress) {
  if (!labels.defined()) return InvalidArgument("evaluation needs labels");
  if (inputs.rank() < 1 || labels.rank() < 1 || labels.dim(0) != inputs.dim(0))
    return InvalidArgument("labels must be int64 [N] matching " + std::to_string(inputs.rank() ? inputs.dim(0) : 0) + " inputs");
  return EvaluateTop1(session, Unnamed(inputs, labels), batch_size, progress);
}

namespace {

// One input's batch: rows of src cycled when it has matching rows, else a pattern or zeros.
StatusOr<Tensor> MakeBatchInput(const IoInfo& in, const Dims& d, int64_t batch, const Tensor* src) {
  if (src && src->rank() >= 1 && src->dim(0) > 0 && src->numel() / src->dim(0) == NumElements(d) / batch) {
    // Rows of the data, cycled, in the input's element type.
    Tensor rows(src->dtype(), d);
    const size_t row_bytes = static_cast<size_t>(NumElements(d) / batch) * DTypeSize(src->dtype());
    for (int64_t b = 0; b < batch; ++b)
      std::memcpy(static_cast<char*>(rows.raw_data()) + static_cast<size_t>(b) * row_bytes,
                  static_cast<const char*>(src->raw_data()) + static_cast<size_t>(b % src->dim(0)) * row_bytes,
                  row_bytes);
    return ConformToInput(rows, in);
  }
  if (in.dtype == DType::kFloat32) {
    Tensor t(DType::kFloat32, d);
    float* p = t.data<float>();
    for (int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<float>((i * 2654435761u) % 1000) / 1000.f;
    return t;
  }
  if (IsIntegerType(in.dtype) || in.dtype == DType::kBool) {
    // Zeros: a valid index or id for any integer input (embedding tables, byte values).
    Tensor t(in.dtype, d);
    std::memset(t.raw_data(), 0, t.nbytes());
    return t;
  }
  return Unimplemented("benchmarking without data needs float32, integer or bool inputs; '" + in.name + "' is " +
                       DTypeName(in.dtype));
}

}  // namespace

StatusOr<std::map<std::string, Tensor>> MakeBatchFeeds(const Session& session, int64_t batch,
                                                       const Dataset* src, const std::map<std::string, Dims>& shapes) {
  if (session.inputs().empty()) return InvalidArgument("the model has no inputs");
  for (const auto& [name, dims] : shapes) {
    bool found = false;
    for (const IoInfo& in : session.inputs()) found |= in.name == name;
    if (!found) return InvalidArgument("--input-shape: the model has no input named '" + name + "'");
  }
  if (src && src->calls) {  // a call as the data gives it: its first
    if (batch != 1)
      return InvalidArgument("the data '" + src->description + "' is a sequence of calls: benchmark with --batch 1");
    return CallFeeds(*src, session.inputs(), 0, 1);
  }
  std::map<std::string, Tensor> feeds;
  for (size_t k = 0; k < session.inputs().size(); ++k) {
    const IoInfo& in = session.inputs()[k];
    const Tensor* data = src ? src->ForInput(in.name, k) : nullptr;
    const auto given = shapes.find(in.name);
    if (given != shapes.end() && given->second.size() != in.shape.size())
      return InvalidArgument("--input-shape " + in.name + ": the input has rank " + std::to_string(in.shape.size()) +
                             ", got " + DimsToString(given->second));
    if (in.shape.empty()) return InvalidArgument("input '" + in.name + "' has rank 0; cannot batch it");
    Dims d{batch};
    for (size_t i = 1; i < in.shape.size(); ++i) {
      if (given != shapes.end()) {
        if (in.shape[i].known() && in.shape[i].value != given->second[i])
          return InvalidArgument("--input-shape " + in.name + ": dim " + std::to_string(i) + " is " +
                                 std::to_string(in.shape[i].value) + " in the model, got " + DimsToString(given->second));
        d.push_back(given->second[i]);
      } else if (in.shape[i].known()) {
        d.push_back(in.shape[i].value);
      } else if (data && data->rank() == static_cast<int>(in.shape.size())) {
        d.push_back(data->dim(static_cast<int>(i)));
      } else {
        const std::string sym = in.shape[i].param.empty() ? "" : " ('" + in.shape[i].param + "')";
        std::string example;
        for (size_t j = 0; j < in.shape.size(); ++j)
          example += (j ? "," : "") + (in.shape[j].known() ? std::to_string(in.shape[j].value) : j ? "N" : "1");
        return InvalidArgument("input '" + in.name + "' " + SymShapeToString(in.shape) + " has a free dimension " +
                               std::to_string(i) + sym + "; give its size with --input-shape " + in.name + "=" +
                               example + " (dim 0 is the batch) or data for the input");
      }
    }
    // A hostile or mistaken shape (an image dim of 2^31) is refused here, before the allocation.
    auto checked = CheckedNumBytes(d, in.dtype);
    if (!checked.ok()) return checked.status().WithContext("input '" + in.name + "'");
    const uint64_t bytes = *checked;
    const int64_t budget = session.options().max_memory_bytes;
    if (budget > 0 && bytes > static_cast<uint64_t>(budget))
      return ResourceExhausted("input '" + in.name + "' of shape " + DimsToString(d) + " needs " + HumanBytes(bytes) +
                               ", over the memory budget of " + HumanBytes(static_cast<uint64_t>(budget)) +
                               " (--max-memory)");
    WH_ASSIGN_OR_RETURN(feeds[in.name], MakeBatchInput(in, d, batch, data));
  }
  return feeds;
}

StatusOr<std::vector<BenchResult>> Benchmark(const Session& session, const BenchOptions& opts, const Dataset* src,
                                             ProfileResult* profile) {
  using Clock = std::chrono::steady_clock;
  std::vector<BenchResult> results;
  std::map<std::string, ProfileEntry> by_type, by_node;
  std::vector<std::string> node_order;
  double all_ms = 0;
  const DeviceType device = BackendDevice(session.options().backend);
  // calls: data benchmarks its first call as it is (one call per run).
  // A fixed-batch model benchmarks at its batch.
  const int64_t fixed = FixedBatch(session.inputs());
  const std::vector<int64_t> batches = src && src->calls ? std::vector<int64_t>{1}
                                       : fixed > 0        ? std::vector<int64_t>{fixed}
                                                          : opts.batches;
  for (int64_t batch : batches) {
    if (batch <= 0) return InvalidArgument("batch sizes must be positive, got " + std::to_string(batch));
    WH_ASSIGN_OR_RETURN(auto feed, MakeBatchFeeds(session, batch, src, opts.input_shapes));
    if (opts.page_locked_input) {
      for (auto& [name, x] : feed) {
        WH_ASSIGN_OR_RETURN(Tensor locked, session.NewHostTensor(x.dtype(), x.dims()));
        WH_RETURN_IF_ERROR(CopyTensorBytes(x, &locked));
        x = std::move(locked);
      }
    }
    int64_t device_before = -1;
    if (device != DeviceType::kCpu) {
      ResetDeviceMemoryPeak(device);
      device_before = DeviceMemoryInUse(device).live_bytes;
    }
    std::vector<Tensor> outs;  // page_locked_output: tensors of the outputs' dtypes and dims, kept
    if (opts.page_locked_output) {
      WH_ASSIGN_OR_RETURN(std::vector<Tensor> first, session.Run(feed));
      for (const Tensor& t : first) {
        WH_ASSIGN_OR_RETURN(Tensor o, session.NewHostTensor(t.dtype(), t.dims()));
        outs.push_back(std::move(o));
      }
    }
    auto run = [&]() { return opts.page_locked_output ? session.RunInto(feed, outs) : session.Run(feed).status(); };
    for (int i = 0; i < opts.warmup; ++i) WH_RETURN_IF_ERROR(run());
    std::vector<double> lat;
    const auto start = Clock::now();
    while (static_cast<int>(lat.size()) < opts.min_iterations ||
           std::chrono::duration<double>(Clock::now() - start).count() < opts.min_seconds) {
      const auto t0 = Clock::now();
      WH_RETURN_IF_ERROR(run());
      lat.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
      if (lat.size() > 100000) break;
    }
    // The profile comes from runs of its own after the timed ones: timing each node synchronises
    // a device after every step, which the latencies above must not pay (on an H100 it doubled
    // the int8 CNN's batch-64 figure).
    const int profiled = profile && opts.profile ? std::min<int>(static_cast<int>(lat.size()), 200) : 0;
    for (int i = 0; i < profiled; ++i) {
      RunStats stats;
      WH_RETURN_IF_ERROR(session.Run(feed, &stats).status());
      ++profile->runs;
      for (const auto& nt : stats.nodes) {
        auto& t = by_type[nt.op_type];
        t.name = t.op_type = nt.op_type;
        t.total_ms += nt.ms;
        ++t.calls;
        if (!by_node.count(nt.name)) node_order.push_back(nt.name);
        auto& nn = by_node[nt.name];
        nn.name = nt.name;
        nn.op_type = nt.op_type;
        nn.device = nt.device;
        nn.total_ms += nt.ms;
        ++nn.calls;
        all_ms += nt.ms;
      }
    }
    BenchResult r;
    r.batch = batch;
    r.iterations = static_cast<int>(lat.size());
    r.p50_ms = Percentile(lat, 50);
    r.p90_ms = Percentile(lat, 90);
    r.p99_ms = Percentile(lat, 99);
    double sum = 0;
    for (double v : lat) sum += v;
    r.mean_ms = sum / static_cast<double>(lat.size());
    r.throughput = r.p50_ms > 0 ? static_cast<double>(batch) * 1000.0 / r.p50_ms : 0;
    if (device != DeviceType::kCpu) {
      r.device_before_bytes = device_before;
      r.device_peak_bytes = DeviceMemoryInUse(device).peak_bytes;
    }
    results.push_back(r);
  }
  if (profile && opts.profile) {
    for (auto& [k, e] : by_type) {
      e.share = all_ms > 0 ? e.total_ms / all_ms : 0;
      profile->by_op_type.push_back(e);
    }
    for (const std::string& k : node_order) {
      ProfileEntry e = by_node[k];
      e.share = all_ms > 0 ? e.total_ms / all_ms : 0;
      profile->by_node.push_back(e);
    }
    auto desc = [](const ProfileEntry& a, const ProfileEntry& b) { return a.total_ms > b.total_ms; };
    std::sort(profile->by_op_type.begin(), profile->by_op_type.end(), desc);
    std::sort(profile->by_node.begin(), profile->by_node.end(), desc);
  }
  return results;
}

}  // namespace whittle
