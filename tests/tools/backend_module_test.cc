// The CUDA backend as a module loaded on demand (kernels/backend_module.h), through run-model: a
// CPU run maps no CUDA library, and where the module cannot be loaded `--device cuda` is a one-line
// error with a non-zero exit while CPU runs go on.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "tests/util/run_command.h"

namespace whittle {
namespace {

std::string RunModel(const std::string& env, const std::string& args) {
  return env + " " + std::string(WHITTLE_BINARY_DIR) + "/bin/run-model " + WHITTLE_SOURCE_DIR + "/models/mlp.onnx " +
         args + " 2>&1";
}

bool CudaModuleBuilt() { return std::filesystem::exists(std::string(WHITTLE_BINARY_DIR) + "/lib/libwhittle_cuda.so"); }

// The dynamic loader's own account (LD_DEBUG=files) of the files a CPU run opens.
TEST(BackendModule, CpuRunLoadsNoCudaLibrary) {
  const auto r = testing::RunCommand(RunModel("LD_DEBUG=files", "--bench --batch 1 --warmup 1 --iterations 2 --min-time 0"));
  ASSERT_EQ(r.code, 0) << r.out;
  ASSERT_NE(r.out.find("file=libwhittle.so"), std::string::npos) << "LD_DEBUG names no library:\n" << r.out;
  for (const char* lib : {"libwhittle_cuda", "libcudart", "libcublas", "libcufft"})
    EXPECT_EQ(r.out.find(lib), std::string::npos) << lib << " was loaded:\n" << r.out;
}

TEST(BackendModule, MissingModuleIsAOneLineError) {
  const auto r = testing::RunCommand(RunModel("WHITTLE_CUDA_MODULE=/nonexistent/libwhittle_cuda.so", "--device cuda"));
  EXPECT_NE(r.code, 0);
  EXPECT_EQ(r.out.find('\n'), r.out.size() - 1) << r.out;
  const std::string want = CudaModuleBuilt()
                               ? "device 'cuda' is not available: CUDA backend unavailable: "
                                 "/nonexistent/libwhittle_cuda.so: cannot open shared object file"
                               : "device 'cuda' is not available: no cuda backend in this build";
  EXPECT_NE(r.out.find(want), std::string::npos) << r.out;
  // The same program's CPU runs are unaffected.
  const auto cpu = testing::RunCommand(RunModel("WHITTLE_CUDA_MODULE=/nonexistent/libwhittle_cuda.so", "--device cpu"));
  EXPECT_EQ(cpu.code, 0) << cpu.out;
}

}  // namespace
}  // namespace whittle
