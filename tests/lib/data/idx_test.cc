#include "lib/data/idx.h"

#include <gtest/gtest.h>

#include "tests/util/scratch_dir.h"
#include <stdlib.h>
#include <zlib.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "lib/data/file_util.h"

namespace whittle {
namespace {

std::string Be32(uint32_t v) {
  std::string s(4, '\0');
  for (int i = 0; i < 4; ++i) s[static_cast<size_t>(i)] = static_cast<char>((v >> (24 - 8 * i)) & 0xff);
  return s;
}

// IDX header: 00 00 type ndims, then big-endian dims.
std::string IdxHeader(int type, const std::vector<uint32_t>& dims) {
  std::string s = {'\0', '\0', static_cast<char>(type), static_cast<char>(dims.size())};
  for (uint32_t d : dims) s += Be32(d);
  return s;
}

// Elements written big-endian, as IDX stores them.
template <class T>
std::string BeElements(const std::vector<T>& v) {
  std::string s;
  for (const T& x : v) {
    char b[sizeof(T)];
    std::memcpy(b, &x, sizeof(T));
    for (size_t k = 0; k < sizeof(T); ++k) s.push_back(b[sizeof(T) - 1 - k]);
  }
  return s;
}

void WriteRaw(const std::string& path, const std::string& bytes) { ASSERT_TRUE(WriteFileAtomically(path, bytes).ok()); }

void WriteGz(const std::string& path, const std::string& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())), static_cast<int>(bytes.size()));
  ASSERT_EQ(gzclose(f), Z_OK);
}

TEST(IdxTest, ReadsRawUint8Images) {
  testing::ScratchDir scratch;
  const std::string dir = scratch.path();
  const std::vector<uint8_t> pixels = {0, 1, 2, 3, 4, 5, 250, 251, 252, 253, 254, 255};
  WriteRaw(dir + "/images.idx", IdxHeader(0x08, {2, 3, 2}) + std::string(pixels.begin(), pixels.end()));
  StatusOr<Tensor> t = ReadIdx(dir + "/images.idx");
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->dtype(), DType::kUInt8);
  EXPECT_EQ(t->dims(), (Dims{2, 3, 2}));
  for (size_t i = 0; i < pixels.size(); ++i) EXPECT_EQ(t->data<uint8_t>()[i], pixels[i]);
}

TEST(IdxTest, ReadsGzippedFilesRegardlessOfName) {
  testing::ScratchDir scratch;
  const std::string dir = scratch.path();
  const std::string bytes = IdxHeader(0x08, {4}) + std::string("\x09\x02\x01\x07", 4);
  WriteGz(dir + "/labels.gz", bytes);
  WriteGz(dir + "/labels_no_suffix", bytes);  // detected by the gzip magic, not the name
  for (const char* name : {"/labels.gz", "/labels_no_suffix"}) {
    StatusOr<Tensor> t = ReadIdx(dir + name);
    ASSERT_TRUE(t.ok()) << t.status().message();
    EXPECT_EQ(t->dims(), (Dims{4}));
    EXPECT_EQ(t->data<uint8_t>()[0], 9);
    EXPECT_EQ(t->data<uint8_t>()[3], 7);
  }
}

