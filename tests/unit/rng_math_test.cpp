// The RNG's building blocks against independent references: Philox
// known-answer vectors, the float math of the samplers (log, sin/cos of a
// turn fraction, the normal quantile) against double-precision libm, the
// double quantile against high-precision values, and float32 -> bfloat16
// rounding on its edge cases.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "engine/core/error.h"
#include "engine/rng/bf16.h"
#include "engine/rng/distributions.h"
#include "engine/rng/philox.h"

using namespace samba;
using namespace samba::rng;

namespace {

// Forces the scalar path for the life of the object.
struct ScalarPath {
  ScalarPath() { detail::force_scalar_path(true); }
  ~ScalarPath() { detail::force_scalar_path(false); }
};

// Distance in units in the last place of float between got and the exact want.
double ulps(float got, double want) {
  const float w = static_cast<float>(want);
  const double ulp = std::nextafter(std::abs(w), std::numeric_limits<float>::infinity()) -
                     static_cast<double>(std::abs(w));
  return std::abs(static_cast<double>(got) - want) / std::max(ulp, 0x1.0p-149);
}

std::vector<uint32_t> turn_grid() {
  std::vector<uint32_t> k;
  for (uint32_t i = 0; i < (1u << 24); i += 97) k.push_back(i);
  for (uint32_t q = 0; q <= 4; ++q)  // around every quarter turn and the ends
    for (int d = -40; d <= 40; ++d) {
      const int64_t v = int64_t{q} * (1 << 22) + d;
      if (v >= 0 && v < (1 << 24)) k.push_back(static_cast<uint32_t>(v));
    }
  return k;
}

}  // namespace

// Random123's known-answer vectors for Philox4x32-10.
TEST(Philox, KnownAnswers) {
  EXPECT_EQ(philox4x32_10({0, 0, 0, 0}, {0, 0}),
            (Counter{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}));
  EXPECT_EQ(philox4x32_10({~0u, ~0u, ~0u, ~0u}, {~0u, ~0u}),
            (Counter{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}));
  EXPECT_EQ(philox4x32_10({0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u},
                          {0xa4093822u, 0x299f31d0u}),
            (Counter{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}));
}

TEST(Philox, WordsFollowTheDocumentedLayoutOnBothPaths) {
  const Philox g{0x0123456789abcdefull, 0xfedcba9876543210ull};
  const int64_t n = 1000;
  const uint64_t first = (uint64_t{1} << 32) * 8 - 96;  // crosses a carry into the high word
  std::vector<uint32_t> want(n);
  for (int64_t j = 0; j < n; ++j) {
    const uint64_t e = first + static_cast<uint64_t>(j);
    want[j] = g.block(e / 32 * 8 + e % 8)[(e / 8) % 4];
  }
  std::vector<uint32_t> vec(n), scalar(n);
  generate_words(g, first, n, vec.data());
  {
    ScalarPath s;
    generate_words(g, first, n, scalar.data());
  }
  EXPECT_EQ(vec, want);
  EXPECT_EQ(scalar, want);
}

TEST(Philox, StreamsOfNamesDiffer) {
  EXPECT_EQ(stream_of("fc1.weight"), stream_of("fc1.weight"));
  EXPECT_NE(stream_of("fc1.weight"), stream_of("fc1.bias"));
  EXPECT_NE(stream_of(""), stream_of("a"));
  EXPECT_NE(derive_stream(stream_of("w"), "a"), derive_stream(stream_of("w"), "b"));
  EXPECT_NE(derive_stream(stream_of("w"), "a"), stream_of("w"));
}

// ---- float math ---------------------------------------------------------------------

TEST(UnitMath, LogWithinTwoUlps) {
  std::vector<float> x;
  for (uint32_t k = 1; k <= (1u << 24); k += 61) x.push_back(static_cast<float>(k) * 0x1.0p-24f);
  for (float v : {1.0f, 0.5f, 0x1.0p-24f, 0.70710677f, 0.70710683f, 1.4142135f, 3.0f, 1e30f, 1e-30f,
                  std::nextafter(1.0f, 0.0f)})
    x.push_back(v);
  std::vector<float> got(x.size());
  for (bool scalar : {false, true}) {
    SCOPED_TRACE(scalar ? "scalar" : "vector");
    detail::force_scalar_path(scalar);
    detail::log_positive(x.data(), static_cast<int64_t>(x.size()), got.data());
    double worst = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      const double want = std::log(static_cast<double>(x[i]));
      if (want == 0.0) {
        EXPECT_EQ(got[i], 0.0f);
        continue;
      }
      worst = std::max(worst, ulps(got[i], want));
    }
    EXPECT_LE(worst, 2.0);
  }
  detail::force_scalar_path(false);
}

