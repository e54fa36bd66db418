#include "kernels/cpu/conv_onednn.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/isa/features.h"
#include "kernels/cpu/parallel.h"

namespace whittle::cpu {
namespace {

dnnl::engine& Engine() {
  static dnnl::engine e = [] {
    (void)CpuFeatures();  // WHITTLE_ISA's cap on oneDNN first
    return dnnl::engine(dnnl::engine::kind::cpu, 0);
  }();
  return e;
}

std::vector<int64_t> Key(const ConvShape& s, bool with_sum, int threads, const OneDnnConv::Layout& l) {
  const Geo2D g = To2D(s.geo);
  return {s.batch, s.in_channels, s.out_channels, s.group, g.ih, g.iw, g.kh, g.kw, g.sh, g.sw,
          g.dh, g.dw, g.pt, g.pl, g.pb, g.pr, with_sum, threads, l.blocked, l.block, l.plain_input};
}

dnnl::memory::format_tag BlockedTag(int block) {
  return block == 16 ? dnnl::memory::format_tag::nChw16c
                     : block == 8 ? dnnl::memory::format_tag::nChw8c : dnnl::memory::format_tag::nhwc;
}

}  // namespace

struct OneDnnConv::Plan {
  bool ok = false;
  dnnl::convolution_forward conv;
  dnnl::memory::desc src_plain, dst_plain, src_md, dst_md, scratch_md;
  bool reorder_src = false, reorder_dst = false;
  dnnl::reorder to_blocked, to_plain, from_plain;  // from_plain: the residual into dst's layout
  dnnl::memory weights, bias;
  size_t scratch_bytes = 0, src_bytes = 0, dst_bytes = 0;
  bool post_act = false;  // the fused activation ran as oneDNN post-ops
};

OneDnnConv::OneDnnConv(const float* weights, const float* bias, FusedActivation act)
    : w_(weights), b_(bias), act_(act) {}

OneDnnConv::~OneDnnConv() = default;

std::shared_ptr<OneDnnConv::Plan> OneDnnConv::PlanFor(const ConvShape& s, bool with_sum, int threads,
                                                      const Layout& layout) const {
  std::lock_guard<std::mutex> lock(mu_);
  const std::vector<int64_t> key = Key(s, with_sum, threads, layout);
  auto it = plans_.find(key);
  if (it != plans_.end()) return it->second;
  auto p = std::make_shared<Plan>();
  plans_[key] = p;
  try {
    using dt = dnnl::memory::data_type;
    using tag = dnnl::memory::format_tag;
    const Geo2D g = To2D(s.geo);
    const dnnl::memory::dims src{s.batch, s.in_channels, g.ih, g.iw}, dst{s.batch, s.out_channels, g.oh, g.ow};
    const bool grouped = s.group > 1;
    const dnnl::memory::dims wd = grouped ? dnnl::memory::dims{s.group, s.out_channels / s.group, s.in_channels / s.group, g.kh, g.kw}
                                          : dnnl::memory::dims{s.out_channels, s.in_channels, g.kh, g.kw};
    p->src_plain = dnnl::memory::desc(src, dt::f32, tag::nchw);
    p->dst_plain = dnnl::memory::desc(dst, dt::f32, tag::nchw);
    // Plain activations: oneDNN picks their layout (reordered to and from NCHW per call). Blocked
    // ones are fixed to nChw{b}c or NHWC, as the NCHWc rewrite hands them over (the input may stay
    // NCHW).
    const bool blocked = layout.blocked;
    // NHWC output with 8 or 16 channels is nChw8c / nChw16c too: a plain (NCHW) input then goes to
    // oneDNN's first-layer kernels, which read NCHW and write the blocked layout (its NHWC ones
    // would need an NHWC input). Otherwise a plain input must have one channel (NHWC already).
    const bool first_layer =
        blocked && layout.plain_input && (layout.block != 0 || s.out_channels == 8 || s.out_channels == 16);
    const tag dst_tag = layout.block == 0 && first_layer ? BlockedTag(static_cast<int>(s.out_channels))
                                                         : BlockedTag(layout.block);
    const dnnl::memory::desc src_any(src, dt::f32, !blocked ? tag::any : first_layer ? tag::nchw : dst_tag);
    const dnnl::memory::desc dst_any(dst, dt::f32, blocked ? dst_tag : tag::any);
    const dnnl::memory::desc w_any(wd, dt::f32, tag::any), b_md({s.out_channels}, dt::f32, tag::x);
    const dnnl::memory::desc w_plain(wd, dt::f32, grouped ? tag::goihw : tag::oihw);
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    // The activations oneDNN computes as ONNX defines them run as post-ops, on the output while
    // it is in registers (ReLU6 = Clip(0, 6), HardSwish = x * relu6(x + 3) / 6, HardSigmoid =
    // clip(alpha * x + beta, 0, 1), SiLU = x * sigmoid(x) (oneDNN's swish, within a few ulp of
    // ours)); the others (Sigmoid, Tanh) run on the output after the conv.
    using alg = dnnl::algorithm;
    dnnl::post_ops po;
    if (with_sum) po.append_sum(1.f);  // dst = conv + b + dst's previous contents (the residual)
    p->post_act = true;
    const float big = std::numeric_limits<float>::max();
    switch (act_.kind) {
      case FusedActivation::kNone: break;
      case FusedActivation::kRelu: po.append_eltwise(1.f, alg::eltwise_relu, 0.f, 0.f); break;
      case FusedActivation::kLeakyRelu: po.append_eltwise(1.f, alg::eltwise_relu, act_.alpha, 0.f); break;
      case FusedActivation::kClip:
        po.append_eltwise(1.f, alg::eltwise_clip, std::max(act_.min, -big), std::min(act_.max, big));
        break;
      case FusedActivation::kHardSwish: po.append_eltwise(1.f, alg::eltwise_hardswish, 0.f, 0.f); break;
      case FusedActivation::kSilu: po.append_eltwise(1.f, alg::eltwise_swish, 1.f, 0.f); break;
      case FusedActivation::kHardSigmoid:
        po.append_eltwise(1.f, alg::eltwise_linear, act_.alpha, act_.beta);
        po.append_eltwise(1.f, alg::eltwise_clip, 0.f, 1.f);
        break;
      default: p->post_act = false;
    }
    if (po.len() > 0) attr.set_post_ops(po);
    const dnnl::convolution_forward::desc d(
        dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, src_any, w_any, b_md, dst_any,
        {g.sh, g.sw}, {g.dh - 1, g.dw - 1}, {g.pt, g.pl}, {g.pb, g.pr});
    const dnnl::convolution_forward::primitive_desc pd(d, attr, Engine());
    // oneDNN's reference kernel is far slower than any of ours: no plan (the caller falls back).
    if (blocked && std::string(pd.impl_info_str()).rfind("ref", 0) == 0) return p;
    p->conv = dnnl::convolution_forward(pd);
    p->src_md = pd.src_desc();
    p->dst_md = pd.dst_desc();
    p->reorder_src = !blocked && p->src_md != p->src_plain;
    p->reorder_dst = !blocked && p->dst_md != p->dst_plain;
    if (p->reorder_src) p->to_blocked = dnnl::reorder(dnnl::reorder::primitive_desc(Engine(), p->src_plain, Engine(), p->src_md));
    if (p->reorder_dst) p->to_plain = dnnl::reorder(dnnl::reorder::primitive_desc(Engine(), p->dst_md, Engine(), p->dst_plain));
    if (p->reorder_dst && with_sum)
      p->from_plain = dnnl::reorder(dnnl::reorder::primitive_desc(Engine(), p->dst_plain, Engine(), p->dst_md));
    p->scratch_md = pd.scratchpad_desc();
    p->scratch_bytes = p->scratch_md.get_size();
    p->src_bytes = p->src_md.get_size();
    p->dst_bytes = p->dst_md.get_size();
    // Weights (and bias) copied into oneDNN's layout once.
    dnnl::stream st(Engine());
    dnnl::memory w_user(w_plain, Engine(), const_cast<float*>(w_));
    p->weights = dnnl::memory(pd.weights_desc(), Engine());
    dnnl::reorder(w_user, p->weights).execute(st, w_user, p->weights);
    p->bias = dnnl::memory(b_md, Engine());
    float* bp = static_cast<float*>(p->bias.get_data_handle());
    for (int64_t m = 0; m < s.out_channels; ++m) bp[m] = b_ ? b_[m] : 0.f;
    st.wait();
    p->ok = true;
  } catch (const dnnl::error&) {
    p->ok = false;
  }
  return p;
}

bool OneDnnConv::Run(const ConvShape& s, const float* x, const float* sum, float* y, int threads,
                     const Layout& layout) const {
  if (s.geo.spatial != 2) return false;
  ScopedOmpThreads omp(threads);  // before the plan: oneDNN sizes its thread split at creation
  std::shared_ptr<Plan> p = PlanFor(s, sum != nullptr, threads, layout);
  if (!p->ok) return false;
  // Per-thread buffers for the blocked activations and the scratchpad, kept across calls.
  thread_local std::vector<char> src_buf, dst_buf, scratch_buf;
  auto grow = [](std::vector<char>& b, size_t n) {
    if (b.size() < n + 64) b.resize(n + 64);
    return b.data();
  };
  dnnl::stream st(Engine());
  dnnl::memory src_user(layout.blocked ? p->src_md : p->src_plain, Engine(), const_cast<float*>(x));
  dnnl::memory dst_user(layout.blocked ? p->dst_md : p->dst_plain, Engine(), y);
  dnnl::memory src = p->reorder_src ? dnnl::memory(p->src_md, Engine(), grow(src_buf, p->src_bytes)) : src_user;
  dnnl::memory dst = p->reorder_dst ? dnnl::memory(p->dst_md, Engine(), grow(dst_buf, p->dst_bytes)) : dst_user;
  dnnl::memory scratch(p->scratch_md, Engine(), grow(scratch_buf, p->scratch_bytes));
  if (p->reorder_src) p->to_blocked.execute(st, src_user, src);
  if (sum) {  // the sum post-op reads the residual from dst
    if (p->reorder_dst) {
      dnnl::memory sum_user(p->dst_plain, Engine(), const_cast<float*>(sum));
      p->from_plain.execute(st, sum_user, dst);
    } else if (sum != y) {  // the residual is in dst's layout already: copied on every thread
      const int64_t n = static_cast<int64_t>(p->dst_bytes / sizeof(float));
      ParallelRange(n, threads, [&](int64_t a, int64_t b) {
        std::memcpy(y + a, sum + a, static_cast<size_t>(b - a) * sizeof(float));
      });
    }
  }
  p->conv.execute(st, {{DNNL_ARG_SRC, src},
                       {DNNL_ARG_WEIGHTS, p->weights},
                       {DNNL_ARG_BIAS, p->bias},
                       {DNNL_ARG_DST, dst},
                       {DNNL_ARG_SCRATCHPAD, scratch}});
  if (p->reorder_dst) p->to_plain.execute(st, dst, dst_user);
  st.wait();
  if (!p->post_act && act_.kind != FusedActivation::kNone) {
    const int64_t n = s.batch * s.out_channels * s.geo.OutSize();
    ParallelRange(n, threads, [&](int64_t a, int64_t b) { act_.Apply(y + a, b - a); });
  }
  return true;
}

std::optional<int> OneDnnPreferredBlock() {
  static const std::optional<int> block = []() -> std::optional<int> {
    try {
      using dt = dnnl::memory::data_type;
      using tag = dnnl::memory::format_tag;
      const dnnl::memory::dims src{1, 64, 14, 14}, w{64, 64, 3, 3};
      const dnnl::convolution_forward::desc d(
          dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
          dnnl::memory::desc(src, dt::f32, tag::any), dnnl::memory::desc(w, dt::f32, tag::any),
          dnnl::memory::desc({64}, dt::f32, tag::x), dnnl::memory::desc(src, dt::f32, tag::any), {1, 1}, {0, 0},
          {1, 1}, {1, 1});
      const dnnl::convolution_forward::primitive_desc pd(d, Engine());
      for (int b : {16, 8, 0})
        if (pd.dst_desc() == dnnl::memory::desc(src, dt::f32, BlockedTag(b))) return b;
    } catch (const dnnl::error&) {
    }
    return std::nullopt;
  }();
  return block;
}

}  // namespace whittle::cpu
