#include "runtime/evaluate.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <map>

#include "kernels/common/index.h"
#include "kernels/kernel.h"
#include "lib/data/dataset.h"
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

StatusOr<Tensor> PredictTop1(const Session& session, const Tensor& inputs, int64_t batch_size,
                             const ProgressFn& progress) {
  if (session.inputs().empty() || session.outputs().empty()) return InvalidArgument("the model has no inputs or outputs");
  if (inputs.rank() < 1) return InvalidArgument("inputs must have a batch dimension");
  if (batch_size <= 0) return InvalidArgument("batch size must be positive, got " + std::to_string(batch_size));
  const int64_t n = inputs.dim(0);
  Tensor pred(DType::kInt64, {n});
  for (int64_t b = 0; b < n; b += batch_size) {
    const int64_t e = std::min(n, b + batch_size);
    WH_ASSIGN_OR_RETURN(Tensor x, ConformToInput(SliceBatch(inputs, b, e), session.inputs()[0]));
    WH_ASSIGN_OR_RETURN(std::vector<Tensor> outs, session.Run({{session.inputs()[0].name, x}}));
    const Tensor& logits = outs[0];
    if (logits.dtype() != DType::kFloat32 || logits.rank() != 2 || logits.dim(0) != e - b)
      return InvalidArgument("output '" + session.outputs()[0].name + "' must be float32 [batch, classes] for accuracy, got " +
                             DimsToString(logits.dims()));
    const int64_t k = logits.dim(1);
    for (int64_t i = 0; i < e - b; ++i) {
      const float* row = logits.data<float>() + i * k;
      pred.data<int64_t>()[b + i] = std::max_element(row, row + k) - row;
    }
    if (progress) progress(e, n);
  }
  return pred;
}

StatusOr<EvalResult> EvaluateTop1(const Session& session, const Tensor& inputs, const Tensor& labels,
                                  int64_t batch_size, const ProgressFn& progress) {
  if (!labels.defined()) return InvalidArgument("evaluation needs labels");
  if (labels.dtype() != DType::kInt64 || labels.rank() != 1 || inputs.rank() < 1 || labels.dim(0) != inputs.dim(0))
    return InvalidArgument("labels must be int64 [N] matching " + std::to_string(inputs.rank() ? inputs.dim(0) : 0) + " inputs");
  const auto t0 = std::chrono::steady_clock::now();
  WH_ASSIGN_OR_RETURN(Tensor pred, PredictTop1(session, inputs, batch_size, progress));
  EvalResult r;
  r.samples = pred.numel();
  for (int64_t i = 0; i < r.samples; ++i) r.correct += pred.data<int64_t>()[i] == labels.data<int64_t>()[i];
  r.accuracy = r.samples ? static_cast<double>(r.correct) / static_cast<double>(r.samples) : 0;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

StatusOr<Tensor> MakeBatchInput(const Session& session, int64_t batch, const Tensor* src) {
  if (session.inputs().empty()) return InvalidArgument("the model has no inputs");
  const IoInfo& in = session.inputs()[0];
  Dims d;
  for (size_t i = 0; i < in.shape.size(); ++i) {
    if (i == 0) d.push_back(batch);
    else if (in.shape[i].known()) d.push_back(in.shape[i].value);
    else return InvalidArgument("input '" + in.name + "' has an unknown dimension " + std::to_string(i) + " (only the batch may be symbolic)");
  }
  if (d.empty()) return InvalidArgument("input '" + in.name + "' has rank 0; cannot batch it");
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
  return Unimplemented("benchmarking without data needs a float32, integer or bool first input; '" + in.name +
                       "' is " + DTypeName(in.dtype));
}

StatusOr<std::vector<BenchResult>> Benchmark(const Session& session, const BenchOptions& opts, const Tensor* src,
                                             ProfileResult* profile) {
  using Clock = std::chrono::steady_clock;
  std::vector<BenchResult> results;
  std::map<std::string, ProfileEntry> by_type, by_node;
  std::vector<std::string> node_order;
  double all_ms = 0;
  const DeviceType device = BackendDevice(session.options().backend);
  for (int64_t batch : opts.batches) {
    if (batch <= 0) return InvalidArgument("batch sizes must be positive, got " + std::to_string(batch));
    WH_ASSIGN_OR_RETURN(Tensor x, MakeBatchInput(session, batch, src));
    if (opts.page_locked_input) {
      WH_ASSIGN_OR_RETURN(Tensor locked, session.NewHostTensor(x.dtype(), x.dims()));
      WH_RETURN_IF_ERROR(CopyTensorBytes(x, &locked));
      x = std::move(locked);
    }
    std::map<std::string, Tensor> feed{{session.inputs()[0].name, x}};
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