TEST(UnitMath, SinCosOfTurnsWithinTwoUlps) {
  const auto k = turn_grid();
  std::vector<float> s(k.size()), c(k.size());
  for (bool scalar : {false, true}) {
    SCOPED_TRACE(scalar ? "scalar" : "vector");
    detail::force_scalar_path(scalar);
    detail::sincos_turns(k.data(), static_cast<int64_t>(k.size()), s.data(), c.data());
    double worst = 0;
    for (size_t i = 0; i < k.size(); ++i) {
      // Exact multiples of a quarter turn: sin/cos must be exactly 0 or +-1.
      const long double a = 2.0L * 3.14159265358979323846264338327950288L * k[i] / 16777216.0L;
      const double ws = static_cast<double>(std::sin(a)), wc = static_cast<double>(std::cos(a));
      if (k[i] % (1u << 22) == 0) {
        EXPECT_EQ(s[i], static_cast<float>(std::round(ws))) << k[i];
        EXPECT_EQ(c[i], static_cast<float>(std::round(wc))) << k[i];
        continue;
      }
      worst = std::max({worst, ulps(s[i], ws), ulps(c[i], wc)});
    }
    EXPECT_LE(worst, 2.0);
  }
  detail::force_scalar_path(false);
}

TEST(UnitMath, FloatQuantileMatchesTheDoubleOne) {
  // Every q the samplers produce is (2k + 1 - 2^24) 2^-25; take a spread of k
  // plus both ends and the branch boundary at |q| = 0.425.
  std::vector<float> q;
  for (int64_t k = 0; k < (1 << 24); k += 53)
    q.push_back(static_cast<float>(2 * k + 1 - (1 << 24)) * 0x1.0p-25f);
  for (int64_t k :
       {int64_t{0}, int64_t{1}, int64_t{2}, (int64_t{1} << 24) - 1, (int64_t{1} << 24) - 2})
    q.push_back(static_cast<float>(2 * k + 1 - (1 << 24)) * 0x1.0p-25f);
  q.push_back(0.425f);
  q.push_back(-std::nextafter(0.425f, 1.0f));
  std::vector<float> got(q.size());
  for (bool scalar : {false, true}) {
    SCOPED_TRACE(scalar ? "scalar" : "vector");
    detail::force_scalar_path(scalar);
    detail::normal_quantile_centered(q.data(), static_cast<int64_t>(q.size()), got.data());
    double worst = 0;
    for (size_t i = 0; i < q.size(); ++i) {
      const double want = normal_quantile(0.5 + static_cast<double>(q[i]));
      worst = std::max(worst, std::abs(got[i] - want) / std::max(std::abs(want), 1e-3));
    }
    // PPND7 itself is within 1.2e-7 of the quantile; evaluating it in float
    // adds a few roundings (3.7e-7 measured).
    EXPECT_LE(worst, 5e-7);
  }
  detail::force_scalar_path(false);
}

// High-precision values (60 digits) of the standard normal quantile.
TEST(NormalQuantile, DoublePrecision) {
  struct Case {
    double p, x;
  } cases[] = {
      {0.975, 1.9599639845400542355},
      {1e-10, -6.3613409024040562047},
      {0.3, -0.52440051270804078404},
      {0.999, 3.0902323061678135415},
      {0.5000001, 2.5066282746310267518e-7},
      {1e-20, -9.2623400897984075737},
      {0.5, 0.0},
  };
  for (const auto& c : cases)
    EXPECT_NEAR(normal_quantile(c.p), c.x, 4e-15 * std::max(1.0, std::abs(c.x))) << c.p;
  EXPECT_NEAR(normal_quantile(1e-300), -37.047096299361199237, 1e-6);
  EXPECT_EQ(normal_quantile(0.0), -std::numeric_limits<double>::infinity());
  EXPECT_EQ(normal_quantile(1.0), std::numeric_limits<double>::infinity());
  EXPECT_TRUE(std::isnan(normal_quantile(-0.1)));
  EXPECT_TRUE(std::isnan(normal_quantile(std::nan(""))));
  // Round trips through the distribution function over many decades.
  for (double p = 1e-15; p < 0.5; p *= 1.7)
    EXPECT_NEAR(normal_cdf(normal_quantile(p)) / p, 1.0, 1e-13) << p;
}

// ---- bfloat16 rounding ---------------------------------------------------------------

