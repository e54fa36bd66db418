// Page-locked input buffers (Session::NewHostTensor, Buffer::AllocatePageLocked) on the stand-in
// device (tests/util/fake_device.h), which reads a held page-locked source when its queue gets
// there, as a GPU's copy engine does: a session that let the caller's input change, or go, before
// it waited for the device would upload the wrong bytes here. The CUDA path runs in
// tests/runtime/c_api_test.cc (CApi.*PageLocked*) where a GPU exists.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "lib/ir/device.h"
#include "tests/util/device_test_ops.h"
#include "tests/util/fake_device.h"
#include "tests/util/graph_builder.h"
#include "tests/util/test_util.h"
#include "whittle/session.h"

namespace whittle {
namespace {

using testing::GraphBuilder;
using testing::RandomFloat;

class PageLocked : public ::testing::Test {
 protected:
  void SetUp() override {
    RegisterAllOps();
    RegisterAllKernels();
    testing::RegisterDevAffine();
    testing::RegisterDevFail();
    scope_.emplace();  // after RegisterAllKernels, which registers the real CUDA runtime where built
  }
  void TearDown() override { scope_.reset(); }
  testing::FakeDevice& state() { return scope_->device(); }
  std::optional<testing::FakeDeviceScope> scope_;
};

void Fill(Tensor& t, const Tensor& from) { std::memcpy(t.raw_data(), from.raw_data(), t.nbytes()); }

// Held, a page-locked source is read when the queue gets there; not held, or pageable, its bytes
// are taken at the call. Either way dst has them once the thread synchronizes.
TEST_F(PageLocked, QueuedCopiesReadAHeldPageLockedSourceWhenTheQueueGetsThere) {
  auto locked = Buffer::AllocatePageLocked(DeviceType::kCuda, 16);
  ASSERT_TRUE(locked.ok()) << locked.status().message();
  ASSERT_TRUE((*locked)->page_locked());
  EXPECT_EQ((*locked)->device(), DeviceType::kCpu);
  EXPECT_EQ(state().host_live.size(), 1u);
  Tensor src(DType::kInt32, {4}, *locked);
  EXPECT_EQ(src.data<int32_t>()[3], 0);  // zero-filled
  auto dst = Tensor(DType::kInt32, {4}).ToDevice(DeviceType::kCuda);
  ASSERT_TRUE(dst.ok());
  const Tensor zeros(DType::kInt32, {4});
  for (bool held : {true, false}) {
    std::fill_n(src.data<int32_t>(), 4, 1);
    ASSERT_TRUE(QueueTensorBytes(src, &*dst, held).ok());
    std::fill_n(src.data<int32_t>(), 4, 2);  // before the thread synchronizes
    ASSERT_TRUE(DeviceRuntimeFor(DeviceType::kCuda)->synchronize().ok());
    auto back = dst->ToDevice(DeviceType::kCpu);
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(back->data<int32_t>()[2], held ? 2 : 1) << "held " << held;
  }
  EXPECT_EQ(state().direct_copies, 1);
  src = Tensor();
  locked->reset();
  EXPECT_TRUE(state().host_live.empty()) << "freed through the device's runtime";
}

// A session's page-locked input is read by the device directly, after Run has queued it, and
// gives the CPU's results run after run as the caller refills it; the CPU outputs a device step
// reads are staged (their buffers are the run's to reuse). An ordinary input is staged too.
TEST_F(PageLocked, SessionReadsARefilledPageLockedInputDirectly) {
  auto dev = testing::LoadOnDevice(testing::MakeMixed());
  ASSERT_TRUE(dev.ok()) << dev.status().message();
  auto cpu = Session::FromGraph(testing::MakeMixed());
  ASSERT_TRUE(cpu.ok()) << cpu.status().message();
  auto x = (*dev)->NewHostTensor(DType::kFloat32, {2, 3});
  ASSERT_TRUE(x.ok()) << x.status().message();
  ASSERT_TRUE(x->buffer()->page_locked());
  for (uint32_t r = 0; r < 3; ++r) {
    const Tensor values = RandomFloat({2, 3}, 70 + r);
    Fill(*x, values);
    state().direct_copies = state().queued_copies = 0;
    auto got = (*dev)->Run({{"x", *x}});
    ASSERT_TRUE(got.ok()) << got.status().message();
    EXPECT_EQ(state().direct_copies, 1) << "x";
    EXPECT_EQ(state().queued_copies, 3) << "x and the outputs of Relu and Add (on the CPU)";
    EXPECT_EQ(testing::FakeDevicePendingCopies(), 0) << "Run waits for the device before it returns";
    auto want = (*cpu)->Run({{"x", values}});
    ASSERT_TRUE(want.ok());
    EXPECT_TRUE((*got)[0].BitwiseEquals((*want)[0])) << "run " << r;
  }
  state().direct_copies = 0;
  ASSERT_TRUE((*dev)->Run({{"x", RandomFloat({2, 3}, 9)}}).ok());
  EXPECT_EQ(state().direct_copies, 0) << "pageable memory is staged";

  // A CPU session's host tensor is plain memory.
  auto plain = (*cpu)->NewHostTensor(DType::kFloat32, {2, 3});
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE(plain->buffer()->page_locked());
  auto bad = (*dev)->NewHostTensor(DType::kFloat32, {2, -3});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("negative dimension"), std::string::npos) << bad.status().message();
}

// A run that fails after queuing the upload of a page-locked input still waits for the device
// before it returns: the caller may refill or free its input then.
TEST_F(PageLocked, FailedRunWaitsForItsPageLockedUpload) {
  Graph g = GraphBuilder(17).Input("x", DType::kFloat32, {2, 3}).Op("DevFail", {"x"}, {"y"}).Output("y").Build();
  auto dev = testing::LoadOnDevice(std::move(g));
  ASSERT_TRUE(dev.ok()) << dev.status().message();
  auto x = (*dev)->NewHostTensor(DType::kFloat32, {2, 3});
  ASSERT_TRUE(x.ok());
  auto r = (*dev)->Run({{"x", *x}});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("DevFail refuses"), std::string::npos) << r.status().message();
  EXPECT_EQ(state().direct_copies, 1);
  EXPECT_EQ(testing::FakeDevicePendingCopies(), 0);
}

