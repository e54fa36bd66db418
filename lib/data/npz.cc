#include "lib/data/npz.h"

#include <zlib.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <set>
#include <utility>

#include "lib/data/file_util.h"
#include "lib/data/npy.h"
#include "lib/ir/memory_meter.h"

namespace whittle {
namespace {

// Record signatures and fixed lengths (PKWARE APPNOTE.TXT, section 4.3).
constexpr uint32_t kLocalHeaderSig = 0x04034b50;
constexpr uint32_t kCentralHeaderSig = 0x02014b50;
constexpr uint32_t kEndSig = 0x06054b50;
constexpr uint32_t kZip64EndSig = 0x06064b50;
constexpr uint32_t kZip64LocatorSig = 0x07064b50;
constexpr uint64_t kLocalHeaderLen = 30;
constexpr uint64_t kCentralHeaderLen = 46;
constexpr uint64_t kEndLen = 22;
constexpr uint64_t kZip64EndLen = 56;
constexpr uint64_t kZip64LocatorLen = 20;
constexpr uint64_t kMaxCommentLen = 0xFFFF;
constexpr uint16_t kZip64ExtraId = 0x0001;
// A 32-bit (16-bit) field holding this says "the real value is in a ZIP64 record".
constexpr uint64_t kZip64Marker32 = 0xFFFFFFFF;
constexpr uint64_t kZip64Marker16 = 0xFFFF;

constexpr uint16_t kMethodStored = 0;
constexpr uint16_t kMethodDeflate = 8;
constexpr uint16_t kFlagEncrypted = 1 << 0;
constexpr uint16_t kFlagUtf8 = 1 << 11;

// No member may claim more than this many uncompressed bytes.
constexpr uint64_t kMaxMemberBytes = uint64_t{1} << 40;
// Deflate cannot expand data by more than 1032:1 (a 258-byte match costs at least 2 bits), so a
// member claiming more than that from its compressed size is lying.
constexpr uint64_t kMaxDeflateRatio = 1032;
// zlib counts bytes in 32-bit uInt; larger buffers go through it in chunks of this size.
constexpr uint64_t kZlibChunk = uint64_t{1} << 30;

constexpr char kNpySuffix[] = ".npy";
constexpr size_t kNpySuffixLen = 4;

// Little-endian unsigned integer of `bytes` bytes at b[at]; the caller has bounds-checked it.
uint64_t ReadLE(const std::string& b, uint64_t at, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(b[at + static_cast<uint64_t>(i)]);
  return v;
}

void PutLE(std::string* out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

// Whether [at, at + len) lies inside [0, limit), without overflowing.
bool Fits(uint64_t at, uint64_t len, uint64_t limit) { return at <= limit && len <= limit - at; }

std::string Hex32(uint64_t v) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "0x%08llx", static_cast<unsigned long long>(v));
  return buf;
}

// A member name as it appears in messages: quoted, with control bytes replaced so that a
// hostile name cannot break the message over lines.
std::string Quoted(const std::string& member) {
  std::string s = "'";
  for (char c : member) s.push_back(static_cast<unsigned char>(c) < 0x20 || c == 0x7f ? '?' : c);
  return s + "'";
}

uint32_t Crc32(const char* data, uint64_t len) {
  uLong crc = crc32(0L, Z_NULL, 0);
  for (uint64_t done = 0; done < len;) {
    const uInt n = static_cast<uInt>(std::min(len - done, kZlibChunk));
    crc = crc32(crc, reinterpret_cast<const Bytef*>(data + done), n);
    done += n;
  }
  return static_cast<uint32_t>(crc);
}

// One central directory entry, with ZIP64 values already substituted for saturated fields.
struct Entry {
  std::string member;
  uint16_t flags = 0;
  uint16_t method = 0;
  uint32_t crc = 0;
  uint64_t compressed = 0;
  uint64_t uncompressed = 0;
  uint64_t local_offset = 0;
  uint64_t data_offset = 0;  // past the local header; filled in by LocateData
};

// Where the central directory lies, from the end records.
struct Directory {
  uint64_t offset = 0;
  uint64_t size = 0;
  uint64_t entries = 0;
};

class ArchiveParser {
 public:
  ArchiveParser(const std::string& bytes, const std::string& name) : b_(bytes), name_(name) {}

