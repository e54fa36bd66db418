#include "kernels/reference/recurrent.h"

#include <algorithm>
#include <vector>

namespace whittle::reference {
namespace {

template <class T>
const T* DataOrNull(const Tensor* t) {
  return t ? t->data<T>() : nullptr;
}

// One direction of one sequence: state h (and c for LSTM) is updated in place over len steps.
template <class T>
class Cell {
 public:
  Cell(const RecurrentAttrs& a, const RecurrentDims& d, int dir, const T* W, const T* R, const T* B, const T* P)
      : a_(a), H_(d.hidden), I_(d.input), G_(d.gates), dir_(dir) {
    const int64_t GH = G_ * H_;
    W_ = W + dir * GH * I_;
    R_ = R + dir * GH * H_;
    wb_.assign(static_cast<size_t>(GH), 0.0);
    rb_.assign(static_cast<size_t>(GH), 0.0);
    if (B) {
      const T* b = B + dir * 2 * GH;
      for (int64_t k = 0; k < GH; ++k) {
        wb_[static_cast<size_t>(k)] = static_cast<double>(b[k]);
        rb_[static_cast<size_t>(k)] = static_cast<double>(b[GH + k]);
      }
    }
    p_.assign(static_cast<size_t>(3 * H_), 0.0);
    if (P)
      for (int64_t k = 0; k < 3 * H_; ++k) p_[static_cast<size_t>(k)] = static_cast<double>(P[dir * 3 * H_ + k]);
    xw_.resize(static_cast<size_t>(GH));
    hr_.resize(static_cast<size_t>(GH));
  }

  // x: one input row; h, c: the state (c only for LSTM), overwritten with the next one.
  void Step(const T* x, std::vector<double>& h, std::vector<double>& c) {
    const int64_t GH = G_ * H_;
    for (int64_t row = 0; row < GH; ++row) {
      double s = wb_[static_cast<size_t>(row)];
      for (int64_t i = 0; i < I_; ++i) s += static_cast<double>(W_[row * I_ + i]) * static_cast<double>(x[i]);
      xw_[static_cast<size_t>(row)] = s;
      hr_[static_cast<size_t>(row)] = rb_[static_cast<size_t>(row)] + Dot(R_ + row * H_, h);
    }
    auto act = [&](int k, double v) { return static_cast<double>(a_.act(dir_, k)(static_cast<T>(a_.Clip(v)))); };
    auto at = [](const std::vector<double>& v, int64_t gate, int64_t H, int64_t j) {
      return v[static_cast<size_t>(gate * H + j)];
    };
    std::vector<double> next(static_cast<size_t>(H_));
    switch (a_.op) {
      case RecurrentOp::kRnn:
        for (int64_t j = 0; j < H_; ++j) next[static_cast<size_t>(j)] = act(0, at(xw_, 0, H_, j) + at(hr_, 0, H_, j));
        break;
      case RecurrentOp::kGru: {
        std::vector<double> z(static_cast<size_t>(H_)), rh(static_cast<size_t>(H_));
        for (int64_t j = 0; j < H_; ++j) {
          z[static_cast<size_t>(j)] = act(0, at(xw_, 0, H_, j) + at(hr_, 0, H_, j));
          const double r = act(0, at(xw_, 1, H_, j) + at(hr_, 1, H_, j));
          rh[static_cast<size_t>(j)] = a_.linear_before_reset ? r : r * h[static_cast<size_t>(j)];
        }
        for (int64_t j = 0; j < H_; ++j) {
          double pre;
          if (a_.linear_before_reset) {
            pre = at(xw_, 2, H_, j) + rh[static_cast<size_t>(j)] * at(hr_, 2, H_, j);
          } else {
            pre = at(xw_, 2, H_, j) + rb_[static_cast<size_t>(2 * H_ + j)] + Dot(R_ + (2 * H_ + j) * H_, rh);
          }
          const double hh = act(1, pre);
          const double zj = z[static_cast<size_t>(j)];
          next[static_cast<size_t>(j)] = (1.0 - zj) * hh + zj * h[static_cast<size_t>(j)];
        }
        break;
      }
      case RecurrentOp::kLstm: {
        // Gates in W/R/B: i, o, f, c; peepholes in P: i, o, f.
        for (int64_t j = 0; j < H_; ++j) {
          const size_t u = static_cast<size_t>(j);
          const double c_prev = c[u];
          const double i = act(0, at(xw_, 0, H_, j) + at(hr_, 0, H_, j) + p_[u] * c_prev);
          const double f = a_.input_forget ? 1.0 - i
                                           : act(0, at(xw_, 2, H_, j) + at(hr_, 2, H_, j) +
                                                        p_[static_cast<size_t>(2 * H_ + j)] * c_prev);
          const double g = act(1, at(xw_, 3, H_, j) + at(hr_, 3, H_, j));
          const double c_new = f * c_prev + i * g;
          const double o = act(0, at(xw_, 1, H_, j) + at(hr_, 1, H_, j) + p_[static_cast<size_t>(H_ + j)] * c_new);
          c[u] = static_cast<double>(static_cast<T>(c_new));
          // h takes the cell unclipped (as ONNX Runtime does: clip bounds the gates' inputs).
          next[u] = o * static_cast<double>(a_.act(dir_, 2)(static_cast<T>(c_new)));
        }
        break;
      }
    }
    for (int64_t j = 0; j < H_; ++j) h[static_cast<size_t>(j)] = static_cast<double>(static_cast<T>(next[static_cast<size_t>(j)]));
  }