// x [2,3] -> DevAffine -> DevAffine -> y = 4 x, all on the device, with CUDA graphs.
StatusOr<std::unique_ptr<Session>> LoadWithGraphs() {
  Graph g = GraphBuilder(17)
                .Input("x", DType::kFloat32, {2, 3})
                .Op("DevAffine", {"x"}, {"a"})
                .Op("DevAffine", {"a"}, {"y"})
                .Output("y")
                .Build();
  SessionOptions o;
  o.backend = Backend::kCuda;
  o.cuda_graphs = true;
  return Session::FromGraph(testing::OnTestDevice(std::move(g)), o);
}

// With CUDA graphs: the capture run and every replay read the refilled page-locked input directly
// and give that run's results.
TEST_F(PageLocked, GraphReplaysReadARefilledPageLockedInput) {
  state().launch_us = 300;  // each eager launch costs what a replay saves
  auto dev = LoadWithGraphs();
  ASSERT_TRUE(dev.ok()) << dev.status().message();
  auto x = (*dev)->NewHostTensor(DType::kFloat32, {2, 3});
  ASSERT_TRUE(x.ok());
  for (uint32_t r = 0; r < 8; ++r) {
    const Tensor values = RandomFloat({2, 3}, 90 + r);
    Fill(*x, values);
    auto got = (*dev)->Run({{"x", *x}});
    ASSERT_TRUE(got.ok()) << got.status().message();
    for (int64_t i = 0; i < 6; ++i) EXPECT_EQ((*got)[0].data<float>()[i], 4.f * values.data<float>()[i]) << r;
  }
  EXPECT_EQ(state().captures, 1);
  EXPECT_EQ(state().replays, 5);  // the capture run's own, and 4 more
  EXPECT_EQ(state().direct_copies, 8) << "every run's x, eager, captured or replayed";
  EXPECT_EQ(testing::FakeDevicePendingCopies(), 0);
}

// x [2,3] -> DevAffine -> a -> DevAffine -> y (on the device); Relu(a) -> r (on the CPU).
Graph MakeTwoOutputs() {
  return GraphBuilder(17)
      .Input("x", DType::kFloat32, {2, 3})
      .Op("DevAffine", {"x"}, {"a"})
      .Op("DevAffine", {"a"}, {"y"})
      .Op("Relu", {"a"}, {"r"})
      .Output("y")
      .Output("r")
      .Build();
}

void ExpectTwoOutputs(const std::vector<Tensor>& got, const Tensor& x, const std::string& what) {
  for (int64_t i = 0; i < 6; ++i) {
    EXPECT_EQ(got[0].data<float>()[i], 4.f * x.data<float>()[i]) << what << ", y " << i;
    EXPECT_EQ(got[1].data<float>()[i], std::max(0.f, 2.f * x.data<float>()[i])) << what << ", r " << i;
  }
}

