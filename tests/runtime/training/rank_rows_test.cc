// Data parallelism's split of a global batch over ranks (runtime/training/communicator.h): every
// row is taken by exactly one rank, shares differ by at most one row, and a tail shorter than the
// rank count leaves some ranks none. The 2-rank training itself runs under mpirun in ctest
// ddp_check (tests/mpi/).
#include <gtest/gtest.h>

#include <vector>

#include "runtime/training/communicator.h"

namespace whittle::training {
namespace {

TEST(RankRows, EveryRowOnceAndEvenShares) {
  for (int size : {1, 2, 3, 8}) {
    for (int64_t len : {0, 1, 2, 5, 64, 65, 127}) {
      const int64_t b0 = 1000;
      std::vector<int> taken(static_cast<size_t>(len), 0);
      int64_t smallest = len, largest = 0;
      for (int r = 0; r < size; ++r) {
        int64_t r0, r1;
        RankRows(b0, b0 + len, r, size, &r0, &r1);
        ASSERT_LE(b0, r0);
        ASSERT_LE(r0, r1);
        ASSERT_LE(r1, b0 + len);
        for (int64_t i = r0; i < r1; ++i) ++taken[static_cast<size_t>(i - b0)];
        smallest = std::min(smallest, r1 - r0);
        largest = std::max(largest, r1 - r0);
      }
      for (int t : taken) EXPECT_EQ(t, 1) << "size " << size << " len " << len;
      EXPECT_LE(largest - smallest, 1) << "size " << size << " len " << len;
    }
  }
}

TEST(RankRows, WithoutALauncherTheProcessTrainsAlone) {
  int argc = 1;
  char name[] = "test";
  char* args[] = {name, nullptr};
  char** argv = args;
  auto world = JoinLaunchedJob(&argc, &argv);
  ASSERT_TRUE(world.ok()) << world.status().message();
  EXPECT_EQ(world->get(), nullptr);
}

}  // namespace
}  // namespace whittle::training
