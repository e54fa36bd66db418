#include "passes/lowering.h"

#include "lib/ir/domain.h"
#include "passes/binarize/binarize_pass.h"
#include "passes/circulant/circulant_pass.h"
#include "passes/cluster/cluster_pass.h"

namespace whittle {

StatusOr<std::string> LowerCompressedOps(Graph& g) {
  std::string summary;
  auto note = [&](int n, const char* what) {
    if (n > 0) summary += (summary.empty() ? "" : ", ") + std::to_string(n) + " " + what;
  };
  WH_ASSIGN_OR_RETURN(int codebooks, LowerCodebooks(g));
  note(codebooks, "CodebookMatMul");
  WH_ASSIGN_OR_RETURN(int binary, LowerBinary(g));
  note(binary, "BinaryMatMul/BinaryConv");
  WH_ASSIGN_OR_RETURN(int circulant, LowerCirculant(g));
  note(circulant, "BlockCirculantMatMul");
  for (const Node& n : g.nodes())
    if (n.domain == kWhittleDomain)
      return Unimplemented("--portable: no standard-ONNX lowering for " + n.DebugName() + " (" + n.op_type + ")");
  if (summary.empty()) return summary;
  g.opset_imports.erase(kWhittleDomain);
  return "--portable: lowered " + summary + " to standard ONNX ops";
}

}  // namespace whittle