// RunInto: a device output is queued down into the caller's page-locked tensor (no copy of its
// own; Run's last wait brings it), a host output copied; the same tensors serve run after run.
// Pageable tensors are written by plain copies, a CPU session's too; a tensor of another shape is
// an error naming the output, with nothing written.
TEST_F(PageLocked, RunIntoWritesTheCallersOutputs) {
  auto dev = testing::LoadOnDevice(MakeTwoOutputs());
  ASSERT_TRUE(dev.ok()) << dev.status().message();
  std::vector<Tensor> outs;
  for (int k = 0; k < 2; ++k) {
    auto t = (*dev)->NewHostTensor(DType::kFloat32, {2, 3});
    ASSERT_TRUE(t.ok());
    outs.push_back(*t);
  }
  const void* y_bytes = outs[0].raw_data();
  for (uint32_t r = 0; r < 3; ++r) {
    const Tensor x = RandomFloat({2, 3}, 40 + r);
    state().queued_downloads = state().copies_to_host = 0;
    const Status st = (*dev)->RunInto({{"x", x}}, outs);
    ASSERT_TRUE(st.ok()) << st.message();
    EXPECT_EQ(state().queued_downloads, 1) << "y";
    EXPECT_EQ(state().copies_to_host, 1) << "a, for Relu on the CPU; not y";
    EXPECT_EQ(testing::FakeDevicePendingCopies(), 0) << "RunInto waits for the device before it returns";
    EXPECT_EQ(outs[0].raw_data(), y_bytes);
    ExpectTwoOutputs(outs, x, "run " + std::to_string(r));
  }

  std::vector<Tensor> pageable = {Tensor(DType::kFloat32, {2, 3}), Tensor(DType::kFloat32, {2, 3})};
  const Tensor x = RandomFloat({2, 3}, 50);
  state().queued_downloads = 0;
  ASSERT_TRUE((*dev)->RunInto({{"x", x}}, pageable).ok());
  EXPECT_EQ(state().queued_downloads, 0);
  ExpectTwoOutputs(pageable, x, "pageable");
  auto cpu = Session::FromGraph(testing::OnTestDevice(MakeTwoOutputs()));
  ASSERT_TRUE(cpu.ok());
  std::vector<Tensor> on_cpu = {Tensor(DType::kFloat32, {2, 3}), Tensor(DType::kFloat32, {2, 3})};
  ASSERT_TRUE((*cpu)->RunInto({{"x", x}}, on_cpu).ok());
  ExpectTwoOutputs(on_cpu, x, "cpu session");

  std::vector<Tensor> wrong = {Tensor(DType::kFloat32, {2, 3}), Tensor(DType::kFloat32, {3, 2})};
  Status st = (*dev)->RunInto({{"x", x}}, wrong);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("output 'r' is float32[2,3], its tensor float32[3,2]"), std::string::npos) << st.message();
  EXPECT_EQ(wrong[0].data<float>()[0], 0.f) << "nothing written, y neither";
  std::vector<Tensor> one = {Tensor(DType::kFloat32, {2, 3})};
  st = (*dev)->RunInto({{"x", x}}, one);
  EXPECT_NE(st.message().find("2 output(s), got 1"), std::string::npos) << st.message();
}

// With CUDA graphs: the capture run and every replay queue the output into the caller's tensor.
TEST_F(PageLocked, GraphReplaysWriteIntoPageLockedOutputs) {
  state().launch_us = 300;  // each eager launch costs what a replay saves
  auto dev = LoadWithGraphs();
  ASSERT_TRUE(dev.ok()) << dev.status().message();
  auto y = (*dev)->NewHostTensor(DType::kFloat32, {2, 3});
  ASSERT_TRUE(y.ok());
  std::vector<Tensor> outs = {*y};
  for (uint32_t r = 0; r < 8; ++r) {
    const Tensor x = RandomFloat({2, 3}, 60 + r);
    const Status st = (*dev)->RunInto({{"x", x}}, outs);
    ASSERT_TRUE(st.ok()) << st.message();
    for (int64_t i = 0; i < 6; ++i) EXPECT_EQ(outs[0].data<float>()[i], 4.f * x.data<float>()[i]) << r;
  }
  EXPECT_EQ(state().captures, 1);
  EXPECT_EQ(state().replays, 5);  // the capture run's own, and 4 more
  EXPECT_EQ(state().queued_downloads, 8) << "every run's y, eager, captured or replayed";
  EXPECT_EQ(state().copies_to_host, 0);
  EXPECT_EQ(testing::FakeDevicePendingCopies(), 0);
  std::vector<Tensor> wrong = {Tensor(DType::kFloat32, {6})};
  const Status st = (*dev)->RunInto({{"x", RandomFloat({2, 3}, 1)}}, wrong);
  EXPECT_NE(st.message().find("output 'y' is float32[2,3]"), std::string::npos) << st.message();
  EXPECT_EQ(testing::FakeDevicePendingCopies(), 0) << "a failed replay waits too";
}

}  // namespace
}  // namespace whittle
