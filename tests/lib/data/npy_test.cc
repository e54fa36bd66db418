#include "lib/data/npy.h"

#include <dirent.h>
#include <gtest/gtest.h>

#include "tests/util/scratch_dir.h"
#include <stdlib.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>


namespace whittle {
namespace {

std::vector<std::string> ListDir(const std::string& dir) {
  std::vector<std::string> names;
  DIR* d = opendir(dir.c_str());
  if (!d) return names;
  while (dirent* e = readdir(d)) {
    if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) names.push_back(e->d_name);
  }
  closedir(d);
  return names;
}

// Builds a v1.0 file from a header dict literal (padded and newline-terminated as NumPy does)
// and raw data bytes.
std::string NpyV1(const std::string& dict, const std::string& data) {
  std::string header = dict;
  while ((10 + header.size() + 1) % 64 != 0) header.push_back(' ');
  header.push_back('\n');
  std::string out = std::string("\x93NUMPY\x01\x00", 8);
  out.push_back(static_cast<char>(header.size() & 0xff));
  out.push_back(static_cast<char>(header.size() >> 8));
  return out + header + data;
}

template <class T>
std::string LeBytes(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

template <class T>
void ExpectRoundTrip(const std::string& dir, const Dims& dims, const std::vector<T>& values) {
  Tensor t = Tensor::FromVector<T>(dims, values);
  const std::string path = dir + "/t_" + DTypeName(t.dtype()) + "_" + std::to_string(dims.size()) + ".npy";
  ASSERT_TRUE(WriteNpy(path, t).ok());
  StatusOr<Tensor> back = ReadNpy(path);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->dtype(), t.dtype());
  EXPECT_EQ(back->dims(), t.dims());
  EXPECT_TRUE(back->BitwiseEquals(t)) << DTypeName(t.dtype());
}

TEST(NpyTest, RoundTripsEveryDType) {
  testing::ScratchDir scratch;
  const std::string dir = scratch.path();
  ExpectRoundTrip<float>(dir, {2, 3}, {0.f, -1.5f, 3.25f, 1e-30f, -7.f, 42.f});
  ExpectRoundTrip<double>(dir, {3}, {1e300, -0.5, 2.0});
  ExpectRoundTrip<int64_t>(dir, {2, 1, 2}, {INT64_MIN, -1, 0, INT64_MAX});
  ExpectRoundTrip<int32_t>(dir, {4}, {-5, 0, 7, INT32_MAX});
  ExpectRoundTrip<int16_t>(dir, {2, 2}, {-300, 300, 0, 1});
  ExpectRoundTrip<int8_t>(dir, {3}, {-128, 0, 127});
  ExpectRoundTrip<uint8_t>(dir, {1, 3}, {0, 128, 255});
  ExpectRoundTrip<uint16_t>(dir, {2}, {0, 65535});
  ExpectRoundTrip<uint32_t>(dir, {2}, {1, 4000000000u});
  ExpectRoundTrip<uint64_t>(dir, {1}, {UINT64_MAX});
  ExpectRoundTrip<bool>(dir, {2, 2}, {true, false, false, true});
  ExpectRoundTrip<float>(dir, {}, {3.5f});      // scalar: shape ()
  ExpectRoundTrip<int32_t>(dir, {0, 3}, {});    // empty
}

TEST(NpyTest, SerializesExactlyLikeNumPy) {
  // np.save of np.arange(6, dtype=np.float32).reshape(2, 3): header padded so data is 64-aligned.
  Tensor t = Tensor::FromVector<float>({2, 3}, {0, 1, 2, 3, 4, 5});
  StatusOr<std::string> bytes = SerializeNpy(t);
  ASSERT_TRUE(bytes.ok());
  const std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
  ASSERT_EQ(bytes->size(), 128u + 24u);
  EXPECT_EQ(bytes->substr(0, 10), std::string("\x93NUMPY\x01\x00\x76\x00", 10));
  EXPECT_EQ(bytes->substr(10, dict.size()), dict);
  EXPECT_EQ((*bytes)[127], '\n');
  EXPECT_EQ(*bytes, NpyV1(dict, LeBytes<float>({0, 1, 2, 3, 4, 5})));
  // One-element shapes need the trailing comma of a Python tuple.
  StatusOr<std::string> one = SerializeNpy(Tensor::FromVector<uint8_t>({3}, {1, 2, 3}));
  ASSERT_TRUE(one.ok());
  EXPECT_NE(one->find("'descr': '|u1'"), std::string::npos);
  EXPECT_NE(one->find("'shape': (3,)"), std::string::npos);
}

TEST(NpyTest, ParsesHandWrittenFiles) {
  StatusOr<Tensor> t = ParseNpy(NpyV1("{'descr': '<i4', 'fortran_order': False, 'shape': (2, 2), }",
                                      LeBytes<int32_t>({1, 2, 3, -1})),
                                "hand.npy");
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->dtype(), DType::kInt32);
  EXPECT_EQ(t->dims(), (Dims{2, 2}));
  EXPECT_EQ(t->data<int32_t>()[3], -1);

