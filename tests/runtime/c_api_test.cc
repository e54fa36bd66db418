#include "whittle/whittle_c.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/kernel.h"
#include "lib/ir/device.h"
#include "tests/util/fake_device.h"

namespace {

TEST(CApi, LoadRunAndErrors) {
  const std::string model = std::string(WHITTLE_SOURCE_DIR) + "/models/mlp.onnx";
  whittle_session* s = nullptr;
  ASSERT_EQ(whittle_session_load(model.c_str(), 2, &s), 0) << whittle_last_error();
  ASSERT_EQ(whittle_session_num_inputs(s), 1u);
  ASSERT_EQ(whittle_session_num_outputs(s), 1u);
  std::vector<float> x(2 * 28 * 28, 0.5f);
  int64_t dims[] = {2, 1, 28, 28};
  whittle_tensor* in = nullptr;
  ASSERT_EQ(whittle_tensor_create(1, dims, 4, x.data(), &in), 0);
  const char* names[] = {whittle_session_input_name(s, 0)};
  const whittle_tensor* ins[] = {in};
  whittle_tensor* out = nullptr;
  ASSERT_EQ(whittle_session_run(s, names, ins, 1, &out), 0) << whittle_last_error();
  ASSERT_EQ(whittle_tensor_rank(out), 2u);
  EXPECT_EQ(whittle_tensor_dims(out)[0], 2);
  EXPECT_EQ(whittle_tensor_dims(out)[1], 10);
  const float* y = static_cast<const float*>(whittle_tensor_data(out));
  EXPECT_EQ(y[0], y[10]);  // both rows had the same input
  whittle_tensor_free(out);

  const char* bad_names[] = {"nope"};
  EXPECT_NE(whittle_session_run(s, bad_names, ins, 1, &out), 0);
  EXPECT_NE(std::string(whittle_last_error()).find("nope"), std::string::npos);
  whittle_tensor_free(in);
  whittle_session_free(s);

  whittle_session* bad = nullptr;
  EXPECT_NE(whittle_session_load("/nonexistent/model.onnx", 1, &bad), 0);
  EXPECT_FALSE(std::string(whittle_last_error()).empty());
  EXPECT_NE(whittle_session_load_on(model.c_str(), 1, "gpu", &bad), 0);
  EXPECT_NE(std::string(whittle_last_error()).find("\"cpu\" or \"cuda\""), std::string::npos);
}

// The precision argument: parsed, checked against the device, fp32 the same as load_on.
TEST(CApi, PrecisionArgument) {
  const std::string model = std::string(WHITTLE_SOURCE_DIR) + "/models/mlp.onnx";
  whittle_session* s = nullptr;
  EXPECT_NE(whittle_session_load_with(model.c_str(), 1, "cpu", "int4", &s), 0);
  EXPECT_NE(std::string(whittle_last_error()).find("unknown precision 'int4'"), std::string::npos) << whittle_last_error();
  EXPECT_NE(whittle_session_load_with(model.c_str(), 1, "cpu", "bf16", &s), 0);
  EXPECT_NE(std::string(whittle_last_error()).find("needs the cuda backend"), std::string::npos) << whittle_last_error();
  EXPECT_NE(whittle_session_load_with(model.c_str(), 1, "cpu", nullptr, &s), 0);
  ASSERT_EQ(whittle_session_load_with(model.c_str(), 1, "cpu", "fp32", &s), 0) << whittle_last_error();
  EXPECT_EQ(whittle_session_num_outputs(s), 1u);
  whittle_session_free(s);
}

// The flags argument: known flags only, and CUDA graphs on "cuda" only.
TEST(CApi, FlagsArgument) {
  const std::string model = std::string(WHITTLE_SOURCE_DIR) + "/models/mlp.onnx";
  whittle_session* s = nullptr;
  EXPECT_NE(whittle_session_load_ex(model.c_str(), 1, "cpu", "fp32", 2u, &s), 0);
  EXPECT_NE(std::string(whittle_last_error()).find("unknown flags 2"), std::string::npos) << whittle_last_error();
  EXPECT_NE(whittle_session_load_ex(model.c_str(), 1, "cpu", "fp32", WHITTLE_CUDA_GRAPHS, &s), 0);
  EXPECT_NE(std::string(whittle_last_error()).find("cuda_graphs needs the cuda backend"), std::string::npos)
      << whittle_last_error();
  ASSERT_EQ(whittle_session_load_ex(model.c_str(), 1, "cpu", "fp32", 0u, &s), 0) << whittle_last_error();
  whittle_session_free(s);
}

// whittle_session_new_input on the CPU: plain memory the caller fills, run like any input; bad
// arguments are one-line errors.
TEST(CApi, NewInputIsFilledAndRun) {
  const std::string model = std::string(WHITTLE_SOURCE_DIR) + "/models/mlp.onnx";
  whittle_session* s = nullptr;
  ASSERT_EQ(whittle_session_load(model.c_str(), 1, &s), 0) << whittle_last_error();
  int64_t dims[] = {2, 1, 28, 28};
  std::vector<float> x(2 * 28 * 28);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 13) / 13.f;
  whittle_tensor *made = nullptr, *copied = nullptr;
  ASSERT_EQ(whittle_session_new_input(s, 1, dims, 4, &made), 0) << whittle_last_error();
  ASSERT_EQ(whittle_tensor_rank(made), 4u);
  EXPECT_EQ(whittle_tensor_dims(made)[0], 2);
  EXPECT_EQ(static_cast<const float*>(whittle_tensor_data(made))[5], 0.f);  // zero-filled
  std::memcpy(whittle_tensor_mutable_data(made), x.data(), x.size() * sizeof(float));
  ASSERT_EQ(whittle_tensor_create(1, dims, 4, x.data(), &copied), 0);
  const char* names[] = {whittle_session_input_name(s, 0)};
  whittle_tensor *a = nullptr, *b = nullptr;
  const whittle_tensor* in_a[] = {made};
  const whittle_tensor* in_b[] = {copied};
  ASSERT_EQ(whittle_session_run(s, names, in_a, 1, &a), 0) << whittle_last_error();
  ASSERT_EQ(whittle_session_run(s, names, in_b, 1, &b), 0) << whittle_last_error();
  EXPECT_EQ(std::memcmp(whittle_tensor_data(a), whittle_tensor_data(b), 20 * sizeof(float)), 0);
  // The output into a tensor the caller made: the same values; of another shape, a named error.
  int64_t out_dims[] = {2, 10}, wrong_dims[] = {2, 9};
  whittle_tensor *into = nullptr, *wrong = nullptr;
  ASSERT_EQ(whittle_session_new_input(s, 1, out_dims, 2, &into), 0) << whittle_last_error();
  ASSERT_EQ(whittle_session_new_input(s, 1, wrong_dims, 2, &wrong), 0) << whittle_last_error();
  ASSERT_EQ(whittle_session_run_into(s, names, in_a, 1, &into), 0) << whittle_last_error();
  EXPECT_EQ(std::memcmp(whittle_tensor_data(a), whittle_tensor_data(into), 20 * sizeof(float)), 0);
  EXPECT_NE(whittle_session_run_into(s, names, in_a, 1, &wrong), 0);
  EXPECT_NE(std::string(whittle_last_error()).find("float32[2,10], its tensor float32[2,9]"), std::string::npos)
      << whittle_last_error();
  EXPECT_EQ(static_cast<const float*>(whittle_tensor_data(wrong))[0], 0.f) << "nothing written";
  whittle_tensor_free(into);
  whittle_tensor_free(wrong);
  whittle_tensor_free(a);
  whittle_tensor_free(b);
  whittle_tensor_free(made);
  whittle_tensor_free(copied);