 private:
  double Dot(const T* row, const std::vector<double>& v) const {
    double s = 0.0;
    for (int64_t k = 0; k < H_; ++k) s += static_cast<double>(row[k]) * v[static_cast<size_t>(k)];
    return s;
  }

  const RecurrentAttrs& a_;
  int64_t H_, I_, G_;
  int dir_;
  const T* W_;
  const T* R_;
  std::vector<double> wb_, rb_, p_, xw_, hr_;
};

template <class T>
Status Run(const RecurrentAttrs& a, KernelContext& ctx) {
  RecurrentDims d;
  WH_RETURN_IF_ERROR(d.Resolve(a, ctx.inputs));
  auto input = [&](int i) -> const Tensor* {
    return i < static_cast<int>(ctx.inputs.size()) ? ctx.inputs[static_cast<size_t>(i)] : nullptr;
  };
  auto output = [&](int i) -> Tensor* {
    return i < static_cast<int>(ctx.outputs.size()) ? ctx.outputs[static_cast<size_t>(i)] : nullptr;
  };
  WH_ASSIGN_OR_RETURN(std::vector<int64_t> lens, ResolveSequenceLengths(input(kRnnSeqLens), d));
  const bool lstm = a.op == RecurrentOp::kLstm;
  const T* X = DataOrNull<T>(input(kRnnX));
  const T* W = DataOrNull<T>(input(kRnnW));
  const T* R = DataOrNull<T>(input(kRnnR));
  const T* B = DataOrNull<T>(input(kRnnB));
  const T* H0 = DataOrNull<T>(input(kRnnInitialH));
  const T* C0 = lstm ? DataOrNull<T>(input(kRnnInitialC)) : nullptr;
  const T* P = lstm ? DataOrNull<T>(input(kRnnP)) : nullptr;
  Tensor* y = output(0);
  Tensor* yh = output(1);
  Tensor* yc = lstm ? output(2) : nullptr;
  T* Y = y ? y->template data<T>() : nullptr;
  if (Y) std::fill(Y, Y + y->numel(), T(0));
  const int64_t H = d.hidden;
  std::vector<double> h(static_cast<size_t>(H)), c(static_cast<size_t>(H));
  for (int dir = 0; dir < d.num_directions; ++dir) {
    Cell<T> cell(a, d, dir, W, R, B, P);
    for (int64_t b = 0; b < d.batch; ++b) {
      const int64_t so = d.StateOffset(a.layout, dir, b);
      for (int64_t j = 0; j < H; ++j) {
        h[static_cast<size_t>(j)] = H0 ? static_cast<double>(H0[so + j]) : 0.0;
        c[static_cast<size_t>(j)] = C0 ? static_cast<double>(C0[so + j]) : 0.0;
      }
      const int64_t len = lens[static_cast<size_t>(b)];
      for (int64_t s = 0; s < len; ++s) {
        const int64_t t = a.Backward(dir) ? len - 1 - s : s;
        cell.Step(X + d.XRow(a.layout, t, b) * d.input, h, c);
        if (Y)
          for (int64_t j = 0; j < H; ++j) Y[d.YOffset(a.layout, t, dir, b) + j] = static_cast<T>(h[static_cast<size_t>(j)]);
      }
      // An empty sequence has no last step: its Y_h and Y_c are zero (as in ONNX Runtime).
      if (len == 0) {
        std::fill(h.begin(), h.end(), 0.0);
        std::fill(c.begin(), c.end(), 0.0);
      }
      for (int64_t j = 0; j < H; ++j) {
        if (yh) yh->template data<T>()[so + j] = static_cast<T>(h[static_cast<size_t>(j)]);
        if (yc) yc->template data<T>()[so + j] = static_cast<T>(c[static_cast<size_t>(j)]);
      }
    }
  }
  return Status::Ok();
}

class RecurrentReferenceKernel : public OpKernel {
 public:
  explicit RecurrentReferenceKernel(const RecurrentAttrs& a) : a_(a) {}

  Status Compute(KernelContext& ctx) const override {
    if (a_.dtype == DType::kFloat64) return Run<double>(a_, ctx);
    return Run<float>(a_, ctx);
  }

 private:
  RecurrentAttrs a_;
};

KernelOr Make(const RecurrentAttrs& a, const KernelInit&) {
  return std::unique_ptr<OpKernel>(std::make_unique<RecurrentReferenceKernel>(a));
}

}  // namespace

const RecurrentFns kRecurrentFns{&Make, &Make, &Make};

}  // namespace whittle::reference
