#include "lib/data/dataset.h"

#include <gtest/gtest.h>

#include "tests/util/scratch_dir.h"
#include <stdlib.h>
#include <sys/stat.h>
#include <zlib.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "lib/data/file_util.h"
#include "lib/data/npy.h"
#include "lib/data/npz.h"

namespace whittle {
namespace {

constexpr char kFashionDir[] = "/usr/share/datasets/fashion-mnist";

std::string IdxU8(const std::vector<uint32_t>& dims, const std::vector<uint8_t>& values) {
  std::string s = {'\0', '\0', '\x08', static_cast<char>(dims.size())};
  for (uint32_t d : dims) {
    for (int i = 0; i < 4; ++i) s.push_back(static_cast<char>((d >> (24 - 8 * i)) & 0xff));
  }
  return s + std::string(values.begin(), values.end());
}

void WriteGz(const std::string& path, const std::string& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())), static_cast<int>(bytes.size()));
  ASSERT_EQ(gzclose(f), Z_OK);
}

// Sets an environment variable for one test and restores the old value.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    const char* old = std::getenv(name);
    had_old_ = old != nullptr;
    if (had_old_) old_ = old;
    setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (had_old_) {
      setenv(name_, old_.c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }

 private:
  const char* name_;
  bool had_old_ = false;
  std::string old_;
};

TEST(DatasetTest, LoadsFashionMnistTestSplit) {
  struct stat st;
  if (std::getenv("WHITTLE_FASHION_MNIST_DIR") == nullptr && stat(kFashionDir, &st) != 0) {
    GTEST_SKIP() << kFashionDir << " is absent: install the Debian package dataset-fashion-mnist";
  }
  StatusOr<Dataset> d = LoadDataset("fashion-mnist:test", 100);
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ(d->inputs.dtype(), DType::kFloat32);
  EXPECT_EQ(d->inputs.dims(), (Dims{100, 1, 28, 28}));
  EXPECT_EQ(d->size(), 100);
  ASSERT_TRUE(d->has_labels());
  EXPECT_EQ(d->labels.dtype(), DType::kInt64);
  EXPECT_EQ(d->labels.dims(), (Dims{100}));
  const float* x = d->inputs.data<float>();
  float lo = 1.f, hi = 0.f;
  for (int64_t i = 0; i < d->inputs.numel(); ++i) {
    lo = std::fmin(lo, x[i]);
    hi = std::fmax(hi, x[i]);
  }
  EXPECT_EQ(lo, 0.f);
  EXPECT_EQ(hi, 1.f);  // pixel 255 somewhere in the first 100 images
  // The first test image's pixels sum to 33456 (computed with NumPy from the IDX file).
  double sum0 = 0;
  for (int i = 0; i < 28 * 28; ++i) sum0 += x[i];
  EXPECT_NEAR(sum0, 33456.0 / 255.0, 1e-3);
  const int64_t* y = d->labels.data<int64_t>();
  const std::vector<int64_t> first = {9, 2, 1, 1, 6, 1, 4, 6, 5, 7};
  for (size_t i = 0; i < first.size(); ++i) EXPECT_EQ(y[i], first[i]) << i;
  for (int64_t i = 0; i < 100; ++i) {
    EXPECT_GE(y[i], 0);
    EXPECT_LE(y[i], 9);
  }
  EXPECT_NE(d->description.find("fashion-mnist:test"), std::string::npos) << d->description;
  EXPECT_NE(d->description.find("100 samples"), std::string::npos) << d->description;
}