  // Keys in another order, double quotes, no trailing comma, extra spaces.
  t = ParseNpy(NpyV1("{ \"shape\" : (3,) , \"fortran_order\": False, \"descr\": \"|u1\" }", "\x01\x02\xff"), "q.npy");
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->dtype(), DType::kUInt8);
  EXPECT_EQ(t->dims(), (Dims{3}));
  EXPECT_EQ(t->data<uint8_t>()[2], 255);

  // Scalar.
  t = ParseNpy(NpyV1("{'descr': '<f8', 'fortran_order': False, 'shape': (), }", LeBytes<double>({-2.5})), "s.npy");
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->rank(), 0);
  EXPECT_EQ(t->data<double>()[0], -2.5);

  // Version 2.0: 4-byte header length.
  std::string header = "{'descr': '<i2', 'fortran_order': False, 'shape': (2,), }";
  while ((12 + header.size() + 1) % 64 != 0) header.push_back(' ');
  header.push_back('\n');
  std::string v2 = std::string("\x93NUMPY\x02\x00", 8);
  v2.push_back(static_cast<char>(header.size()));
  v2.append(3, '\0');
  v2 += header + LeBytes<int16_t>({-2, 513});
  t = ParseNpy(v2, "v2.npy");
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->data<int16_t>()[0], -2);
  EXPECT_EQ(t->data<int16_t>()[1], 513);
}

void ExpectRejected(const std::string& bytes, const std::string& fragment) {
  StatusOr<Tensor> t = ParseNpy(bytes, "bad.npy");
  ASSERT_FALSE(t.ok()) << "accepted a file that should fail with '" << fragment << "'";
  EXPECT_NE(t.status().message().find("bad.npy"), std::string::npos) << t.status().message();
  EXPECT_NE(t.status().message().find(fragment), std::string::npos) << t.status().message();
}

