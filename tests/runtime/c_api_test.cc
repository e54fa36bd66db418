#include "whittle/whittle_c.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace {

TEST(CApi, LoadRunAndErrors) {
  const std::string model = std::string(WHITTLE_SOURCE_DIR) + "/models/mlp.onnx";
  whittle_session* s = nullptr;
  ASSERT_EQ(whittle_session_load(model.c_str(), 2, &s), 0) << whittle_last_error();
  ASSERT_EQ(whittle_session_num_inputs(s), 1u);
  ASSERT_EQ(whittle_session_num_outputs(s), 1u);
  std::vector<float> x(2 * 28 * 28, 0.5f);
  int64_t dims[] = {2, 1, 28, 28};
  whittle_tensor* in = nullptr;
  ASSERT_EQ(whittle_tensor_create(1, dims, 4, x.data(), &in), 0);
  const char* names[] = {whittle_session_input_name(s, 0)};
  const whittle_tensor* ins[] = {in};
  whittle_tensor* out = nullptr;
  ASSERT_EQ(whittle_session_run(s, names, ins, 1, &out), 0) << whittle_last_error();
  ASSERT_EQ(whittle_tensor_rank(out), 2u);
  EXPECT_EQ(whittle_tensor_dims(out)[0], 2);
  EXPECT_EQ(whittle_tensor_dims(out)[1], 10);
  const float* y = static_cast<const float*>(whittle_tensor_data(out));
  EXPECT_EQ(y[0], y[10]);  // both rows had the same input
  whittle_tensor_free(out);

  const char* bad_names[] = {"nope"};
  EXPECT_NE(whittle_session_run(s, bad_names, ins, 1, &out), 0);
  EXPECT_NE(std::string(whittle_last_error()).find("nope"), std::string::npos);
  whittle_tensor_free(in);
  whittle_session_free(s);

  whittle_session* bad = nullptr;
  EXPECT_NE(whittle_session_load("/nonexistent/model.onnx", 1, &bad), 0);
  EXPECT_FALSE(std::string(whittle_last_error()).empty());
}

}  // namespace
