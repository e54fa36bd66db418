#include "passes/binarize/binarize_pass.h"

#include <cmath>
#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include "lib/ir/binary_format.h"
#include "lib/ir/domain.h"
#include "passes/cost.h"
#include "passes/layer_selection.h"
#include "passes/linear_weight.h"
#include "passes/lowering.h"

namespace whittle {
namespace {

const std::set<std::string> kTypes{"Gemm", "MatMul", "Conv"};

struct BinarizeConfig {
  std::string spec;
  bool binary = false;  // activations=binary
  LayerSelection select;
  std::vector<std::string> include;
};

// A matched layer: W [n, k] (output channel, contracted inputs in the op's order) and its bias.
using Match = WeightMatch;

bool MatchLayer(const Graph& g, int index, Match* m, std::string* reason) {
  const Node& node = g.nodes()[static_cast<size_t>(index)];
  if (!node.domain.empty() || !kTypes.count(node.op_type)) return false;
  if (node.op_type != "Conv") return MatchGemmWeight(g, index, m, reason);
  const Tensor* b = node.inputs.size() > 1 ? g.ConstInput(node, 1, DType::kFloat32) : nullptr;
  if (!b || b->rank() != 4) {
    *reason = "the weight is not a constant float32 [M, C/group, kh, kw] (BinaryConv is 2-D)";
    return false;
  }
  m->node = index;
  m->conv = true;
  m->n = b->dim(0);
  m->k = b->dim(1) * b->dim(2) * b->dim(3);
  m->w.assign(b->data<float>(), b->data<float>() + m->n * m->k);
  return MatchBias(g, index, 2, false, m, reason);
}

// The first and last Gemm/MatMul/Conv (or already binarized layer) in topological order.
void FirstLast(const Graph& g, std::string* first, std::string* last) {
  for (const Node& n : g.nodes()) {
    const bool layer = (n.domain.empty() && kTypes.count(n.op_type)) ||
                       (n.domain == kWhittleDomain && (n.op_type == "BinaryMatMul" || n.op_type == "BinaryConv"));
    if (!layer) continue;
    if (first->empty()) *first = n.name;
    *last = n.name;
  }
}

class BinarizePass : public Pass {
 public:
  explicit BinarizePass(BinarizeConfig c) : c_(std::move(c)) {}
  std::string name() const override { return "binarize"; }

  StatusOr<PassReport> Run(Graph& g, const PassContext& ctx) override {
    WH_RETURN_IF_ERROR(c_.select.Check(g, kTypes));
    std::set<std::string> include(c_.include.begin(), c_.include.end()), names;
    for (const Node& n : g.nodes()) names.insert(n.name);
    for (const std::string& i : c_.include)
      if (!names.count(i)) return InvalidArgument("--binarize: no node named '" + i + "' (include=) in the model");
    PassReport rep;
    rep.pass = "binarize";
    rep.config = c_.spec;
    std::string first, last;
    FirstLast(g, &first, &last);
    const std::vector<Match> work = CollectWeightLayers(g, MatchLayer, c_.select, &rep, [&](const Node& n) {
      if ((n.name != first && n.name != last) || include.count(n.name)) return std::string();
      return std::string(n.name == first ? "the first" : "the last") + " layer stays float (include=" + n.name +
             " binarizes it)";
    });
    for (const Match& m : work) {
      const Node node = g.nodes()[static_cast<size_t>(m.node)];  // a copy: the graph grows below
      const int64_t words = BinaryWords(m.k);
      LayerReport lr;
      lr.node = node.name;
      lr.op_type = node.op_type;
      lr.params_before = NodeParams(g, node);
      lr.macs_before = lr.macs_after = NodeMacs(g, node);
      Tensor bits(DType::kUInt64, {m.n, words});
      Tensor alpha(DType::kFloat32, {m.n});
      uint64_t* pb = bits.data<uint64_t>();
      double err = 0, energy = 0;
      for (int64_t o = 0; o < m.n; ++o) {
        const float* row = m.w.data() + o * m.k;
        const double a = PackSigns(row, m.k, pb + o * words) / static_cast<double>(m.k);
        alpha.data<float>()[o] = static_cast<float>(a);
        for (int64_t i = 0; i < m.k; ++i) {
          const double d = row[i] - (row[i] >= 0.f ? a : -a);
          err += d * d;
          energy += static_cast<double>(row[i]) * row[i];
        }
      }
      Node nn;
      nn.name = node.name;
      nn.domain = kWhittleDomain;
      nn.inputs = {node.inputs[0], g.AddInitializer(g.UniqueName(node.name + "/weight_bits"), bits),
                   g.AddInitializer(g.UniqueName(node.name + "/alpha"), alpha)};
      if (m.bias >= 0) nn.inputs.push_back(WhittleBiasInput(g, m, node.name));
      if (m.conv) {
        nn.op_type = "BinaryConv";
        for (const char* a : {"strides", "pads", "dilations", "auto_pad"})
          if (node.attrs.Has(a)) nn.attrs.Set(a, *node.attrs.Find(a));
        const Tensor* w = g.ConstInput(node, 1);
        nn.attrs.Set("kernel_shape", Attribute::Ints({w->dim(2), w->dim(3)}));
        const int64_t group = node.attrs.GetInt("group", 1);
        nn.attrs.Set("group", Attribute::Int(group));
        nn.attrs.Set("in_channels", Attribute::Int(w->dim(1) * group));
        nn.attrs.Set("out_channels", Attribute::Int(m.n));
      } else {
        nn.op_type = "BinaryMatMul";
        nn.attrs.Set("in_features", Attribute::Int(m.k));
        nn.attrs.Set("out_features", Attribute::Int(m.n));
      }
      nn.attrs.Set("activations", Attribute::String(c_.binary ? "binary" : "float"));
      nn.outputs = node.outputs;
      g.nodes()[static_cast<size_t>(m.node)] = std::move(nn);
      lr.action = "binarize";
      char buf[160];
      std::snprintf(buf, sizeof buf, "1-bit weights%s: %lld -> %lld bytes, weight error %.4f (relative)",
                    c_.binary ? " and activations" : "", static_cast<long long>(m.n * m.k * 4),
                    static_cast<long long>(m.n * words * 8 + m.n * 4), energy > 0 ? std::sqrt(err / energy) : 0.0);
      lr.detail = buf;
      rep.layers.push_back(lr);
    }
    ctx.Progress("binarize", static_cast<int64_t>(work.size()), static_cast<int64_t>(work.size()));
    WH_RETURN_IF_ERROR(FinishWhittleRewrite(g, !work.empty(), "binarize", &rep));
    return rep;
  }

