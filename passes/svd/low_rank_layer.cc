#include "passes/svd/low_rank_layer.h"

#include <set>

#include "passes/cost.h"

namespace whittle {
namespace {

std::string Str(int64_t v) { return std::to_string(v); }

int64_t Prod(const Dims& d, size_t from) {
  int64_t p = 1;
  for (size_t i = from; i < d.size(); ++i) p *= d[i];
  return p;
}

// Per-sample dims of a computed value (symbolic dims count as 1, as in passes/cost.h);
// false when the rank is unknown or `need_known_from` onwards a dim is unknown.
bool PerSampleDims(const Value& v, size_t need_known_from, Dims* out) {
  if (!v.shape) return false;
  out->clear();
  for (size_t i = 0; i < v.shape->size(); ++i) {
    const Dim& d = (*v.shape)[i];
    if (!d.known() && i >= need_known_from) return false;
    out->push_back(d.known() ? d.value : 1);
  }
  return true;
}

std::string NodeNameFree(const Graph& g, const std::string& want) {
  std::set<std::string> used;
  for (const Node& n : g.nodes()) used.insert(n.name);
  if (!used.count(want)) return want;
  for (int i = 1;; ++i)
    if (!used.count(want + "_" + Str(i))) return want + "_" + Str(i);
}

Tensor MakeTensor(const Dims& dims, const std::vector<float>& values) { return Tensor::FromVector<float>(dims, values); }

std::vector<float> Transposed(const Matrix& a) {
  std::vector<float> t(a.data.size());
  for (int64_t i = 0; i < a.rows; ++i)
    for (int64_t j = 0; j < a.cols; ++j) t[static_cast<size_t>(j * a.rows + i)] = a.at(i, j);
  return t;
}

bool MatchGemmOrMatMul(const Graph& g, const Node& node, LowRankLayer* l, std::string* reason) {
  const Dims& w = g.value(l->weight).initializer->dims();
  if (w.size() != 2) {
    *reason = "weight is " + DimsToString(w) + ", not a 2-D matrix";
    return false;
  }
  if (node.op_type == "Gemm") {
    const bool tb = node.attrs.GetInt("transB", 0) != 0;
    l->kind = LowRankKind::kGemm;
    l->m = tb ? w[1] : w[0];
    l->n = tb ? w[0] : w[1];
    if (node.attrs.GetInt("transA", 0) != 0 && g.OpsetFor("") < 11) {
      *reason = "Gemm with transA=1 before opset 11 (the first factor would need a C input)";
      return false;
    }
    l->macs_before = l->m * l->n;
    l->macs_per_rank = l->m + l->n;
    return true;
  }
  l->kind = LowRankKind::kMatMul;
  l->m = w[0];
  l->n = w[1];
  Dims out;
  if (node.outputs.empty() || !PerSampleDims(g.value(node.outputs[0]), ~size_t{0}, &out) || out.empty()) {
    *reason = "output shape unknown (shape inference could not derive it)";
    return false;
  }
  const int64_t rows = Prod(Dims(out.begin(), out.end() - 1), 0);  // per-sample rows of A
  l->macs_before = rows * l->m * l->n;
  l->macs_per_rank = rows * (l->m + l->n);
  return true;
}

bool MatchConv(const Graph& g, const Node& node, bool spatial, LowRankLayer* l, std::string* reason) {
  const Dims& w = g.value(l->weight).initializer->dims();
  if (w.size() < 3) {
    *reason = "weight is " + DimsToString(w) + ", expected [Cout, Cin, k...]";
    return false;
  }
  const int64_t group = node.attrs.GetInt("group", 1);
  if (group != 1) {
    *reason = (w[1] == 1 ? "depthwise convolution (group=" : "grouped convolution (group=") + Str(group) +
              "): per-group factorization is not supported";
    return false;
  }
  Dims out;
  if (node.outputs.empty() || !PerSampleDims(g.value(node.outputs[0]), 2, &out) || out.size() != w.size()) {
    *reason = "output shape unknown (spatial dims must be known to count MACs)";
    return false;
  }
  const int64_t cout = w[0], cin = w[1], kk = Prod(w, 2), s = Prod(out, 2);
  l->macs_before = s * cout * cin * kk;
  if (!spatial) {
    l->kind = LowRankKind::kConvChannel;
    l->m = cout;
    l->n = cin * kk;
    l->macs_per_rank = s * (cin * kk + cout);
    return true;
  }
  if (w.size() != 4) {
    *reason = "mode=spatial needs a 2-D kernel, weight is " + DimsToString(w);
    return false;
  }
  Dims in;
  if (!PerSampleDims(g.value(node.inputs[0]), 2, &in) || in.size() != 4) {
    *reason = "input shape unknown (spatial dims must be known to count MACs)";
    return false;
  }
  const int64_t kh = w[2], kw = w[3];
  l->kind = LowRankKind::kConvSpatial;
  l->m = cin * kh;
  l->n = cout * kw;
  // First conv: kh×1, output height as the original's, width of the (horizontally unpadded)
  // input; second: 1×kw on that, producing the original output.
  l->macs_per_rank = out[2] * in[3] * cin * kh + s * cout * kw;
  return true;
}

}  // namespace

int64_t LowRankLayer::MaxUsefulRank() const {
  if (macs_per_rank <= 0) return 0;
  const int64_t r = (macs_before - 1) / macs_per_rank;
  return r < full_rank() ? r : full_rank();
}

const char* LowRankLayer::Action() const {
  switch (kind) {
    case LowRankKind::kConvChannel: return "svd-channel";
    case LowRankKind::kConvSpatial: return "svd-spatial";
    default: return "svd";
  }
}

bool IsSvdFactorName(const std::string& value_name) {
  return value_name.find("/svd_u") != std::string::npos || value_name.find("/svd_v") != std::string::npos;
}

bool MatchLowRankLayer(const Graph& g, int index, bool spatial, LowRankLayer* out, std::string* reason) {
  reason->clear();
  const Node& node = g.nodes()[static_cast<size_t>(index)];
  if (!node.domain.empty() && node.domain != "ai.onnx") return false;
  if (node.op_type != "Gemm" && node.op_type != "MatMul" && node.op_type != "Conv") return false;
  LowRankLayer l;
  l.node = index;
  l.name = node.name;
  l.op_type = node.op_type;
  if (node.inputs.size() < 2 || node.inputs[0] < 0 || node.inputs[1] < 0 || node.outputs.empty()) {
    *reason = "missing input or output";
    return false;
  }
  l.weight = node.inputs[1];
  const Value& w = g.value(l.weight);
  if (!w.initializer) {
    *reason = "weight '" + w.name + "' is not a constant initializer";
    return false;
  }
  if (w.initializer->dtype() != DType::kFloat32) {
    *reason = std::string("weight is ") + DTypeName(w.initializer->dtype()) + "; only float32 is factorized";
    return false;
  }
  if (IsSvdFactorName(w.name)) {
    *reason = "already a low-rank factor produced by --svd";
    return false;
  }
  if (node.op_type == "Conv") {
    if (!MatchConv(g, node, spatial, &l, reason)) return false;
  } else if (!MatchGemmOrMatMul(g, node, &l, reason)) {
    return false;
  }
  if (l.m <= 0 || l.n <= 0) {
    *reason = "empty weight";
    return false;
  }
  l.params_before = NodeParams(g, node);
  l.other_params = l.params_before - l.m * l.n;
  *out = l;
  return true;
}

static Matrix LayerMatrixOf(const Graph& g, const LowRankLayer& l, const Tensor& t);

Matrix LayerMatrix(const Graph& g, const LowRankLayer& l) {
  const Tensor& t = *g.value(l.weight).initializer;
  Matrix mat = LayerMatrixOf(g, l, t);
  t.buffer()->ReleaseResidentPages();  // a mapped weight, now copied: its pages go back
  return mat;
}

static Matrix LayerMatrixOf(const Graph& g, const LowRankLayer& l, const Tensor& t) {
  const float* w = t.data<float>();
  Matrix mat(l.m, l.n);
  const Node& node = g.nodes()[static_cast<size_t>(l.node)];
  switch (l.kind) {
    case LowRankKind::kGemm:
      if (node.attrs.GetInt("transB", 0) != 0) {  // stored [N, K]
        for (int64_t k = 0; k < l.m; ++k)
          for (int64_t j = 0; j < l.n; ++j) mat.at(k, j) = w[j * l.m + k];
        return mat;
      }
      [[fallthrough]];
    case LowRankKind::kMatMul:
    case LowRankKind::kConvChannel:  // [Cout, Cin*k] is the weight's own layout
      mat.data.assign(w, w + l.m * l.n);
      return mat;
    case LowRankKind::kConvSpatial: {
      const int64_t cout = t.dim(0), cin = t.dim(1), kh = t.dim(2), kw = t.dim(3);
      for (int64_t o = 0; o < cout; ++o)
        for (int64_t c = 0; c < cin; ++c)
          for (int64_t y = 0; y < kh; ++y)
            for (int64_t x = 0; x < kw; ++x) mat.at(c * kh + y, o * kw + x) = w[((o * cin + c) * kh + y) * kw + x];
      return mat;
    }
  }
  return mat;
}

void ApplyLowRank(Graph& g, const LowRankLayer& l, const Matrix& a, const Matrix& b) {
  WH_CHECK(a.rows == l.m && b.cols == l.n && a.cols == b.rows);
  const int64_t r = a.cols;
  Node& orig = g.nodes()[static_cast<size_t>(l.node)];
  const std::string base = orig.name.empty() ? g.value(orig.outputs[0]).name : orig.name;
  const Dims wdims = g.value(l.weight).initializer->dims();
  Node first;
  first.name = NodeNameFree(g, base + "/svd_u");
  first.domain = orig.domain;
  Tensor u, v;
  AttributeMap first_attrs, second_attrs;
  switch (l.kind) {
    case LowRankKind::kGemm: {
      const bool tb = orig.attrs.GetInt("transB", 0) != 0;
      if (g.OpsetFor("") >= 11) {
        first.op_type = "Gemm";
        if (orig.attrs.GetInt("transA", 0) != 0) first_attrs.Set("transA", Attribute::Int(1));
        if (tb) first_attrs.Set("transB", Attribute::Int(1));
        u = tb ? MakeTensor({r, l.m}, Transposed(a)) : MakeTensor({l.m, r}, a.data);
      } else {  // Gemm needs C before opset 11; matched only with transA=0
        first.op_type = "MatMul";
        u = MakeTensor({l.m, r}, a.data);
      }
      v = tb ? MakeTensor({l.n, r}, Transposed(b)) : MakeTensor({r, l.n}, b.data);
      second_attrs = orig.attrs;
      second_attrs.Erase("transA");
      break;
    }
    case LowRankKind::kMatMul:
      first.op_type = "MatMul";
      u = MakeTensor({l.m, r}, a.data);
      v = MakeTensor({r, l.n}, b.data);
      break;
    case LowRankKind::kConvChannel: {
      first.op_type = "Conv";
      Dims fd = wdims, sd(wdims.size(), 1);
      fd[0] = r;
      sd[0] = l.m;
      sd[1] = r;
      u = MakeTensor(fd, b.data);  // r filters over the original receptive field
      v = MakeTensor(sd, a.data);  // 1×1 mixing to Cout
      first_attrs = orig.attrs;
      first_attrs.Set("kernel_shape", Attribute::Ints(Dims(wdims.begin() + 2, wdims.end())));
      second_attrs.Set("kernel_shape", Attribute::Ints(Dims(wdims.size() - 2, 1)));
      break;
    }
    case LowRankKind::kConvSpatial: {
      first.op_type = "Conv";
      const int64_t cout = wdims[0], cin = wdims[1], kh = wdims[2], kw = wdims[3];
      std::vector<float> vert(static_cast<size_t>(r * cin * kh)), horz(static_cast<size_t>(cout * r * kw));
      for (int64_t j = 0; j < r; ++j)
        for (int64_t c = 0; c < cin; ++c)
          for (int64_t y = 0; y < kh; ++y) vert[static_cast<size_t>((j * cin + c) * kh + y)] = a.at(c * kh + y, j);
      for (int64_t o = 0; o < cout; ++o)
        for (int64_t j = 0; j < r; ++j)
          for (int64_t x = 0; x < kw; ++x) horz[static_cast<size_t>((o * r + j) * kw + x)] = b.at(j, o * kw + x);
      u = MakeTensor({r, cin, kh, 1}, vert);
      v = MakeTensor({cout, r, 1, kw}, horz);
      const Dims strides = orig.attrs.GetInts("strides", {1, 1});
      const Dims dil = orig.attrs.GetInts("dilations", {1, 1});
      first_attrs.Set("kernel_shape", Attribute::Ints({kh, 1}));
      second_attrs.Set("kernel_shape", Attribute::Ints({1, kw}));
      first_attrs.Set("strides", Attribute::Ints({strides[0], 1}));
      second_attrs.Set("strides", Attribute::Ints({1, strides[1]}));
      first_attrs.Set("dilations", Attribute::Ints({dil[0], 1}));
      second_attrs.Set("dilations", Attribute::Ints({1, dil[1]}));
      if (orig.attrs.Has("pads")) {
        const Dims p = orig.attrs.GetInts("pads");  // [top, left, bottom, right]
        first_attrs.Set("pads", Attribute::Ints({p[0], 0, p[2], 0}));
        second_attrs.Set("pads", Attribute::Ints({0, p[1], 0, p[3]}));
      }
      // SAME_*/VALID padding is computed per axis, so each factor pads only its own axis.
      if (const Attribute* ap = orig.attrs.Find("auto_pad")) {
        first_attrs.Set("auto_pad", *ap);
        second_attrs.Set("auto_pad", *ap);
      }
      break;
    }
  }
  const int u_id = g.AddInitializer(g.UniqueName(base + "/svd_u"), u);
  const int v_id = g.AddInitializer(g.UniqueName(base + "/svd_v"), v);
  const int mid = g.AddValue(g.UniqueName(base + "/svd_u_out"), DType::kFloat32);
  first.inputs = {orig.inputs[0], u_id};
  first.outputs = {mid};
  first.attrs = std::move(first_attrs);
  // The original node becomes the second factor: same name, same output, same bias/C.
  orig.inputs[0] = mid;
  orig.inputs[1] = v_id;
  if (l.kind != LowRankKind::kMatMul) orig.attrs = std::move(second_attrs);
  g.AddNode(std::move(first));  // invalidates `orig`
}

}  // namespace whittle