  StatusOr<std::vector<NpzArray>> Parse() {
    Directory dir;
    WH_RETURN_IF_ERROR(FindDirectory(&dir));
    std::vector<Entry> entries;
    WH_RETURN_IF_ERROR(ReadDirectory(dir, &entries));
    std::set<std::string> names;
    for (Entry& e : entries) {
      WH_RETURN_IF_ERROR(CheckEntry(e, &names));
      WH_RETURN_IF_ERROR(LocateData(&e));
    }
    WH_RETURN_IF_ERROR(CheckNoOverlap(dir, entries));

    std::vector<NpzArray> arrays;
    arrays.reserve(entries.size());
    for (const Entry& e : entries) {
      std::string npy;
      WH_RETURN_IF_ERROR(Extract(e, &npy));
      WH_ASSIGN_OR_RETURN(Tensor t, ParseNpy(npy, name_ + ":" + e.member));
      arrays.push_back({e.member.substr(0, e.member.size() - kNpySuffixLen), std::move(t)});
    }
    return arrays;
  }

 private:
  Status Fail(const std::string& what) const {
    return InvalidArgument(name_ + ": not a valid .npz archive: " + what);
  }
  Status FailMember(const Entry& e, const std::string& what) const {
    return Fail("member " + Quoted(e.member) + " " + what);
  }

  // Finds the end of central directory record (the last one whose comment fits the buffer) and,
  // when a ZIP64 locator precedes it, the ZIP64 end record that replaces its 16/32-bit fields.
  Status FindDirectory(Directory* dir) const {
    const uint64_t size = b_.size();
    const std::string no_end = "no end of central directory record (not a zip archive, or truncated)";
    if (size < kEndLen) return Fail(no_end);
    const uint64_t lowest = size - kEndLen > kMaxCommentLen ? size - kEndLen - kMaxCommentLen : 0;
    uint64_t end = size;
    for (uint64_t at = size - kEndLen;; --at) {
      if (ReadLE(b_, at, 4) == kEndSig && ReadLE(b_, at + 20, 2) <= size - kEndLen - at) {
        end = at;
        break;
      }
      if (at == lowest) break;
    }
    if (end == size) return Fail(no_end);

    uint64_t disk = ReadLE(b_, end + 4, 2);
    uint64_t dir_disk = ReadLE(b_, end + 6, 2);
    uint64_t disk_entries = ReadLE(b_, end + 8, 2);
    dir->entries = ReadLE(b_, end + 10, 2);
    dir->size = ReadLE(b_, end + 12, 4);
    dir->offset = ReadLE(b_, end + 16, 4);
    uint64_t limit = end;  // the central directory must end before the end record(s)

    if (end >= kZip64LocatorLen && ReadLE(b_, end - kZip64LocatorLen, 4) == kZip64LocatorSig) {
      const uint64_t loc = end - kZip64LocatorLen;
      const uint64_t record = ReadLE(b_, loc + 8, 8);
      if (ReadLE(b_, loc + 16, 4) > 1) return Fail("multi-disk (split) archives are not supported");
      if (!Fits(record, kZip64EndLen, loc))
        return Fail("ZIP64 end of central directory record offset " + std::to_string(record) +
                    " is past the end of the archive");
      if (ReadLE(b_, record, 4) != kZip64EndSig)
        return Fail("bad signature for the ZIP64 end of central directory record at offset " + std::to_string(record));
      disk = ReadLE(b_, record + 16, 4);
      dir_disk = ReadLE(b_, record + 20, 4);
      disk_entries = ReadLE(b_, record + 24, 8);
      dir->entries = ReadLE(b_, record + 32, 8);
      dir->size = ReadLE(b_, record + 40, 8);
      dir->offset = ReadLE(b_, record + 48, 8);
      limit = record;
    } else if (dir->size == kZip64Marker32 || dir->offset == kZip64Marker32) {
      return Fail("the end of central directory record defers to ZIP64 but there is no ZIP64 locator");
    }
    if (disk != 0 || dir_disk != 0 || disk_entries != dir->entries)
      return Fail("multi-disk (split) archives are not supported");
    if (dir->offset > size)
      return Fail("central directory offset " + std::to_string(dir->offset) + " is past the end of the archive (" +
                  std::to_string(size) + " bytes)");
    if (!Fits(dir->offset, dir->size, limit))
      return Fail("central directory (" + std::to_string(dir->size) + " bytes at offset " +
                  std::to_string(dir->offset) + ") runs past the end records at offset " + std::to_string(limit) +
                  " (truncated or corrupt)");
    if (dir->entries == 0) return Fail("it holds no arrays");
    if (dir->entries > dir->size / kCentralHeaderLen)
      return Fail("the central directory claims " + std::to_string(dir->entries) + " entries but its " +
                  std::to_string(dir->size) + " bytes cannot hold them");
    return Status::Ok();
  }

