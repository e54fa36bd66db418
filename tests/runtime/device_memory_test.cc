// Device memory accounting (lib/ir/device.h, DeviceMemoryInUse) on the stand-in device: every
// device Buffer is counted from its allocation to its free (a capture's kept ones until the graph
// goes), the peak holds the highest, and run-model --bench's figures (BenchResult's device bytes)
// come from it.
#include <gtest/gtest.h>

#include <memory>
#include <optional>

#include "lib/ir/device.h"
#include "runtime/evaluate.h"
#include "tests/util/device_test_ops.h"
#include "tests/util/fake_device.h"
#include "tests/util/graph_builder.h"
#include "tests/util/test_util.h"
#include "whittle/session.h"

namespace whittle {
namespace {

using testing::GraphBuilder;

class DeviceMemory : public ::testing::Test {
 protected:
  void SetUp() override {
    RegisterAllOps();
    RegisterAllKernels();
    testing::RegisterDevAffine();
    scope_.emplace();  // after RegisterAllKernels, which registers the real CUDA runtime where built
  }
  void TearDown() override { scope_.reset(); }
  std::optional<testing::FakeDeviceScope> scope_;
};

int64_t Live() { return DeviceMemoryInUse(DeviceType::kCuda).live_bytes; }
int64_t Peak() { return DeviceMemoryInUse(DeviceType::kCuda).peak_bytes; }

TEST_F(DeviceMemory, CountsEachBufferFromAllocationToFree) {
  const int64_t base = Live();
  ResetDeviceMemoryPeak(DeviceType::kCuda);
  EXPECT_EQ(Peak(), base);
  {
    auto a = Buffer::AllocateOn(DeviceType::kCuda, 1000);
    ASSERT_TRUE(a.ok());
    {
      auto b = Buffer::AllocateOn(DeviceType::kCuda, 24);
      ASSERT_TRUE(b.ok());
      EXPECT_EQ(Live(), base + 1024);
    }
    EXPECT_EQ(Live(), base + 1000);
    auto host = Buffer::AllocatePageLocked(DeviceType::kCuda, 4096);  // host memory: not counted
    ASSERT_TRUE(host.ok());
    EXPECT_EQ(Live(), base + 1000);
  }
  EXPECT_EQ(Live(), base);
  EXPECT_EQ(Peak(), base + 1024);
  ResetDeviceMemoryPeak(DeviceType::kCuda);
  EXPECT_EQ(Peak(), base);
  // Released in a capture's span, a buffer is still held (and counted) until the graph goes.
  auto kept = std::make_unique<CaptureReleases>();
  {
    auto c = Buffer::AllocateOn(DeviceType::kCuda, 512);
    ASSERT_TRUE(c.ok());
  }
  kept->Stop();
  EXPECT_EQ(Live(), base + 512);
  kept.reset();
  EXPECT_EQ(Live(), base);
}

// Benchmark reports, per batch size, what the device held before its runs and at their peak: the
// session's constants before, and the batch's activations on top at the peak.
TEST_F(DeviceMemory, BenchmarkReportsTheDevicePeakPerBatchSize) {
  Graph g = GraphBuilder(17)
                .Input("x", DType::kFloat32, {Dim::Symbol("batch"), 256})
                .Init("b", testing::RandomFloat({1, 256}, 1))
                .Op("DevAffine", {"x"}, {"a"})
                .Op("Add", {"a", "b"}, {"c"})  // on the CPU: a comes down, c goes up
                .Op("DevAffine", {"c"}, {"y"})
                .Output("y")
                .Build();
  const int64_t base = Live();
  auto dev = testing::LoadOnDevice(g);
  ASSERT_TRUE(dev.ok()) << dev.status().message();
  BenchOptions o;
  o.batches = {1, 64};
  o.warmup = 1;
  o.min_iterations = 2;
  o.min_seconds = 0;
  auto r = Benchmark(**dev, o, nullptr, nullptr);
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->size(), 2u);
  const int64_t row = 256 * 4;  // bytes of one sample's activations
  for (const BenchResult& b : *r) {
    EXPECT_GE(b.device_before_bytes, base) << "batch " << b.batch;
    // The batch's own tensors on the device, none of which the runs before could hold.
    EXPECT_GE(b.device_peak_bytes - b.device_before_bytes, b.batch * row) << "batch " << b.batch;
    EXPECT_GE(b.device_peak_bytes, base + 2 * b.batch * row) << "batch " << b.batch;
  }
  EXPECT_GT((*r)[1].device_peak_bytes, (*r)[0].device_peak_bytes);
  dev->reset();
  EXPECT_EQ(Live(), base);  // the session's arenas and constants went with it

  auto cpu = Session::FromGraph(testing::OnTestDevice(g));
  ASSERT_TRUE(cpu.ok()) << cpu.status().message();
  auto c = Benchmark(**cpu, o, nullptr, nullptr);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ((*c)[0].device_peak_bytes, -1);
  EXPECT_EQ((*c)[0].device_before_bytes, -1);
}

}  // namespace
}  // namespace whittle
