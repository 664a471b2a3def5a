// The AVX-512 sigmoid and tanh (wide_float_math.h) give, element for element,
// the bits of the 8-lane versions the lower levels run: ragged lengths (the
// masked end), saturating and tiny inputs, infinities and NaN.
#include "engine/kernels/wide_float_math.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "engine/kernels/elementwise_math.h"

using namespace samba::ops;

namespace {

std::vector<float> inputs(int64_t n) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-12.0f, 12.0f);
  std::vector<float> x(static_cast<size_t>(n));
  for (float& v : x) v = u(rng);
  const float special[] = {0.0f, -0.0f, 3e-4f, -1e-5f, 8.5f, -9.0f, 90.0f, -110.0f,
                           std::numeric_limits<float>::infinity(),
                           -std::numeric_limits<float>::infinity(),
                           std::numeric_limits<float>::quiet_NaN()};
  for (size_t i = 0; i < std::size(special) && i < x.size(); ++i) x[i] = special[i];
  return x;
}

// The same bits (NaN compared as NaN).
void expect_same(const std::vector<float>& want, const std::vector<float>& got, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const auto k = static_cast<size_t>(i);
    if (std::isnan(want[k])) {
      EXPECT_TRUE(std::isnan(got[k])) << "at " << i;
      continue;
    }
    EXPECT_EQ(std::memcmp(&want[k], &got[k], sizeof(float)), 0)
        << "at " << i << ": " << want[k] << " vs " << got[k];
  }
}

TEST(WideFloatMath, SigmoidAndTanhMatchTheEightLaneVersions) {
  const ew::WideFloatMath& wide = ew::wide_float_math();
  if (!wide.sigmoid || !wide.tanh) GTEST_SKIP() << "no AVX-512 level active";
  for (int64_t n : {1, 11, 15, 16, 17, 40, 256}) {
    const std::vector<float> x = inputs(n);
    std::vector<float> want(x.size()), got(x.size() + 1, 42.0f);
#ifdef SAMBA_EW_EXP8
    ew::map8(n, want.data(), x.data(), ew::sigmoid8);
    wide.sigmoid(n, got.data(), x.data());
    expect_same(want, got, n);
#endif
    EXPECT_EQ(got[static_cast<size_t>(n)], 42.0f) << "wrote past the end";
    ew::vec(want.data(), n) = ew::vec(x.data(), n).tanh();
    wide.tanh(n, got.data(), x.data());
    expect_same(want, got, n);
    EXPECT_EQ(got[static_cast<size_t>(n)], 42.0f) << "wrote past the end";
  }
}

}  // namespace
