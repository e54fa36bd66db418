// libFuzzer target: model bytes -> ParseModel (protobuf, conversion, op validation, shape
// inference) -> Session::FromGraph (Verify, ValidateNode, InferShapes, the runtime's rewrites,
// kernel preparation) -> one single-threaded Run on small generated inputs (free dims 1 or 2,
// each input at most 1 MiB). Errors are expected; a crash, a sanitizer report or a timeout is a
// finding. Models whose static shapes exceed fuzz_util.h's screen are not run (known issue 41).
#include <cstdint>
#include <string>

#include "lib/onnx/model_io.h"
#include "tests/fuzz/fuzz_util.h"
#include "whittle/session.h"

using namespace whittle;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::Init();
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  // The last byte picks the free dims (bit i: the i-th free dim is 2 instead of 1).
  const uint32_t pick = size > 0 ? data[size - 1] : 0;
  auto g = ParseModel(bytes, fuzz::ScratchModelDir());
  if (!g.ok() || !fuzz::ShapesAreSmall(*g)) return 0;
  SessionOptions opts;
  opts.num_threads = 1;
  opts.blocked_layout = (pick & 0x80) == 0;
  auto s = Session::FromGraph(std::move(*g), opts);
  if (!s.ok()) return 0;
  fuzz::RunSmall(**s, pick);
  return 0;
}