TEST(IdxTest, ConvertsBigEndianElementTypes) {
  StatusOr<Tensor> t = ParseIdx(IdxHeader(0x09, {3}) + BeElements<int8_t>({-128, 0, 127}), "i8");
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->dtype(), DType::kInt8);
  EXPECT_EQ(t->data<int8_t>()[0], -128);

  t = ParseIdx(IdxHeader(0x0B, {2}) + BeElements<int16_t>({-2, 0x0102}), "i16");
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->dtype(), DType::kInt16);
  EXPECT_EQ(t->data<int16_t>()[0], -2);
  EXPECT_EQ(t->data<int16_t>()[1], 0x0102);

  // Hand-written big-endian int32 0x01020304 and -1.
  t = ParseIdx(IdxHeader(0x0C, {2}) + std::string("\x01\x02\x03\x04\xff\xff\xff\xff", 8), "i32");
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->dtype(), DType::kInt32);
  EXPECT_EQ(t->data<int32_t>()[0], 0x01020304);
  EXPECT_EQ(t->data<int32_t>()[1], -1);

  // Hand-written big-endian float32: 0x3FC00000 = 1.5, 0xC0100000 = -2.25.
  t = ParseIdx(IdxHeader(0x0D, {1, 2}) + std::string("\x3f\xc0\x00\x00\xc0\x10\x00\x00", 8), "f32");
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->dtype(), DType::kFloat32);
  EXPECT_EQ(t->dims(), (Dims{1, 2}));
  EXPECT_EQ(t->data<float>()[0], 1.5f);
  EXPECT_EQ(t->data<float>()[1], -2.25f);

  t = ParseIdx(IdxHeader(0x0E, {2}) + BeElements<double>({0.1, -1e300}), "f64");
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->dtype(), DType::kFloat64);
  EXPECT_EQ(t->data<double>()[0], 0.1);
  EXPECT_EQ(t->data<double>()[1], -1e300);
}

void ExpectRejected(const std::string& bytes, const std::string& fragment) {
  StatusOr<Tensor> t = ParseIdx(bytes, "bad.idx");
  ASSERT_FALSE(t.ok()) << "accepted a file that should fail with '" << fragment << "'";
  EXPECT_NE(t.status().message().find("bad.idx"), std::string::npos) << t.status().message();
  EXPECT_NE(t.status().message().find(fragment), std::string::npos) << t.status().message();
}

TEST(IdxTest, RejectsMalformedFiles) {
  const std::string good = IdxHeader(0x08, {2, 2}) + std::string("\x01\x02\x03\x04", 4);
  ASSERT_TRUE(ParseIdx(good, "good").ok());
  ExpectRejected(good.substr(0, good.size() - 1), "truncated payload");
  ExpectRejected(good + "x", "trailing bytes");
  std::string bad_magic = good;
  bad_magic[0] = 1;
  ExpectRejected(bad_magic, "magic");
  ExpectRejected(std::string("\0\0", 2), "magic");
  std::string bad_type = good;
  bad_type[2] = 0x0A;
  ExpectRejected(bad_type, "element type 0x0A");
  ExpectRejected(IdxHeader(0x08, {}), "zero dimensions");
  ExpectRejected(good.substr(0, 9), "truncated header");
  // Dims whose product overflows, and int32 elements of 2^31 bytes, both refused before allocating.
  ExpectRejected(IdxHeader(0x08, {0xffffffffu, 0xffffffffu, 0xffffffffu}), "overflow");
  ExpectRejected(IdxHeader(0x0C, {0x80000000u}) + "abcd", "truncated payload");
}

TEST(IdxTest, RejectsCorruptFilesOnDisk) {
  testing::ScratchDir scratch;
  const std::string dir = scratch.path();
  const std::string bytes = IdxHeader(0x08, {3}) + std::string("\x01\x02\x03", 3);
  // Payload one byte short inside a valid gzip stream.
  WriteGz(dir + "/short.gz", bytes.substr(0, bytes.size() - 1));
  StatusOr<Tensor> t = ReadIdx(dir + "/short.gz");
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("short.gz"), std::string::npos);
  EXPECT_NE(t.status().message().find("truncated payload"), std::string::npos) << t.status().message();

  // Trailing data inside the gzip stream (1 MiB past a 3-byte payload).
  WriteGz(dir + "/long.gz", bytes + std::string(1 << 20, '\0'));
  t = ReadIdx(dir + "/long.gz");
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("trailing bytes"), std::string::npos) << t.status().message();

  // A gzip stream cut in the middle.
  WriteGz(dir + "/whole.gz", bytes + std::string(4000, '\x07'));
  StatusOr<std::string> gz = ReadFileBytes(dir + "/whole.gz");
  ASSERT_TRUE(gz.ok());
  WriteRaw(dir + "/cut.gz", gz->substr(0, gz->size() / 2));
  t = ReadIdx(dir + "/cut.gz");
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("cut.gz"), std::string::npos) << t.status().message();

  t = ReadIdx(dir + "/absent.idx");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace whittle
