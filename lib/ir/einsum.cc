#include "lib/ir/einsum.h"

#include <algorithm>
#include <cctype>

namespace whittle {
namespace {

std::string Str(int64_t v) { return std::to_string(v); }

bool IsLabel(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

// One term ("ab...c") into labels; `what` names it in errors.
Status ParseTerm(const std::string& eq, const std::string& term, const std::string& what, std::vector<int>* out) {
  bool ellipsis = false;
  for (size_t i = 0; i < term.size();) {
    const char c = term[i];
    if (IsLabel(c)) {
      out->push_back(static_cast<unsigned char>(c));
      ++i;
    } else if (c == '.') {
      if (term.compare(i, 3, "...") != 0)
        return InvalidArgument("Einsum equation '" + eq + "': " + what + " has a '.' that is not part of '...'");
      if (ellipsis) return InvalidArgument("Einsum equation '" + eq + "': " + what + " has more than one '...'");
      ellipsis = true;
      out->push_back(EinsumEquation::kEllipsis);
      i += 3;
    } else {
      return InvalidArgument("Einsum equation '" + eq + "': unexpected character '" + std::string(1, c) + "' in " +
                             what + " (subscripts are letters and '...')");
    }
  }
  return Status::Ok();
}

// Merges two sizes of one label or ellipsis dim: equal, or one of them is 1 (numpy broadcast).
bool MergeDim(const Dim& a, const Dim& b, Dim* out) {
  if (a.known() && b.known()) {
    if (a.value == b.value || b.value == 1) *out = a;
    else if (a.value == 1) *out = b;
    else return false;
    return true;
  }
  if (a.known()) *out = a.value == 1 ? b : a;
  else if (b.known()) *out = b.value == 1 ? a : b;
  else *out = (a == b) ? a : Dim();
  return true;
}

}  // namespace

StatusOr<EinsumEquation> EinsumEquation::Parse(const std::string& equation, int num_inputs) {
  std::string eq;
  for (char c : equation)
    if (!std::isspace(static_cast<unsigned char>(c))) eq.push_back(c);
  if (eq.empty()) return InvalidArgument("Einsum equation is empty");
  EinsumEquation e;
  const size_t arrow = eq.find("->");
  if (arrow != std::string::npos && eq.find("->", arrow + 2) != std::string::npos)
    return InvalidArgument("Einsum equation '" + equation + "' has more than one '->'");
  const std::string lhs = eq.substr(0, arrow);
  size_t start = 0;
  for (int t = 0;; ++t) {
    const size_t comma = lhs.find(',', start);
    const std::string term = lhs.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    e.inputs.emplace_back();
    WH_RETURN_IF_ERROR(ParseTerm(equation, term, "input term " + Str(t), &e.inputs.back()));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (static_cast<int>(e.inputs.size()) != num_inputs)
    return InvalidArgument("Einsum equation '" + equation + "' has " + Str(static_cast<int64_t>(e.inputs.size())) +
                           " input terms but the node has " + Str(num_inputs) + " inputs");
  int count[128] = {};
  bool any_ellipsis = false;
  for (const auto& term : e.inputs)
    for (int l : term) {
      if (l == kEllipsis) any_ellipsis = true;
      else ++count[l];
    }
  if (arrow != std::string::npos) {
    e.explicit_output = true;
    const std::string rhs = eq.substr(arrow + 2);
    if (rhs.find(',') != std::string::npos)
      return InvalidArgument("Einsum equation '" + equation + "': the output has a ','");
    WH_RETURN_IF_ERROR(ParseTerm(equation, rhs, "the output", &e.output));
    bool seen[128] = {};
    for (int l : e.output) {
      if (l == kEllipsis) continue;
      if (seen[l])
        return InvalidArgument("Einsum equation '" + equation + "': output label '" +
                               std::string(1, static_cast<char>(l)) + "' is repeated");
      seen[l] = true;
      if (count[l] == 0)
        return InvalidArgument("Einsum equation '" + equation + "': output label '" +
                               std::string(1, static_cast<char>(l)) + "' does not occur in the inputs");
    }
  } else {
    if (any_ellipsis) e.output.push_back(kEllipsis);
    for (int l = 0; l < 128; ++l)
      if (count[l] == 1) e.output.push_back(l);
  }
  return e;
}

std::vector<int> EinsumEquation::Labels() const {
  bool seen[128] = {};
  for (const auto& term : inputs)
    for (int l : term)
      if (l != kEllipsis) seen[l] = true;
  std::vector<int> out;
  for (int l = 0; l < 128; ++l)
    if (seen[l]) out.push_back(l);
  return out;
}

StatusOr<EinsumDims> BindEinsumDims(const EinsumEquation& eq, const std::vector<SymShape>& shapes) {
  if (shapes.size() != eq.inputs.size())
    return InvalidArgument("Einsum has " + Str(static_cast<int64_t>(shapes.size())) + " inputs for " +
                           Str(static_cast<int64_t>(eq.inputs.size())) + " equation terms");
  EinsumDims d;
  d.label.assign(128, Dim());
  bool bound[128] = {};
  // Ellipsis rank first: the dims of each operand not covered by letters.
  std::vector<size_t> ell_rank(shapes.size(), 0);
  size_t ell = 0;
  for (size_t i = 0; i < shapes.size(); ++i) {
    const auto& term = eq.inputs[i];
    const bool has_ell = std::find(term.begin(), term.end(), EinsumEquation::kEllipsis) != term.end();
    const size_t letters = term.size() - (has_ell ? 1 : 0);
    const size_t rank = shapes[i].size();
    if (has_ell ? rank < letters : rank != letters)
      return InvalidArgument("Einsum input " + Str(static_cast<int64_t>(i)) + " has rank " +
                             Str(static_cast<int64_t>(rank)) + " but its term has " +
                             Str(static_cast<int64_t>(letters)) + " subscripts" + (has_ell ? " and '...'" : ""));
    if (has_ell) ell_rank[i] = rank - letters;
    ell = std::max(ell, ell_rank[i]);
  }
  d.ellipsis.assign(ell, Dim(1));
  for (size_t i = 0; i < shapes.size(); ++i) {
    const auto& term = eq.inputs[i];
    size_t axis = 0;
    for (int l : term) {
      if (l == EinsumEquation::kEllipsis) {
        for (size_t j = 0; j < ell_rank[i]; ++j, ++axis) {
          Dim& slot = d.ellipsis[ell - ell_rank[i] + j];
          if (!MergeDim(slot, shapes[i][axis], &slot))
            return InvalidArgument("Einsum input " + Str(static_cast<int64_t>(i)) + " " +
                                   SymShapeToString(shapes[i]) + ": its '...' dims do not broadcast with the others");
        }
        continue;
      }
      const Dim& dim = shapes[i][axis++];
      if (!bound[l]) {
        d.label[static_cast<size_t>(l)] = dim;
        bound[l] = true;
      } else if (!MergeDim(d.label[static_cast<size_t>(l)], dim, &d.label[static_cast<size_t>(l)])) {
        return InvalidArgument("Einsum label '" + std::string(1, static_cast<char>(l)) + "' has sizes " +
                               Str(d.label[static_cast<size_t>(l)].value) + " and " + Str(dim.value) +
                               " (input " + Str(static_cast<int64_t>(i)) + " " + SymShapeToString(shapes[i]) + ")");
      }
    }
  }
  const bool out_ell =
      std::find(eq.output.begin(), eq.output.end(), EinsumEquation::kEllipsis) != eq.output.end();
  if (ell > 0 && !out_ell)
    return InvalidArgument("Einsum: '...' covers " + Str(static_cast<int64_t>(ell)) +
                           " dims of the inputs but the output has no '...'");
  for (int l : eq.output) {
    if (l == EinsumEquation::kEllipsis) d.output.insert(d.output.end(), d.ellipsis.begin(), d.ellipsis.end());
    else d.output.push_back(d.label[static_cast<size_t>(l)]);
  }
  return d;
}

}  // namespace whittle