  Status ReadDirectory(const Directory& dir, std::vector<Entry>* entries) const {
    const uint64_t dir_end = dir.offset + dir.size;  // FindDirectory checked it fits
    uint64_t p = dir.offset;
    entries->reserve(static_cast<size_t>(dir.entries));
    for (uint64_t i = 0; i < dir.entries; ++i) {
      const std::string which = "central directory entry " + std::to_string(i);
      if (!Fits(p, kCentralHeaderLen, dir_end)) return Fail(which + " runs past the end of the central directory");
      if (ReadLE(b_, p, 4) != kCentralHeaderSig)
        return Fail("bad signature for " + which + " at offset " + std::to_string(p));
      Entry e;
      e.flags = static_cast<uint16_t>(ReadLE(b_, p + 8, 2));
      e.method = static_cast<uint16_t>(ReadLE(b_, p + 10, 2));
      e.crc = static_cast<uint32_t>(ReadLE(b_, p + 16, 4));
      e.compressed = ReadLE(b_, p + 20, 4);
      e.uncompressed = ReadLE(b_, p + 24, 4);
      const uint64_t name_len = ReadLE(b_, p + 28, 2);
      const uint64_t extra_len = ReadLE(b_, p + 30, 2);
      const uint64_t comment_len = ReadLE(b_, p + 32, 2);
      e.local_offset = ReadLE(b_, p + 42, 4);
      if (!Fits(p + kCentralHeaderLen, name_len + extra_len + comment_len, dir_end))
        return Fail(which + " runs past the end of the central directory");
      e.member = b_.substr(p + kCentralHeaderLen, name_len);
      WH_RETURN_IF_ERROR(ApplyZip64Extra(p + kCentralHeaderLen + name_len, extra_len, &e));
      entries->push_back(std::move(e));
      p += kCentralHeaderLen + name_len + extra_len + comment_len;
    }
    return Status::Ok();
  }

  // Replaces the saturated (0xFFFFFFFF) sizes and offset of `e` with the 64-bit values of its
  // ZIP64 extra field, which holds exactly the saturated ones, in the order uncompressed size,
  // compressed size, local header offset.
  Status ApplyZip64Extra(uint64_t at, uint64_t len, Entry* e) const {
    uint64_t* const fields[] = {&e->uncompressed, &e->compressed, &e->local_offset};
    bool needed = false;
    for (uint64_t* f : fields) needed |= *f == kZip64Marker32;
    if (!needed) return Status::Ok();
    const uint64_t end = at + len;
    // Walk the (id, size, data) records; a short tail (zero padding some tools add) ends the walk.
    for (uint64_t q = at; Fits(q, 4, end);) {
      const uint64_t id = ReadLE(b_, q, 2);
      const uint64_t size = ReadLE(b_, q + 2, 2);
      if (!Fits(q + 4, size, end)) break;
      if (id == kZip64ExtraId) {
        uint64_t r = q + 4;
        for (uint64_t* f : fields) {
          if (*f != kZip64Marker32) continue;
          if (!Fits(r, 8, q + 4 + size))
            return FailMember(*e, "has a ZIP64 extra field too short for its 0xFFFFFFFF fields");
          *f = ReadLE(b_, r, 8);
          r += 8;
        }
        return Status::Ok();
      }
      q += 4 + size;
    }
    return FailMember(*e, "has 0xFFFFFFFF sizes or offset but no ZIP64 extra field");
  }

