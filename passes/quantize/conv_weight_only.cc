#include "passes/quantize/conv_weight_only.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>

#include "passes/cost.h"
#include "passes/layer_inputs_eigen.h"
#include "passes/quantize/gptq.h"
#include "passes/quantize/opset_upgrade.h"
#include "runtime/evaluate.h"
#include "whittle/session.h"

namespace whittle {
namespace {

const Tensor* ConvWeight(const Graph& g, const Node& n) {
  const Tensor* w = g.ConstInput(n, 1, DType::kFloat32);
  return w && w->rank() == 4 && w->dim(0) > 0 ? w : nullptr;
}

// A 2-D Conv's geometry (passes/layer_inputs_eigen.h) and group, or false with why (auto_pad
// SAME_*, a group that does not divide the channels).
bool ReadGeometry(const Node& n, const Tensor& w, ConvGeo* c, int64_t* group, std::string* why) {
  *c = ReadConvGeo(n, w);
  *group = n.attrs.GetInt("group", 1);
  const std::string pad = n.attrs.GetString("auto_pad", "NOTSET");
  if (pad != "NOTSET" && pad != "VALID") *why = "auto_pad " + pad;
  else if (*group < 1 || w.dim(0) % *group != 0) *why = "its group does not divide the output channels";
  else if (c->sh < 1 || c->sw < 1 || c->dh < 1 || c->dw < 1) *why = "strides or dilations below 1";
  else return true;
  return false;
}

}  // namespace

std::vector<int> ConvWeightOnlyLayers(const Graph& g, const LayerSelection& select) {
  std::vector<int> out;
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    const Node& n = g.nodes()[i];
    if (n.op_type == "Conv" && n.domain.empty() && select.LeftAloneReason(n.name).empty() && ConvWeight(g, n))
      out.push_back(static_cast<int>(i));
  }
  return out;
}

