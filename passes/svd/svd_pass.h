// SVD low-rank factorization pass (`--svd`): Gemm/MatMul with a constant weight W ≈ U·V as two
// standard ops (bias on the second); Conv as channel (k×k with r filters, then 1×1) or spatial
// (k×1 then 1×k) factorization. Rank by rank=N, energy=E, or a global ratio=R allocated across
// layers by measured sensitivity on the calibration data.
#pragma once

#include <memory>

#include "passes/pass.h"
#include "passes/pass_options.h"

namespace whittle {

// Validates the options (unknown keys, ranges) and returns the configured pass.
StatusOr<std::unique_ptr<Pass>> MakeSvdPass(PassOptions options);
// One paragraph for --help: every option with its default.
const char* SvdPassHelp();

}  // namespace whittle
