// TempFile: beside its target, removed unless committed, and removable from a signal handler.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "lib/data/file_util.h"
#include "tests/util/scratch_dir.h"

namespace whittle {
namespace {

using testing::ScratchDir;

bool Exists(const std::string& p) { return std::filesystem::exists(p); }

TEST(TempFile, RemovedUnlessCommitted) {
  ScratchDir dir;
  std::string tmp;
  {
    TempFile t(dir / "out.bin");
    tmp = t.path();
    EXPECT_EQ(std::filesystem::path(tmp).parent_path(), std::filesystem::path(dir.path()));
    std::ofstream(tmp) << "partial";
    EXPECT_TRUE(Exists(tmp));
  }
  EXPECT_FALSE(Exists(tmp));
  EXPECT_FALSE(Exists(dir / "out.bin"));
  {
    TempFile t(dir / "out.bin");
    std::ofstream(t.path()) << "done";
    ASSERT_TRUE(t.Commit().ok());
    EXPECT_FALSE(Exists(t.path()));
  }
  EXPECT_EQ(ReadFileBytes(dir / "out.bin").value(), "done");
  EXPECT_EQ(FileSizeOf(dir / "out.bin"), 4);
  EXPECT_EQ(FileSizeOf(dir / "missing"), -1);
}

TEST(TempFile, LiveFilesCanBeRemovedAtOnce) {
  ScratchDir dir;
  TempFile a(dir / "a"), b(dir / "b");
  EXPECT_NE(a.path(), b.path());
  std::ofstream(a.path()) << "x";
  std::ofstream(b.path()) << "y";
  RemoveLiveTempFiles();
  EXPECT_FALSE(Exists(a.path()));
  EXPECT_FALSE(Exists(b.path()));
}

TEST(TempFile, CommitIntoMissingDirectoryFailsAndLeavesNothing) {
  ScratchDir dir;
  TempFile t(dir / "no/such/out.bin");
  Status s = t.Commit();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("cannot rename"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace whittle
