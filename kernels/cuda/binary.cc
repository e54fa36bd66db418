// The CUDA binarized and weight-shared layers' host side: ai.whittle BinaryMatMul and BinaryConv
// (2-D; activations float or binary; a fused Relu) and CodebookMatMul (4 or 8 bits), whose
// weights, scales and bias are constants — as compress-model writes them. The factory checks
// them as the CPU's does (a hostile file is refused the same way: the node is left to the CPU
// factory, which names what is wrong); the session uploads them once, compact as stored, and
// each call runs the tile products of kernels/cuda/binary_body.h on those device copies.
// Computed weights run on the CPU.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "kernels/cuda/binary.h"
#include "kernels/cuda/binary_body.h"
#include "kernels/cuda/cuda_util.h"
#include "kernels/reference/binary.h"
#include "lib/ir/binary_format.h"
#include "lib/ir/codebook_format.h"

namespace whittle::cuda {
namespace {

// The weight inputs 1, 2 and (when present) 3 are constants and input 0 is float32.
bool ConstantWeights(const KernelInit& init) {
  return InputDType(init, 0) == DType::kFloat32 && ConstInput(init, 1) && ConstInput(init, 2) &&
         ConstantInputs(init, {3});
}

// The shared part of both binary layers' attributes; false where the CPU factory would refuse
// them (it then says why).
bool ReadBinary(const KernelInit& init, const char* n_name, int64_t k, BinaryAttrs* b) {
  Unary act;
  if (!FusedKind(init.attrs, &act)) return false;
  auto binary = ParseBinaryActivations(init.attrs.GetString("activations", "float"));
  if (!binary.ok()) return false;
  b->n = init.attrs.GetInt(n_name, 0);
  b->k = k;
  b->binary = *binary;
  b->relu = act == Unary::kRelu;
  return b->n >= 1 && b->k >= 1 &&
         CheckBinaryTensors(*b, *ConstInput(init, 1), *ConstInput(init, 2), ConstInput(init, 3), true).ok();
}

// The constant inputs' device copies (the session uploads a device kernel's constants once, at
// load): BinaryMatMul's bits and alpha, or CodebookMatMul's codebook and indices; the bias.
void PointAtInputs(const KernelContext& ctx, BLinear* l) {
  if (l->decode == BDecode::kSigns) {
    l->signs = ctx.inputs[1]->data<uint64_t>();
    l->alpha = ctx.inputs[2]->data<float>();
  } else {
    l->codebook = ctx.inputs[1]->data<float>();
    l->index = ctx.inputs[2]->data<uint8_t>();
  }
  l->bias = ctx.inputs.size() > 3 && ctx.inputs[3] ? ctx.inputs[3]->data<float>() : nullptr;
}

// y [rows, N] from x [..., K] through RunBLinear (XNOR scratch: sign bits and beta of a slice).
KernelOr LinearKernel(const KernelInit& init, const BLinear& layer) {
  const std::string node = init.node_name;
  return Kernel([=](KernelContext& ctx) -> Status {
    BLinear l = layer;
    PointAtInputs(ctx, &l);
    const Tensor& x = *ctx.inputs[0];
    Tensor& y = *ctx.outputs[0];
    if (x.rank() < 1 || x.dims().back() != l.K)
      return InvalidArgument(node + ": the input's last dim must be " + std::to_string(l.K) + ", got " +
                             DimsToString(x.dims()));
    const int64_t rows = x.numel() / l.K;
    if (y.numel() != rows * l.N) return InvalidArgument(node + ": output has the wrong size " + DimsToString(y.dims()));
    if (rows == 0) return Status::Ok();
    uint64_t* abits = nullptr;
    float* beta = nullptr;
    if (l.binary) {
      const int64_t slice = std::min(rows, kBMaxGridYZ * kBTileM), words = BCeil(l.K, 64);
      WH_ASSIGN_OR_RETURN(void* p, Scratch(static_cast<size_t>(slice * (words * 8 + 4)), 1));
      abits = static_cast<uint64_t*>(p);
      beta = reinterpret_cast<float*>(abits + slice * words);
    }
    RunBLinear(CudaBLaunches(), l, x.data<float>(), rows, y.data<float>(), abits, beta);
    return Launched(l.binary ? "BinaryMatMul" : "a decoding MatMul");
  });
}

KernelOr MakeBinaryMatMul(const KernelInit& init) {
  BinaryAttrs b;
  if (!ConstantWeights(init) || !ReadBinary(init, "out_features", init.attrs.GetInt("in_features", 0), &b))
    return KernelOr(nullptr);
  BLinear l;
  l.N = b.n;
  l.K = b.k;
  l.binary = b.binary;
  l.relu = b.relu;
  return LinearKernel(init, l);
}

KernelOr MakeCodebookMatMul(const KernelInit& init) {
  Unary act;
  const CodebookAttrs a = CodebookAttrsOf(init.attrs);
  if (!ConstantWeights(init) || !FusedKind(init.attrs, &act) ||
      !CheckCodebookTensors(a, *ConstInput(init, 1), *ConstInput(init, 2), ConstInput(init, 3), true).ok())
    return KernelOr(nullptr);
  BLinear l;
  l.N = a.n;
  l.K = a.k;
  l.decode = a.bits == 4 ? BDecode::kCodebook4 : BDecode::kCodebook8;
  l.relu = act == Unary::kRelu;
  return LinearKernel(init, l);
}

KernelOr MakeBinaryConv(const KernelInit& init) {
  BinaryConvAttrs a;
  auto window = ParseWindowAttrs(init.attrs);
  if (!ConstantWeights(init) || !window.ok() || window->kernel_shape.size() != 2) return KernelOr(nullptr);
  a.window = *window;
  a.in_channels = init.attrs.GetInt("in_channels", 0);
  a.group = init.attrs.GetInt("group", 1);
  const int64_t m = init.attrs.GetInt("out_channels", 0);
  if (a.group < 1 || a.group > kBMaxGridYZ || a.in_channels < 1 || a.in_channels % a.group != 0 || m % a.group != 0)
    return KernelOr(nullptr);
  const int64_t k = a.in_channels / a.group * a.window.kernel_shape[0] * a.window.kernel_shape[1];
  if (!ReadBinary(init, "out_channels", k, &a.b)) return KernelOr(nullptr);
  BConv c;
  c.M = a.b.n;
  c.binary = a.b.binary;
  c.relu = a.b.relu;
  const std::string node = init.node_name;
  return Kernel([=](KernelContext& ctx) -> Status {
    const Tensor& x = *ctx.inputs[0];
    Tensor& y = *ctx.outputs[0];
    ConvShape s;
    Status shape = ResolveBinaryConv(a, x, &s);
    if (!shape.ok()) return InvalidArgument(node + ": " + shape.message());
    BConv call = c;
    call.signs = ctx.inputs[1]->data<uint64_t>();
    call.alpha = ctx.inputs[2]->data<float>();
    call.bias = ctx.inputs.size() > 3 && ctx.inputs[3] ? ctx.inputs[3]->data<float>() : nullptr;
    call.g = BConvGeometryOf(s, a.b.k);
    const BConvGeometry& g = call.g;
    const Dims y_dims{s.batch, c.M, g.win.out_h, g.win.out_w};
    if (y.dims() != y_dims)
      return InvalidArgument(node + ": output is " + DimsToString(y.dims()) + ", expected " + DimsToString(y_dims));
    if (y.numel() == 0) return Status::Ok();
    if (BCeil(g.P(), kBTileM) > kBMaxGridYZ)
      return Unimplemented(node + ": the CUDA BinaryConv takes up to " + std::to_string(kBMaxGridYZ * kBTileM) +
                           " output positions per image");
    // About 128 MB of scratch at a time.
    const int64_t per_image = std::max<int64_t>(1, BConvScratchBytes(call, 1, 1));
    const int64_t chunk =
        std::max<int64_t>(1, std::min({s.batch, kBMaxGridYZ / a.group, (int64_t{128} << 20) / per_image}));
    WH_ASSIGN_OR_RETURN(void* scratch, Scratch(static_cast<size_t>(BConvScratchBytes(call, chunk, s.batch)), 1));
    RunBConv(CudaBLaunches(), call, x.data<float>(), s.batch, chunk, y.data<float>(), scratch);
    return Launched("BinaryConv");
  });
}

}  // namespace

void RegisterBinaryCodebookKernels(KernelRegistry& r) {
  DeclareCudaKernel(r, kWhittleDomain, "BinaryMatMul", {DType::kFloat32}, MakeBinaryMatMul);
  DeclareCudaKernel(r, kWhittleDomain, "BinaryConv", {DType::kFloat32}, MakeBinaryConv);
  DeclareCudaKernel(r, kWhittleDomain, "CodebookMatMul", {DType::kFloat32}, MakeCodebookMatMul);
}

}  // namespace whittle::cuda
