#include "lib/data/npz.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "lib/data/file_util.h"
#include "lib/data/npy.h"
#include "tests/util/scratch_dir.h"

namespace whittle {
namespace {

std::string Fixture(const std::string& file) { return std::string(WHITTLE_SOURCE_DIR) + "/tests/data/npz/" + file; }

void PutLE(std::string* out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void SetLE(std::string* b, size_t at, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) (*b)[at + static_cast<size_t>(i)] = static_cast<char>((v >> (8 * i)) & 0xff);
}
uint64_t GetLE(const std::string& b, size_t at, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(b[at + static_cast<size_t>(i)]);
  return v;
}

// Offset of the i-th central directory entry (found by its signature; fine for small test archives).
size_t CentralEntry(const std::string& zip, int i) {
  size_t at = zip.find(std::string("PK\x01\x02", 4));
  for (int k = 0; k < i && at != std::string::npos; ++k) at = zip.find(std::string("PK\x01\x02", 4), at + 4);
  EXPECT_NE(at, std::string::npos) << "no central directory entry " << i;
  return at;
}
size_t EndRecord(const std::string& zip) { return zip.rfind(std::string("PK\x05\x06", 4)); }
// Offset of the i-th member's data, through its local header.
size_t DataOffset(const std::string& zip, int i) {
  const size_t local = GetLE(zip, CentralEntry(zip, i) + 42, 4);
  return local + 30 + GetLE(zip, local + 26, 2) + GetLE(zip, local + 28, 2);
}

std::string Npy(const Tensor& t) {
  StatusOr<std::string> bytes = SerializeNpy(t);
  EXPECT_TRUE(bytes.ok());
  return bytes.ok() ? *bytes : std::string();
}

// A member for BuildZip. Data is written as given (the method field is only a label).
struct FakeMember {
  std::string name;
  std::string data;
  uint16_t method = 0;
  uint16_t flags = 0;
  int local_header_of = -1;  // >= 0: point the central entry at that member's local header
};

// A hand-built zip. With zip64, every central entry stores its sizes and offset as 0xFFFFFFFF
// with a ZIP64 extra field, and the end records go through a ZIP64 end record and locator (what
// np.savez produces for members or archives past 4 GiB). Local headers carry a ZIP64 extra field
// either way, as NumPy's do.
std::string BuildZip(const std::vector<FakeMember>& members, bool zip64) {
  std::string out, central;
  std::vector<uint64_t> offsets;
  for (const FakeMember& m : members) {
    offsets.push_back(out.size());
    const uint32_t crc = static_cast<uint32_t>(
        crc32(0L, reinterpret_cast<const Bytef*>(m.data.data()), static_cast<uInt>(m.data.size())));
    PutLE(&out, 0x04034b50, 4);
    PutLE(&out, 45, 2);
    PutLE(&out, m.flags, 2);
    PutLE(&out, m.method, 2);
    PutLE(&out, 0, 4);  // time, date
    PutLE(&out, crc, 4);
    PutLE(&out, 0xFFFFFFFF, 4);
    PutLE(&out, 0xFFFFFFFF, 4);
    PutLE(&out, m.name.size(), 2);
    PutLE(&out, 20, 2);
    out += m.name;
    PutLE(&out, 1, 2);
    PutLE(&out, 16, 2);
    PutLE(&out, m.data.size(), 8);
    PutLE(&out, m.data.size(), 8);
    out += m.data;
  }
  for (const FakeMember& m : members) {
    const uint64_t offset = offsets[m.local_header_of >= 0 ? static_cast<size_t>(m.local_header_of) : &m - &members[0]];
    const uint32_t crc = static_cast<uint32_t>(
        crc32(0L, reinterpret_cast<const Bytef*>(m.data.data()), static_cast<uInt>(m.data.size())));
    PutLE(&central, 0x02014b50, 4);
    PutLE(&central, 0x032d, 2);
    PutLE(&central, 45, 2);
    PutLE(&central, m.flags, 2);
    PutLE(&central, m.method, 2);
    PutLE(&central, 0, 4);
    PutLE(&central, crc, 4);
    PutLE(&central, zip64 ? 0xFFFFFFFF : m.data.size(), 4);
    PutLE(&central, zip64 ? 0xFFFFFFFF : m.data.size(), 4);
    PutLE(&central, m.name.size(), 2);
    PutLE(&central, zip64 ? 4 + 4 + 24 : 0, 2);  // an empty unrelated field, then ZIP64's
    PutLE(&central, 0, 2 + 2 + 2);  // comment length, disk, internal attributes
    PutLE(&central, 0, 4);
    PutLE(&central, zip64 ? 0xFFFFFFFF : offset, 4);
    central += m.name;
    if (zip64) {
      PutLE(&central, 0x5455, 2);  // an unrelated extra field first: the reader must skip it
      PutLE(&central, 0, 2);
      PutLE(&central, 1, 2);
      PutLE(&central, 24, 2);
      PutLE(&central, m.data.size(), 8);
      PutLE(&central, m.data.size(), 8);
      PutLE(&central, offset, 8);
    }
  }
  const uint64_t dir_offset = out.size();
  out += central;
  if (zip64) {
    const uint64_t record = out.size();
    PutLE(&out, 0x06064b50, 4);
    PutLE(&out, 44, 8);
    PutLE(&out, 45, 2);
    PutLE(&out, 45, 2);
    PutLE(&out, 0, 8);  // disk numbers
    PutLE(&out, members.size(), 8);
    PutLE(&out, members.size(), 8);
    PutLE(&out, central.size(), 8);
    PutLE(&out, dir_offset, 8);
    PutLE(&out, 0x07064b50, 4);
    PutLE(&out, 0, 4);
    PutLE(&out, record, 8);
    PutLE(&out, 1, 4);
  }
  PutLE(&out, 0x06054b50, 4);
  PutLE(&out, 0, 4);
  PutLE(&out, zip64 ? 0xFFFF : members.size(), 2);
  PutLE(&out, zip64 ? 0xFFFF : members.size(), 2);
  PutLE(&out, zip64 ? 0xFFFFFFFF : central.size(), 4);
  PutLE(&out, zip64 ? 0xFFFFFFFF : dir_offset, 4);
  PutLE(&out, 0, 2);
  return out;
}

void ExpectRejected(const std::string& bytes, const std::string& fragment) {
  StatusOr<std::vector<NpzArray>> r = ParseNpz(bytes, "bad.npz");
  ASSERT_FALSE(r.ok()) << "accepted an archive that should fail with '" << fragment << "'";
  const std::string msg = r.status().message();
  EXPECT_EQ(msg.rfind("bad.npz", 0), 0u) << msg;
  EXPECT_NE(msg.find(fragment), std::string::npos) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
}

std::string ReadFixture(const std::string& file) {
  StatusOr<std::string> bytes = ReadFileBytes(Fixture(file));
  EXPECT_TRUE(bytes.ok()) << bytes.status().message();
  return bytes.ok() ? *bytes : std::string();
}

// The arrays tests/data/npz/make_fixtures.py saves.
void ExpectFixtureArrays(const std::vector<NpzArray>& arrays) {
  ASSERT_EQ(arrays.size(), 3u);
  EXPECT_EQ(arrays[0].name, "ids");
  EXPECT_EQ(arrays[1].name, "mask");
  EXPECT_EQ(arrays[2].name, "x");
  std::vector<int64_t> ids(15), mask(15);
  for (int64_t i = 0; i < 15; ++i) {
    ids[static_cast<size_t>(i)] = i;
    mask[static_cast<size_t>(i)] = i % 2;
  }
  std::vector<float> x(6);
  for (int i = 0; i < 6; ++i) x[static_cast<size_t>(i)] = static_cast<float>(i) * 0.5f - 1.f;
  EXPECT_TRUE(arrays[0].tensor.BitwiseEquals(Tensor::FromVector<int64_t>({3, 5}, ids)));
  EXPECT_TRUE(arrays[1].tensor.BitwiseEquals(Tensor::FromVector<int64_t>({3, 5}, mask)));
  EXPECT_TRUE(arrays[2].tensor.BitwiseEquals(Tensor::FromVector<float>({3, 2}, x)));
}

std::vector<NpzArray> SampleArrays() {
  return {
      {"weights", Tensor::FromVector<float>({2, 3}, {0.f, -1.5f, 3.25f, 1e-30f, -7.f, 42.f})},
      {"ids", Tensor::FromVector<int64_t>({4}, {INT64_MIN, -1, 0, INT64_MAX})},
      {"mask", Tensor::FromVector<bool>({2, 2}, {true, false, false, true})},
      {"count", Tensor::Scalar<int32_t>(7)},
      {"empty", Tensor(DType::kInt32, {0, 3})},
      {"a_last", Tensor::FromVector<int32_t>({1, 2, 1}, {-5, INT32_MAX})},
  };
}

TEST(NpzTest, RoundTripsSeveralDTypesInOrder) {
  testing::ScratchDir scratch;
  const std::vector<NpzArray> arrays = SampleArrays();
  ASSERT_TRUE(WriteNpz(scratch / "a.npz", arrays).ok());
  StatusOr<std::vector<NpzArray>> back = ReadNpz(scratch / "a.npz");
  ASSERT_TRUE(back.ok()) << back.status().message();
  ASSERT_EQ(back->size(), arrays.size());
  for (size_t i = 0; i < arrays.size(); ++i) {
    EXPECT_EQ((*back)[i].name, arrays[i].name);
    EXPECT_EQ((*back)[i].tensor.dtype(), arrays[i].tensor.dtype()) << arrays[i].name;
    EXPECT_EQ((*back)[i].tensor.dims(), arrays[i].tensor.dims()) << arrays[i].name;
    EXPECT_TRUE((*back)[i].tensor.BitwiseEquals(arrays[i].tensor)) << arrays[i].name;
  }
}

TEST(NpzTest, WritesStoredNpyMembersAtomically) {
  testing::ScratchDir scratch;
  const std::string path = scratch / "w.npz";
  ASSERT_TRUE(WriteNpz(path, {{"old", Tensor::Scalar<float>(1.f)}}).ok());
  const Tensor t = Tensor::FromVector<int32_t>({3}, {1, 2, 3});
  ASSERT_TRUE(WriteNpz(path, {{"dir/t", t}}).ok());  // replaces the old file
  StatusOr<std::string> zip = ReadFileBytes(path);
  ASSERT_TRUE(zip.ok());
  // One stored member named "dir/t.npy" holding exactly the .npy serialization.
  const size_t c = CentralEntry(*zip, 0);
  EXPECT_EQ(GetLE(*zip, c + 10, 2), 0u);  // method: stored
  EXPECT_EQ(zip->substr(c + 46, GetLE(*zip, c + 28, 2)), "dir/t.npy");
  EXPECT_EQ(zip->substr(DataOffset(*zip, 0), GetLE(*zip, c + 20, 4)), Npy(t));
  StatusOr<std::vector<NpzArray>> back = ReadNpz(path);
  ASSERT_TRUE(back.ok()) << back.status().message();
  ASSERT_EQ(back->size(), 1u);
  EXPECT_EQ((*back)[0].name, "dir/t");
  EXPECT_TRUE((*back)[0].tensor.BitwiseEquals(t));
  // No temporary file is left behind.
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(scratch.path())) files.push_back(e.path().filename());
  EXPECT_EQ(files, std::vector<std::string>{"w.npz"});
}

TEST(NpzTest, WriteRejectsBadArrays) {
  testing::ScratchDir scratch;
  const Tensor t = Tensor::Scalar<float>(1.f);
  auto expect_error = [&](const std::vector<NpzArray>& arrays, const std::string& fragment) {
    Status st = WriteNpz(scratch / "bad.npz", arrays);
    ASSERT_FALSE(st.ok()) << fragment;
    EXPECT_NE(st.message().find("bad.npz"), std::string::npos) << st.message();
    EXPECT_NE(st.message().find(fragment), std::string::npos) << st.message();
  };
  expect_error({}, "no arrays");
  expect_error({{"", t}}, "non-empty");
  expect_error({{"a", t}, {"b", t}, {"a", t}}, "duplicate array name 'a'");
  expect_error({{"half", Tensor(DType::kBFloat16, {2})}}, "bfloat16");
  expect_error({{"undefined", Tensor()}}, "undefined");
  EXPECT_FALSE(std::filesystem::exists(scratch / "bad.npz"));
  EXPECT_FALSE(WriteNpz(scratch / "no/such/dir/x.npz", {{"a", t}}).ok());
}

TEST(NpzTest, ReadsNumPySavez) {
  StatusOr<std::vector<NpzArray>> arrays = ReadNpz(Fixture("savez.npz"));
  ASSERT_TRUE(arrays.ok()) << arrays.status().message();
  ExpectFixtureArrays(*arrays);
}

TEST(NpzTest, ReadsNumPySavezCompressed) {
  const std::string zip = ReadFixture("savez_compressed.npz");
  ASSERT_EQ(GetLE(zip, CentralEntry(zip, 0) + 10, 2), 8u);  // really deflated
  StatusOr<std::vector<NpzArray>> arrays = ParseNpz(zip, "savez_compressed.npz");
  ASSERT_TRUE(arrays.ok()) << arrays.status().message();
  ExpectFixtureArrays(*arrays);
}

TEST(NpzTest, ReadsZip64CentralDirectoryAndEndRecords) {
  const Tensor a = Tensor::FromVector<int32_t>({2}, {1, 2});
  const Tensor b = Tensor::FromVector<double>({1, 1}, {-0.5});
  const std::string zip = BuildZip({{"a.npy", Npy(a)}, {"b.npy", Npy(b)}}, /*zip64=*/true);
  StatusOr<std::vector<NpzArray>> arrays = ParseNpz(zip, "zip64.npz");
  ASSERT_TRUE(arrays.ok()) << arrays.status().message();
  ASSERT_EQ(arrays->size(), 2u);
  EXPECT_EQ((*arrays)[0].name, "a");
  EXPECT_TRUE((*arrays)[0].tensor.BitwiseEquals(a));
  EXPECT_EQ((*arrays)[1].name, "b");
  EXPECT_TRUE((*arrays)[1].tensor.BitwiseEquals(b));

  // An archive comment after the end record is skipped.
  std::string commented = zip;
  SetLE(&commented, EndRecord(commented) + 20, 5, 2);
  commented += "hello";
  EXPECT_TRUE(ParseNpz(commented, "comment.npz").ok());
  // A comment holding something that looks like an end record, but whose comment length does not
  // fit the file, does not fool the backwards scan.
  std::string decoy = zip;
  std::string fake;
  PutLE(&fake, 0x06054b50, 4);
  fake.append(16, '\0');
  PutLE(&fake, 0x1234, 2);
  SetLE(&decoy, EndRecord(decoy) + 20, fake.size(), 2);
  decoy += fake;
  StatusOr<std::vector<NpzArray>> r = ParseNpz(decoy, "decoy.npz");
  EXPECT_TRUE(r.ok()) << r.status().message();
}

TEST(NpzHostileTest, EveryTruncationFails) {
  testing::ScratchDir scratch;
  ASSERT_TRUE(WriteNpz(scratch / "small.npz", {{"v", Tensor::FromVector<uint8_t>({3}, {1, 2, 3})}}).ok());
  StatusOr<std::string> written = ReadFileBytes(scratch / "small.npz");
  ASSERT_TRUE(written.ok());
  const std::string zip64 = BuildZip({{"z.npy", Npy(Tensor::Scalar<int8_t>(3))}}, true);
  for (const std::string& zip : {*written, ReadFixture("savez_compressed.npz"), zip64}) {
    ASSERT_TRUE(ParseNpz(zip, "whole.npz").ok());
    for (size_t n = 0; n < zip.size(); ++n) {
      StatusOr<std::vector<NpzArray>> r = ParseNpz(zip.substr(0, n), "cut.npz");
      ASSERT_FALSE(r.ok()) << "accepted the first " << n << " bytes";
      EXPECT_NE(r.status().message().find("cut.npz"), std::string::npos) << r.status().message();
      EXPECT_NE(r.status().message().find("truncated"), std::string::npos) << r.status().message();
    }
  }
}

TEST(NpzHostileTest, FlippedDataByteFailsTheCrc) {
  std::string zip = ReadFixture("savez.npz");
  zip[DataOffset(zip, 1) + 200] ^= 0x01;  // inside mask's array data
  ExpectRejected(zip, "CRC");
  ExpectRejected(zip, "'mask.npy'");

  // In a deflated member the flip shows as corrupt deflate data, wrong size or a CRC mismatch.
  std::string deflated = ReadFixture("savez_compressed.npz");
  deflated[DataOffset(deflated, 0) + 20] ^= 0x10;
  ExpectRejected(deflated, "'ids.npy'");
}

TEST(NpzHostileTest, RejectsBadMemberNames) {
  const std::string npy = Npy(Tensor::Scalar<float>(1.f));
  ExpectRejected(BuildZip({{"a.npy", npy}, {"weights.bin", npy}}, false), "'weights.bin' does not end in \".npy\"");
  ExpectRejected(BuildZip({{"a.npy", npy}, {"a.npy", npy}}, false), "'a.npy' appears more than once");
  ExpectRejected(BuildZip({{".npy", npy}}, false), "empty array name");
  ExpectRejected(BuildZip({{"dir/", ""}}, false), "'dir/'");
  // Control bytes in a name do not break the one-line message.
  ExpectRejected(BuildZip({{"x\ny", npy}}, false), "'x?y'");
}

TEST(NpzHostileTest, RejectsUnsupportedMethodsAndEncryption) {
  std::string zip = ReadFixture("savez.npz");
  SetLE(&zip, CentralEntry(zip, 2) + 10, 12, 2);  // x.npy: bzip2
  ExpectRejected(zip, "'x.npy' uses compression method 12");

  const std::string npy = Npy(Tensor::Scalar<float>(1.f));
  ExpectRejected(BuildZip({{"a.npy", npy, 0, /*flags=*/1}}, false), "'a.npy' is encrypted");
}

TEST(NpzHostileTest, RejectsEmptyArchive) {
  std::string empty;
  PutLE(&empty, 0x06054b50, 4);
  empty.append(18, '\0');
  ExpectRejected(empty, "holds no arrays");
  ExpectRejected("", "truncated");
  ExpectRejected("just some text that is not a zip archive at all", "not a zip archive");
}

TEST(NpzHostileTest, RejectsOffsetsAndSizesPastTheEnd) {
  const std::string good = ReadFixture("savez.npz");
  const size_t end = EndRecord(good);

  std::string zip = good;
  SetLE(&zip, end + 16, 1u << 30, 4);  // central directory offset
  ExpectRejected(zip, "central directory offset 1073741824 is past the end");
  zip = good;
  SetLE(&zip, end + 12, GetLE(zip, end + 12, 4) + 1, 4);  // central directory size
  ExpectRejected(zip, "runs past the end records");
  zip = good;
  SetLE(&zip, end + 10, 3000, 2);  // entry count
  SetLE(&zip, end + 8, 3000, 2);
  ExpectRejected(zip, "claims 3000 entries");

  zip = good;
  SetLE(&zip, CentralEntry(zip, 1) + 42, 0x7FFFFFFF, 4);  // local header offset
  ExpectRejected(zip, "'mask.npy' has its local header at offset 2147483647, past the end");
  zip = good;
  SetLE(&zip, CentralEntry(zip, 1) + 42, 10, 4);
  ExpectRejected(zip, "'mask.npy' has a bad local header signature");

  // Stored sizes that lie: past the end, or disagreeing with each other.
  const size_t x = CentralEntry(good, 2);
  zip = good;
  SetLE(&zip, x + 20, 0x7FFFFFF0, 4);
  SetLE(&zip, x + 24, 0x7FFFFFF0, 4);
  ExpectRejected(zip, "'x.npy' has 2147483632 bytes of data");
  ExpectRejected(zip, "truncated");
  zip = good;
  SetLE(&zip, x + 24, 150, 4);
  ExpectRejected(zip, "'x.npy' is stored but its compressed size 152 differs");

  // Deflated sizes that lie.
  const std::string deflated = ReadFixture("savez_compressed.npz");
  const size_t d = CentralEntry(deflated, 0);
  zip = deflated;
  SetLE(&zip, d + 24, 200, 4);
  ExpectRejected(zip, "'ids.npy' inflates to more than the 200 bytes");
  zip = deflated;
  SetLE(&zip, d + 24, 300, 4);
  ExpectRejected(zip, "'ids.npy' holds 248 bytes but its header says 300");
  zip = deflated;
  SetLE(&zip, d + 24, 0xFFFFFFF0, 4);
  ExpectRejected(zip, "more than deflate can produce");
  zip = deflated;
  SetLE(&zip, d + 20, GetLE(zip, d + 20, 4) - 10, 4);
  ExpectRejected(zip, "'ids.npy' has deflate data that ends early");
}

TEST(NpzHostileTest, RejectsOverlappingMembers) {
  // A member whose data runs into the next one.
  std::string zip = ReadFixture("savez.npz");
  const size_t ids = CentralEntry(zip, 0);
  SetLE(&zip, ids + 20, 400, 4);
  SetLE(&zip, ids + 24, 400, 4);
  ExpectRejected(zip, "member 'ids.npy' overlaps member 'mask.npy'");
  // One into the central directory.
  zip = ReadFixture("savez.npz");
  const size_t x = CentralEntry(zip, 2);
  SetLE(&zip, x + 20, 160, 4);
  SetLE(&zip, x + 24, 160, 4);
  ExpectRejected(zip, "member 'x.npy' overlaps the central directory");
  // Two central entries sharing one local header (the zip-bomb trick): caught as a duplicate
  // name or as a local header that names another member.
  const std::string npy = Npy(Tensor::Scalar<float>(1.f));
  ExpectRejected(BuildZip({{"a.npy", npy}, {"a.npy", npy, 0, 0, /*local_header_of=*/0}}, false), "more than once");
  ExpectRejected(BuildZip({{"a.npy", npy}, {"b.npy", npy, 0, 0, /*local_header_of=*/0}}, false),
                 "'b.npy' has a local header naming 'a.npy'");
}

TEST(NpzHostileTest, RejectsBrokenZip64Records) {
  const std::string npy = Npy(Tensor::Scalar<float>(1.f));
  const std::string zip64 = BuildZip({{"a.npy", npy}}, true);
  const size_t end = EndRecord(zip64);

  std::string zip = zip64;
  SetLE(&zip, end - 20 + 8, 1u << 20, 8);  // locator's record offset
  ExpectRejected(zip, "ZIP64 end of central directory record offset 1048576 is past the end");
  zip = zip64;
  zip[end - 20] = 'X';  // no locator, yet the end record says 0xFFFFFFFF
  ExpectRejected(zip, "no ZIP64 locator");
  zip = zip64;
  const size_t c = CentralEntry(zip, 0);
  SetLE(&zip, c + 46 + 5 + 4 + 2, 16, 2);  // ZIP64 extra field: 16 of the 24 bytes it needs
  ExpectRejected(zip, "'a.npy' has a ZIP64 extra field too short");
  zip = zip64;
  SetLE(&zip, c + 46 + 5 + 4, 0x9999, 2);  // ZIP64 extra field id
  ExpectRejected(zip, "'a.npy' has 0xFFFFFFFF sizes or offset but no ZIP64 extra field");
  zip = zip64;
  SetLE(&zip, c + 46 + 5 + 4 + 4 + 16, uint64_t{1} << 50, 8);  // ZIP64 local header offset
  ExpectRejected(zip, "past the end");
  zip = zip64;
  SetLE(&zip, c + 46 + 5 + 4 + 4, (uint64_t{1} << 40) + 1, 8);  // ZIP64 uncompressed size
  ExpectRejected(zip, "more than the 1 TiB limit");
}

TEST(NpzHostileTest, BadNpyMemberNamesArchiveAndMember) {
  ExpectRejected(BuildZip({{"a.npy", Npy(Tensor::Scalar<float>(1.f))}, {"b.npy", "not npy"}}, false),
                 "bad.npz:b.npy: not a valid .npy file: bad magic");
}

TEST(NpzHostileTest, SingleByteCorruptionsNeverCrash) {
  // Every byte of two small archives overwritten with a few values: each parse either succeeds
  // (comments, timestamps, attributes) or fails with a message naming the archive.
  const std::string zip64 = BuildZip({{"a.npy", Npy(Tensor::Scalar<int16_t>(9))}}, true);
  for (const std::string& good : {ReadFixture("savez_compressed.npz"), zip64}) {
    for (size_t i = 0; i < good.size(); ++i) {
      for (int v : {0x00, 0x7F, 0xFF}) {
        std::string zip = good;
        zip[i] = static_cast<char>(v);
        StatusOr<std::vector<NpzArray>> r = ParseNpz(zip, "mutant.npz");
        if (!r.ok()) {
          EXPECT_NE(r.status().message().find("mutant.npz"), std::string::npos) << r.status().message();
        }
      }
    }
  }
}

}  // namespace
}  // namespace whittle