namespace {
uint16_t to_bits(float x, Bf16Rounding r, bool vector_path) {
  // The array conversion takes its vector path for 16 elements or more.
  std::vector<float> in(vector_path ? 16 : 1, x);
  std::vector<bf16> out(in.size());
  to_bf16(in.data(), static_cast<int64_t>(in.size()), r, out.data());
  return std::bit_cast<uint16_t>(out.back());
}
float from_bits(uint32_t u) { return std::bit_cast<float>(u); }
}  // namespace

TEST(Bf16, RoundingEdgeCases) {
  const auto ne = Bf16Rounding::NearestEven, tr = Bf16Rounding::Truncation;
  struct Case {
    uint32_t in;
    uint16_t nearest, truncated;
  } cases[] = {
      {0x3f800000u, 0x3f80, 0x3f80},  // 1
      {0x3f808000u, 0x3f80, 0x3f80},  // 1 + 2^-8: a tie, to the even 1
      {0x3f818000u, 0x3f82, 0x3f81},  // 1 + 3 2^-8: a tie, to the even 1 + 2^-6
      {0x3f808001u, 0x3f81, 0x3f80},  // just above the tie
      {0x3f807fffu, 0x3f80, 0x3f80},  // just below it
      {0xbf818000u, 0xbf82, 0xbf81},  // negative tie
      {0x7f7f0000u, 0x7f7f, 0x7f7f},  // bfloat16's largest finite
      {0x7f7f7fffu, 0x7f7f, 0x7f7f},  // still rounds down to it
      {0x7f7f8000u, 0x7f80, 0x7f7f},  // tie above it: to infinity
      {0x7f7fffffu, 0x7f80, 0x7f7f},  // float's largest finite
      {0x7f800000u, 0x7f80, 0x7f80},  // +inf
      {0xff800000u, 0xff80, 0xff80},  // -inf
      {0x7fc00000u, 0x7fc0, 0x7fc0},  // quiet NaN
      {0x7f800001u, 0x7fc0, 0x7fc0},  // signalling NaN, payload in the low bits only
      {0xffa00000u, 0xffe0, 0xffe0},  // negative NaN keeps sign and payload
      {0x7fbfffffu, 0x7fff, 0x7fff},  // NaN whose rounding would carry: no carry
      {0x00008000u, 0x0000, 0x0000},  // denormal tie to even 0
      {0x00018000u, 0x0002, 0x0001},  // denormal tie to even 2
      {0x007fffffu, 0x0080, 0x007f},  // largest denormal rounds up to the smallest normal
      {0x80000000u, 0x8000, 0x8000},  // -0
  };
  for (const auto& c : cases) {
    for (bool vector_path : {false, true}) {
      SCOPED_TRACE(::testing::Message()
                   << std::hex << c.in << (vector_path ? " vector" : " scalar"));
      EXPECT_EQ(to_bits(from_bits(c.in), ne, vector_path), c.nearest);
      EXPECT_EQ(to_bits(from_bits(c.in), tr, vector_path), c.truncated);
    }
  }
}

TEST(Bf16, NearestEvenAgreesWithEigenOnRandomBitsAndTruncationKeepsTheTop) {
  std::mt19937 gen(7);
  std::vector<float> in(100003);
  for (auto& x : in) {
    do x = from_bits(static_cast<uint32_t>(gen()));
    while (std::isnan(x));
  }
  std::vector<bf16> ne(in.size()), tr(in.size());
  to_bf16(in.data(), static_cast<int64_t>(in.size()), Bf16Rounding::NearestEven, ne.data());
  to_bf16(in.data(), static_cast<int64_t>(in.size()), Bf16Rounding::Truncation, tr.data());
  for (size_t i = 0; i < in.size(); ++i) {
    ASSERT_EQ(std::bit_cast<uint16_t>(ne[i]), std::bit_cast<uint16_t>(bf16(in[i]))) << in[i];
    ASSERT_EQ(std::bit_cast<uint16_t>(tr[i]), std::bit_cast<uint32_t>(in[i]) >> 16) << in[i];
  }
}

TEST(Bf16, RoundingNames) {
  EXPECT_EQ(bf16_rounding_from_name("nearest_even"), Bf16Rounding::NearestEven);
  EXPECT_EQ(bf16_rounding_from_name("truncation"), Bf16Rounding::Truncation);
  EXPECT_EQ(bf16_rounding_name(Bf16Rounding::Truncation), "truncation");
  try {
    bf16_rounding_from_name("nearest");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Status::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("'nearest'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("truncation"), std::string::npos) << e.what();
  }
}