  // Checks what the central directory says about a member before anything is read or allocated.
  Status CheckEntry(const Entry& e, std::set<std::string>* names) const {
    if (e.member.size() < kNpySuffixLen ||
        e.member.compare(e.member.size() - kNpySuffixLen, kNpySuffixLen, kNpySuffix) != 0)
      return FailMember(e, "does not end in \".npy\"");
    if (e.member.size() == kNpySuffixLen) return FailMember(e, "has an empty array name");
    if (!names->insert(e.member).second) return FailMember(e, "appears more than once (duplicate name)");
    if (e.flags & kFlagEncrypted) return FailMember(e, "is encrypted, which is not supported");
    if (e.method != kMethodStored && e.method != kMethodDeflate)
      return FailMember(e, "uses compression method " + std::to_string(e.method) +
                               " (only 0 stored and 8 deflate are supported)");
    if (e.uncompressed > kMaxMemberBytes)
      return FailMember(e, "claims " + std::to_string(e.uncompressed) + " bytes, more than the 1 TiB limit");
    // A bomb that deflate can really produce (zeros compress about 1000:1) is held to the
    // process's memory budget (the CLIs' --max-memory) before anything is inflated.
    if (const int64_t budget = ProcessMemoryBudget(); budget > 0 && e.uncompressed > static_cast<uint64_t>(budget))
      return FailMember(e, "would decompress to " + HumanBytes(e.uncompressed) + ", over the memory budget of " +
                               HumanBytes(static_cast<uint64_t>(budget)) + " (--max-memory)");
    if (e.method == kMethodStored && e.compressed != e.uncompressed)
      return FailMember(e, "is stored but its compressed size " + std::to_string(e.compressed) +
                               " differs from its size " + std::to_string(e.uncompressed));
    if (e.method == kMethodDeflate && e.uncompressed / kMaxDeflateRatio > e.compressed)
      return FailMember(e, "claims " + std::to_string(e.uncompressed) + " bytes from " + std::to_string(e.compressed) +
                               " compressed bytes, more than deflate can produce");
    return Status::Ok();
  }

  // Reads the member's local header to find where its data starts (its name and extra field may
  // differ in length from the central directory's: NumPy's local headers carry a ZIP64 extra
  // field that the central directory leaves out) and checks the data lies inside the buffer.
  Status LocateData(Entry* e) const {
    const uint64_t size = b_.size();
    const uint64_t at = e->local_offset;
    if (!Fits(at, kLocalHeaderLen, size))
      return FailMember(*e, "has its local header at offset " + std::to_string(at) + ", past the end of the archive (" +
                                std::to_string(size) + " bytes)");
    if (ReadLE(b_, at, 4) != kLocalHeaderSig)
      return FailMember(*e, "has a bad local header signature at offset " + std::to_string(at));
    const uint64_t name_len = ReadLE(b_, at + 26, 2);
    const uint64_t extra_len = ReadLE(b_, at + 28, 2);
    if (!Fits(at + kLocalHeaderLen, name_len + extra_len, size))
      return FailMember(*e, "has a local header that runs past the end of the archive (truncated?)");
    if (b_.compare(at + kLocalHeaderLen, name_len, e->member) != 0)
      return FailMember(*e, "has a local header naming " + Quoted(b_.substr(at + kLocalHeaderLen, name_len)));
    e->data_offset = at + kLocalHeaderLen + name_len + extra_len;
    if (!Fits(e->data_offset, e->compressed, size))
      return FailMember(*e, "has " + std::to_string(e->compressed) + " bytes of data at offset " +
                                std::to_string(e->data_offset) + " that run past the end of the archive (" +
                                std::to_string(size) + " bytes; truncated?)");
    return Status::Ok();
  }

