// BatchingSession: dynamic batching over a Session, for a service that answers many small
// concurrent requests (serve-model uses it; any embedding service may). Each Run() call is a
// request of one or more rows (every input's first axis is the batch). Requests with compatible
// inputs — the same input names and dtypes, and the same dims after the batch axis — are stacked
// along the batch axis into one run of at most max_batch rows, then split back so each caller gets
// only its own rows. When a batch starts is the dispatch policy (BatchingOptions::eager):
//   eager (the default): a worker that is idle takes the queue's oldest request at once, together
//     with every queued request compatible with it, oldest first, up to max_batch rows (stopping at
//     the first compatible one that would not fit). Nothing waits for company: a lone request runs
//     as soon as a worker is free, and requests arriving while every worker is busy accumulate and
//     go together when one frees up, so batches form exactly when there is load. max_delay_ms is
//     not used.
//   timeout (eager = false): a batch starts when it is full (its rows reach max_batch, or the next
//     compatible request would not fit) or when its oldest request has waited max_delay_ms, even if
//     a worker is idle meanwhile. Every request under light load waits max_delay_ms.
// In both, a worker takes the oldest ready group first (no signature starves another), and during
// Shutdown everything queued goes at once. The results are the rows a Session::Run of the request alone would give, up to
// rounding: most of Whittle's CPU kernels compute a row the same way at any batch size, but not
// all. A Gemm/MatMul with constant weights that takes a different path at different row counts
// (packed_gemm.h's PackedGemmPreferred: a narrow head such as the bundled models' 10 classes runs
// oneDNN's sgemm on AVX-512, and Eigen's GEMV for a single row on AVX2; any batch over 256 rows
// leaves the packed tiles) rounds a row differently, by a few ulps. Measured on the bundled models'
// logits: from 16 rows on on a Xeon with AVX-512 (max |diff| 6e-6 at 16-64 rows), from 2 rows on
// on an AVX2-only AMD EPYC (max |diff| 6.7e-6 at 2-64 rows), 2026-11-29. With WHITTLE_GEMM=packed
// the same batches were bit-identical on both
// (tests/runtime/serving/batching_session_test.cc).
//
// The queue is bounded (max_queue requests): a request that would pass it fails at once with
// kResourceExhausted (a server answers 503). A request still queued at its deadline fails with
// kDeadlineExceeded and never runs. Swap() replaces the model without dropping anything: requests
// already taken into a batch finish on the old session, later ones run on the new. Shutdown()
// stops accepting (new requests fail with kResourceExhausted, "shutting down"),
// finishes everything queued and returns when the workers are idle.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "whittle/session.h"
#include "whittle/status.h"
#include "whittle/tensor.h"

namespace whittle {

struct BatchingOptions {
  int64_t max_batch = 32;     // rows per run at most (1: no batching; a request larger runs alone)
  double max_delay_ms = 2.0;  // timeout policy: how long a batch's first request waits for company
  int64_t max_queue = 1024;   // requests queued at most; more fail with kResourceExhausted
  int workers = 1;            // batches run at once (each Session::Run uses the session's threads)
  // Dispatch policy (see the top of this file). true: an idle worker takes what is queued at once
  // (batches form only while every worker is busy; max_delay_ms unused). false: wait until the
  // batch is full or its oldest request has waited max_delay_ms.
  bool eager = true;
};

struct BatchingStats {
  int64_t requests = 0;         // Run() calls accepted
  int64_t rejected = 0;         // refused because the queue was full or shutting down
  int64_t expired = 0;          // deadline passed while queued
  int64_t failed = 0;           // their batch's run failed
  int64_t batches = 0;          // Session::Run calls made
  int64_t queue_depth = 0;      // requests waiting now
  // batch_rows[k]: batches of rows in (2^(k-1), 2^k] (k = 0: one row); 16 buckets.
  std::vector<int64_t> batch_rows;
  int64_t invalid = 0;  // refused before queueing: inputs that do not fit the session's (InvalidArgument)
  int64_t rows = 0;     // rows run in all batches (rows / batches: the mean batch)
};

class BatchingSession {
 public:
  using Clock = std::chrono::steady_clock;

  // The session must not be null; it is shared with the caller (and kept alive by each batch
  // that uses it).
  static StatusOr<std::unique_ptr<BatchingSession>> Make(std::shared_ptr<const Session> session,
                                                         const BatchingOptions& options = {});
  ~BatchingSession();  // Shutdown()

  // One request: every model input by name, batch first. Blocks until its rows are computed.
  // Outputs in the session's outputs() order, each with this request's rows only. An output
  // whose first axis is not the batch (the run's rows) is returned whole to every caller of
  // the batch only if the request ran alone; otherwise the request fails naming the output
  // (models with such outputs should use max_batch 1).
  StatusOr<std::vector<Tensor>> Run(const std::map<std::string, Tensor>& inputs,
                                    Clock::time_point deadline = Clock::time_point::max());

  // New requests run on `session` (same inputs and outputs expected by the caller; not checked
  // beyond being non-null); batches already formed finish on the old one.
  Status Swap(std::shared_ptr<const Session> session);

  // Stop accepting, finish what is queued, join the workers. Idempotent.
  void Shutdown();

  std::shared_ptr<const Session> session() const;
  BatchingStats stats() const;
  const BatchingOptions& options() const;

  struct Impl;

 private:
  explicit BatchingSession(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace whittle
