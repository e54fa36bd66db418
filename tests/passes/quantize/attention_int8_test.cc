// --int8 attention=1 on an exported transformer: the activation x activation MatMuls of attention
// (Q·Kᵀ, softmax·V) are quantized too, and the model stays close to float. --int8 on PyTorch's
// nn.TransformerEncoderLayer export: its Linear biases (MatMul -> Add) and its head reshapes
// (Reshape, Unsqueeze, Transpose, Squeeze, Gather of q/k/v) run in int8 in the runtime.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "lib/data/dataset.h"
#include "lib/onnx/model_io.h"
#include "runtime/evaluate.h"
#include "runtime/session_internal.h"
#include "tests/passes/pass_test_util.h"
#include "tests/util/test_util.h"
#include "whittle/session.h"

namespace whittle {
namespace {

TEST(Int8Attention, QuantizesTheActivationMatMulsOfAnExportedTransformer) {
  auto loaded = LoadModel(std::string(WHITTLE_SOURCE_DIR) + "/tests/corpus/patch_transformer_op17.onnx");
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  const Graph original = *loaded;
  auto calib = MakeDataset(testing::RandomFloat({64, 1, 28, 28}, 1, 0.f, 1.f), Tensor(), "random");
  ASSERT_TRUE(calib.ok());
  PassContext ctx;
  ctx.calibration = &*calib;
  Graph g = original;
  auto r = testing::RunPass(g, "int8", "attention=1", ctx);
  ASSERT_TRUE(r.ok()) << r.status().message();
  int weights = 0, activations = 0, skipped = 0;
  for (const LayerReport& l : r->layers) {
    if (l.action == "skipped") ++skipped;
    else if (l.detail.find("activations x activations") != std::string::npos) ++activations;
    else ++weights;
  }
  EXPECT_EQ(weights, 10);
  EXPECT_EQ(activations, 4);
  EXPECT_EQ(skipped, 0);
  // Close to float: random weights make the logits of different classes close, so agreement is
  // checked on the logits themselves (relative to their spread).
  const Tensor x = testing::RandomFloat({32, 1, 28, 28}, 2, 0.f, 1.f);
  auto s0 = Session::FromGraph(original);
  ASSERT_TRUE(s0.ok());
  auto y0 = (*s0)->Run({{"input", x}});
  ASSERT_TRUE(y0.ok());
  double var = 0, mean = 0;
  const Tensor& f = (*y0)[0];
  for (int64_t i = 0; i < f.numel(); ++i) mean += f.data<float>()[i];
  mean /= static_cast<double>(f.numel());
  for (int64_t i = 0; i < f.numel(); ++i) var += (f.data<float>()[i] - mean) * (f.data<float>()[i] - mean);
  var /= static_cast<double>(f.numel());
  EXPECT_LT(testing::OutputMse(original, g, "input", x), 0.05 * var);
  // Refused where both inputs cannot get QDQ pairs.
  Graph h = original;
  EXPECT_FALSE(testing::RunPass(h, "int8", "attention=1,format=qoperator", ctx).ok());
}

// PyTorch writes a Linear on [B, S, D] as MatMul -> Add(bias), and nn.MultiheadAttention splits
// q, k and v out of the in-projection with Reshape/Unsqueeze/Transpose/Squeeze/Gather. --int8 keeps
// each bias Add before the layer's output QuantizeLinear, so the runtime runs it as the QGemm's
// int32 bias, and quantizes through the head reshapes, which the runtime runs on the bytes.
TEST(Int8Attention, TorchLinearBiasesAndHeadReshapesRunInInt8) {
  auto loaded = LoadModel(std::string(WHITTLE_SOURCE_DIR) + "/tests/corpus/torch_encoder_int64_op17.onnx");
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  const Graph original = *loaded;
  Tensor ids(DType::kInt64, {64, 12});
  for (int64_t i = 0; i < ids.numel(); ++i) ids.data<int64_t>()[i] = (i * 37 + 11) % 100;
  auto calib = MakeDataset(ids, Tensor(), "ids");
  ASSERT_TRUE(calib.ok()) << calib.status().message();
  PassContext ctx;
  ctx.calibration = &*calib;
  Graph g = original;
  auto r = testing::RunPass(g, "int8", "calibration=minmax", ctx);
  ASSERT_TRUE(r.ok()) << r.status().message();
  auto s = Session::FromGraph(g);
  ASSERT_TRUE(s.ok()) << s.status().message();
  const Graph& h = SessionGraph(**s);
  int qgemm = 0, bias_adds = 0, dq_into_moves = 0, moves_on_bytes = 0;
  for (const Node& n : h.nodes()) {
    if (n.op_type == "QGemm") ++qgemm;
    for (int in : n.inputs) {
      if (in < 0 || h.value(in).producer < 0) continue;
      const Node& p = h.nodes()[static_cast<size_t>(h.value(in).producer)];
      // A bias Add left outside a layer: a constant added to a quantized layer's output.
      const int other = n.inputs.size() == 2 ? n.inputs[in == n.inputs[0] ? 1 : 0] : -1;
      if (n.op_type == "Add" && other >= 0 && h.value(other).is_constant() &&
          (p.op_type == "QGemm" || p.op_type == "DequantizeLinear"))
        ++bias_adds;
      const bool move = n.op_type == "Reshape" || n.op_type == "Unsqueeze" || n.op_type == "Transpose" ||
                        n.op_type == "Squeeze" || n.op_type == "Gather";
      if (move && in == n.inputs[0] && p.op_type == "DequantizeLinear") ++dq_into_moves;
    }
    if ((n.op_type == "Transpose" || n.op_type == "Squeeze" || n.op_type == "Gather") && !n.inputs.empty() &&
        h.value(n.inputs[0]).dtype == DType::kUInt8)
      ++moves_on_bytes;
  }
  EXPECT_EQ(qgemm, 5);  // in-projection, out-projection, the two feed-forward Linears, the classifier
  EXPECT_EQ(bias_adds, 0);  // every bias is inside its QGemm
  EXPECT_EQ(dq_into_moves, 0);
  EXPECT_GE(moves_on_bytes, 5);  // Transpose, Squeeze and q/k/v Gathers
  // Close to float.
  auto s0 = Session::FromGraph(original);
  ASSERT_TRUE(s0.ok());
  Tensor x(DType::kInt64, {8, 12});
  for (int64_t i = 0; i < x.numel(); ++i) x.data<int64_t>()[i] = (i * 53 + 7) % 100;
  auto y0 = (*s0)->Run({{"ids", x}});
  auto y1 = (*s)->Run({{"ids", x}});
  ASSERT_TRUE(y0.ok() && y1.ok());
  double err = 0, mag = 0;
  for (int64_t i = 0; i < (*y0)[0].numel(); ++i) {
    err = std::max(err, std::fabs(static_cast<double>((*y0)[0].data<float>()[i] - (*y1)[0].data<float>()[i])));
    mag = std::max(mag, std::fabs(static_cast<double>((*y0)[0].data<float>()[i])));
  }
  EXPECT_LT(err, 0.1 * mag);
}

}  // namespace
}  // namespace whittle
