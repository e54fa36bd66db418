// libFuzzer target: the data readers of lib/data. The first byte picks the reader: .npy bytes
// (ParseNpy, then MakeDataset and a SerializeNpy round trip that must give the same tensor), .npz
// (ParseNpz), IDX (ParseIdx), the file readers (ReadIdx with gzip, ReadNpz, ReadNpy) and the
// dataset-spec parser (LoadDataset). For the spec, the text up to the first newline is the spec,
// where '@' and '#' stand for two scratch files holding the rest of the input (a 2-byte length,
// file A, then file B). Errors are expected; crashes, sanitizer reports and timeouts are findings.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "lib/data/dataset.h"
#include "lib/data/idx.h"
#include "lib/data/npy.h"
#include "lib/data/npz.h"
#include "tests/fuzz/fuzz_util.h"

using namespace whittle;

namespace {

void NpyRoundTrip(const std::string& bytes) {
  auto t = ParseNpy(bytes, "fuzz.npy");
  if (!t.ok()) return;
  (void)MakeDataset(*t, Tensor(), "fuzz.npy", 3);
  auto again = SerializeNpy(*t);
  if (!again.ok()) return;  // dtypes NumPy cannot name
  auto back = ParseNpy(*again, "fuzz-roundtrip.npy");
  if (!back.ok() || !back->BitwiseEquals(*t)) __builtin_trap();  // the writer and the reader disagree
}

void Spec(const std::string& in) {
  const size_t nl = in.find('\n');
  if (nl == std::string::npos) return;
  std::string spec = in.substr(0, nl);
  if (spec.find('/') != std::string::npos) return;  // only the scratch files, never the file system
  std::string rest = in.substr(nl + 1);
  size_t len_a = 0;
  if (rest.size() >= 2) len_a = static_cast<uint8_t>(rest[0]) | static_cast<size_t>(static_cast<uint8_t>(rest[1])) << 8;
  rest = rest.size() >= 2 ? rest.substr(2) : std::string();
  if (len_a > rest.size()) len_a = rest.size();
  const std::string a = fuzz::WriteScratch(".a", rest.substr(0, len_a));
  const std::string b = fuzz::WriteScratch(".b", rest.substr(len_a));
  std::string expanded;
  for (char c : spec) expanded += c == '@' ? a : c == '#' ? b : std::string(1, c);
  const int64_t limit = static_cast<int64_t>(spec.size() % 4) - 1;  // -1 (all), 0, 1, 2
  (void)LoadDataset(expanded, limit);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // fashion-mnist:... would read the real data set (60,000 images) on every input.
  setenv("WHITTLE_FASHION_MNIST_DIR", "/nonexistent-whittle-fuzz", 1);
  fuzz::Init();  // the npz reader holds members to the memory budget
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 6) {
    case 0: NpyRoundTrip(bytes); break;
    case 1: (void)ParseNpz(bytes, "fuzz.npz"); break;
    case 2: (void)ParseIdx(bytes, "fuzz.idx"); break;
    case 3: (void)ReadIdx(fuzz::WriteScratch(".idx", bytes)); break;  // gzip-compressed IDX too
    case 4: (void)ReadNpz(fuzz::WriteScratch(".npz", bytes)); break;
    default: Spec(bytes); break;
  }
  return 0;
}
