// ai.whittle Attention (the runtime's fused attention) on every tested backend against the
// reference loops: the CPU's register tiles and, where a GPU is present, the CUDA kernel's
// strided-batched products (Q, K, V read in place from the packed rows) with a softmax between.
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <string>
#include <vector>

#include "kernels/common/attention_shape.h"
#include "kernels/cuda/softmax_body.h"
#include "lib/ir/domain.h"
#include "lib/ops/op_def.h"
#include "runtime/node_runner.h"
#include "tests/util/test_util.h"

namespace whittle {
namespace {

using testing::ExpectBackendsMatchReference;
using testing::MakeNode;
using testing::RandomFloat;

TEST(AttentionKernel, BackendsMatchReference) {
  RegisterAllOps();
  struct Case {
    int64_t b, n, heads, d;
    bool scale_input;
  };
  // One token; a ViT on 28x28 at batch 2 and 64 (50 tokens, 4 heads of 16); odd sizes with the
  // scale given as an input; a ViT-B-like head (197 tokens, 64 wide).
  const Case cases[] = {{1, 1, 1, 1, false}, {2, 50, 4, 16, false}, {3, 17, 2, 8, true}, {64, 50, 4, 16, false},
                        {1, 197, 3, 64, true}};
  uint32_t seed = 1;
  for (const Case& c : cases)
    for (bool as_const : {false, true}) {
      SCOPED_TRACE("b " + std::to_string(c.b) + " n " + std::to_string(c.n) + " heads " + std::to_string(c.heads) +
                   " d " + std::to_string(c.d) + (c.scale_input ? " scale input" : "") + (as_const ? " const" : ""));
      AttributeMap a;
      a.Set("heads", Attribute::Int(c.heads));
      a.Set("head_dim", Attribute::Int(c.d));
      a.Set("scale", Attribute::Float(0.25f));
      std::vector<Tensor> in{RandomFloat({c.b, c.n, 3 * c.heads * c.d}, seed++)};
      if (c.scale_input) in.push_back(Tensor::FromVector<float>({1}, {0.7f}));
      const Node node = MakeNode("Attention", static_cast<int>(in.size()), 1, a, kWhittleDomain);
      ExpectBackendsMatchReference(node, in, 1e-4f, 1e-4f, 17, 2, as_const);
    }
}

// The additive mask, broadcast from the shapes exporters give it (a [N, N] causal mask, a
// [B, 1, 1, N] padding mask, a full [B, H, N, N] one), on every backend.
const std::vector<Dims> kMaskDims = {{5, 5}, {2, 1, 1, 5}, {2, 3, 5, 5}, {1, 3, 5, 1}};

TEST(AttentionKernel, MaskedBackendsMatchReference) {
  RegisterAllOps();
  AttributeMap a;
  a.Set("heads", Attribute::Int(3));
  a.Set("head_dim", Attribute::Int(4));
  a.Set("scale", Attribute::Float(0.5f));
  uint32_t seed = 40;
  for (const Dims& md : kMaskDims) {
    SCOPED_TRACE("mask " + DimsToString(md));
    const std::vector<Tensor> in{RandomFloat({2, 5, 36}, seed++), Tensor::FromVector<float>({1}, {0.7f}),
                                 RandomFloat(md, seed++, -4.f, 0.f)};
    ExpectBackendsMatchReference(MakeNode("Attention", 3, 1, a, kWhittleDomain), in, 1e-4f, 1e-4f);
  }
}

// The CUDA Attention's masked softmax, run on the CPU: per chunk of one batch entry and per head,
// scores = scale Q K^T (cuBLAS's part, plain loops here), then the softmax kernel's rows read
// through SoftmaxInput with the mask laid out as kernels/cuda/attention.cc lays it out, then P V.
TEST(AttentionKernel, CudaMaskedSoftmaxLayoutMatchesReference) {
  RegisterAllOps();
  const int64_t B = 2, N = 5, H = 3, D = 4;
  const float scale = 0.5f, scale_in = 0.7f;
  AttributeMap a;
  a.Set("heads", Attribute::Int(H));
  a.Set("head_dim", Attribute::Int(D));
  a.Set("scale", Attribute::Float(scale));
  uint32_t seed = 60;
  for (const Dims& md : kMaskDims) {
    SCOPED_TRACE("mask " + DimsToString(md));
    const Tensor x = RandomFloat({B, N, 3 * H * D}, seed++), mask = RandomFloat(md, seed++, -4.f, 0.f);
    auto want = RunNode(MakeNode("Attention", 3, 1, a, kWhittleDomain), 17,
                        {x, Tensor::FromVector<float>({1}, {scale_in}), mask}, Backend::kReference);
    ASSERT_TRUE(want.ok()) << want.status().message();
    int64_t ms[4];
    ASSERT_TRUE(AttentionMaskStrides(mask, B, H, N, ms).ok());
    Tensor got(DType::kFloat32, {B, N, H * D});
    const float* q = x.data<float>();
    for (int64_t b0 = 0; b0 < B; ++b0)  // a chunk of one batch entry, so b0 offsets the mask
      for (int64_t hi = 0; hi < H; ++hi) {
        std::vector<float> s(static_cast<size_t>(N * N));
        for (int64_t i = 0; i < N; ++i)
          for (int64_t j = 0; j < N; ++j) {
            float acc = 0.f;
            for (int64_t k = 0; k < D; ++k)
              acc += q[(b0 * N + i) * 3 * H * D + hi * D + k] * q[(b0 * N + j) * 3 * H * D + H * D + hi * D + k];
            s[static_cast<size_t>(i * N + j)] = scale * acc;
          }
        cuda::SoftmaxMask m{mask.data<float>() + b0 * ms[0] + hi * ms[1], N, ms[0], ms[2], ms[3]};
        for (int64_t r = 0; r < N; ++r) {  // the kernel's three passes over a row
          float mx = -FLT_MAX, sum = 0.f;
          for (int64_t k = 0; k < N; ++k) mx = std::max(mx, cuda::SoftmaxInput(s.data(), scale_in, m, N, r, k));
          for (int64_t k = 0; k < N; ++k) sum += std::exp(cuda::SoftmaxInput(s.data(), scale_in, m, N, r, k) - mx);
          for (int64_t j = 0; j < D; ++j) {
            float acc = 0.f;
            for (int64_t k = 0; k < N; ++k)
              acc += std::exp(cuda::SoftmaxInput(s.data(), scale_in, m, N, r, k) - mx) / sum *
                     q[(b0 * N + k) * 3 * H * D + 2 * H * D + hi * D + j];
            got.data<float>()[(b0 * N + r) * H * D + hi * D + j] = acc;
          }
        }
      }
    EXPECT_TRUE(testing::TensorsClose(got, (*want)[0], 1e-5f, 1e-5f));
  }
}

}  // namespace
}  // namespace whittle
