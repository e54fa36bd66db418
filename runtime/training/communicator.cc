#include "runtime/training/communicator.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#ifdef WHITTLE_MPI
#include <mpi.h>
#endif

namespace whittle::training {
namespace {

// The rank count a launcher gave this process (Open MPI, MPICH/Hydra, Slurm), 0 where none did.
int LaunchedSize() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"})
    if (const char* s = std::getenv(v)) return std::atoi(s);
  return 0;
}

#ifdef WHITTLE_MPI
std::string MpiError(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(code, text, &len);
  return std::string(text, static_cast<size_t>(len));
}

// MPI_COMM_WORLD of an mpirun job. Collective errors come back as statuses (MPI_ERRORS_RETURN),
// so a failed all-reduce names itself; a rank that dies makes mpirun end the job. Every
// collective is started non-blocking and waited for by polling, within the timeout: a rank that
// hangs (stopped, deadlocked, in a loop) would otherwise hold the others in MPI forever.
class MpiCommunicator : public Communicator {
 public:
  MpiCommunicator() {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  }
  ~MpiCommunicator() override {
    // A rank that gave up on a peer must not wait for it in MPI_Finalize's own synchronization.
    if (failed_) Abort(1);
    MPI_Finalize();
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  Status AllReduceSum(float* data, int64_t n) const override {
    WH_RETURN_IF_ERROR(Start(data, n, MPI_FLOAT, "float32"));
    return WaitAll();
  }
  Status AllReduceSum(double* data, int64_t n) const override {
    WH_RETURN_IF_ERROR(Start(data, n, MPI_DOUBLE, "float64"));
    return WaitAll();
  }
  Status Broadcast(void* data, int64_t bytes, int root) const override {
    for (int64_t done = 0; done < bytes;) {
      const int chunk = static_cast<int>(std::min<int64_t>(bytes - done, int64_t{1} << 30));
      MPI_Request req = MPI_REQUEST_NULL;
      const int rc = MPI_Ibcast(static_cast<char*>(data) + done, chunk, MPI_BYTE, root, MPI_COMM_WORLD, &req);
      if (rc != MPI_SUCCESS) return Failed("broadcast failed: " + MpiError(rc));
      pending_.push_back(req);
      WH_RETURN_IF_ERROR(WaitAll("a broadcast"));
      done += chunk;
    }
    return Status::Ok();
  }
  Status StartAllReduceSum(float* data, int64_t n) const override { return Start(data, n, MPI_FLOAT, "float32"); }
  void Progress() const override {
    if (pending_.empty()) return;
    int done = 0;
    MPI_Testall(static_cast<int>(pending_.size()), pending_.data(), &done, MPI_STATUSES_IGNORE);
    if (done) pending_.clear();
  }
  Status WaitAll() const override { return WaitAll("an all-reduce"); }
  void set_timeout(double seconds) const override { timeout_s_ = seconds; }
  [[noreturn]] void Abort(int code) const override {
    std::fflush(stdout);
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code);  // MPI_Abort does not return; this only satisfies [[noreturn]]
  }

 private:
  static constexpr int kHelloTag = 0x7a11, kHereTag = 0x7a12;

  Status Start(void* data, int64_t n, MPI_Datatype type, const char* what) const {
    const int bytes = type == MPI_FLOAT ? 4 : 8;
    ++collectives_;
    for (int64_t done = 0; done < n;) {  // MPI counts are int
      const int chunk = static_cast<int>(std::min<int64_t>(n - done, int64_t{1} << 28));
      MPI_Request req = MPI_REQUEST_NULL;
      const int rc = MPI_Iallreduce(MPI_IN_PLACE, static_cast<char*>(data) + done * bytes, chunk, type, MPI_SUM,
                                    MPI_COMM_WORLD, &req);
      if (rc != MPI_SUCCESS)
        return Failed("all-reduce of " + std::to_string(n) + " " + what + " failed: " + MpiError(rc));
      pending_.push_back(req);
      done += chunk;
    }
    return Status::Ok();
  }

  // Polls the pending requests until done: spinning first (a step's all-reduce takes microseconds
  // on one machine), then yielding the core; answers peers that ask who is still here.
  Status WaitAll(const char* what) const {
    using Clock = std::chrono::steady_clock;
    const auto t0 = Clock::now();
    for (int64_t polls = 0; !pending_.empty(); ++polls) {
      int done = 0;
      const int rc = MPI_Testall(static_cast<int>(pending_.size()), pending_.data(), &done, MPI_STATUSES_IGNORE);
      if (rc != MPI_SUCCESS) return Failed(std::string(what) + " failed: " + MpiError(rc));
      if (done) {
        pending_.clear();
        break;
      }
      if (polls < 2000) continue;
      if (polls % 64 == 0) {
        AnswerPeers();
        const double waited = std::chrono::duration<double>(Clock::now() - t0).count();
        if (timeout_s_ > 0 && waited > timeout_s_) return HungPeers(what, waited);
      }
      std::this_thread::sleep_for(std::chrono::microseconds(polls < 20000 ? 0 : 200));
    }
    return Status::Ok();
  }

