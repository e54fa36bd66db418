// Fuses the bias Add that exporters write after a Linear layer's MatMul (PyTorch on 3-D inputs,
// Keras Dense, Paddle fc): MatMul(A, W) -> Add(., b) with W a constant [K, N] and b a float32
// constant of N values broadcast along the last dim ([N] or [1, ..., 1, N], no more dims than the
// product) becomes one MatMul with b as an internal third input, added in the GEMM's epilogue (and
// then an activation the activation fusion moves in). The product must be read only by the Add.
#pragma once

#include "lib/ir/graph.h"
#include "lib/ir/status.h"

namespace whittle {

Status FuseMatMulBias(Graph& g, int* count);

}  // namespace whittle
