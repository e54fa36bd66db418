// Synchronous data parallelism against one process (issue 44), run by ctest as
//   mpirun -np 2 ddp_check --student S.onnx --teacher T.onnx --data fashion-mnist:train
// Every rank trains the student with the global batch (--batch, default 64) split over the ranks
// for --steps SGD steps (one epoch of steps x batch samples); rank 0 also trains it alone with the
// whole batch on the same data order. Holds: every rank ends with the same weights (bit for bit),
// and they equal the single process's within --max-rel (max |a - b| / max |b| per parameter,
// default 1e-5). With --average 1 the ranks average their models after every step instead of
// summing gradients (model averaging; no clipping), which must come to the same. Prints the
// figures; exits non-zero naming what failed.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "lib/data/dataset.h"
#include "lib/onnx/model_io.h"
#include "runtime/training/communicator.h"
#include "runtime/training/trainer.h"

using namespace whittle;

namespace {

int Fail(const std::string& m) {
  std::fprintf(stderr, "ddp_check: %s\n", m.c_str());
  return 1;
}

std::vector<float> Flat(training::Trainer& t) {
  std::vector<float> f;
  for (const Tensor& v : t.param_values()) f.insert(f.end(), v.data<float>(), v.data<float>() + v.numel());
  return f;
}

}  // namespace

int main(int argc, char** argv) {
  auto comm = training::JoinLaunchedJob(&argc, &argv);
  if (!comm.ok()) return Fail(comm.status().message());
  std::string student_path, teacher_path, data_spec = "fashion-mnist:train";
  int64_t steps = 50, batch = 64;
  double max_rel = 1e-5;
  int average = 0;  // --average K: model averaging every K steps (K = 1 must equal synchronous SGD)
  int64_t bucket_kb = 0;  // --bucket-kb N: gradient buckets of N KiB (0: the trainer's default)
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--student") student_path = v;
    else if (k == "--teacher") teacher_path = v;
    else if (k == "--data") data_spec = v;
    else if (k == "--steps") steps = std::atoll(v.c_str());
    else if (k == "--batch") batch = std::atoll(v.c_str());
    else if (k == "--max-rel") max_rel = std::atof(v.c_str());
    else if (k == "--average") average = std::atoi(v.c_str());
    else if (k == "--bucket-kb") bucket_kb = std::atoll(v.c_str());
    else return Fail("unknown flag " + k);
  }
  if (student_path.empty() || teacher_path.empty()) return Fail("--student and --teacher are required");
  const training::Communicator* c = comm->get();
  const int rank = c ? c->rank() : 0, size = c ? c->size() : 1;
  auto student = LoadModel(student_path);
  auto teacher = LoadModel(teacher_path);
  if (!student.ok()) return Fail(student.status().message());
  if (!teacher.ok()) return Fail(teacher.status().message());
  auto data = LoadDataset(data_spec, steps * batch);
  if (!data.ok()) return Fail(data.status().message());
  training::TrainOptions o;
  o.epochs = 1;
  o.batch = batch;
  o.optimizer = training::OptimizerKind::kSgd;
  o.seed = 7;
  o.threads = 1;
  if (bucket_kb > 0) o.bucket_bytes = bucket_kb * 1024;
  if (average > 0) o.clip_norm = 0;  // clipping per rank's gradient would differ from the global batch's
  auto train = [&](const training::Communicator* with) -> StatusOr<std::vector<float>> {
    training::TrainOptions oo = o;
    oo.comm = with;
    oo.average_every = with ? average : 0;
    WH_ASSIGN_OR_RETURN(auto t, training::Trainer::Create(*student, &*teacher, oo));
    WH_ASSIGN_OR_RETURN(training::EpochStats st, t->TrainEpoch(*data, 0, nullptr));
    std::printf("rank %d/%d%s: %lld steps of global batch %lld, loss %.5f", rank, size, with ? "" : " (alone)",
                static_cast<long long>(t->StepsPerEpoch(data->size())), static_cast<long long>(batch), st.loss);
    if (with && average == 0)
      std::printf(", %lld gradient buckets all-reduced, %lld of them started during the backward pass",
                  static_cast<long long>(st.buckets), static_cast<long long>(st.buckets_overlapped));
    std::printf("\n");
    // With more than one bucket per step, the first ones start before the backward pass ends.
    const int64_t per_step = st.buckets / std::max<int64_t>(1, t->StepsPerEpoch(data->size()));
    if (with && average == 0 && per_step > 1 && st.buckets_overlapped < st.buckets / 2)
      return Internal("only " + std::to_string(st.buckets_overlapped) + " of " + std::to_string(st.buckets) +
                      " buckets started during the backward pass");
    return Flat(*t);
  };
  auto dist = train(c);
  if (!dist.ok()) return Fail("rank " + std::to_string(rank) + ": " + dist.status().message());
  // Every rank's weights equal rank 0's, bit for bit.
  std::vector<float> zero = *dist;
  if (c) {
    Status st = c->Broadcast(zero.data(), static_cast<int64_t>(zero.size() * sizeof(float)), 0);
    if (!st.ok()) return Fail(st.message());
    if (std::memcmp(zero.data(), dist->data(), zero.size() * sizeof(float)) != 0)
      return Fail("rank " + std::to_string(rank) + " ends with weights that differ from rank 0's");
  }
  if (rank != 0) return 0;
  auto alone = train(nullptr);
  if (!alone.ok()) return Fail(alone.status().message());
  double worst = 0, max_abs = 0;
  for (size_t i = 0; i < alone->size(); ++i) {
    worst = std::max(worst, static_cast<double>(std::fabs((*dist)[i] - (*alone)[i])));
    max_abs = std::max(max_abs, static_cast<double>(std::fabs((*alone)[i])));
  }
  const double rel = worst / std::max(max_abs, 1e-30);
  std::printf("%d ranks x batch %lld%s vs 1 x %lld after %lld SGD steps: max |diff| %.3g, max rel %.3g (bound %.1g)\n",
              size, static_cast<long long>(batch / std::max(size, 1)),
              average > 0 ? (" averaging every " + std::to_string(average) + " step(s)").c_str() : "",
              static_cast<long long>(batch), static_cast<long long>(steps), worst, rel, max_rel);
  if (!(rel <= max_rel)) return Fail("the distributed weights differ from the single process's by " + std::to_string(rel));
  return 0;
}
