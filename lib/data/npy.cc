#include "lib/data/npy.h"

#include <cstring>
#include <limits>

#include "lib/data/file_util.h"

namespace whittle {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicLen = 6;

struct DescrEntry {
  const char* code;  // kind + size, as in '<f4'
  DType dtype;
};

constexpr DescrEntry kDescrs[] = {
    {"f4", DType::kFloat32}, {"f8", DType::kFloat64}, {"f2", DType::kFloat16}, {"i1", DType::kInt8},
    {"i2", DType::kInt16},   {"i4", DType::kInt32},   {"i8", DType::kInt64},   {"u1", DType::kUInt8},
    {"u2", DType::kUInt16},  {"u4", DType::kUInt32},  {"u8", DType::kUInt64},  {"b1", DType::kBool},
};

StatusOr<DType> DTypeFromDescr(const std::string& descr) {
  if (descr.size() != 3) return InvalidArgument("unsupported dtype '" + descr + "' (expected e.g. '<f4')");
  const char order = descr[0];
  const std::string code = descr.substr(1);
  for (const DescrEntry& e : kDescrs) {
    if (code != e.code) continue;
    const bool one_byte = DTypeSize(e.dtype) == 1;
    // Byte order is meaningless for one-byte types; NumPy writes '|' for them.
    if (order == '<' || (one_byte && (order == '|' || order == '>' || order == '='))) return e.dtype;
    if (order == '>')
      return InvalidArgument("big-endian dtype '" + descr + "' is not supported (convert with astype('<" + code +
                             "'))");
    return InvalidArgument("unsupported byte order in dtype '" + descr + "'");
  }
  return InvalidArgument("unsupported dtype '" + descr +
                         "' (supported: f2 f4 f8 i1 i2 i4 i8 u1 u2 u4 u8 b1, little-endian)");
}

StatusOr<std::string> DescrFromDType(DType dtype) {
  for (const DescrEntry& e : kDescrs) {
    if (e.dtype == dtype) return std::string(DTypeSize(dtype) == 1 ? "|" : "<") + e.code;
  }
  return InvalidArgument(std::string("NumPy has no dtype for ") + DTypeName(dtype));
}

// Parses the Python dict literal of an .npy header, e.g.
//   {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
// Only the subset NumPy writes is accepted: string keys, a string, a bool and a tuple of ints.
class HeaderParser {
 public:
  explicit HeaderParser(const std::string& text) : s_(text) {}

  Status Parse(std::string* descr, bool* fortran_order, Dims* shape) {
    bool has_descr = false, has_order = false, has_shape = false;
    SkipSpace();
    if (!Consume('{')) return Error("expected '{'");
    while (true) {
      SkipSpace();
      if (Consume('}')) break;
      std::string key;
      WH_RETURN_IF_ERROR(ParseString(&key));
      SkipSpace();
      if (!Consume(':')) return Error("expected ':' after key '" + key + "'");
      SkipSpace();
      if (key == "descr") {
        if (has_descr) return Error("duplicate key 'descr'");
        has_descr = true;
        if (pos_ < s_.size() && s_[pos_] == '[') return Error("structured dtypes are not supported");
        WH_RETURN_IF_ERROR(ParseString(descr));
      } else if (key == "fortran_order") {
        if (has_order) return Error("duplicate key 'fortran_order'");
        has_order = true;
        WH_RETURN_IF_ERROR(ParseBool(fortran_order));
      } else if (key == "shape") {
        if (has_shape) return Error("duplicate key 'shape'");
        has_shape = true;
        WH_RETURN_IF_ERROR(ParseShape(shape));
      } else {
        return Error("unexpected key '" + key + "'");
      }
      SkipSpace();
      if (Consume(',')) continue;
      SkipSpace();
      if (Consume('}')) break;
      return Error("expected ',' or '}'");
    }
    SkipSpace();
    if (pos_ != s_.size()) return Error("unexpected text after '}'");
    if (!has_descr || !has_order || !has_shape)
      return Error("header must have the keys 'descr', 'fortran_order' and 'shape'");
    return Status::Ok();
  }

 private:
  Status Error(const std::string& what) const {
    return InvalidArgument("malformed header at offset " + std::to_string(pos_) + ": " + what);
  }
  void SkipSpace() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) ++pos_;
  }
  bool Consume(char c) {
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  bool ConsumeWord(const char* w) {
    const size_t n = std::strlen(w);
    if (s_.compare(pos_, n, w) == 0) {
      pos_ += n;
      return true;
    }
    return false;
  }
  Status ParseString(std::string* out) {
    if (pos_ >= s_.size() || (s_[pos_] != '\'' && s_[pos_] != '"')) return Error("expected a quoted string");
    const char quote = s_[pos_++];
    const size_t end = s_.find(quote, pos_);
    if (end == std::string::npos) return Error("unterminated string");
    *out = s_.substr(pos_, end - pos_);
    if (out->find('\\') != std::string::npos) return Error("escapes in strings are not supported");
    pos_ = end + 1;
    return Status::Ok();
  }
  Status ParseBool(bool* out) {
    if (ConsumeWord("True")) {
      *out = true;
    } else if (ConsumeWord("False")) {
      *out = false;
    } else {
      return Error("expected True or False");
    }
    return Status::Ok();
  }
  Status ParseInt(int64_t* out) {
    const size_t start = pos_;
    int64_t v = 0;
    while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') {
      const int digit = s_[pos_] - '0';
      if (v > (std::numeric_limits<int64_t>::max() - digit) / 10) return Error("dimension too large");
      v = v * 10 + digit;
      ++pos_;
    }
    if (pos_ == start) return Error(pos_ < s_.size() && s_[pos_] == '-' ? "negative dimension" : "expected a dimension");
    *out = v;
    return Status::Ok();
  }
  Status ParseShape(Dims* out) {
    out->clear();
    if (!Consume('(')) return Error("expected '(' to open the shape");
    bool after_comma = false;  // a one-element tuple must be written (n,)
    while (true) {
      SkipSpace();
      if (Consume(')')) break;
      if (!out->empty() && !after_comma) return Error("expected ',' between dimensions");
      int64_t d = 0;
      WH_RETURN_IF_ERROR(ParseInt(&d));
      out->push_back(d);
      SkipSpace();
      after_comma = Consume(',');
      if (!after_comma) {
        SkipSpace();
        if (!Consume(')')) return Error("expected ',' or ')' in the shape");
        break;
      }
    }
    if (out->size() == 1 && !after_comma) return Error("a one-dimensional shape must be written (n,)");
    return Status::Ok();
  }

  const std::string& s_;
  size_t pos_ = 0;
};