  whittle_tensor* bad = nullptr;
  EXPECT_NE(whittle_session_new_input(s, 999, dims, 4, &bad), 0);
  EXPECT_NE(std::string(whittle_last_error()).find("unsupported dtype 999"), std::string::npos) << whittle_last_error();
  int64_t negative[] = {2, -1};
  EXPECT_NE(whittle_session_new_input(s, 1, negative, 2, &bad), 0);
  EXPECT_NE(std::string(whittle_last_error()).find("negative dimension"), std::string::npos) << whittle_last_error();
  EXPECT_NE(whittle_session_new_input(nullptr, 1, dims, 4, &bad), 0);
  EXPECT_EQ(bad, nullptr);
  whittle_session_free(s);
}

// The device memory Whittle holds (here on the stand-in device): a buffer shows in the live and
// peak figures, the peak starts again from what is live when reset, and only "cuda" is counted.
TEST(CApi, DeviceMemoryCountsWhatWhittleHoldsOnTheDevice) {
  whittle::RegisterAllKernels();  // the real CUDA runtime where built; the stand-in replaces it below
  whittle::testing::FakeDeviceScope scope;
  int64_t live = -1, peak = -1;
  ASSERT_EQ(whittle_device_memory_reset_peak("cuda"), 0) << whittle_last_error();
  ASSERT_EQ(whittle_device_memory("cuda", &live, &peak), 0) << whittle_last_error();
  const int64_t base = live;
  EXPECT_EQ(peak, base);
  {
    auto b = whittle::Buffer::AllocateOn(whittle::DeviceType::kCuda, 4096);
    ASSERT_TRUE(b.ok());
    ASSERT_EQ(whittle_device_memory("cuda", &live, nullptr), 0);
    EXPECT_EQ(live, base + 4096);
  }
  ASSERT_EQ(whittle_device_memory("cuda", &live, &peak), 0);
  EXPECT_EQ(live, base);
  EXPECT_EQ(peak, base + 4096);
  ASSERT_EQ(whittle_device_memory_reset_peak("cuda"), 0);
  ASSERT_EQ(whittle_device_memory("cuda", nullptr, &peak), 0);
  EXPECT_EQ(peak, base);
  EXPECT_NE(whittle_device_memory("cpu", &live, &peak), 0);
  EXPECT_NE(std::string(whittle_last_error()).find("device must be \"cuda\", got \"cpu\""), std::string::npos)
      << whittle_last_error();
  EXPECT_NE(whittle_device_memory_reset_peak(nullptr), 0);
}

