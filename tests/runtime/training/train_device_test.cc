// Training on a device backend, on any machine: with the stand-in device of tests/util/
// fake_device.h registered as kCuda, the Trainer keeps every parameter, gradient and optimizer
// state on that device between steps and updates them there through the device's registered
// optimizer functions (here the CPU's, run on the stand-in's buffers). Its nodes fall back to
// the CPU kernels, so a run must match the CPU backend's bit for bit: anything the trainer
// forgot to move, or moved twice, shows up as a difference or as a buffer that is not the
// device's. The CUDA update kernels themselves run in scripts/cuda-device-check.sh on a GPU.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "lib/data/npy.h"
#include "lib/onnx/model_io.h"
#include "lib/ops/op_def.h"
#include "kernels/kernel.h"
#include "runtime/training/trainer.h"
#include "tests/util/fake_device.h"

namespace whittle::training {
namespace {

std::string Src(const std::string& rel) { return std::string(WHITTLE_SOURCE_DIR) + "/" + rel; }

struct Trained {
  std::vector<Tensor> params, state;  // host copies after the steps
  std::vector<double> losses;
  Graph model;
};

Trained Train(const std::string& student, TrainOptions o, testing::FakeDevice* device) {
  auto s = LoadModel(Src("models/" + student + ".onnx"));
  auto t = LoadModel(Src("models/mlp.onnx"));
  const std::string dir = Src("tests/data/train_step/" + student + "/");
  auto x = ReadNpy(dir + "x.npy");
  auto labels = ReadNpy(dir + "labels.npy");
  EXPECT_TRUE(s.ok() && t.ok() && x.ok() && labels.ok());
  Trained r;
  auto tr = Trainer::Create(*s, &*t, o);
  EXPECT_TRUE(tr.ok()) << tr.status().message();
  if (!tr.ok()) return r;
  Trainer& trainer = **tr;
  for (int step = 0; step < 3; ++step) {
    if (step == 2) {
      // A restored checkpoint hands the trainer host tensors; the next step moves them.
      for (Tensor& p : trainer.param_values()) p = *p.ToDevice(DeviceType::kCpu);
    }
    auto res = trainer.Step(*x, *labels, step, 10);
    EXPECT_TRUE(res.ok()) << res.status().message();
    if (!res.ok()) return r;
    r.losses.push_back(res->loss);
    for (std::vector<Tensor>* ts : {&trainer.param_values(), &trainer.state1(), &trainer.state2(), &trainer.state_values()})
      for (const Tensor& p : *ts) {
        EXPECT_EQ(p.device(), BackendDevice(o.backend));
        if (device) {
          EXPECT_TRUE(device->Owns(p.buffer()->data())) << "a parameter or state outside the device";
        }
      }
  }
  for (const Tensor& p : trainer.param_values()) r.params.push_back(*p.ToDevice(DeviceType::kCpu));
  for (const Tensor& p : trainer.state_values()) r.state.push_back(*p.ToDevice(DeviceType::kCpu));
  r.model = trainer.CurrentModel();
  return r;
}

TEST(TrainOnDevice, ParamsStayOnTheDeviceAndTrainingMatchesTheCpu) {
  RegisterAllOps();
  RegisterAllKernels();
  for (const char* student : {"cnn", "mlp"})
    for (OptimizerKind opt : {OptimizerKind::kSgd, OptimizerKind::kAdamW}) {
      SCOPED_TRACE(std::string(student) + (opt == OptimizerKind::kSgd ? " sgd" : " adamw"));
      TrainOptions o;
      o.optimizer = opt;
      o.lr = opt == OptimizerKind::kSgd ? 0.05f : 0.002f;
      o.bn_training = true;  // running statistics are state the steps carry on the device
      o.batch = 32;
      const Trained cpu = Train(student, o, nullptr);
      testing::FakeDeviceScope scope;
      o.backend = Backend::kCuda;
      const Trained dev = Train(student, o, &scope.device());
      ASSERT_EQ(cpu.params.size(), dev.params.size());
      ASSERT_FALSE(cpu.params.empty());
      EXPECT_EQ(cpu.losses, dev.losses);
      EXPECT_GT(cpu.losses.front(), cpu.losses.back()) << "the steps trained";
      for (size_t k = 0; k < cpu.params.size(); ++k) EXPECT_TRUE(dev.params[k].BitwiseEquals(cpu.params[k])) << k;
      ASSERT_EQ(cpu.state.size(), dev.state.size());
      for (size_t k = 0; k < cpu.state.size(); ++k) EXPECT_TRUE(dev.state[k].BitwiseEquals(cpu.state[k])) << k;
      // The exported model holds the trained values, from the device.
      for (const Value& v : dev.model.values())
        if (v.initializer) {
          const int c = cpu.model.FindValue(v.name);
          ASSERT_GE(c, 0);
          ASSERT_TRUE(cpu.model.value(c).initializer.has_value());
          EXPECT_TRUE(v.initializer->BitwiseEquals(*cpu.model.value(c).initializer)) << v.name;
        }
    }
}

TEST(TrainOnDevice, ReducedPrecisionNeedsTheCudaBackend) {
  RegisterAllOps();
  auto s = LoadModel(Src("models/mlp.onnx"));
  ASSERT_TRUE(s.ok());
  TrainOptions o;
  o.alpha = 0;
  o.precision = Precision::kBf16;
  auto tr = Trainer::Create(*s, nullptr, o);
  ASSERT_FALSE(tr.ok());
  EXPECT_NE(tr.status().message().find("precision bf16 needs the cuda backend"), std::string::npos)
      << tr.status().message();
}

}  // namespace
}  // namespace whittle::training