  // Members (local header through data) may not overlap each other or the central directory:
  // overlapping members are how zip bombs multiply their output.
  Status CheckNoOverlap(const Directory& dir, const std::vector<Entry>& entries) const {
    struct Span {
      uint64_t begin, end;
      const Entry* entry;  // null for the central directory
    };
    std::vector<Span> spans;
    spans.reserve(entries.size() + 1);
    for (const Entry& e : entries) spans.push_back({e.local_offset, e.data_offset + e.compressed, &e});
    spans.push_back({dir.offset, dir.offset + dir.size, nullptr});
    std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) { return a.begin < b.begin; });
    auto what = [](const Span& s) {
      return s.entry ? "member " + Quoted(s.entry->member) : std::string("the central directory");
    };
    for (size_t i = 1; i < spans.size(); ++i) {
      if (spans[i].begin < spans[i - 1].end)
        return Fail(what(spans[i - 1]) + " overlaps " + what(spans[i]));
    }
    return Status::Ok();
  }

  // The member's uncompressed bytes, checked against its size and CRC-32.
  Status Extract(const Entry& e, std::string* out) const {
    if (e.method == kMethodStored) {
      *out = b_.substr(e.data_offset, e.compressed);
    } else {
      WH_RETURN_IF_ERROR(Inflate(e, out));
    }
    if (out->size() != e.uncompressed)
      return FailMember(e, "holds " + std::to_string(out->size()) + " bytes but its header says " +
                               std::to_string(e.uncompressed));
    const uint32_t crc = Crc32(out->data(), out->size());
    if (crc != e.crc)
      return FailMember(e, "fails its CRC-32 check (header " + Hex32(e.crc) + ", data " + Hex32(crc) +
                               "): corrupt data");
    return Status::Ok();
  }

  // Raw deflate into a buffer that grows with the output, never past one byte more than the
  // header promises (that byte tells a stream that runs longer), so memory follows real output.
  Status Inflate(const Entry& e, std::string* out) const {
    z_stream zs{};
    if (inflateInit2(&zs, -MAX_WBITS) != Z_OK) return Internal("zlib inflateInit2 failed");
    struct Ender {
      z_stream* zs;
      ~Ender() { inflateEnd(zs); }
    } ender{&zs};

    const char* in = b_.data() + e.data_offset;
    const uint64_t in_len = e.compressed;
    const uint64_t cap = e.uncompressed + 1;
    uint64_t in_pos = 0, out_pos = 0;
    out->assign(static_cast<size_t>(std::min<uint64_t>(cap, std::max<uint64_t>(uint64_t{1} << 16, in_len * 4))), '\0');
    while (true) {
      if (zs.avail_in == 0 && in_pos < in_len) {
        const uInt n = static_cast<uInt>(std::min(in_len - in_pos, kZlibChunk));
        zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in + in_pos));
        zs.avail_in = n;
        in_pos += n;
      }
      if (out_pos == out->size() && out->size() < cap)
        out->resize(static_cast<size_t>(std::min<uint64_t>(cap, uint64_t{out->size()} * 2)));
      const uInt room = static_cast<uInt>(std::min<uint64_t>(out->size() - out_pos, kZlibChunk));
      zs.next_out = reinterpret_cast<Bytef*>(&(*out)[0] + out_pos);
      zs.avail_out = room;
      const int ret = inflate(&zs, Z_NO_FLUSH);
      out_pos += room - zs.avail_out;
      if (ret == Z_STREAM_END) break;
      if (out_pos > e.uncompressed)
        return FailMember(e, "inflates to more than the " + std::to_string(e.uncompressed) + " bytes its header says");
      if (ret == Z_OK) continue;
      if (ret == Z_BUF_ERROR && out_pos == out->size()) continue;  // out of room: grow and go on
      if (ret == Z_BUF_ERROR && zs.avail_in == 0 && in_pos == in_len)
        return FailMember(e, "has deflate data that ends early (truncated)");
      const std::string why = zs.msg ? zs.msg : "zlib error " + std::to_string(ret);
      return FailMember(e, "has corrupt deflate data (" + why + ")");
    }
    out->resize(static_cast<size_t>(out_pos));
    return Status::Ok();
  }

  const std::string& b_;
  const std::string& name_;
};

// Fixed DOS timestamp (1980-01-01 00:00, as np.savez writes) so equal arrays give equal files.
constexpr uint16_t kDosTime = 0;
constexpr uint16_t kDosDate = (1 << 5) | 1;
constexpr uint16_t kVersionNeeded = 20;            // 2.0: stored and deflate, no ZIP64
constexpr uint16_t kVersionMadeBy = (3 << 8) | 20; // Unix, 2.0
constexpr uint32_t kExternalAttrs = 0100644u << 16; // regular file, rw-r--r--

}  // namespace