// The MLP loaded on CUDA at `precision` (with `flags`) gives the CPU's outputs to rtol, run after
// run, each run's input new; with page_locked, the CUDA session's input is one whittle_session_new_input
// tensor refilled before each run, and its output another that whittle_session_run_into writes.
// Without a GPU, the load fails with a one-line reason and the test is skipped.
void ExpectCudaMatchesCpu(const char* precision, float rtol, unsigned flags = 0, bool page_locked = false) {
  const std::string model = std::string(WHITTLE_SOURCE_DIR) + "/models/mlp.onnx";
  whittle_session* s = nullptr;
  if (whittle_session_load_ex(model.c_str(), 1, "cuda", precision, flags, &s) != 0) {
    const std::string why = whittle_last_error();
    EXPECT_NE(why.find("device 'cuda' is not available"), std::string::npos) << why;
    GTEST_SKIP() << why;
  }
  whittle_session* cpu = nullptr;
  ASSERT_EQ(whittle_session_load(model.c_str(), 1, &cpu), 0) << whittle_last_error();
  int64_t dims[] = {3, 1, 28, 28};
  std::vector<float> x(3 * 28 * 28);
  whittle_tensor *locked = nullptr, *locked_out = nullptr;
  if (page_locked) {
    int64_t out_dims[] = {3, 10};
    ASSERT_EQ(whittle_session_new_input(s, 1, dims, 4, &locked), 0) << whittle_last_error();
    ASSERT_EQ(whittle_session_new_input(s, 1, out_dims, 2, &locked_out), 0) << whittle_last_error();
  }
  const char* names[] = {whittle_session_input_name(s, 0)};
  for (int run = 0; run < 8; ++run) {  // eager, then (with WHITTLE_CUDA_GRAPHS) captured and replayed
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i + static_cast<size_t>(run) * 5) % 17) / 17.f;
    whittle_tensor* in = nullptr;
    ASSERT_EQ(whittle_tensor_create(1, dims, 4, x.data(), &in), 0);
    if (locked) std::memcpy(whittle_tensor_mutable_data(locked), x.data(), x.size() * sizeof(float));
    const whittle_tensor* ins[] = {in};
    const whittle_tensor* ins_cuda[] = {locked ? locked : in};
    whittle_tensor *a = nullptr, *b = nullptr;
    ASSERT_EQ(whittle_session_run(cpu, names, ins, 1, &b), 0) << whittle_last_error();
    if (locked_out) {
      ASSERT_EQ(whittle_session_run_into(s, names, ins_cuda, 1, &locked_out), 0) << whittle_last_error();
    } else {
      ASSERT_EQ(whittle_session_run(s, names, ins_cuda, 1, &a), 0) << whittle_last_error();
    }
    const float* ya = static_cast<const float*>(whittle_tensor_data(locked_out ? locked_out : a));
    const float* yb = static_cast<const float*>(whittle_tensor_data(b));
    for (int i = 0; i < 30; ++i) EXPECT_NEAR(ya[i], yb[i], rtol * (1.f + std::fabs(yb[i]))) << "run " << run << ", " << i;
    whittle_tensor_free(a);
    whittle_tensor_free(b);
    whittle_tensor_free(in);
  }
  whittle_tensor_free(locked);
  whittle_tensor_free(locked_out);
  whittle_session_free(s);
  whittle_session_free(cpu);
}

// On CUDA (whittle_session_load_on is load_with at fp32): the CPU's outputs.
TEST(CApi, LoadOnCuda) { ExpectCudaMatchesCpu("fp32", 1e-4f); }

// TF32 to TF32's tolerance (10 mantissa bits in the products).
TEST(CApi, LoadOnCudaWithPrecision) { ExpectCudaMatchesCpu("tf32", 2e-2f); }

// With CUDA graphs: the same outputs from the replays.
TEST(CApi, LoadOnCudaWithGraphs) { ExpectCudaMatchesCpu("fp32", 1e-4f, WHITTLE_CUDA_GRAPHS); }

// Page-locked inputs refilled run after run, read by the GPU with no staging copy, and a page-locked
// output it writes: eagerly, and by the replays of a graph.
TEST(CApi, LoadOnCudaWithPageLockedInput) { ExpectCudaMatchesCpu("fp32", 1e-4f, 0, true); }
TEST(CApi, LoadOnCudaWithGraphsAndPageLockedInput) { ExpectCudaMatchesCpu("fp32", 1e-4f, WHITTLE_CUDA_GRAPHS, true); }

}  // namespace