TEST(DatasetTest, FashionMnistDirectoryOverrideAndMissingPackage) {
  testing::ScratchDir scratch;
  const std::string dir = scratch.path();
  // A 2-image, 2x3 stand-in for the Debian files.
  WriteGz(dir + "/train-images-idx3-ubyte.gz", IdxU8({2, 2, 3}, {0, 51, 102, 153, 204, 255, 1, 2, 3, 4, 5, 6}));
  WriteGz(dir + "/train-labels-idx1-ubyte.gz", IdxU8({2}, {3, 0}));
  {
    ScopedEnv env("WHITTLE_FASHION_MNIST_DIR", dir);
    StatusOr<Dataset> d = LoadDataset("fashion-mnist:train");
    ASSERT_TRUE(d.ok()) << d.status().message();
    EXPECT_EQ(d->inputs.dims(), (Dims{2, 1, 2, 3}));
    EXPECT_FLOAT_EQ(d->inputs.data<float>()[1], 0.2f);
    EXPECT_FLOAT_EQ(d->inputs.data<float>()[5], 1.f);
    EXPECT_EQ(d->labels.data<int64_t>()[0], 3);

    StatusOr<Dataset> missing = LoadDataset("fashion-mnist:test");  // no t10k files there
    ASSERT_FALSE(missing.ok());
    EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
    EXPECT_NE(missing.status().message().find("dataset-fashion-mnist"), std::string::npos)
        << missing.status().message();
    EXPECT_NE(missing.status().message().find(dir), std::string::npos);
  }
}

TEST(DatasetTest, LoadsIdxPairsWithLimit) {
  testing::ScratchDir scratch;
  const std::string dir = scratch.path();
  ASSERT_TRUE(WriteFileAtomically(dir + "/img", IdxU8({3, 1, 2}, {0, 255, 85, 170, 10, 20})).ok());
  WriteGz(dir + "/lbl.gz", IdxU8({3}, {1, 2, 0}));
  StatusOr<Dataset> d = LoadDataset("idx:" + dir + "/img:" + dir + "/lbl.gz", 2);
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ(d->inputs.dims(), (Dims{2, 1, 1, 2}));
  const std::vector<float> want = {0.f, 1.f, 85.f / 255.f, 170.f / 255.f};
  for (size_t i = 0; i < want.size(); ++i) EXPECT_FLOAT_EQ(d->inputs.data<float>()[i], want[i]);
  EXPECT_EQ(d->labels.dims(), (Dims{2}));
  EXPECT_EQ(d->labels.data<int64_t>()[1], 2);

  // Limit past the end keeps everything; counts must agree.
  d = LoadDataset("idx:" + dir + "/img:" + dir + "/lbl.gz", 50);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->size(), 3);
  WriteGz(dir + "/lbl4.gz", IdxU8({4}, {1, 2, 0, 1}));
  d = LoadDataset("idx:" + dir + "/img:" + dir + "/lbl4.gz");
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("4 labels for 3 inputs"), std::string::npos) << d.status().message();
}

TEST(DatasetTest, LoadsNpyWithConversions) {
  testing::ScratchDir scratch;
  const std::string dir = scratch.path();
  ASSERT_TRUE(WriteNpy(dir + "/x64.npy", Tensor::FromVector<double>({3, 2}, {0.5, -1, 2, 3, 4, 5})).ok());
  ASSERT_TRUE(WriteNpy(dir + "/y32.npy", Tensor::FromVector<int32_t>({3}, {4, 0, 7})).ok());
  ASSERT_TRUE(WriteNpy(dir + "/x8.npy", Tensor::FromVector<uint8_t>({2, 2}, {0, 255, 51, 102})).ok());
  ASSERT_TRUE(WriteNpy(dir + "/ycol.npy", Tensor::FromVector<uint8_t>({2, 1}, {5, 6})).ok());

  StatusOr<Dataset> d = LoadDataset("npy:" + dir + "/x64.npy:" + dir + "/y32.npy");
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ(d->inputs.dtype(), DType::kFloat32);
  EXPECT_EQ(d->inputs.dims(), (Dims{3, 2}));  // npy inputs keep their shape
  EXPECT_EQ(d->inputs.data<float>()[1], -1.f);
  EXPECT_EQ(d->labels.dtype(), DType::kInt64);
  EXPECT_EQ(d->labels.data<int64_t>()[2], 7);

  // Integer and bool inputs (token ids, bytes, masks) stay as stored.
  ASSERT_TRUE(WriteNpy(dir + "/xi32.npy", Tensor::FromVector<int32_t>({3, 2}, {1, 2, 3, 4, 5, 6})).ok());
  d = LoadDataset("npy:" + dir + "/xi32.npy:" + dir + "/y32.npy");
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ(d->inputs.dtype(), DType::kInt32);
  EXPECT_EQ(d->inputs.data<int32_t>()[5], 6);
  EXPECT_NE(d->description.find("samples of int32 [2]"), std::string::npos) << d->description;

  d = LoadDataset("npy:" + dir + "/x8.npy:" + dir + "/ycol.npy", 1);
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ(d->inputs.dims(), (Dims{1, 2}));
  EXPECT_FLOAT_EQ(d->inputs.data<float>()[1], 1.f);
  EXPECT_EQ(d->labels.dims(), (Dims{1}));
  EXPECT_EQ(d->labels.data<int64_t>()[0], 5);

  d = LoadDataset("npy:" + dir + "/x64.npy");  // unlabeled
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_FALSE(d->has_labels());
  EXPECT_EQ(d->size(), 3);
}

