#include "lib/data/idx.h"

#include <zlib.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>

#include "lib/data/file_util.h"

namespace whittle {
namespace {

StatusOr<DType> DTypeFromIdxCode(int code) {
  switch (code) {
    case 0x08: return DType::kUInt8;
    case 0x09: return DType::kInt8;
    case 0x0B: return DType::kInt16;
    case 0x0C: return DType::kInt32;
    case 0x0D: return DType::kFloat32;
    case 0x0E: return DType::kFloat64;
    default: break;
  }
  char hex[8];
  std::snprintf(hex, sizeof(hex), "0x%02X", code);
  return InvalidArgument(std::string("unknown element type ") + hex +
                         " (expected 0x08 u8, 0x09 i8, 0x0B i16, 0x0C i32, 0x0D f32, 0x0E f64)");
}

class GzCloser {
 public:
  explicit GzCloser(gzFile f) : f_(f) {}
  ~GzCloser() {
    if (f_) gzclose(f_);
  }
  GzCloser(const GzCloser&) = delete;
  GzCloser& operator=(const GzCloser&) = delete;

 private:
  gzFile f_;
};

uint32_t ReadBE32(const unsigned char* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

// Total file size the IDX header at the start of `bytes` promises, once enough of it is there
// and it is valid; 0 otherwise (ParseIdx then reports what is wrong).
uint64_t PromisedIdxSize(const std::string& bytes) {
  const auto* b = reinterpret_cast<const unsigned char*>(bytes.data());
  if (bytes.size() < 4 || b[0] != 0 || b[1] != 0 || b[3] == 0) return 0;
  StatusOr<DType> dtype = DTypeFromIdxCode(b[2]);
  const size_t header = 4 + 4 * size_t{b[3]};
  if (!dtype.ok() || bytes.size() < header) return 0;
  Dims dims(b[3]);
  for (size_t i = 0; i < dims.size(); ++i) dims[i] = ReadBE32(b + 4 + 4 * i);
  StatusOr<int64_t> numel = CheckedNumElements(dims);
  const uint64_t elem = DTypeSize(*dtype);
  if (!numel.ok() || static_cast<uint64_t>(*numel) > (uint64_t{1} << 62) / elem) return 0;
  return header + static_cast<uint64_t>(*numel) * elem;
}

std::string GzErrorMessage(gzFile f, const std::string& path) {
  int errnum = 0;
  const char* msg = gzerror(f, &errnum);
  std::string m = msg ? msg : "unknown error";
  // zlib usually prefixes the path itself.
  if (m.compare(0, path.size(), path) != 0) m = path + ": " + m;
  return "gzip decompression failed: " + m;
}

// Decompresses a gzip file, stopping one byte past what the IDX header promises so that a
// small hostile file cannot inflate into gigabytes before ParseIdx rejects it.
StatusOr<std::string> ReadGzipIdx(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) return IoError("cannot open " + path + ": " + std::strerror(errno));
  GzCloser closer(f);
  gzbuffer(f, 1 << 17);
  std::string out;
  uint64_t promised = 0;
  char chunk[1 << 16];
  while (promised == 0 || out.size() <= promised) {
    const int n = gzread(f, chunk, sizeof(chunk));
    if (n < 0) return IoError(GzErrorMessage(f, path));
    if (n == 0) break;
    out.append(chunk, static_cast<size_t>(n));
    if (promised == 0) {
      promised = PromisedIdxSize(out);
      // Reserve only plausible sizes: the header is not yet backed by data.
      if (promised != 0 && promised < (uint64_t{1} << 30)) out.reserve(promised + 1);
    }
    if (promised == 0 && out.size() >= 4 + 4 * 255) break;  // no valid header: let ParseIdx say why
  }
  // gzread returns 0 both at a clean end and at a truncated stream; gzerror tells them apart.
  int errnum = 0;
  gzerror(f, &errnum);
  if (errnum != Z_OK && errnum != Z_STREAM_END) return IoError(GzErrorMessage(f, path));
  return out;
}

}  // namespace

StatusOr<Tensor> ParseIdx(const std::string& bytes, const std::string& name) {
  auto fail = [&](const std::string& what) { return InvalidArgument(name + ": not a valid IDX file: " + what); };
  const auto* b = reinterpret_cast<const unsigned char*>(bytes.data());
  if (bytes.size() < 4) return fail("shorter than the 4-byte magic");
  if (b[0] != 0 || b[1] != 0) return fail("bad magic (the first two bytes must be zero)");
  StatusOr<DType> dtype = DTypeFromIdxCode(b[2]);
  if (!dtype.ok()) return fail(dtype.status().message());
  const size_t ndims = b[3];
  if (ndims == 0) return fail("zero dimensions");
  const size_t header = 4 + 4 * ndims;
  if (bytes.size() < header)
    return fail("truncated header (" + std::to_string(ndims) + " dims need " + std::to_string(header) + " bytes)");
  Dims dims(ndims);
  for (size_t i = 0; i < ndims; ++i) dims[i] = ReadBE32(b + 4 + 4 * i);
  StatusOr<int64_t> numel = CheckedNumElements(dims);
  if (!numel.ok()) return fail(numel.status().message());
  const size_t elem = DTypeSize(*dtype);
  if (*numel > std::numeric_limits<int64_t>::max() / static_cast<int64_t>(elem))
    return fail("shape " + DimsToString(dims) + " is too large");
  const uint64_t expected = static_cast<uint64_t>(*numel) * elem;
  const uint64_t present = bytes.size() - header;
  if (present != expected)
    return fail(std::string(present < expected ? "truncated payload" : "trailing bytes after the payload") +
                ": " + DTypeName(*dtype) + " " + DimsToString(dims) + " needs " + std::to_string(expected) +
                " bytes, found " + std::to_string(present));

  Tensor t(*dtype, dims);
  auto* dst = static_cast<unsigned char*>(t.raw_data());
  const unsigned char* src = b + header;
  if (elem == 1) {
    if (expected > 0) std::memcpy(dst, src, expected);
  } else {
    // IDX is big-endian; Whittle tensors are host (little-endian) order.
    for (uint64_t i = 0; i < expected; i += elem) {
      for (size_t k = 0; k < elem; ++k) dst[i + k] = src[i + elem - 1 - k];
    }
  }
  return t;
}

StatusOr<Tensor> ReadIdx(const std::string& path) {
  WH_ASSIGN_OR_RETURN(std::string bytes, ReadFileBytes(path));
  const bool gzipped = bytes.size() >= 2 && static_cast<unsigned char>(bytes[0]) == 0x1f &&
                       static_cast<unsigned char>(bytes[1]) == 0x8b;
  if (!gzipped) return ParseIdx(bytes, path);
  bytes.clear();
  bytes.shrink_to_fit();
  WH_ASSIGN_OR_RETURN(std::string raw, ReadGzipIdx(path));
  return ParseIdx(raw, path);
}

}  // namespace whittle