TEST(NpyTest, RejectsCorruptFiles) {
  const std::string f4x2 = LeBytes<float>({1.f, 2.f});
  const std::string good = NpyV1("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", f4x2);
  ASSERT_TRUE(ParseNpy(good, "good.npy").ok());

  std::string bad_magic = good;
  bad_magic[1] = 'X';
  ExpectRejected(bad_magic, "magic");
  ExpectRejected("", "magic");
  ExpectRejected(good.substr(0, 40), "truncated header");
  std::string bad_version = good;
  bad_version[6] = 9;
  ExpectRejected(bad_version, "version");

  ExpectRejected(NpyV1("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", f4x2), "data bytes");
  ExpectRejected(NpyV1("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", f4x2), "data bytes");
  ExpectRejected(good + "x", "data bytes");
  ExpectRejected(NpyV1("{'descr': '<f4', 'fortran_order': True, 'shape': (1, 2), }", f4x2), "fortran_order");
  ExpectRejected(NpyV1("{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", f4x2), "big-endian");
  ExpectRejected(NpyV1("{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }", f4x2), "unsupported dtype");
  ExpectRejected(NpyV1("{'descr': '|O', 'fortran_order': False, 'shape': (1,), }", f4x2), "unsupported dtype");
  ExpectRejected(NpyV1("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }", f4x2), "structured");

  // Header syntax.
  ExpectRejected(NpyV1("{'descr': '<f4', 'shape': (2,), }", f4x2), "keys");
  ExpectRejected(NpyV1("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'extra': 1}", f4x2), "extra");
  ExpectRejected(NpyV1("{'descr': '<f4', 'fortran_order': False, 'shape': (2,)", f4x2), "malformed");
  ExpectRejected(NpyV1("{'descr': '<f4', 'fortran_order': maybe, 'shape': (2,), }", f4x2), "True or False");
  ExpectRejected(NpyV1("{'descr': '<f4', 'fortran_order': False, 'shape': (2), }", f4x2), "(n,)");
  ExpectRejected(NpyV1("{'descr': '<f4', 'fortran_order': False, 'shape': (1 2), }", f4x2), "malformed");
  ExpectRejected(NpyV1("{'descr': '<f4', 'fortran_order': False, 'shape': (-2,), }", f4x2), "negative");
  ExpectRejected(NpyV1("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }", f4x2),
                 "too large");
  ExpectRejected(NpyV1("{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904, 4), }", f4x2),
                 "overflow");
  ExpectRejected(NpyV1("{'descr': '<f8', 'fortran_order': False, 'shape': (4611686018427387903,), }", f4x2),
                 "too large");
  ExpectRejected(NpyV1("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), } junk", f4x2), "after '}'");
  std::string no_newline = good;
  no_newline[127] = ' ';
  ExpectRejected(no_newline, "newline");
  ExpectRejected(NpyV1("{'descr': '|b1', 'fortran_order': False, 'shape': (2,), }", std::string("\x01\x02", 2)),
                 "neither 0 nor 1");
}

TEST(NpyTest, FileErrorsNameThePath) {
  testing::ScratchDir scratch;
  const std::string dir = scratch.path();
  StatusOr<Tensor> missing = ReadNpy(dir + "/absent.npy");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("absent.npy"), std::string::npos);
  EXPECT_FALSE(ReadNpy(dir).ok());  // a directory

  Tensor bf16(DType::kBFloat16, {2});
  Status st = WriteNpy(dir + "/bf16.npy", bf16);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("bfloat16"), std::string::npos);
  EXPECT_FALSE(WriteNpy(dir + "/no/such/dir/x.npy", Tensor::Scalar<float>(1.f)).ok());
  EXPECT_FALSE(WriteNpy(dir + "/undef.npy", Tensor()).ok());
}

TEST(NpyTest, WriteIsAtomicAndReplacesTheOldFile) {
  testing::ScratchDir scratch;
  const std::string dir = scratch.path();
  const std::string path = dir + "/a.npy";
  ASSERT_TRUE(WriteNpy(path, Tensor::FromVector<int32_t>({3}, {1, 2, 3})).ok());
  ASSERT_TRUE(WriteNpy(path, Tensor::FromVector<int32_t>({2}, {7, 8})).ok());
  StatusOr<Tensor> back = ReadNpy(path);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->dims(), (Dims{2}));
  EXPECT_EQ(back->data<int32_t>()[1], 8);
  // No temporary file is left behind.
  EXPECT_EQ(ListDir(dir), std::vector<std::string>{"a.npy"});
}

TEST(NpyTest, LargeHeaderUsesVersion2) {
  // 30000 dims of 1 make a ~90 KB shape literal, past version 1.0's 16-bit header length.
  Dims dims(30000, 1);
  Tensor t(DType::kFloat32, dims);
  t.data<float>()[0] = 9.f;
  StatusOr<std::string> bytes = SerializeNpy(t);
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ((*bytes)[6], 2);
  StatusOr<Tensor> back = ParseNpy(*bytes, "big_header.npy");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->rank(), 30000);
  EXPECT_EQ(back->data<float>()[0], 9.f);
}

}  // namespace
}  // namespace whittle
