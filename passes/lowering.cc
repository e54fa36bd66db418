#include "passes/lowering.h"

#include <set>

#include "lib/ir/domain.h"
#include "passes/binarize/binarize_pass.h"
#include "passes/circulant/circulant_pass.h"
#include "passes/cluster/cluster_pass.h"

namespace whittle {

StatusOr<int> LowerEachNode(Graph& g, const std::function<bool(const Node&)>& match,
                            const std::function<Status(const Node&)>& lower) {
  std::set<int> dead;
  const size_t count = g.nodes().size();
  for (size_t ni = 0; ni < count; ++ni) {
    const Node node = g.nodes()[ni];
    if (!match(node)) continue;
    WH_RETURN_IF_ERROR(lower(node));
    Node& fin = g.nodes().back();
    fin.name = node.name;
    fin.outputs = node.outputs;
    dead.insert(static_cast<int>(ni));
  }
  g.RemoveNodes(dead);
  WH_RETURN_IF_ERROR(g.Compact());
  return static_cast<int>(dead.size());
}

StatusOr<std::string> LowerCompressedOps(Graph& g, bool circulant_dense) {
  std::string summary;
  auto note = [&](int n, const char* what) {
    if (n > 0) summary += (summary.empty() ? "" : ", ") + std::to_string(n) + " " + what;
  };
  WH_ASSIGN_OR_RETURN(int codebooks, LowerCodebooks(g));
  note(codebooks, "CodebookMatMul");
  WH_ASSIGN_OR_RETURN(int binary, LowerBinary(g));
  note(binary, "BinaryMatMul/BinaryConv");
  auto circulant = circulant_dense ? LowerCirculant(g) : LowerCirculantDft(g);
  if (!circulant.ok())
    return circulant.status().WithContext(circulant_dense ? "--portable" : "--portable (--portable-dense avoids the DFT op)");
  note(*circulant, circulant_dense ? "BlockCirculantMatMul (dense)" : "BlockCirculantMatMul (DFT)");
  for (const Node& n : g.nodes())
    if (n.domain == kWhittleDomain)
      return Unimplemented("--portable: no standard-ONNX lowering for " + n.DebugName() + " (" + n.op_type + ")");
  if (summary.empty()) return summary;
  g.opset_imports.erase(kWhittleDomain);
  return "--portable: lowered " + summary + " to standard ONNX ops";
}

}  // namespace whittle
