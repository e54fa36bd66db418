// libFuzzer target: model bytes -> ParseModel -> one of compress-model's passes through the
// library's PassManager (int8 mode=dynamic, svd rank=1, prune ratio=0.5, cluster k=2; the last byte
// picks it) -> Session::FromGraph on the result and one Run on small generated inputs. Only
// models under 16 kB (the ONNX node tests and small mutants of them) are compressed, so each input
// stays cheap. Errors are expected; crashes, sanitizer reports and timeouts are findings.
#include <cstdint>
#include <string>

#include "lib/onnx/model_io.h"
#include "passes/pass_manager.h"
#include "passes/pass_registry.h"
#include "tests/fuzz/fuzz_util.h"

using namespace whittle;

namespace {

constexpr size_t kMaxModelBytes = 16 * 1024;  // a campaign of 10^6 inputs must be affordable

struct Step {
  const char* pass;
  const char* spec;
};
constexpr Step kSteps[] = {
    {"int8", "mode=dynamic"}, {"svd", "rank=1"}, {"prune", "ratio=0.5"}, {"cluster", "k=2"}};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::Init();
  if (size == 0 || size > kMaxModelBytes) return 0;
  const uint32_t pick = data[size - 1];
  auto g = ParseModel(std::string(reinterpret_cast<const char*>(data), size), fuzz::ScratchModelDir());
  if (!g.ok() || !fuzz::ShapesAreSmall(*g)) return 0;
  const Step& step = kSteps[pick % 4];
  auto options = PassOptions::Parse(step.pass, step.spec);
  if (!options.ok()) __builtin_trap();  // the fixed specs above must parse
  auto pass = MakePass(step.pass, *options);
  if (!pass.ok()) __builtin_trap();
  PassManager pm;
  pm.Add(std::move(*pass));
  PassContext ctx;
  Graph out = *g;
  if (!pm.Run(&out, ctx).ok()) return 0;
  SessionOptions opts;
  opts.num_threads = 1;
  auto s = Session::FromGraph(std::move(out), opts);
  if (s.ok()) fuzz::RunSmall(**s, pick >> 2);
  return 0;
}
