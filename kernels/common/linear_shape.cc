#include "kernels/common/linear_shape.h"

#include <algorithm>
#include <string>

namespace whittle {
namespace {

std::string Str(int64_t v) { return std::to_string(v); }

bool IsLinearType(DType t) {
  return t == DType::kFloat32 || t == DType::kFloat64 || t == DType::kInt32 || t == DType::kInt64 ||
         t == DType::kUInt32 || t == DType::kUInt64;
}

Status CheckLinearInit(const KernelInit& init, const char* op) {
  const DType dt = init.input_dtypes.empty() ? DType::kUndefined : init.input_dtypes[0];
  if (!IsLinearType(dt))
    return Unimplemented(std::string(op) + " supports float, double, int32, int64, uint32 and uint64, got " +
                         DTypeName(dt));
  if (FusedActivation::FromAttrs(init.attrs).kind != FusedActivation::kNone && dt != DType::kFloat32)
    return Unimplemented(std::string("a fused activation needs float32 ") + op);
  return Status::Ok();
}

}  // namespace

Status MatMulPlan::Resolve(const Dims& a, const Dims& b) {
  if (a.empty() || b.empty()) return InvalidArgument("MatMul inputs must have rank >= 1");
  const bool a_vec = a.size() == 1, b_vec = b.size() == 1;
  const Dims ad = a_vec ? Dims{1, a[0]} : a;
  const Dims bd = b_vec ? Dims{b[0], 1} : b;
  const size_t ra = ad.size(), rb = bd.size();
  M = ad[ra - 2];
  K = ad[ra - 1];
  N = bd[rb - 1];
  if (bd[rb - 2] != K)
    return InvalidArgument("MatMul inner dims differ: A " + DimsToString(a) + " x B " + DimsToString(b));
  const size_t nb = std::max(ra, rb) - 2, na = ra - 2, nbb = rb - 2;
  out_batch.assign(nb, 1);
  a_step.assign(nb, 0);
  b_step.assign(nb, 0);
  int64_t a_stride = 1, b_stride = 1, a_count = 1;
  for (size_t k = 0; k < nb; ++k) {
    const size_t i = nb - 1 - k;  // right-aligned batch position
    const int64_t da = k < na ? ad[na - 1 - k] : 1;
    const int64_t db = k < nbb ? bd[nbb - 1 - k] : 1;
    if (da != db && da != 1 && db != 1)
      return InvalidArgument("MatMul batch dims do not broadcast: A " + DimsToString(a) + " x B " + DimsToString(b));
    out_batch[i] = da == 1 ? db : da;
    a_step[i] = da == 1 ? 0 : a_stride;
    b_step[i] = db == 1 ? 0 : b_stride;
    a_stride *= da;
    b_stride *= db;
    a_count *= da;
  }
  batch = 1;
  for (int64_t d : out_batch) batch *= d;
  b_shared = true;
  for (int64_t s : b_step) b_shared = b_shared && s == 0;
  a_contiguous = a_count == batch;
  out_dims.assign(out_batch.begin(), out_batch.end());
  if (!a_vec) out_dims.push_back(M);
  if (!b_vec) out_dims.push_back(N);
  return Status::Ok();
}

void MatMulPlan::Offsets(int64_t i, int64_t* a_mat, int64_t* b_mat) const {
  int64_t ao = 0, bo = 0;
  for (size_t k = out_batch.size(); k-- > 0;) {
    const int64_t idx = i % out_batch[k];
    i /= out_batch[k];
    ao += idx * a_step[k];
    bo += idx * b_step[k];
  }
  *a_mat = ao;
  *b_mat = bo;
}

StatusOr<GemmBias> GemmBias::Resolve(const Dims& c, int64_t M, int64_t N) {
  GemmBias g;
  const std::string err = "Gemm C " + DimsToString(c) + " does not broadcast to [" + Str(M) + "," + Str(N) + "]";
  if (c.size() > 2) return InvalidArgument(err);
  const int64_t cm = c.size() == 2 ? c[0] : 1;
  const int64_t cn = c.empty() ? 1 : c.back();
  if ((cm != 1 && cm != M) || (cn != 1 && cn != N)) return InvalidArgument(err);
  g.row_step = cm == 1 ? 0 : cn;
  g.col_step = cn == 1 ? 0 : 1;
  return g;
}

Status ResolveGemmDims(const Dims& a, const Dims& b, bool trans_a, bool trans_b, int64_t* M, int64_t* N,
                       int64_t* K) {
  if (a.size() != 2 || b.size() != 2)
    return InvalidArgument("Gemm A and B must be 2-D, got " + DimsToString(a) + " and " + DimsToString(b));
  *M = trans_a ? a[1] : a[0];
  *K = trans_a ? a[0] : a[1];
  const int64_t kb = trans_b ? b[1] : b[0];
  *N = trans_b ? b[0] : b[1];
  if (kb != *K)
    return InvalidArgument("Gemm inner dims differ: op(A) is [" + Str(*M) + "," + Str(*K) + "], op(B) is [" +
                           Str(kb) + "," + Str(*N) + "]");
  return Status::Ok();
}

StatusOr<GemmAttrs> ParseGemmAttrs(const KernelInit& init) {
  WH_RETURN_IF_ERROR(CheckLinearInit(init, "Gemm"));
  const AttributeMap& a = init.attrs;
  GemmAttrs g;
  g.trans_a = a.GetInt("transA", 0) != 0;
  g.trans_b = a.GetInt("transB", 0) != 0;
  g.alpha = a.GetFloat("alpha", 1.f);
  g.beta = a.GetFloat("beta", 1.f);
  g.act = FusedActivation::FromAttrs(a);
  return g;
}

StatusOr<MatMulAttrs> ParseMatMulAttrs(const KernelInit& init) {
  WH_RETURN_IF_ERROR(CheckLinearInit(init, "MatMul"));
  return MatMulAttrs{FusedActivation::FromAttrs(init.attrs)};
}

StatusOr<EinsumAttrs> ParseEinsumAttrs(const KernelInit& init) {
  const DType dt = init.input_dtypes.empty() ? DType::kUndefined : init.input_dtypes[0];
  if (!IsLinearType(dt))
    return Unimplemented(std::string("Einsum supports float, double, int32, int64, uint32 and uint64, got ") +
                         DTypeName(dt));
  for (DType t : init.input_dtypes)
    if (t != dt) return InvalidArgument("Einsum inputs must share one element type");
  if (!init.attrs.Has("equation")) return InvalidArgument("Einsum needs the equation attribute");
  EinsumAttrs a;
  WH_ASSIGN_OR_RETURN(a.equation, EinsumEquation::Parse(init.attrs.GetString("equation", ""),
                                                        static_cast<int>(init.input_dtypes.size())));
  return a;
}

Status EinsumPlan::Resolve(const EinsumEquation& eq, const std::vector<Dims>& inputs) {
  std::vector<SymShape> shapes;
  for (const Dims& d : inputs) shapes.push_back(ToSymShape(d));
  WH_ASSIGN_OR_RETURN(EinsumDims d, BindEinsumDims(eq, shapes));
  // Loop axes: ids 0..127 for labels, 128 + j for ellipsis dim j.
  std::vector<int> axes;
  for (int l : eq.output) {
    if (l != EinsumEquation::kEllipsis) axes.push_back(l);
    else for (size_t j = 0; j < d.ellipsis.size(); ++j) axes.push_back(128 + static_cast<int>(j));
  }
  out_axes = axes.size();
  for (int l : eq.Labels())
    if (std::find(eq.output.begin(), eq.output.end(), l) == eq.output.end()) axes.push_back(l);
  std::vector<int> axis_of(128 + d.ellipsis.size(), -1);
  sizes.clear();
  for (size_t a = 0; a < axes.size(); ++a) {
    axis_of[static_cast<size_t>(axes[a])] = static_cast<int>(a);
    const Dim& dim = axes[a] < 128 ? d.label[static_cast<size_t>(axes[a])] : d.ellipsis[static_cast<size_t>(axes[a] - 128)];
    sizes.push_back(dim.value);
  }
  out_dims.assign(sizes.begin(), sizes.begin() + static_cast<std::ptrdiff_t>(out_axes));
  strides.assign(inputs.size(), std::vector<int64_t>(axes.size(), 0));
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Dims& dims = inputs[i];
    const size_t rank = dims.size();
    size_t letters = 0;
    for (int l : eq.inputs[i]) letters += l != EinsumEquation::kEllipsis;
    const size_t ell_rank = rank - letters, ell_first = d.ellipsis.size() - ell_rank;
    // Subscript of each dim of operand i: its loop axis.
    std::vector<int> dim_axis;
    for (int l : eq.inputs[i]) {
      if (l != EinsumEquation::kEllipsis) dim_axis.push_back(axis_of[static_cast<size_t>(l)]);
      else for (size_t j = 0; j < ell_rank; ++j) dim_axis.push_back(axis_of[128 + ell_first + j]);
    }
    int64_t stride = 1;
    for (size_t k = rank; k-- > 0;) {
      const size_t a = static_cast<size_t>(dim_axis[k]);
      if (!(dims[k] == 1 && sizes[a] != 1)) strides[i][a] += stride;
      stride *= dims[k];
    }
  }
  return Status::Ok();
}

}  // namespace whittle