StatusOr<std::vector<NpzArray>> ParseNpz(const std::string& bytes, const std::string& name) {
  return ArchiveParser(bytes, name).Parse();
}

StatusOr<std::vector<NpzArray>> ReadNpz(const std::string& path) {
  WH_ASSIGN_OR_RETURN(std::string bytes, ReadFileBytes(path));
  return ParseNpz(bytes, path);
}

Status WriteNpz(const std::string& path, const std::vector<NpzArray>& arrays) {
  auto fail = [&](const std::string& what) { return InvalidArgument("writing " + path + ": " + what); };
  const std::string zip64 = ", which needs ZIP64 (not written by WriteNpz)";
  if (arrays.empty()) return fail("no arrays to write (an .npz archive needs at least one)");
  if (arrays.size() >= kZip64Marker16) return fail(std::to_string(arrays.size()) + " arrays are too many" + zip64);

  std::string out, central;
  std::set<std::string> names;
  for (const NpzArray& a : arrays) {
    if (a.name.empty()) return fail("array names must be non-empty");
    if (!names.insert(a.name).second) return fail("duplicate array name " + Quoted(a.name));
    const std::string member = a.name + kNpySuffix;
    if (member.size() > 0xFFFF) return fail("array name " + Quoted(a.name.substr(0, 40) + "...") + " is too long");
    StatusOr<std::string> npy = SerializeNpy(a.tensor);
    if (!npy.ok()) return npy.status().WithContext("writing " + path + ": array " + Quoted(a.name));
    if (npy->size() >= kZip64Marker32)
      return fail("array " + Quoted(a.name) + " is " + std::to_string(npy->size()) + " bytes as .npy, 4 GiB or more" +
                  zip64);
    const uint64_t offset = out.size();
    if (offset + kLocalHeaderLen + member.size() + npy->size() >= kZip64Marker32)
      return fail("the archive would reach 4 GiB" + zip64);
    const uint32_t crc = Crc32(npy->data(), npy->size());
    bool ascii = true;
    for (char c : member) ascii &= static_cast<unsigned char>(c) < 0x80;
    const uint16_t flags = ascii ? 0 : kFlagUtf8;  // tells readers the name is UTF-8, not CP437

    // Fields common to the local header (from offset 4) and the central entry (from offset 6).
    std::string common;
    PutLE(&common, kVersionNeeded, 2);
    PutLE(&common, flags, 2);
    PutLE(&common, kMethodStored, 2);
    PutLE(&common, kDosTime, 2);
    PutLE(&common, kDosDate, 2);
    PutLE(&common, crc, 4);
    PutLE(&common, npy->size(), 4);  // compressed
    PutLE(&common, npy->size(), 4);  // uncompressed
    PutLE(&common, member.size(), 2);
    PutLE(&common, 0, 2);  // extra field length

    PutLE(&out, kLocalHeaderSig, 4);
    out += common + member + *npy;

    PutLE(&central, kCentralHeaderSig, 4);
    PutLE(&central, kVersionMadeBy, 2);
    central += common;
    PutLE(&central, 0, 2);  // comment length
    PutLE(&central, 0, 2);  // disk number
    PutLE(&central, 0, 2);  // internal attributes
    PutLE(&central, kExternalAttrs, 4);
    PutLE(&central, offset, 4);
    central += member;
  }
  const uint64_t dir_offset = out.size();
  if (dir_offset + central.size() + kEndLen >= kZip64Marker32) return fail("the archive would reach 4 GiB" + zip64);
  out += central;
  PutLE(&out, kEndSig, 4);
  PutLE(&out, 0, 2);  // this disk
  PutLE(&out, 0, 2);  // disk with the central directory
  PutLE(&out, arrays.size(), 2);
  PutLE(&out, arrays.size(), 2);
  PutLE(&out, central.size(), 4);
  PutLE(&out, dir_offset, 4);
  PutLE(&out, 0, 2);  // comment length
  return WriteFileAtomically(path, out);
}

}  // namespace whittle