StatusOr<ConvGrams> CollectConvGrams(const Graph& g, const std::vector<int>& convs, const Dataset& data,
                                     const PassContext& ctx, int64_t max_bytes_per_layer) {
  ConvGrams grams;
  struct Layer {
    int node;
    ConvGeo geo;
    int64_t group = 1;
    int64_t cg = 0, features = 0;  // input channels per group; their patch size
    std::vector<RowMat> h;        // per group
  };
  std::vector<Layer> layers;
  Graph probe = g;
  probe.outputs().clear();
  std::map<int, size_t> slot;
  for (int ni : convs) {
    const Node& n = g.nodes()[static_cast<size_t>(ni)];
    const Tensor* w = ConvWeight(g, n);
    Layer l;
    l.node = ni;
    std::string why;
    if (!w || !ReadGeometry(n, *w, &l.geo, &l.group, &why)) continue;
    l.cg = w->dim(1);
    l.features = l.cg * l.geo.kh * l.geo.kw;
    if (l.group * l.features * l.features * 8 > max_bytes_per_layer) continue;
    l.h.assign(static_cast<size_t>(l.group), RowMat::Zero(l.features, l.features));
    layers.push_back(std::move(l));
    const int v = n.inputs[0];
    if (!slot.count(v)) {
      slot[v] = probe.outputs().size();
      probe.outputs().push_back(v);
    }
  }
  if (layers.empty()) return grams;
  if (data.size() == 0) return InvalidArgument("calibration data '" + data.description + "' is empty");
  SessionOptions so;
  so.num_threads = ctx.num_threads;
  WH_ASSIGN_OR_RETURN(auto session, Session::FromGraph(std::move(probe), so));
  std::mt19937_64 rng(ctx.seed);
  constexpr int64_t kMaxPositions = 4096;  // per image; more are sampled
  const int64_t n = data.size();
  const int64_t batch = DataBatch(data, 16, &session->inputs());
  const std::string stage = "int8: GPTQ input statistics of " + std::to_string(layers.size()) + " convolutions";
  for (int64_t b = 0; b < n; b += batch) {
    const int64_t e = std::min(n, b + batch);
    ctx.Progress(stage, b, n);
    WH_ASSIGN_OR_RETURN(auto feeds, BatchFeeds(data, session->inputs(), b, e));
    WH_ASSIGN_OR_RETURN(std::vector<Tensor> outs, session->Run(feeds));
    for (Layer& l : layers) {
      const Node& node = g.nodes()[static_cast<size_t>(l.node)];
      const Tensor& x = outs[slot.at(node.inputs[0])];
      if (x.dtype() != DType::kFloat32 || x.rank() != 4 || x.dim(1) != l.cg * l.group)
        return InvalidArgument(node.DebugName() + ": its input is not a float32 [N, " +
                               std::to_string(l.cg * l.group) + ", H, W] tensor on the calibration data");
      const ConvGeo& c = l.geo;
      const int64_t N = x.dim(0), H = x.dim(2), W = x.dim(3);
      const int64_t oh = (H + c.pt + c.pb - c.dh * (c.kh - 1) - 1) / c.sh + 1;
      const int64_t ow = (W + c.pl + c.pr - c.dw * (c.kw - 1) - 1) / c.sw + 1;
      if (oh <= 0 || ow <= 0) continue;
      const int64_t per = std::min(kMaxPositions, oh * ow), K = c.kh * c.kw;
      const float* px = x.data<float>();
      std::vector<int64_t> pos(static_cast<size_t>(per));
      RowMat rows(N * per, l.features);
      for (int64_t grp = 0; grp < l.group; ++grp) {
        for (int64_t img = 0; img < N; ++img) {
          if (grp == 0)
            for (int64_t s = 0; s < per; ++s)
              pos[static_cast<size_t>(s)] =
                  per == oh * ow ? s : std::uniform_int_distribution<int64_t>(0, oh * ow - 1)(rng);
          for (int64_t s = 0; s < per; ++s) {
            const int64_t p = pos[static_cast<size_t>(s)];
            const int64_t y0 = (p / ow) * c.sh - c.pt, x0 = (p % ow) * c.sw - c.pl;
            double* row = rows.row(img * per + s).data();
            for (int64_t ch = 0; ch < l.cg; ++ch) {
              const float* plane = px + ((img * l.cg * l.group) + grp * l.cg + ch) * H * W;
              for (int64_t i = 0; i < c.kh; ++i)
                for (int64_t j = 0; j < c.kw; ++j) {
                  const int64_t yy = y0 + i * c.dh, xx = x0 + j * c.dw;
                  row[ch * K + i * c.kw + j] = yy >= 0 && yy < H && xx >= 0 && xx < W ? plane[yy * W + xx] : 0.0;
                }
            }
          }
        }
        l.h[static_cast<size_t>(grp)].selfadjointView<Eigen::Upper>().rankUpdate(rows.transpose());
      }
    }
  }
  ctx.Progress(stage, n, n);
  for (Layer& l : layers) {
    auto& out = grams[g.nodes()[static_cast<size_t>(l.node)].name];
    for (RowMat& h : l.h) {
      h.triangularView<Eigen::StrictlyLower>() = h.transpose();
      out.emplace_back(h.data(), h.data() + h.size());
    }
  }
  return grams;
}

