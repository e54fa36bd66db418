// Buffers released while a thread captures a CUDA graph (lib/ir/device.h, CaptureReleases): a
// kernel's temporary dies at the end of its Compute, but the work the capture recorded still points
// at it, and a free waits for the device, which a capture may refuse. The stand-in device
// (tests/util/fake_device.h) refuses a free while capturing, so a session that let one through
// would never get a graph here, and one that freed the memory would replay over freed memory.
#include <gtest/gtest.h>

#include <memory>
#include <mutex>
#include <optional>

#include "lib/ir/device.h"
#include "tests/util/device_test_ops.h"
#include "tests/util/fake_device.h"
#include "tests/util/graph_builder.h"
#include "tests/util/test_util.h"
#include "whittle/session.h"

namespace whittle {
namespace {

using testing::ActiveFakeDevice;
using testing::GraphBuilder;
using testing::RandomFloat;

// test.device DevTemp(X) = 3 X, float32, on the device, through a temporary device buffer that it
// allocates in Compute and drops at its end, as a kernel with a workspace of its own would.
class DevTemp : public OpKernel {
 public:
  DeviceType device() const override { return DeviceType::kCuda; }
  Status Compute(KernelContext& ctx) const override {
    const int64_t n = ctx.inputs[0]->numel();
    WH_ASSIGN_OR_RETURN(std::shared_ptr<Buffer> temp, Buffer::AllocateOn(DeviceType::kCuda, n * sizeof(float)));
    const float* x = ctx.inputs[0]->data<float>();
    float* t = static_cast<float*>(temp->data());
    float* y = ctx.outputs[0]->data<float>();
    testing::FakeDeviceWork([x, t, n] {
      for (int64_t i = 0; i < n; ++i) t[i] = 3.f * x[i];
    });
    testing::FakeDeviceWork([t, y, n] {
      for (int64_t i = 0; i < n; ++i) y[i] = t[i];
    });
    return Status::Ok();  // temp is released here, its work perhaps only recorded
  }
};

void RegisterDevTemp() {
  static std::once_flag once;
  std::call_once(once, [] {
    testing::RegisterDeviceOp("DevTemp", 1, 1, [](const KernelInit&) -> KernelOr { return std::unique_ptr<OpKernel>(new DevTemp); });
  });
}

class CaptureRelease : public ::testing::Test {
 protected:
  void SetUp() override {
    RegisterAllOps();
    RegisterAllKernels();
    testing::RegisterDevAffine();
    RegisterDevTemp();
    scope_.emplace();  // after RegisterAllKernels, which registers the real CUDA runtime where built
  }
  void TearDown() override { scope_.reset(); }
  testing::FakeDevice& state() { return scope_->device(); }
  std::optional<testing::FakeDeviceScope> scope_;
};

// While one is active, device and page-locked buffers released on its thread stay allocated; once
// stopped, releases free again; destroyed, it frees what it kept. One per thread at a time.
TEST_F(CaptureRelease, KeepsWhatItsThreadReleasesUntilDestroyed) {
  auto kept = std::make_unique<CaptureReleases>();
  CaptureReleases second;  // another on the same thread is inactive
  {
    auto a = Buffer::AllocateOn(DeviceType::kCuda, 64);
    auto h = Buffer::AllocatePageLocked(DeviceType::kCuda, 64);
    ASSERT_TRUE(a.ok() && h.ok());
    std::shared_ptr<Buffer> cpu = Buffer::Allocate(64);  // plain host memory is freed as ever
  }
  EXPECT_EQ(kept->size(), 2u);
  EXPECT_EQ(second.size(), 0u);
  EXPECT_EQ(state().live.size(), 1u);
  EXPECT_EQ(state().host_live.size(), 1u);
  kept->Stop();
  {
    auto b = Buffer::AllocateOn(DeviceType::kCuda, 64);
    ASSERT_TRUE(b.ok());
  }
  EXPECT_EQ(state().live.size(), 1u);  // b went at once
  EXPECT_EQ(kept->size(), 2u);
  kept.reset();
  EXPECT_TRUE(state().live.empty());
  EXPECT_TRUE(state().host_live.empty());
}

// A kernel's temporary released during the capture lives as long as the graph, so every replay
// reads memory that is still the graph's, with each run's own input; it is freed with the graph.
TEST_F(CaptureRelease, KernelTemporariesLiveAsLongAsTheGraph) {
  state().launch_us = 300;  // each eager launch costs what a replay saves
  SessionOptions o;
  o.backend = Backend::kCuda;
  o.cuda_graphs = true;
  Graph g = GraphBuilder(17)
                .Input("x", DType::kFloat32, {4, 3})
                .Op("DevAffine", {"x"}, {"a"})
                .Op("DevTemp", {"a"}, {"y"})
                .Output("y")
                .Build();
  auto s = Session::FromGraph(testing::OnTestDevice(std::move(g)), o);
  ASSERT_TRUE(s.ok()) << s.status().message();
  const size_t before = state().live.size();  // what the session holds from its load
  for (int r = 0; r < 12; ++r) {
    const Tensor x = RandomFloat({4, 3}, 100 + static_cast<uint32_t>(r));
    auto y = (*s)->Run({{"x", x}});
    ASSERT_TRUE(y.ok()) << y.status().message();
    for (int64_t i = 0; i < x.numel(); ++i) ASSERT_EQ((*y)[0].data<float>()[i], 6.f * x.data<float>()[i]) << "run " << r;
  }
  std::string report;
  for (const std::string& l : (*s)->device_graph_report()) report += l;
  EXPECT_EQ(state().captures, 1) << report;
  EXPECT_EQ(state().replays, 9) << report;  // the capture run's own, and 8 more
  EXPECT_NE(report.find("replayed as a CUDA graph"), std::string::npos) << report;
  EXPECT_GT(state().live.size(), before);  // the temporary, among the graph's buffers
  s->reset();
  EXPECT_TRUE(state().live.empty());
}

}  // namespace
}  // namespace whittle
