#include "runtime/training/communicator.h"

#include <cstdlib>
#include <string>

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
// so a failed all-reduce names itself; a rank that dies makes the others' collectives fail.
class MpiCommunicator : public Communicator {
 public:
  MpiCommunicator() {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  }
  ~MpiCommunicator() override { MPI_Finalize(); }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  Status AllReduceSum(float* data, int64_t n) const override { return Reduce(data, n, MPI_FLOAT, "float32"); }
  Status AllReduceSum(double* data, int64_t n) const override { return Reduce(data, n, MPI_DOUBLE, "float64"); }
  Status Broadcast(void* data, int64_t bytes, int root) const override {
    for (int64_t done = 0; done < bytes;) {
      const int chunk = static_cast<int>(std::min<int64_t>(bytes - done, int64_t{1} << 30));
      const int rc = MPI_Bcast(static_cast<char*>(data) + done, chunk, MPI_BYTE, root, MPI_COMM_WORLD);
      if (rc != MPI_SUCCESS) return Internal("rank " + std::to_string(rank_) + ": broadcast failed: " + MpiError(rc));
      done += chunk;
    }
    return Status::Ok();
  }

 private:
  Status Reduce(void* data, int64_t n, MPI_Datatype type, const char* what) const {
    const int size = type == MPI_FLOAT ? 4 : 8;
    for (int64_t done = 0; done < n;) {  // MPI counts are int
      const int chunk = static_cast<int>(std::min<int64_t>(n - done, int64_t{1} << 28));
      const int rc = MPI_Allreduce(MPI_IN_PLACE, static_cast<char*>(data) + done * size, chunk, type, MPI_SUM,
                                   MPI_COMM_WORLD);
      if (rc != MPI_SUCCESS)
        return Internal("rank " + std::to_string(rank_) + ": all-reduce of " + std::to_string(n) + " " + what +
                        " failed: " + MpiError(rc));
      done += chunk;
    }
    return Status::Ok();
  }
  int rank_ = 0, size_ = 1;
};
#endif

}  // namespace

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
