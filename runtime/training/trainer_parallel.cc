// The Trainer's data parallelism (issue 44): synchronous SGD's gradient buckets all-reduced
// while the backward pass runs, the step's statistics, model averaging, and the teacher's
// logits shared by the ranks. The rest of the Trainer is trainer.cc.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <limits>
#include <numeric>

#include "runtime/session_internal.h"
#include "runtime/training/trainer.h"

namespace whittle::training {

void Trainer::PlanBuckets() {
  // The order the backward pass computes the gradients in: the session runs the training graph's
  // nodes in its topological order, so a gradient comes when the node that makes it runs (one no
  // node makes, an input or a constant, at the end). Every rank plans the same buckets from the
  // same graph.
  const size_t P = values_.size();
  const Graph& g = SessionGraph(*train_);
  std::vector<int64_t> when(P, std::numeric_limits<int64_t>::max());
  if (auto order = g.TopologicalOrder(); order.ok()) {
    std::vector<int64_t> pos(g.nodes().size(), 0);
    for (size_t i = 0; i < order->size(); ++i) pos[static_cast<size_t>((*order)[i])] = static_cast<int64_t>(i);
    for (size_t k = 0; k < P && k + 1 < g.outputs().size(); ++k)
      if (const int p = g.value(g.outputs()[k + 1]).producer; p >= 0) when[k] = pos[static_cast<size_t>(p)];
  }
  std::vector<size_t> by_arrival(P);
  std::iota(by_arrival.begin(), by_arrival.end(), 0);
  std::stable_sort(by_arrival.begin(), by_arrival.end(), [&](size_t a, size_t b) { return when[a] < when[b]; });
  grad_offset_.assign(P, 0);
  bucket_of_.assign(P, 0);
  bucket_range_.clear();
  int64_t at = 0, begin = 0;
  const int64_t cap = std::max<int64_t>(1, opts_.bucket_bytes / static_cast<int64_t>(sizeof(float)));
  for (size_t k : by_arrival) {
    // A bucket closes before the param that would take it past the cap (a param larger than the
    // cap is a bucket of its own).
    if (at > begin && at - begin + values_[k].numel() > cap) {
      bucket_range_.emplace_back(begin, at);
      begin = at;
    }
    grad_offset_[k] = at;
    bucket_of_[k] = static_cast<int>(bucket_range_.size());
    at += values_[k].numel();
  }
  if (at > begin || bucket_range_.empty()) bucket_range_.emplace_back(begin, at);
  flat_.assign(static_cast<size_t>(at), 0.f);
}

StatusOr<StepResult> Trainer::ReducedGradients(const Tensor& x, const Tensor& labels, const Tensor& teacher_logits,
                                               std::vector<Tensor>* grads) {
  if (device_ != DeviceType::kCpu)
    return Unimplemented("data-parallel training runs on the CPU backend only (the NCCL path is not built yet)");
  if (bucket_range_.empty() || grad_offset_.size() != values_.size()) PlanBuckets();
  const Communicator& comm = *opts_.comm;
  const int64_t rows = x.defined() && x.rank() > 0 ? x.dim(0) : 0;
  bucket_missing_.assign(bucket_range_.size(), 0);
  for (int b : bucket_of_) ++bucket_missing_[static_cast<size_t>(b)];
  size_t next = 0;  // buckets start in order on every rank (MPI matches collectives by order)
  int64_t to_come = static_cast<int64_t>(values_.size());  // gradients the backward pass has yet to give
  Status failed = Status::Ok();
  double comm_s = 0;
  auto start_ready = [&] {
    const auto c0 = std::chrono::steady_clock::now();
    for (; failed.ok() && next < bucket_range_.size() && bucket_missing_[next] == 0; ++next) {
      const auto [b0, b1] = bucket_range_[next];
      failed = comm.StartAllReduceSum(flat_.data() + b0, b1 - b0);
      ++buckets_;
      buckets_overlapped_ += to_come > 0;
    }
    comm.Progress();
    comm_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - c0).count();
  };
  // Each rank's gradient of its rows' mean loss, times its row count: the sum over ranks divided
  // by the global row count is the global batch's gradient.
  const auto w = static_cast<float>(rows);
  const size_t P = values_.size();
  std::function<void(size_t, const Tensor&)> ready = [&](size_t out, const Tensor& g) {
    if (out < 1 || out > P || !failed.ok()) return;
    const size_t k = out - 1;
    if (g.dtype() != DType::kFloat32 || g.numel() != values_[k].numel() || g.device() != DeviceType::kCpu) {
      failed = Internal("the gradient of '" + params_[k] + "' is not a host float32 tensor of its param's size");
      return;
    }
    const float* p = g.data<float>();
    float* dst = flat_.data() + grad_offset_[k];
    for (int64_t i = 0; i < g.numel(); ++i) dst[i] = p[i] * w;
    --bucket_missing_[static_cast<size_t>(bucket_of_[k])];
    --to_come;
    start_ready();
  };
  StepResult r;
  if (rows == 0) {  // a global batch's tail shorter than the rank count: this rank adds zeros
    std::fill(flat_.begin(), flat_.end(), 0.f);
    std::fill(bucket_missing_.begin(), bucket_missing_.end(), 0);
    to_come = 0;
    start_ready();
  } else {
    std::vector<Tensor> local;
    auto got = GradientsNotifying(x, labels, &local, teacher_logits, &ready);
    if (!got.ok()) {
      // The other ranks wait in this step's all-reduces; the job ends (the caller aborts it).
      return got.status();
    }
    r = *got;
  }
  WH_RETURN_IF_ERROR(failed);
  if (next != bucket_range_.size())
    return Internal("gradient bucket " + std::to_string(next) + " was never complete (" +
                    std::to_string(bucket_missing_[next]) + " gradient(s) not reported)");
  const auto c0 = std::chrono::steady_clock::now();
  WH_RETURN_IF_ERROR(comm.WaitAll());
  WH_RETURN_IF_ERROR(ReduceStats(rows, &r));
  comm_s_ += comm_s + std::chrono::duration<double>(std::chrono::steady_clock::now() - c0).count();
  const auto inv = static_cast<float>(1.0 / std::max<double>(static_cast<double>(r.samples), 1.0));
  grads->clear();
  for (size_t k = 0; k < P; ++k) {
    Tensor out(DType::kFloat32, values_[k].dims());  // the trainer's own: not the session's arena
    float* p = out.data<float>();
    const float* src = flat_.data() + grad_offset_[k];
    for (int64_t i = 0; i < out.numel(); ++i) p[i] = src[i] * inv;
    grads->push_back(std::move(out));
  }
  return r;
}