 private:
  BinarizeConfig c_;
};

}  // namespace

StatusOr<std::unique_ptr<Pass>> MakeBinarizePass(PassOptions o) {
  BinarizeConfig c;
  c.spec = o.spec();
  WH_ASSIGN_OR_RETURN(std::string act, o.GetChoice("activations", "float", {"float", "binary"}));
  c.binary = act == "binary";
  if (o.Has("lower"))  // what compress-model --portable does, for every pass's ops at once
    return InvalidArgument("--binarize: lower= is gone; write standard ONNX with compress-model --portable");
  for (const std::string& name : o.GetList("include")) {
    if (name.empty()) return InvalidArgument("--binarize: include= has an empty layer name");
    c.include.push_back(name);
  }
  WH_ASSIGN_OR_RETURN(c.select, LayerSelection::Parse(o));
  for (auto& [name, lo] : o.layers()) WH_RETURN_IF_ERROR(lo.Finish());
  WH_RETURN_IF_ERROR(o.Finish());
  return std::unique_ptr<Pass>(new BinarizePass(std::move(c)));
}

const char* BinarizePassHelp() {
  return "binarization (XNOR-Net): the weight of each Gemm/MatMul with a constant 2-D weight and each 2-D Conv "
         "with a constant weight becomes sign(W) * alpha, alpha per output channel = mean |W| of the channel, "
         "stored 1 bit per weight (about 32x smaller) in ai.whittle BinaryMatMul/BinaryConv; the float weights are "
         "dropped. The first layer (from the input) and the last (the logits) stay float by default. Options:\n"
         "  activations=float|binary  float: binary weights only (adds/subtracts of the inputs, times alpha);\n"
         "                            binary: inputs binarized too, sign(x) * beta with beta = mean |x| over each\n"
         "                            row (Gemm/MatMul) or each sample's C x H x W (Conv); the product is\n"
         "                            XNOR + popcount\n"
         "  include=NAME,...          binarize these even when first or last\n"
         "  exclude=NAME,...          leave these nodes alone\n"
         "compress-model --portable writes the layers as standard ONNX instead (signs -> Cast -> Mul alpha -> "
         "MatMul/Conv).\n";
}

StatusOr<int> LowerBinary(Graph& g) {
  const int64_t opset = g.OpsetFor("");
  return LowerEachNode(
      g,
      [](const Node& node) {
        return node.domain == kWhittleDomain && (node.op_type == "BinaryConv" || node.op_type == "BinaryMatMul");
      },
      [&](const Node& node) -> Status {
        const bool conv = node.op_type == "BinaryConv";
        BinaryAttrs a;
        a.n = node.attrs.GetInt(conv ? "out_channels" : "out_features", 0);
        const auto ks = node.attrs.GetInts("kernel_shape");
        const int64_t group = node.attrs.GetInt("group", 1);
        a.k = conv ? (ks.size() == 2 ? node.attrs.GetInt("in_channels", 0) / std::max<int64_t>(group, 1) * ks[0] * ks[1] : 0)
                   : node.attrs.GetInt("in_features", 0);
        WH_ASSIGN_OR_RETURN(a.binary, ParseBinaryActivations(node.attrs.GetString("activations", "float")));
        const Tensor* bits = g.ConstInput(node, 1);
        const Tensor* alpha = g.ConstInput(node, 2);
        if (!bits || !alpha) return Unimplemented(node.DebugName() + ": lowering needs constant bits and alpha");
        const bool has_bias = node.inputs.size() > 3 && node.inputs[3] >= 0;
        const Tensor* bias = has_bias ? g.ConstInput(node, 3) : nullptr;
        Status s = CheckBinaryTensors(a, *bits, *alpha, bias, true);
        if (!s.ok()) return InvalidArgument(node.DebugName() + ": " + s.message());
        // Copies: the pointers above dangle once values are added below.
        const Tensor bias_copy = bias ? *bias : Tensor();
        const int64_t words = BinaryWords(a.k);
        // Signs as the standard op's weight: MatMul B [K, N]; Conv W [M, C/group, kh, kw].
        Tensor sign(DType::kInt8, conv ? Dims{a.n, a.k / (ks[0] * ks[1]), ks[0], ks[1]} : Dims{a.k, a.n});
        for (int64_t o = 0; o < a.n; ++o)
          for (int64_t i = 0; i < a.k; ++i)
            sign.data<int8_t>()[conv ? o * a.k + i : i * a.n + o] = BinaryBit(bits->data<uint64_t>() + o * words, i) ? 1 : -1;
        // activations=float: the weight is sign * alpha (exactly the float layer the pass describes).
        // activations=binary: the weight is the +-1 signs and alpha scales the product, so the sums
        // are exact integers as in the kernel and a zero dot product stays exactly zero (the next
        // layer's sign(0) = +1 must not see a rounding residue instead).
        Tensor al = *alpha;
        if (conv)
          al = Tensor::FromVector<float>(a.binary ? Dims{a.n, 1, 1} : Dims{a.n, 1, 1, 1},
                                         std::vector<float>(alpha->data<float>(), alpha->data<float>() + a.n));
        auto add = [&](const std::string& op, std::vector<int> in, AttributeMap at = {}) {
          return g.AddOp(node.name + "/" + op, op, std::move(in), std::move(at));
        };
        auto init = [&](const std::string& suffix, Tensor t) { return g.AddInitializer(g.UniqueName(node.name + suffix), t); };
        AttributeMap to;
        to.Set("to", Attribute::Int(static_cast<int64_t>(1)));  // FLOAT
        const int signs = add("Cast", {init("/weight_sign", sign)}, to);
        const int w = a.binary ? signs : add("Mul", {signs, init("/alpha", al)});
        int x = node.inputs[0], beta = -1;
        if (a.binary) {
          const int neg = add("Less", {x, init("/zero", Tensor::FromVector<float>({1}, {0.f}))});
          const int sx = add("Where", {neg, init("/minus_one", Tensor::FromVector<float>({1}, {-1.f})),
                                       init("/one", Tensor::FromVector<float>({1}, {1.f}))});
          AttributeMap rm;
          rm.Set("keepdims", Attribute::Int(1));
          std::vector<int64_t> axes = conv ? std::vector<int64_t>{1, 2, 3} : std::vector<int64_t>{-1};
          std::vector<int> rin{add("Abs", {x})};
          if (opset >= 18) rin.push_back(init("/axes", Tensor::FromVector<int64_t>({static_cast<int64_t>(axes.size())}, axes)));
          else rm.Set("axes", Attribute::Ints(axes));
          beta = add("ReduceMean", rin, rm);
          x = sx;
        }
        int y;
        if (conv) {
          AttributeMap ca;
          for (const char* k : {"kernel_shape", "strides", "pads", "dilations", "auto_pad", "group"})
            if (node.attrs.Has(k)) ca.Set(k, *node.attrs.Find(k));
          std::vector<int> cin{x, w};
          if (has_bias && !a.binary) cin.push_back(node.inputs[3]);
          y = add("Conv", cin, ca);
        } else {
          y = add("MatMul", {x, w});
        }
        if (a.binary) y = add("Mul", {add("Mul", {y, init("/alpha", al)}), beta});
        if (has_bias && (a.binary || !conv)) {
          int b = node.inputs[3];
          if (conv)
            b = init("/bias", Tensor::FromVector<float>({a.n, 1, 1}, std::vector<float>(bias_copy.data<float>(),
                                                                                       bias_copy.data<float>() + a.n)));
          y = add("Add", {y, b});
        }
        return Status::Ok();
      });
}

}  // namespace whittle