Status QuantizeConvWeightsInt8(Graph& g, const LayerSelection& select, PassReport* rep, const ConvGrams* grams) {
  std::vector<int> convs;  // match first, then rewrite
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    const Node& n = g.nodes()[i];
    if (n.op_type != "Conv" || !n.domain.empty()) continue;
    const std::string why = select.LeftAloneReason(n.name);
    const Tensor* w = g.ConstInput(n, 1, DType::kFloat32);
    if (!why.empty() || !w || w->rank() < 3 || w->dim(0) == 0) {
      rep->layers.push_back(SkippedLayer(g, n, !why.empty() ? why : "its weight is not a constant float32 tensor"));
      continue;
    }
    convs.push_back(static_cast<int>(i));
  }
  if (convs.empty()) return Status::Ok();
  WH_RETURN_IF_ERROR(quant::UpgradeOpsetTo13(g, &rep->notes));
  for (int i : convs) {
    const Node node = g.nodes()[static_cast<size_t>(i)];  // a copy: the graph grows below
    const Tensor& w = *g.ConstInput(node, 1, DType::kFloat32);
    const int64_t numel = w.numel(), out = w.dim(0), per = numel / out;
    Tensor q(DType::kInt8, w.dims()), scale(DType::kFloat32, {out});
    const float* src = w.data<float>();
    int8_t* codes = q.data<int8_t>();
    // Round to nearest, per output channel.
    for (int64_t o = 0; o < out; ++o) {
      float amax = 0;
      for (int64_t k = 0; k < per; ++k) amax = std::max(amax, std::fabs(src[o * per + k]));
      const float s = amax > 0 ? amax / 127.f : 1.f;
      scale.data<float>()[o] = s;
      for (int64_t k = 0; k < per; ++k)
        codes[o * per + k] = static_cast<int8_t>(std::lround(std::clamp(src[o * per + k] / s, -127.f, 127.f)));
    }
    // GPTQ per group where its statistics were gathered: the same scales (a block is the whole
    // row, its parameters from the row as given), other codes.
    std::string how = "round to nearest";
    const std::vector<std::vector<double>>* stats = nullptr;
    if (grams) {
      auto it = grams->find(node.name);
      if (it != grams->end() && !it->second.empty() && out % static_cast<int64_t>(it->second.size()) == 0)
        stats = &it->second;
    }
    if (stats) {
      const int64_t groups = static_cast<int64_t>(stats->size()), og = out / groups;
      int64_t fallback = 0;
      for (int64_t grp = 0; grp < groups; ++grp) {
        const std::vector<double>& h = (*stats)[static_cast<size_t>(grp)];
        if (static_cast<int64_t>(h.size()) != per * per) {
          ++fallback;
          continue;
        }
        quant::IntBlocks b;
        if (!quant::QuantizeGptq(src + grp * og * per, og, per, per, /*symmetric=*/true, h, &b, 8)) {
          ++fallback;
          continue;
        }
        for (int64_t r = 0; r < og; ++r) {
          const int64_t o = grp * og + r;
          scale.data<float>()[o] = b.scale[static_cast<size_t>(r)];
          for (int64_t k = 0; k < per; ++k)
            codes[o * per + k] = static_cast<int8_t>(static_cast<int>(b.codes[static_cast<size_t>(r * per + k)]) -
                                                     static_cast<int>(b.zero[static_cast<size_t>(r)]));
        }
      }
      how = fallback == 0 ? "GPTQ" : "GPTQ (" + std::to_string(fallback) + " of " + std::to_string(groups) +
                                         " groups rounded to nearest: their statistics were not positive definite)";
      if (fallback) rep->notes.push_back(node.name + ": " + how);
    } else if (grams) {
      how = "round to nearest (no GPTQ statistics for it)";
    }
    double err = 0, energy = 0;
    for (int64_t o = 0; o < out; ++o)
      for (int64_t k = 0; k < per; ++k) {
        const double x = src[o * per + k], d = x - codes[o * per + k] * static_cast<double>(scale.data<float>()[o]);
        err += d * d;
        energy += x * x;
      }
    LayerReport lr;
    lr.node = node.name;
    lr.op_type = node.op_type;
    lr.params_before = lr.params_after = NodeParams(g, node);
    lr.macs_before = lr.macs_after = NodeMacs(g, node);
    // `w` points into the graph's values, which the additions below may move.
    const int qid = g.AddInitializer(g.UniqueName(node.name + "/weight_int8"), std::move(q));
    const int sid = g.AddInitializer(g.UniqueName(node.name + "/weight_scale"), std::move(scale));
    // An explicit int8 zero point (all 0) names the code type, as the int8 pass's weights do, so
    // that quantization-aware fine-tuning lifts it to an int8 fake quantizer.
    const int zid = g.AddInitializer(g.UniqueName(node.name + "/weight_zero_point"), Tensor(DType::kInt8, {out}));
    AttributeMap attrs;
    attrs.Set("axis", Attribute::Int(0));
    const int dq = g.AddOp(node.name + "/weight_dequantize", "DequantizeLinear", {qid, sid, zid}, attrs);
    g.nodes()[static_cast<size_t>(i)].inputs[1] = dq;
    char detail[200];
    std::snprintf(detail, sizeof detail, "weights int8 per output channel (%s), activations float: %lld -> ~%lld bytes, "
                  "weight error %.4f (relative)", how.c_str(), static_cast<long long>(numel * 4),
                  static_cast<long long>(numel + out * 5), energy > 0 ? std::sqrt(err / energy) : 0.0);
    lr.action = "int8-weights";
    lr.setting = 8;
    lr.detail = detail;
    rep->layers.push_back(lr);
  }
  g.Reindex();
  return g.Compact();
}

}  // namespace whittle
