// AtomicFile, the one atomic writer: beside its target, removed unless committed, and listed for
// RemoveLiveTempFiles so that a SIGINT/SIGTERM handler leaves no temporary behind, including the
// model and external-data temporaries of a staged save (compress-model's write).
#include "lib/ir/atomic_file.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <string>
#include <vector>

#include "lib/data/file_util.h"
#include "lib/onnx/model_io.h"
#include "tests/util/graph_builder.h"
#include "tests/util/scratch_dir.h"
#include "tests/util/test_util.h"

namespace whittle {
namespace {

using testing::ScratchDir;

bool Exists(const std::string& p) { return std::filesystem::exists(p); }

std::vector<std::string> Files(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir)) names.push_back(e.path().filename().string());
  return names;
}

TEST(AtomicFile, RemovedUnlessCommitted) {
  ScratchDir dir;
  std::string tmp;
  {
    AtomicFile f(dir / "out.bin");
    tmp = f.temp_path();
    EXPECT_EQ(std::filesystem::path(tmp).parent_path(), std::filesystem::path(dir.path()));
    ASSERT_TRUE(f.Open().ok());
    ASSERT_TRUE(f.Write("partial", 7).ok());
    EXPECT_TRUE(Exists(tmp));
  }
  EXPECT_FALSE(Exists(tmp));
  EXPECT_FALSE(Exists(dir / "out.bin"));
  {
    AtomicFile f(dir / "out.bin");
    ASSERT_TRUE(f.Open().ok());
    ASSERT_TRUE(f.Write("done", 4).ok());
    ASSERT_TRUE(f.Commit().ok());
    EXPECT_FALSE(Exists(f.temp_path()));
  }
  EXPECT_EQ(ReadFileBytes(dir / "out.bin").value(), "done");
  EXPECT_EQ(FileSizeOf(dir / "out.bin"), 4);
  EXPECT_EQ(FileSizeOf(dir / "missing"), -1);
  ASSERT_TRUE(WriteFileAtomically(dir / "out.bin", "again").ok());
  EXPECT_EQ(ReadFileBytes(dir / "out.bin").value(), "again");
  EXPECT_EQ(Files(dir.path()), std::vector<std::string>{"out.bin"});
}

TEST(AtomicFile, LiveFilesCanBeRemovedAtOnce) {
  ScratchDir dir;
  AtomicFile a(dir / "a"), b(dir / "b");
  EXPECT_NE(a.temp_path(), b.temp_path());
  ASSERT_TRUE(a.Open().ok());
  ASSERT_TRUE(b.Open().ok());
  RemoveLiveTempFiles();
  EXPECT_FALSE(Exists(a.temp_path()));
  EXPECT_FALSE(Exists(b.temp_path()));
}

TEST(AtomicFile, CommitIntoMissingDirectoryFailsAndLeavesNothing) {
  ScratchDir dir;
  AtomicFile f(dir / "no/such/out.bin");
  Status s = f.Open();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("cannot create"), std::string::npos) << s.message();
  EXPECT_TRUE(Files(dir.path()).empty());
}

// A model with one large weight, saved with it as external data.
Graph BigGemm() {
  return testing::GraphBuilder()
      .Input("x", DType::kFloat32, {Dim(1), Dim(64)})
      .Init("w", testing::RandomFloat({64, 64}, 1))
      .Op("MatMul", {"x", "w"}, {"y"})
      .Output("y")
      .Build();
}

// What a Ctrl-C does to a save in flight (compress-model writes its model staged, then its
// reports, then commits): a child stages the model and its external data, installs the CLIs'
// handler and is interrupted; nothing is left beside the target.
TEST(AtomicFile, SignalDuringAStagedSaveLeavesNoTemporary) {
  for (int sig : {SIGINT, SIGTERM}) {
    ScratchDir dir;
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      RemoveTempFilesOnSignal();
      SaveOptions so;
      so.external_data_threshold = 0;
      auto staged = StageModel(BigGemm(), dir / "out.onnx", so);
      if (!staged.ok() || Files(dir.path()).size() != 2) ::_exit(3);  // the model's and the data's temporaries
      std::raise(sig);
      ::_exit(4);
    }
    int st = 0;
    ASSERT_EQ(::waitpid(pid, &st, 0), pid);
    ASSERT_TRUE(WIFSIGNALED(st)) << "exit " << WEXITSTATUS(st);
    EXPECT_EQ(WTERMSIG(st), sig);
    EXPECT_TRUE(Files(dir.path()).empty()) << Files(dir.path())[0];
  }
}

TEST(StagedModel, CommitsModelAndDataOrLeavesNothing) {
  ScratchDir dir;
  SaveOptions so;
  so.external_data_threshold = 0;
  {
    auto staged = StageModel(BigGemm(), dir / "gone.onnx", so);
    ASSERT_TRUE(staged.ok()) << staged.status().message();
  }
  EXPECT_TRUE(Files(dir.path()).empty());
  auto staged = StageModel(BigGemm(), dir / "m.onnx", so);
  ASSERT_TRUE(staged.ok()) << staged.status().message();
  const int64_t bytes = (*staged)->file_bytes();
  ASSERT_TRUE((*staged)->Commit().ok());
  EXPECT_EQ(FileSizeOf(dir / "m.onnx"), bytes);
  EXPECT_TRUE(Exists(dir / "m.onnx.data"));
  EXPECT_EQ(Files(dir.path()).size(), 2u);
  EXPECT_TRUE(LoadModel(dir / "m.onnx").ok());
}

}  // namespace
}  // namespace whittle
