// The kernel registry's declarations: a backend's declaration builds its kernel, and where that
// backend has none for the opset, or its factory declines (a null kernel), the reference
// declaration builds it with the same init; Replace hands back what it replaced; the coverage
// table lists every declaration, and every op of the global registry has a reference kernel.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "kernels/coverage.h"
#include "kernels/kernel.h"

namespace whittle {
namespace {

// A kernel that remembers which declaration built it.
class Tagged : public OpKernel {
 public:
  explicit Tagged(std::string tag) : tag(std::move(tag)) {}
  Status Compute(KernelContext&) const override { return Status::Ok(); }
  std::string tag;
};

KernelFactory Make(const std::string& tag) {
  return [tag](const KernelInit&) -> KernelOr { return std::unique_ptr<OpKernel>(new Tagged(tag)); };
}

KernelFactory Decline() {
  return [](const KernelInit&) -> KernelOr { return KernelOr(nullptr); };
}

std::string Built(const KernelRegistry& r, const std::string& op, Backend b, int opset) {
  const AttributeMap attrs;
  KernelInit init{attrs, opset, {DType::kFloat32}, {nullptr}, 1, "node", b};
  const KernelFactory* f = r.Find("", op);
  if (!f) return "none";
  KernelOr k = (*f)(init);
  if (!k.ok()) return "error";
  return *k ? static_cast<const Tagged&>(**k).tag : "null";
}

TEST(KernelRegistryTest, BackendDeclarationThenReference) {
  KernelRegistry r;
  r.Add(DeclareKernel(Backend::kReference, "", "Op", kFloatTypes, Make("ref")));
  r.Add(DeclareKernel(Backend::kCpu, "", "Op", {DType::kFloat32}, Make("cpu-old"), 1, 12));
  r.Add(DeclareKernel(Backend::kCpu, "", "Op", {DType::kFloat32}, Decline(), 13));
  r.Add(DeclareKernel(Backend::kReference, "ai.onnx", "Only", {}, Make("only")));
  EXPECT_EQ(Built(r, "Op", Backend::kReference, 11), "ref");
  EXPECT_EQ(Built(r, "Op", Backend::kCpu, 11), "cpu-old");
  EXPECT_EQ(Built(r, "Op", Backend::kCpu, 13), "ref");   // the CPU's declaration declines
  EXPECT_EQ(Built(r, "Op", Backend::kCuda, 13), "ref");  // no CUDA declaration
  EXPECT_EQ(Built(r, "Only", Backend::kCpu, 1), "only");  // "ai.onnx" is the default domain
  EXPECT_EQ(Built(r, "Missing", Backend::kCpu, 1), "none");
  EXPECT_NE(r.FindDef("", "Op", 12, Backend::kCpu), nullptr);
  EXPECT_EQ(r.FindDef("", "Op", 12, Backend::kCuda), nullptr);
}

TEST(KernelRegistryTest, ReplaceReturnsTheReplacedFactory) {
  KernelRegistry r;
  r.Add(DeclareKernel(Backend::kReference, "", "Op", {}, Make("ref")));
  EXPECT_FALSE(r.Replace(DeclareKernel(Backend::kCuda, "", "Op", {}, Make("a"))));  // added
  KernelFactory old = r.Replace(DeclareKernel(Backend::kCuda, "", "Op", {}, Make("b")));
  ASSERT_TRUE(old);
  EXPECT_EQ(Built(r, "Op", Backend::kCuda, 1), "b");
}

TEST(KernelRegistryTest, CoverageListsEveryDeclaration) {
  KernelRegistry r;
  r.Add(DeclareKernel(Backend::kReference, "", "Op", kFloatTypes, Make("ref")));
  r.Add(DeclareKernel(Backend::kCpu, "", "Op", {DType::kFloat32}, Make("cpu"), 7, 12));
  r.Add(DeclareKernel(Backend::kReference, "", "Ref", {DType::kBool}, Make("ref")));
  const std::string text = KernelCoverage(r, false);
  EXPECT_NE(text.find("| Op | ai.onnx | 1+ float | 7-12 f32 |"), std::string::npos) << text;
  EXPECT_NE(text.find("| Ref | ai.onnx | 1+ bool | ref |"), std::string::npos) << text;
  const std::string json = KernelCoverage(r, true, [](const std::string&, const std::string&) { return 6; });
  EXPECT_NE(json.find("\"op\": \"Op\", \"backend\": \"cpu\", \"since_version\": 7, \"end_version\": 12, "
                      "\"dtypes\": [\"float32\"]"),
            std::string::npos)
      << json;
  EXPECT_NE(json.find("\"op\": \"Ref\", \"backend\": \"reference\", \"since_version\": 6"), std::string::npos);
}

TEST(KernelRegistryTest, EveryOpHasAReferenceKernel) {
  RegisterAllKernels();
  for (const KernelDef* d : KernelRegistry::Global().Declarations()) {
    if (d->domain.rfind("test.", 0) == 0) continue;  // ops other tests register
    EXPECT_NE(KernelRegistry::Global().FindDef(d->domain, d->op_type, d->since_version, Backend::kReference), nullptr)
        << d->domain << "::" << d->op_type;
  }
}

}  // namespace
}  // namespace whittle
