#include "passes/lowering.h"

#include "lib/ir/domain.h"
#include "passes/binarize/binarize_pass.h"
#include "passes/circulant/circulant_pass.h"
#include "passes/cluster/cluster_pass.h"

namespace whittle {

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
