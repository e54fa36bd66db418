// The stand-in device's test ops (device_test_ops.h).
#include "tests/util/device_test_ops.h"

#include <cstring>
#include <mutex>
#include <optional>
#include <utility>

#include "lib/ops/op_def.h"
#include "tests/util/fake_device.h"
#include "tests/util/graph_builder.h"
#include "tests/util/test_util.h"

namespace whittle::testing {
namespace {

// test.device DevAffine(X[, B]) = 2 X (+ B), float32, B of X's shape.
class DevAffine : public OpKernel {
 public:
  explicit DevAffine(DeviceType d) : d_(d) {}
  DeviceType device() const override { return d_; }
  Status Compute(KernelContext& ctx) const override {
    auto on_device = [&](const Tensor* t) {
      if (!t || t->device() != d_) return false;
      // The bytes must be the stand-in device's own.
      return d_ == DeviceType::kCpu || ActiveFakeDevice()->Owns(t->buffer()->data());
    };
    for (const Tensor* t : ctx.inputs)
      if (t && !on_device(t)) return Internal("DevAffine got a tensor that is not on its device");
    if (!on_device(ctx.outputs[0])) return Internal("DevAffine's output is not on its device");
    const float* x = ctx.inputs[0]->data<float>();
    const float* b = ctx.inputs.size() > 1 && ctx.inputs[1] ? ctx.inputs[1]->data<float>() : nullptr;
    float* y = ctx.outputs[0]->data<float>();
    const int64_t n = ctx.inputs[0]->numel();
    auto work = [x, b, y, n] {
      for (int64_t i = 0; i < n; ++i) y[i] = 2.f * x[i] + (b ? b[i] : 0.f);
    };
    if (d_ == DeviceType::kCpu) work();
    else FakeDeviceWork(work);  // recorded while the session captures a graph
    return Status::Ok();
  }

 private:
  DeviceType d_;
};

// test.device DevCopy(X) = X, any dtype, on the device (its inference reads no value).
class DevCopy : public OpKernel {
 public:
  DeviceType device() const override { return DeviceType::kCuda; }
  Status Compute(KernelContext& ctx) const override {
    if (!ActiveFakeDevice()->Owns(ctx.inputs[0]->buffer()->data())) return Internal("DevCopy's input is not on its device");
    void* y = ctx.outputs[0]->raw_data();
    const void* x = ctx.inputs[0]->raw_data();
    const size_t bytes = ctx.inputs[0]->nbytes();
    FakeDeviceWork([y, x, bytes] { std::memcpy(y, x, bytes); });
    return Status::Ok();
  }
};

// test.device DevFail(X): a device kernel that fails before it queues any work.
class DevFail : public OpKernel {
 public:
  DeviceType device() const override { return DeviceType::kCuda; }
  Status Compute(KernelContext&) const override { return InvalidArgument("DevFail refuses"); }
};

}  // namespace

// Registers test.device `op` (inputs min..max; output 0 of input 0's shape and dtype) with a
// kernel factory.
void RegisterDeviceOp(const char* op, int min_inputs, int max_inputs, KernelFactory make) {
  OpDef d;
  d.domain = "test.device";
  d.op_type = op;
  d.min_inputs = min_inputs;
  d.max_inputs = max_inputs;
  d.infer = [](InferContext& ctx) {
    ctx.SetOutput(0, ctx.InputDType(0), ctx.InputShape(0) ? std::optional<SymShape>(*ctx.InputShape(0)) : std::nullopt);
    return Status::Ok();
  };
  OpRegistry::Global().Register(std::move(d));
  KernelRegistry::Global().Register("test.device", op, std::move(make));
}

void RegisterDevAffine() {
  static std::once_flag once;
  std::call_once(once, [] {
    RegisterDeviceOp("DevAffine", 1, 2, [](const KernelInit& init) -> KernelOr {
      return std::unique_ptr<OpKernel>(
          new DevAffine(init.backend == Backend::kCuda ? DeviceType::kCuda : DeviceType::kCpu));
    });
  });
}

void RegisterDevCopy() {
  static std::once_flag once;
  std::call_once(once, [] {
    RegisterDeviceOp("DevCopy", 1, 1, [](const KernelInit&) -> KernelOr { return std::unique_ptr<OpKernel>(new DevCopy); });
  });
}

void RegisterDevFail() {
  static std::once_flag once;
  std::call_once(once, [] {
    RegisterDeviceOp("DevFail", 1, 1, [](const KernelInit&) -> KernelOr { return std::unique_ptr<OpKernel>(new DevFail); });
  });
}

// g with its test ops (the ops named Dev*) in the test.device domain.
Graph OnTestDevice(Graph g) {
  for (Node& n : g.nodes())
    if (n.op_type.rfind("Dev", 0) == 0) n.domain = "test.device";
  g.opset_imports["test.device"] = 1;
  return g;
}

// A session of g (after OnTestDevice) on the CUDA backend, i.e. the stand-in device.
StatusOr<std::unique_ptr<Session>> LoadOnDevice(Graph g) {
  SessionOptions o;
  o.backend = Backend::kCuda;
  return Session::FromGraph(OnTestDevice(std::move(g)), o);
}

// x -> DevAffine -> Relu (CPU) -> DevAffine(+ constant) -> Reshape (alias) -> Add (CPU) -> DevAffine
Graph MakeMixed() {
  Graph g = GraphBuilder(17)
                .Input("x", DType::kFloat32, {2, 3})
                .Init("bias", RandomFloat({2, 3}, 2))
                .Init("shape", Tensor::FromVector<int64_t>({2}, {3, 2}))
                .Init("c", RandomFloat({3, 2}, 3))
                .Op("DevAffine", {"x"}, {"a"})
                .Op("Relu", {"a"}, {"r"})
                .Op("DevAffine", {"r", "bias"}, {"b"})
                .Op("Reshape", {"b", "shape"}, {"s"})
                .Op("Add", {"s", "c"}, {"t"})
                .Op("DevAffine", {"t"}, {"y"})
                .Output("y")
                .Build();
  return OnTestDevice(std::move(g));
}

}  // namespace whittle::testing
