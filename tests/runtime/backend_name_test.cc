// The one parser of backend names: each name BackendName gives reads back, and a wrong one is an
// error that names it and the choices.
#include "runtime/backend_name.h"

#include <gtest/gtest.h>

namespace whittle {
namespace {

TEST(ParseBackend, ReadsBackEveryBackendName) {
  for (Backend b : {Backend::kCpu, Backend::kCuda, Backend::kReference}) {
    auto p = ParseBackend(BackendName(b));
    ASSERT_TRUE(p.ok()) << BackendName(b);
    EXPECT_EQ(*p, b);
  }
}

TEST(ParseBackend, AWrongNameIsAnErrorNamingTheChoices) {
  for (const char* bad : {"", "CPU", "gpu", "cuda0", "reference "}) {
    auto p = ParseBackend(bad);
    ASSERT_FALSE(p.ok()) << bad;
    EXPECT_EQ(p.status().message(), std::string("unknown device '") + bad + "' (expected one of cpu|cuda|reference)");
  }
}

}  // namespace
}  // namespace whittle
