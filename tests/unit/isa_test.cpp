// The kernels' ISA level: what SAMBA_ISA selects, that the level chosen for
// the process is the one asked for, and every level's GEMM kernels that this
// CPU runs against a double-precision reference (each level in one run, so a
// wrong kernel of a level the default run does not use still fails here).
#include "engine/core/isa.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <random>
#include <vector>

#include "engine/kernels/gemm.h"
#include "engine/kernels/sgemm_kernels.h"

using namespace samba;
using namespace samba::ops;

namespace {

TEST(Isa, NamesRoundTrip) {
  for (IsaLevel l : isa_levels()) EXPECT_EQ(isa_from_name(isa_name(l)), l);
  EXPECT_EQ(isa_from_name("AVX2"), std::nullopt);
  EXPECT_EQ(isa_from_name("sse"), std::nullopt);
}

TEST(Isa, ChoiceHonoursALowerLevelSilently) {
  IsaChoice c = choose_isa("avx2", IsaLevel::Avx512);
  EXPECT_EQ(c.level, IsaLevel::Avx2);
  EXPECT_EQ(c.warning, "");
  c = choose_isa("generic", IsaLevel::Avx2);
  EXPECT_EQ(c.level, IsaLevel::Generic);
  EXPECT_EQ(choose_isa(std::nullopt, IsaLevel::Avx2).level, IsaLevel::Avx2);
  EXPECT_EQ(choose_isa("", IsaLevel::Avx2).warning, "");
}

TEST(Isa, ChoiceWarnsAndUsesTheBestForAnUnknownOrUnsupportedValue) {
  IsaChoice c = choose_isa("avx1024", IsaLevel::Avx2);
  EXPECT_EQ(c.level, IsaLevel::Avx2);
  EXPECT_NE(c.warning.find("SAMBA_ISA='avx1024'"), std::string::npos) << c.warning;
  EXPECT_NE(c.warning.find("generic, avx2, avx512, avx512_bf16"), std::string::npos) << c.warning;
  EXPECT_NE(c.warning.find("using avx2"), std::string::npos) << c.warning;
  c = choose_isa("avx512_bf16", IsaLevel::Avx2);
  EXPECT_EQ(c.level, IsaLevel::Avx2);
  EXPECT_NE(c.warning.find("above what this CPU and build support"), std::string::npos)
      << c.warning;
}

// Under ctest's per-level runs (kernels.isa_<level>.*) SAMBA_ISA names a
// level this machine runs: the whole executable must run at it.
TEST(Isa, TheProcessRunsAtTheRequestedLevel) {
  const char* env = std::getenv("SAMBA_ISA");
  const IsaLevel best = isa_best_supported();
  EXPECT_LE(active_isa(), best);
  if (env && isa_from_name(env) && *isa_from_name(env) <= best) {
    EXPECT_EQ(active_isa(), *isa_from_name(env));
  }
  if (!env) {
    EXPECT_EQ(active_isa(), best);
  }
  // The GEMM runs the table of that level (the bf16 level has no fp32 table of its own).
  const IsaLevel table = detail::sgemm_kernels().level;
  EXPECT_LE(table, active_isa());
  if (active_isa() != IsaLevel::Avx512Bf16) {
    EXPECT_EQ(table, active_isa());
  }
}

// C = act(op(A) op(B) + bias) by one level's kernel on one tile covering C,
// against a double loop.
void check_level_tile(const detail::SgemmKernels& kern, int64_t m, int64_t n, int64_t k, bool ta,
                      bool tb, bool dot) {
  SCOPED_TRACE(testing::Message() << isa_name(kern.level) << (dot ? " dot" : " packed") << " m="
                                  << m << " n=" << n << " k=" << k << " ta=" << ta << " tb=" << tb);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> a(m * k), b(k * n), bias(n), c(m * n, std::nanf(""));
  for (float& x : a) x = u(rng);
  for (float& x : b) x = u(rng);
  for (float& x : bias) x = u(rng);
  GemmArgs<float> g;
  g.m = m, g.n = n, g.k = k;
  g.a = {a.data(), ta ? m : k, ta};
  g.b = {b.data(), tb ? k : n, tb};
  g.c = c.data();
  g.ldc = n;
  g.bias = dot ? nullptr : bias.data();
  g.act = dot ? Activation::None : Activation::Relu;
  if (dot) {
    ASSERT_TRUE(kern.prefer_dot(g, m));
    kern.dot_tile(g, a.data(), b.data(), c.data(), 0, m, 0, n);
  } else {
    ASSERT_TRUE(kern.prefer_packed(m, n, k));
    kern.packed_tile(g, a.data(), b.data(), c.data(), 0, m, 0, n);
  }
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double want = g.bias ? bias[j] : 0.0;
      for (int64_t p = 0; p < k; ++p)
        want += static_cast<double>(ta ? a[p * m + i] : a[i * k + p]) *
                (tb ? b[j * k + p] : b[p * n + j]);
      if (g.act == Activation::Relu) want = std::max(want, 0.0);
      ASSERT_NEAR(c[i * n + j], want, 1e-4 * std::max(1.0, std::abs(want)))
          << "at (" << i << ", " << j << ")";
    }
}

TEST(Isa, EveryLevelThisCpuRunsComputesTheProduct) {
  int tested = 0;
  for (IsaLevel l : isa_levels()) {
    if (l > isa_best_supported()) continue;
    const detail::SgemmKernels& kern = detail::sgemm_kernels_for(l);
    if (kern.packed_tile) {
      ++tested;
      // Shapes with edges in every dimension, and several depth blocks.
      for (bool ta : {false, true})
        for (bool tb : {false, true}) {
          check_level_tile(kern, 37, 70, 53, ta, tb, false);
          check_level_tile(kern, 12, 64, 700, ta, tb, false);
        }
    }
    if (kern.dot_tile) {
      check_level_tile(kern, 5, 31, 45, false, true, true);
      check_level_tile(kern, 32, 8, 9, false, true, true);
    }
  }
#if defined(__x86_64__)
  if (isa_best_supported() >= IsaLevel::Avx2) {
    EXPECT_GE(tested, 1);
  }
#endif
}

}  // namespace