TEST(DatasetTest, RejectsBadLabels) {
  testing::ScratchDir scratch;
  const std::string dir = scratch.path();
  const std::string x = dir + "/x.npy";
  ASSERT_TRUE(WriteNpy(x, Tensor::FromVector<float>({2, 1}, {1, 2})).ok());
  ASSERT_TRUE(WriteNpy(dir + "/neg.npy", Tensor::FromVector<int64_t>({2}, {1, -3})).ok());
  ASSERT_TRUE(WriteNpy(dir + "/float.npy", Tensor::FromVector<float>({2}, {1, 0})).ok());
  ASSERT_TRUE(WriteNpy(dir + "/three.npy", Tensor::FromVector<int64_t>({3}, {1, 0, 1})).ok());
  ASSERT_TRUE(WriteNpy(dir + "/huge.npy", Tensor::FromVector<uint64_t>({2}, {1, UINT64_MAX})).ok());
  ASSERT_TRUE(WriteNpy(dir + "/matrix.npy", Tensor::FromVector<int64_t>({2, 2}, {1, 0, 1, 0})).ok());
  ASSERT_TRUE(WriteNpy(dir + "/scalar_label.npy", Tensor::Scalar<int64_t>(1)).ok());
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"neg.npy", ">= 0"}, {"float.npy", "integer dtype"}, {"three.npy", "3 labels for 2 inputs"},
      {"huge.npy", ">= 0"}, {"scalar_label.npy", "labels for 2 inputs"}};
  for (const auto& [file, fragment] : cases) {
    StatusOr<Dataset> d = LoadDataset("npy:" + x + ":" + dir + "/" + file);
    ASSERT_FALSE(d.ok()) << file;
    EXPECT_NE(d.status().message().find(fragment), std::string::npos) << file << ": " << d.status().message();
  }
  // [N, T] labels: one class per position of a sequence model, kept as they are.
  StatusOr<Dataset> per_position = LoadDataset("npy:" + x + ":" + dir + "/matrix.npy");
  ASSERT_TRUE(per_position.ok()) << per_position.status().message();
  EXPECT_EQ(per_position->labels.dims(), (Dims{2, 2}));
  ASSERT_TRUE(WriteNpy(dir + "/scalar.npy", Tensor::Scalar<float>(1.f)).ok());
  EXPECT_FALSE(LoadDataset("npy:" + dir + "/scalar.npy").ok());
  // Bool inputs (masks) are accepted as stored; a float16 array is not an input type we read.
  ASSERT_TRUE(WriteNpy(dir + "/bool.npy", Tensor::FromVector<bool>({2}, {true, false})).ok());
  StatusOr<Dataset> masks = LoadDataset("npy:" + dir + "/bool.npy");
  ASSERT_TRUE(masks.ok()) << masks.status().message();
  EXPECT_EQ(masks->inputs.dtype(), DType::kBool);
  StatusOr<Dataset> absent = LoadDataset("npy:" + dir + "/absent.npy");
  ASSERT_FALSE(absent.ok());
  EXPECT_NE(absent.status().message().find("absent.npy"), std::string::npos);
}

TEST(DatasetTest, RejectsBadSpecsWithTheAcceptedForms) {
  const std::vector<std::string> specs = {"foo:bar",   "",          "fashion-mnist", "fashion-mnist:val",
                                          "fashion-mnist:train:x", "idx:images", "idx::labels", "idx:a:b:c",
                                          "npy",       "npy:",      "npy:a:b:c",     "mnist"};
  for (const std::string& spec : specs) {
    StatusOr<Dataset> d = LoadDataset(spec);
    ASSERT_FALSE(d.ok()) << spec;
    EXPECT_EQ(d.status().code(), StatusCode::kInvalidArgument) << spec;
    const std::string m = d.status().message();
    const std::string quoted = "'" + spec + "'";
    EXPECT_NE(m.find(quoted), std::string::npos) << m;
    EXPECT_NE(m.find(DatasetSpecHelp()), std::string::npos) << m;
    EXPECT_NE(m.find("npy:INPUTS.npy[:LABELS.npy]"), std::string::npos) << m;
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  }
}

