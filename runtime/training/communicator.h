// Data-parallel training's collectives (issue 44): one process per rank, launched by the engine's
// own launcher (`mpirun -np N finetune-model ...`). The trainer needs only this interface;
// the MPI implementation (runtime/training/communicator.cc) is built where CMake finds MPI
// (WHITTLE_MPI), and a single process needs none.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "lib/ir/status.h"

namespace whittle::training {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Sums data[0, n) over every rank, in place: every rank gets the same sum (the same bits: the
  // engine reduces in one order for all).
  virtual Status AllReduceSum(float* data, int64_t n) const = 0;
  virtual Status AllReduceSum(double* data, int64_t n) const = 0;
  // root's bytes to every rank.
  virtual Status Broadcast(void* data, int64_t bytes, int root) const = 0;

  // The same sum started without waiting (gradient buckets all-reduced while the backward pass
  // still runs): every rank must start the same all-reduces in the same order. data stays
  // untouched by the caller until WaitAll returns.
  virtual Status StartAllReduceSum(float* data, int64_t n) const = 0;
  // Lets started all-reduces advance (the engine moves data only inside its calls); cheap.
  virtual void Progress() const = 0;
  // Waits for every all-reduce started so far.
  virtual Status WaitAll() const = 0;

  // Every wait (the collectives above) is bounded: a peer that does not join within this many
  // seconds (0: no bound) is a hung rank, and the wait fails with a message naming the ranks that
  // did not answer. The job must then end with Abort (a peer stuck elsewhere never returns).
  virtual void set_timeout(double seconds) const = 0;
  // Ends every rank of the job now (after a failure on this one), with exit code `code`.
  [[noreturn]] virtual void Abort(int code) const = 0;
};

// The rows of a global batch [b0, b1) that rank r of `size` takes: as even a split as there is
// ([b0 + len*r/size, b0 + len*(r+1)/size)), so no row is taken twice and every row is taken; a
// tail shorter than the rank count leaves some ranks none.
inline void RankRows(int64_t b0, int64_t b1, int rank, int size, int64_t* r0, int64_t* r1) {
  const int64_t len = b1 - b0;
  *r0 = b0 + len * rank / size;
  *r1 = b0 + len * (rank + 1) / size;
}

// This process's place in a job that mpirun launched with more than one rank (MPI initialized,
// finalized when the returned object goes); null for a process launched on its own, or where
// Whittle was built without MPI and the environment shows no launcher. An error where a launcher
// started this process but Whittle was built without MPI (it would train alone, N times over).
StatusOr<std::unique_ptr<Communicator>> JoinLaunchedJob(int* argc, char*** argv);

// A bad launch (ranks given different models, data or options) refused before any step: every
// rank passes what identifies its launch (its command line, sizes of what it loaded) and learns
// whether all ranks passed the same (by hash). The error names this rank, or the count of others.
Status CheckSameLaunch(const Communicator& comm, const std::string& id);

// Whether this build can join an MPI job.
bool BuiltWithMpi();

}  // namespace whittle::training
