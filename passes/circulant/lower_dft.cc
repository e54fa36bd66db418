// LowerCirculantDft (passes/circulant/circulant_pass.h): a BlockCirculantMatMul as standard ONNX
// with the DFT op (opset 17), the same computation Whittle's kernel makes: block (p, q) of W is the
// circulant of blocks[p, q, :], W[pB+i, qB+j] = c[(i - j) mod B], so each output block is a sum
// over q of circular convolutions c_pq * x_q, and in the frequency domain
//   Y_p[f] = sum_q C_pq[f] X_q[f]      (C = DFT(c), X = DFT(x), complex),
// computed per frequency f as two real batched MatMuls [B, M, Q] x [B, Q, P] for each of the four
// real/imaginary products; then y_p = IDFT(Y_p), real part. The spectra C are constants.
#include <cmath>
#include <string>
#include <vector>

#include "lib/ir/circulant_format.h"
#include "lib/ir/domain.h"
#include "lib/ops/schema_compat.h"
#include "passes/circulant/circulant_pass.h"
#include "passes/circulant/lowering.h"
#include "passes/lowering.h"

namespace whittle {

namespace {

// Raises g's default-domain opset to 17 (DFT's first) when every op it has is unchanged in
// between; else says which op blocks it.
Status EnsureOpset17(Graph& g) {
  const int64_t from = g.OpsetFor("");
  if (from >= 17) return Status::Ok();
  for (const Node& n : g.nodes()) {
    if (!n.domain.empty() && n.domain != "ai.onnx") continue;
    std::string why;
    if (!OpUnchangedBetween(n.op_type, from, 17, &why))
      return Unimplemented("the DFT lowering needs opset 17 and " + n.DebugName() + " changed since opset " +
                           std::to_string(from) + ": " + why);
  }
  g.opset_imports[""] = 17;
  return Status::Ok();
}

}  // namespace

StatusOr<int> LowerCirculantDft(Graph& g) {
  bool any = false;
  for (const Node& n : g.nodes()) any = any || IsCirculantNode(n);
  if (!any) return 0;
  WH_RETURN_IF_ERROR(EnsureOpset17(g));
  const bool axis_input = g.OpsetFor("") >= 20;
  return LowerEachNode(
      g, IsCirculantNode,
      [&](const Node& node) -> Status {
        WH_ASSIGN_OR_RETURN(const CirculantLayer layer, ReadCirculantLayer(g, node));
        const CirculantAttrs& a = layer.a;
        const int64_t B = a.block, P = a.p(), Q = a.q();
        // The blocks' spectra, laid out [f, q, p] for the per-frequency MatMuls.
        Tensor wr(DType::kFloat32, {B, Q, P}), wi(DType::kFloat32, {B, Q, P});
        const float* c = layer.blocks->data<float>();
        for (int64_t p = 0; p < P; ++p)
          for (int64_t q = 0; q < Q; ++q)
            for (int64_t f = 0; f < B; ++f) {
              double re = 0, im = 0;
              for (int64_t t = 0; t < B; ++t) {
                const double ang = -2.0 * M_PI * static_cast<double>(f * t % B) / static_cast<double>(B);
                re += c[(p * Q + q) * B + t] * std::cos(ang);
                im += c[(p * Q + q) * B + t] * std::sin(ang);
              }
              wr.data<float>()[(f * Q + q) * P + p] = static_cast<float>(re);
              wi.data<float>()[(f * Q + q) * P + p] = static_cast<float>(im);
            }
        auto ints = [&](const std::string& what, std::vector<int64_t> v) {
          const int64_t len = static_cast<int64_t>(v.size());
          return g.AddInitializer(g.UniqueName(node.name + "/" + what), Tensor::FromVector<int64_t>({len}, std::move(v)));
        };
        auto scalar = [&](const std::string& what, int64_t v) {
          return g.AddInitializer(g.UniqueName(node.name + "/" + what), Tensor::Scalar<int64_t>(v));
        };
        auto add = [&](const std::string& op, std::vector<int> in, AttributeMap at = {}) {
          return g.AddOp(node.name + "/dft_" + op, op, std::move(in), std::move(at));
        };
        auto attrs = [](std::initializer_list<std::pair<const char*, Attribute>> l) {
          AttributeMap m;
          for (const auto& [k, v] : l) m.Set(k, v);
          return m;
        };
        auto dft = [&](int x, bool inverse) {
          AttributeMap at = attrs({{"inverse", Attribute::Int(inverse ? 1 : 0)}, {"onesided", Attribute::Int(0)}});
          if (axis_input) return add("DFT", {x, -1, scalar("dft_axis", 2)}, at);
          at.Set("axis", Attribute::Int(2));
          return add("DFT", {x}, at);
        };
        auto part = [&](int x, int64_t which) {  // real (0) or imaginary (1) part of [..., 2]
          return add("Gather", {x, scalar(which ? "imag" : "real", which)}, attrs({{"axis", Attribute::Int(3)}}));
        };
        const int a_in = node.inputs[0];
        const int lead = add("Slice", {add("Shape", {a_in}), ints("lead_start", {0}), ints("lead_end", {-1})});
        int x2 = add("Reshape", {a_in, ints("rows", {-1, a.k})});
        if (Q * B > a.k) x2 = add("Pad", {x2, ints("pad", {0, 0, 0, Q * B - a.k})});
        const int X = dft(add("Reshape", {x2, ints("signals", {-1, Q, B, 1})}), false);  // [M, Q, B, 2]
        const std::vector<int64_t> to_fmq{2, 0, 1};
        const int xr = add("Transpose", {part(X, 0)}, attrs({{"perm", Attribute::Ints(to_fmq)}}));  // [B, M, Q]
        const int xi = add("Transpose", {part(X, 1)}, attrs({{"perm", Attribute::Ints(to_fmq)}}));
        const int wrv = g.AddInitializer(g.UniqueName(node.name + "/spectrum_real"), wr);
        const int wiv = g.AddInitializer(g.UniqueName(node.name + "/spectrum_imag"), wi);
        const int yr = add("Sub", {add("MatMul", {xr, wrv}), add("MatMul", {xi, wiv})});  // [B, M, P]
        const int yi = add("Add", {add("MatMul", {xr, wiv}), add("MatMul", {xi, wrv})});
        const int axis3 = ints("complex_axis", {3});
        const int yc = add("Concat", {add("Unsqueeze", {yr, axis3}), add("Unsqueeze", {yi, axis3})},
                           attrs({{"axis", Attribute::Int(3)}}));  // [B, M, P, 2]
        const int ys = add("Transpose", {yc}, attrs({{"perm", Attribute::Ints({1, 2, 0, 3})}}));  // [M, P, B, 2]
        int y = add("Reshape", {part(dft(ys, true), 0), ints("cols", {-1, P * B})});
        if (P * B > a.n) y = add("Slice", {y, ints("out_start", {0}), ints("out_end", {a.n}), ints("out_axis", {1})});
        if (layer.has_bias) y = add("Add", {y, node.inputs[2]});
        add("Reshape", {y, add("Concat", {lead, ints("features", {a.n})}, attrs({{"axis", Attribute::Int(0)}}))});
        return Status::Ok();
      });
}

}  // namespace whittle