Status Trainer::ReduceStats(int64_t rows, StepResult* r) const {
  double stats[3] = {static_cast<double>(rows), r->loss * static_cast<double>(rows), static_cast<double>(r->correct)};
  WH_RETURN_IF_ERROR(opts_.comm->AllReduceSum(stats, 3));
  const double n = std::max(stats[0], 1.0);
  r->loss = stats[1] / n;
  r->correct = static_cast<int64_t>(stats[2]);
  r->samples = static_cast<int64_t>(stats[0]);
  return Status::Ok();
}

Status Trainer::AverageModels() {
  if (device_ != DeviceType::kCpu)
    return Unimplemented("data-parallel training runs on the CPU backend only (the NCCL path is not built yet)");
  std::vector<Tensor*> all;
  for (auto* set : {&values_, &m_, &v_})
    for (Tensor& t : *set)
      if (t.defined() && t.dtype() == DType::kFloat32) all.push_back(&t);
  int64_t total = 0;
  for (const Tensor* t : all) total += t->numel();
  std::vector<float> flat(static_cast<size_t>(total));
  size_t at = 0;
  for (const Tensor* t : all) {
    std::copy(t->data<float>(), t->data<float>() + t->numel(), flat.begin() + static_cast<std::ptrdiff_t>(at));
    at += static_cast<size_t>(t->numel());
  }
  WH_RETURN_IF_ERROR(opts_.comm->AllReduceSum(flat.data(), total));
  const float inv = 1.f / static_cast<float>(opts_.comm->size());
  at = 0;
  for (Tensor* t : all) {
    float* p = t->data<float>();
    for (int64_t i = 0; i < t->numel(); ++i) p[i] = flat[at++] * inv;
  }
  return Status::Ok();
}

StatusOr<Tensor> Trainer::SharedTeacherLogits(const Dataset& data, const std::vector<int64_t>& order, int64_t g0,
                                              int64_t g1, int64_t l0, int64_t l1, const Tensor& x, int64_t* cached) {
  const int64_t n = data.size(), B = l1 - l0;
  CacheFor(data);
  // Every rank holds the same cache (each step fills the whole global batch's rows), so every
  // rank takes the same branch and the collectives match.
  bool all = cache_classes_ > 0;
  for (int64_t i = g0; i < g1 && all; ++i) all = cache_filled_[static_cast<size_t>(order[static_cast<size_t>(i)])];
  if (all) {
    if (B == 0) return Tensor();
    *cached += B;
    return CachedLogits(order.data() + l0, B);
  }
  Tensor tz;
  int64_t mine = 0;  // this rank's logits per row (0: no rows, or not a float32 [B, C])
  if (B > 0) {
    WH_ASSIGN_OR_RETURN(std::vector<Tensor> tout, teacher_->Run({{teacher_->inputs()[0].name, x}}));
    tz = tout[0];
    if (tz.dtype() == DType::kFloat32 && tz.numel() % B == 0) mine = tz.numel() / B;
  }
  if (cache_classes_ == 0) {  // the first step: the ranks agree on the class count
    double agree[3] = {static_cast<double>(mine), B > 0 ? 1.0 : 0.0, B > 0 && mine == 0 ? 1.0 : 0.0};
    WH_RETURN_IF_ERROR(opts_.comm->AllReduceSum(agree, 3));
    const auto C = static_cast<int64_t>(agree[1] > 0 ? agree[0] / agree[1] : 0);
    // Not cached (never shared) unless every rank with rows has the same C and it fits in 1 GiB.
    if (agree[2] > 0 || C <= 0 || static_cast<double>(C) * agree[1] != agree[0] || n * C > (int64_t{1} << 28)) {
      cache_classes_ = -1;
    } else {
      cache_classes_ = C;
      teacher_cache_.assign(static_cast<size_t>(n * C), 0.f);
    }
  }
  if (cache_classes_ < 0) return tz;  // the same on every rank: nothing is shared
  const int64_t C = cache_classes_;
  std::vector<float> rows(static_cast<size_t>((g1 - g0) * C), 0.f);
  if (B > 0) std::memcpy(rows.data() + (l0 - g0) * C, tz.data<float>(), sizeof(float) * static_cast<size_t>(B * C));
  WH_RETURN_IF_ERROR(opts_.comm->AllReduceSum(rows.data(), static_cast<int64_t>(rows.size())));
  for (int64_t i = g0; i < g1; ++i) {
    const int64_t r = order[static_cast<size_t>(i)];
    std::memcpy(teacher_cache_.data() + r * C, rows.data() + (i - g0) * C, sizeof(float) * static_cast<size_t>(C));
    cache_filled_[static_cast<size_t>(r)] = 1;
  }
  return tz;
}

}  // namespace whittle::training