uint32_t ReadLE(const std::string& b, size_t at, int bytes) {
  uint32_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(b[at + static_cast<size_t>(i)]);
  return v;
}

std::string ShapeLiteral(const Dims& dims) {
  std::string s = "(";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(dims[i]);
  }
  if (dims.size() == 1) s += ",";
  return s + ")";
}

}  // namespace

StatusOr<Tensor> ParseNpy(const std::string& bytes, const std::string& name) {
  auto fail = [&](const std::string& what) { return InvalidArgument(name + ": not a valid .npy file: " + what); };
  if (bytes.size() < kMagicLen + 2 || bytes.compare(0, kMagicLen, kMagic, kMagicLen) != 0)
    return fail("bad magic (expected \\x93NUMPY)");
  const int major = static_cast<unsigned char>(bytes[6]);
  if (major < 1 || major > 3) return fail("unsupported format version " + std::to_string(major));
  const size_t len_bytes = major == 1 ? 2 : 4;
  const size_t preamble = kMagicLen + 2 + len_bytes;
  if (bytes.size() < preamble) return fail("truncated header");
  const size_t header_len = ReadLE(bytes, kMagicLen + 2, static_cast<int>(len_bytes));
  if (header_len > bytes.size() - preamble)
    return fail("truncated header (" + std::to_string(header_len) + " bytes promised, " +
                std::to_string(bytes.size() - preamble) + " present)");
  const std::string header = bytes.substr(preamble, header_len);
  if (header.empty() || header.back() != '\n') return fail("header does not end with a newline");

  std::string descr;
  bool fortran_order = false;
  Dims dims;
  Status st = HeaderParser(header).Parse(&descr, &fortran_order, &dims);
  if (!st.ok()) return fail(st.message());
  StatusOr<DType> dtype = DTypeFromDescr(descr);
  if (!dtype.ok()) return fail(dtype.status().message());
  if (fortran_order) return fail("fortran_order True is not supported (save with np.ascontiguousarray)");
  StatusOr<int64_t> numel = CheckedNumElements(dims);
  if (!numel.ok()) return fail(numel.status().message());
  const size_t elem = DTypeSize(*dtype);
  if (*numel > std::numeric_limits<int64_t>::max() / static_cast<int64_t>(elem))
    return fail("shape " + DimsToString(dims) + " is too large");
  const uint64_t data_bytes = static_cast<uint64_t>(*numel) * elem;
  const uint64_t present = bytes.size() - preamble - header_len;
  if (present != data_bytes)
    return fail("header promises " + std::to_string(data_bytes) + " data bytes for " + descr + " " +
                DimsToString(dims) + " but the file holds " + std::to_string(present));

  Tensor t(*dtype, dims);
  if (data_bytes > 0) std::memcpy(t.raw_data(), bytes.data() + preamble + header_len, data_bytes);
  if (*dtype == DType::kBool) {
    const unsigned char* p = static_cast<const unsigned char*>(t.raw_data());
    for (uint64_t i = 0; i < data_bytes; ++i) {
      if (p[i] > 1) return fail("bool element " + std::to_string(i) + " is neither 0 nor 1");
    }
  }
  return t;
}

StatusOr<Tensor> ReadNpy(const std::string& path) {
  WH_ASSIGN_OR_RETURN(std::string bytes, ReadFileBytes(path));
  return ParseNpy(bytes, path);
}

StatusOr<std::string> SerializeNpy(const Tensor& t) {
  if (!t.defined()) return InvalidArgument("cannot write an undefined tensor as .npy");
  WH_ASSIGN_OR_RETURN(std::string descr, DescrFromDType(t.dtype()));
  std::string header = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + ShapeLiteral(t.dims()) + ", }";
  // Version 1.0 stores the header length in 16 bits; fall back to 2.0 past that.
  const bool v2 = header.size() + 1 + 64 > 65535;
  const size_t preamble = v2 ? 12 : 10;
  const size_t padded = ((preamble + header.size() + 1 + 63) / 64) * 64;  // data aligned to 64 bytes
  header.append(padded - preamble - header.size() - 1, ' ');
  header.push_back('\n');

  std::string out(kMagic, kMagicLen);
  out.push_back(static_cast<char>(v2 ? 2 : 1));
  out.push_back(0);
  const uint32_t len = static_cast<uint32_t>(header.size());
  for (size_t i = 0; i < (v2 ? 4u : 2u); ++i) out.push_back(static_cast<char>((len >> (8 * i)) & 0xff));
  out += header;
  out.append(static_cast<const char*>(t.raw_data()), t.nbytes());
  return out;
}

Status WriteNpy(const std::string& path, const Tensor& t) {
  StatusOr<std::string> bytes = SerializeNpy(t);
  if (!bytes.ok()) return bytes.status().WithContext("writing " + path);
  return WriteFileAtomically(path, *bytes);
}

}  // namespace whittle
