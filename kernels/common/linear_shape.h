// Gemm, MatMul and Einsum shape resolution and attributes, shared by every backend: MatMulPlan implements
// numpy matmul semantics (1-D promotion, batch dims broadcast), GemmBias describes how Gemm's C
// broadcasts to [M, N], and LinearFns is the per-backend table of kernel builders. Attributes are
// parsed and checked once (supported dtype; a fused activation only on float32) by the family's
// factory in kernels/linear_kernels.cc.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/common/fused_activation.h"
#include "kernels/kernel.h"
#include "lib/ir/einsum.h"

namespace whittle {

// Numpy matmul of A (dims a, rank ra >= 1) and B (rank rb >= 1).
struct MatMulPlan {
  int64_t M = 1, N = 1, K = 0;
  int64_t batch = 1;                    // product of the broadcast batch dims
  Dims out_dims;                        // final output dims (promoted 1-D dims removed)
  std::vector<int64_t> out_batch;       // broadcast batch dims
  std::vector<int64_t> a_step, b_step;  // per batch dim: matrices to skip (0 where broadcast)
  bool b_shared = true;                 // every batch uses the same B matrix
  bool a_contiguous = true;             // batch i uses A matrix i (A batches can fold into M)

  Status Resolve(const Dims& a, const Dims& b);
  // Matrix indices (in units of M*K and K*N elements) of A and B for flat batch index i.
  void Offsets(int64_t i, int64_t* a_mat, int64_t* b_mat) const;
};

// How Gemm's C (rank 0..2) maps onto [M, N]: element (i, j) is c[i*row_step + j*col_step].
struct GemmBias {
  int64_t row_step = 0, col_step = 0;
  static StatusOr<GemmBias> Resolve(const Dims& c, int64_t M, int64_t N);
};

// Gemm dims from A and B dims and the transpose flags.
Status ResolveGemmDims(const Dims& a, const Dims& b, bool trans_a, bool trans_b, int64_t* M, int64_t* N,
                       int64_t* K);

// Gemm attributes, checked once.
struct GemmAttrs {
  bool trans_a = false, trans_b = false;
  float alpha = 1.f, beta = 1.f;
  FusedActivation act;
};
StatusOr<GemmAttrs> ParseGemmAttrs(const KernelInit& init);

// MatMul attributes (only Whittle's fused activation), checked once.
struct MatMulAttrs {
  FusedActivation act;
};
StatusOr<MatMulAttrs> ParseMatMulAttrs(const KernelInit& init);

// Einsum attributes: the equation, parsed once (lib/ir/einsum.h), and a supported dtype.
struct EinsumAttrs {
  EinsumEquation equation;
};
StatusOr<EinsumAttrs> ParseEinsumAttrs(const KernelInit& init);

// One Einsum call as a loop nest over every index: the output's axes first (ellipsis dims
// expanded), then the summed axes. strides[i][a] is how far operand i moves along loop axis a
// (the sum of its strides for a repeated label, 0 where it lacks the axis or broadcasts a size-1 dim).
struct EinsumPlan {
  Dims out_dims;
  std::vector<int64_t> sizes;  // per loop axis
  size_t out_axes = 0;         // the first out_axes loop axes are the output's dims, in order
  std::vector<std::vector<int64_t>> strides;
  Status Resolve(const EinsumEquation& eq, const std::vector<Dims>& inputs);
};

// A backend's Gemm/MatMul/Einsum builders (nullptr, or an ok null kernel: the reference builds it).
struct LinearFns {
  KernelOr (*gemm)(const GemmAttrs& a, const KernelInit& init);
  KernelOr (*matmul)(const MatMulAttrs& a, const KernelInit& init);
  KernelOr (*einsum)(const EinsumAttrs& a, const KernelInit& init);
};

}  // namespace whittle
