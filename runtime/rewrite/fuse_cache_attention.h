// Gives ai.onnx Attention (opset 23) its key/value cache back where an exporter wrote the cache
// outside it. torch.onnx's dynamo export of a Hugging Face decoder writes, per layer,
//   present = Concat(past, new, axis=2)                  (a past_key_values.* input, this call's rows)
//   k = Reshape(Expand(Unsqueeze(present, 2), [B, kv, reps, T, d]), [B, kv*reps, T, d])
//                                                        (grouped-query heads repeated; absent
//                                                         when every query head has its own)
//   y = Attention(q, k, v, mask)
// which is Attention(q, new_k, new_v, mask, past_k, past_v) -> (y, present_k, present_v): the op
// then reads each key/value head in place for its query heads (never the repeated copy) and, under
// Session::RunWithCaches, grows the cache in place instead of concatenating it per step. Fused
// only where it is exactly that: 4-D operands, no is_causal (its diagonal moves with a past), the
// repeat chain read by nothing else, the heads and head size known, the past a graph input.
// Below opset 23 the TorchScript export writes the attention itself out,
//   y = MatMul(Softmax(Add(Mul(MatMul(q, Transpose(k, [0, 1, 3, 2])), scale), mask)), v)
// over the same cache operands; that becomes ai.whittle GroupedAttention, the same op and kernel
// with the mask broadcasting as the Add did.
#pragma once

#include "lib/ir/graph.h"
#include "lib/ir/status.h"

namespace whittle {

Status FuseCacheAttention(Graph& g, int* count);

}  // namespace whittle