  // A peer that timed out asks every rank whether it is waiting too; this one is.
  void AnswerPeers() const {
    for (;;) {
      int flag = 0;
      MPI_Status st;
      MPI_Iprobe(MPI_ANY_SOURCE, kHelloTag, MPI_COMM_WORLD, &flag, &st);
      if (!flag) return;
      int who = 0;
      MPI_Recv(&who, 1, MPI_INT, st.MPI_SOURCE, kHelloTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      MPI_Request r;
      MPI_Isend(&rank_, 1, MPI_INT, st.MPI_SOURCE, kHereTag, MPI_COMM_WORLD, &r);
      MPI_Request_free(&r);
    }
  }

  // The wait timed out: the ranks that answer within a grace period are waiting too; the others
  // are named (stopped, deadlocked, computing far longer than the bound, or gone).
  Status HungPeers(const char* what, double waited) const {
    std::vector<int> here(static_cast<size_t>(size_), 0), answer(static_cast<size_t>(size_), -1);
    std::vector<MPI_Request> reqs;
    for (int p = 0; p < size_; ++p) {
      if (p == rank_) continue;
      MPI_Request s, r;
      MPI_Isend(&rank_, 1, MPI_INT, p, kHelloTag, MPI_COMM_WORLD, &s);
      MPI_Request_free(&s);
      MPI_Irecv(&answer[static_cast<size_t>(p)], 1, MPI_INT, p, kHereTag, MPI_COMM_WORLD, &r);
      reqs.push_back(r);
    }
    const auto t0 = std::chrono::steady_clock::now();
    while (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < 3.0) {
      AnswerPeers();
      int done = 0;
      MPI_Testall(static_cast<int>(reqs.size()), reqs.data(), &done, MPI_STATUSES_IGNORE);
      if (done) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    std::string missing;
    int count = 0;
    for (int p = 0; p < size_; ++p)
      if (p != rank_ && answer[static_cast<size_t>(p)] != p) {
        missing += (missing.empty() ? "" : ", ") + std::to_string(p);
        ++count;
      }
    char secs[32];
    std::snprintf(secs, sizeof secs, "%.0f", waited);
    const std::string head = std::string(what) + " (collective #" + std::to_string(collectives_) + ") waited " + secs + " s";
    if (missing.empty())
      return Failed(head + "; every rank answered, so they wait in different collectives (a bug: please report it)");
    return Failed(head + " for " + (count == 1 ? "rank " : "ranks ") + missing +
                  ", which did not join or answer: hung, stopped, or slower than --rank-timeout allows");
  }

  Status Failed(const std::string& why) const {
    failed_ = true;
    return Internal(why);  // the caller names this rank
  }

  int rank_ = 0, size_ = 1;
  mutable std::vector<MPI_Request> pending_;
  mutable double timeout_s_ = 0;
  mutable int64_t collectives_ = 0;
  mutable bool failed_ = false;
};
#endif

}  // namespace

Status CheckSameLaunch(const Communicator& comm, const std::string& id) {
  const double mine = static_cast<double>(std::hash<std::string>()(id) >> 12);  // exact in a double
  double first = mine;
  const std::string who = "rank " + std::to_string(comm.rank()) + ": ";
  if (Status st = comm.Broadcast(&first, sizeof first, 0); !st.ok()) return Internal(who + st.message());
  double differ = mine != first ? 1 : 0;
  if (Status st = comm.AllReduceSum(&differ, 1); !st.ok()) return Internal(who + st.message());
  if (mine != first) return InvalidArgument(who + "this rank's command line or data differ from rank 0's");
  if (differ > 0)
    return InvalidArgument(who + std::to_string(static_cast<int>(differ)) +
                           " rank(s) were launched with another command line or data");
  return Status::Ok();
}

bool BuiltWithMpi() {
#ifdef WHITTLE_MPI
  return true;
#else
  return false;
#endif
}

StatusOr<std::unique_ptr<Communicator>> JoinLaunchedJob(int* argc, char*** argv) {
  const int launched = LaunchedSize();
  if (launched <= 1) return std::unique_ptr<Communicator>();
#ifdef WHITTLE_MPI
  int provided = 0;
  const int rc = MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
  if (rc != MPI_SUCCESS) return Internal("MPI_Init failed: " + MpiError(rc));
  return std::unique_ptr<Communicator>(new MpiCommunicator());
#else
  (void)argc, (void)argv;
  return Unimplemented("launched as one of " + std::to_string(launched) +
                            " ranks, but this build has no MPI (install libopenmpi-dev and rebuild)");
#endif
}

}  // namespace whittle::training