TEST(DatasetTest, SliceBatchCopiesRows) {
  Tensor t = Tensor::FromVector<int32_t>({4, 2}, {0, 1, 10, 11, 20, 21, 30, 31});
  Tensor s = SliceBatch(t, 1, 3);
  EXPECT_EQ(s.dims(), (Dims{2, 2}));
  EXPECT_EQ(s.data<int32_t>()[0], 10);
  EXPECT_EQ(s.data<int32_t>()[3], 21);
  s.data<int32_t>()[0] = -1;  // a copy: the source is untouched
  EXPECT_EQ(t.data<int32_t>()[2], 10);
  EXPECT_EQ(SliceBatch(t, 4, 4).dims(), (Dims{0, 2}));
  Tensor v = SliceBatch(Tensor::FromVector<float>({3}, {1, 2, 3}), 2, 3);
  EXPECT_EQ(v.dims(), (Dims{1}));
  EXPECT_EQ(v.data<float>()[0], 3.f);
}

}  // namespace
}  // namespace whittle

namespace whittle {
namespace {

// calls: (issue 43): a stateful model's sequence of calls in one archive: each array's first axis
// counts the calls, each call's value is taken as it is (a 0-d input's array is [calls]).
TEST(DatasetTest, CallsLayoutFeedsEachCallAsItIs) {
  testing::ScratchDir dir;
  const std::string path = dir / "calls.npz";
  Tensor input(DType::kFloat32, {3, 1, 4}), state(DType::kFloat32, {3, 2, 1, 2});
  for (int64_t i = 0; i < input.numel(); ++i) input.data<float>()[i] = static_cast<float>(i);
  for (int64_t i = 0; i < state.numel(); ++i) state.data<float>()[i] = -static_cast<float>(i);
  ASSERT_TRUE(WriteNpz(path, {{"input", input}, {"state", state}, {"sr", Tensor::FromVector<int64_t>({3}, {8, 16, 16})}})
                  .ok());
  auto d = LoadDataset("calls:" + path + ":state=stateN");
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_TRUE(d->calls);
  EXPECT_EQ(d->size(), 3);
  ASSERT_EQ(d->feedback.size(), 1u);
  EXPECT_EQ(d->feedback[0].first, "state");
  EXPECT_EQ(d->feedback[0].second, "stateN");
  auto x = d->CallInput("input", 2);
  ASSERT_TRUE(x.ok());
  EXPECT_EQ(x->dims(), (Dims{1, 4}));
  EXPECT_FLOAT_EQ(x->data<float>()[0], 8.f);
  auto sr = d->CallInput("sr", 1);
  ASSERT_TRUE(sr.ok());
  EXPECT_EQ(sr->dims(), Dims{});
  EXPECT_EQ(sr->data<int64_t>()[0], 16);
  EXPECT_FALSE(d->CallInput("missing", 0).ok());
  auto limited = LoadDataset("calls:" + path, 2);
  ASSERT_TRUE(limited.ok());
  EXPECT_EQ(limited->size(), 2);

  // Calls counted differently, a feedback input without an array, a malformed pair.
  const std::string bad = dir / "bad.npz";
  ASSERT_TRUE(WriteNpz(bad, {{"input", input}, {"sr", Tensor::FromVector<int64_t>({2}, {8, 16})}}).ok());
  auto e = LoadDataset("calls:" + bad);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("first axis counts the calls"), std::string::npos) << e.status().message();
  e = LoadDataset("calls:" + path + ":h=hN");
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("feedback input 'h'"), std::string::npos) << e.status().message();
  e = LoadDataset("calls:" + path + ":state");
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("INPUT=OUTPUT"), std::string::npos) << e.status().message();
}

}  // namespace
}  // namespace whittle
