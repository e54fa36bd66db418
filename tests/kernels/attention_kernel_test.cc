// ai.whittle Attention (the runtime's fused attention) on every tested backend against the
// reference loops: the CPU's register tiles and, where a GPU is present, the CUDA kernel's
// strided-batched products (Q, K, V read in place from the packed rows) with a softmax between.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "lib/ir/domain.h"
#include "lib/ops/op_def.h"
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

}  // namespace
}  // namespace whittle
