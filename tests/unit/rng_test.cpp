// The samplers and MultithreadedRng: values recomputed from the Philox words
// by the documented formulas, the same bits on the vector and scalar paths,
// for any partition of a range, for any thread count and in another process;
// the right distributions (Kolmogorov-Smirnov, moments, lag correlations,
// chi-square); streams of different names independent.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "distribution_test_util.h"
#include "engine/core/error.h"
#include "engine/core/parallel.h"
#include "engine/rng/bf16.h"
#include "engine/rng/distributions.h"
#include "engine/rng/multithreaded_rng.h"
#include "engine/rng/philox.h"
#include "op_test_util.h"

using namespace samba;
using namespace samba::rng;
using samba::testing::bytes_of;
using samba::testing::ks_limit;
using samba::testing::ks_statistic;
using samba::testing::phi;
using samba::testing::values;

namespace {

const Philox kGen{20240607, stream_of("layer.weight")};

struct ScalarPath {
  ScalarPath() { detail::force_scalar_path(true); }
  ~ScalarPath() { detail::force_scalar_path(false); }
};

// Word w of element e's block under the documented layouts (philox.h).
uint32_t single_word(const Philox& g, uint64_t e) {
  return g.block(e / 32 * 8 + e % 8)[(e / 8) % 4];
}
uint32_t pair_word(const Philox& g, uint64_t e, int which) {
  return g.block(e / 16 * 8 + e % 8)[2 * ((e / 8) % 2) + which];
}
uint64_t pair_bits(const Philox& g, uint64_t e) {
  return (uint64_t{pair_word(g, e, 0)} << 32) | pair_word(g, e, 1);
}

// Every sampler as f(first, n, out-bytes), for bit comparisons.
struct Sampler {
  std::string name;
  size_t elem;
  std::function<void(uint64_t, int64_t, void*)> run;
};

std::vector<Sampler> samplers() {
  const Philox g = kGen;
  return {
      {"words", 4,
       [=](uint64_t f, int64_t n, void* p) { generate_words(g, f, n, static_cast<uint32_t*>(p)); }},
      {"uniform f32", 4,
       [=](uint64_t f, int64_t n, void* p) {
         generate_uniform(g, f, n, -2.0f, 3.0f, static_cast<float*>(p));
       }},
      {"box-muller f32", 4,
       [=](uint64_t f, int64_t n, void* p) {
         generate_normal(g, f, n, 0.5f, 2.0f, NormalMethod::BoxMuller, static_cast<float*>(p));
       }},
      {"inverse f32", 4,
       [=](uint64_t f, int64_t n, void* p) {
         generate_normal(g, f, n, 0.5f, 2.0f, NormalMethod::InverseTransform,
                         static_cast<float*>(p));
       }},
      {"uniform f64", 8,
       [=](uint64_t f, int64_t n, void* p) {
         generate_uniform(g, f, n, -2.0, 3.0, static_cast<double*>(p));
       }},
      {"box-muller f64", 8,
       [=](uint64_t f, int64_t n, void* p) {
         generate_normal(g, f, n, 0.5, 2.0, NormalMethod::BoxMuller, static_cast<double*>(p));
       }},
      {"inverse f64", 8,
       [=](uint64_t f, int64_t n, void* p) {
         generate_normal(g, f, n, 0.5, 2.0, NormalMethod::InverseTransform,
                         static_cast<double*>(p));
       }},
      {"trunc normal", 8,
       [=](uint64_t f, int64_t n, void* p) {
         generate_trunc_normal(g, f, n, {0.5, 2.0, -1.0, 4.0}, static_cast<double*>(p));
       }},
      {"integers", 8,
       [=](uint64_t f, int64_t n, void* p) {
         generate_integers(g, f, n, -7, 1000, static_cast<int64_t*>(p));
       }},
  };
}

std::vector<unsigned char> run(const Sampler& s, uint64_t first, int64_t n) {
  std::vector<unsigned char> out(static_cast<size_t>(n) * s.elem);
  s.run(first, n, out.data());
  return out;
}

template <class T>
std::vector<double> as_doubles(const std::vector<T>& v) {
  return std::vector<double>(v.begin(), v.end());
}

}  // namespace

// ---- exact layout and formulas ------------------------------------------------------

TEST(Samplers, ValuesFollowTheDocumentedFormulas) {
  const int64_t n = 4099;
  const uint64_t first = 77;
  std::vector<float> u32(n), bm32(n), it32(n);
  std::vector<double> u64(n), bm64(n), it64(n);
  std::vector<int64_t> ints(n);
  generate_uniform(kGen, first, n, -2.0f, 3.0f, u32.data());
  generate_normal(kGen, first, n, 0.0f, 1.0f, NormalMethod::BoxMuller, bm32.data());
  generate_normal(kGen, first, n, 0.0f, 1.0f, NormalMethod::InverseTransform, it32.data());
  generate_uniform(kGen, first, n, -2.0, 3.0, u64.data());
  generate_normal(kGen, first, n, 0.0, 1.0, NormalMethod::BoxMuller, bm64.data());
  generate_normal(kGen, first, n, 0.0, 1.0, NormalMethod::InverseTransform, it64.data());
  generate_integers(kGen, first, n, -7, 1000, ints.data());
  const double two_pi = 6.283185307179586476925;
  for (int64_t j = 0; j < n; ++j) {
    const uint64_t e = first + static_cast<uint64_t>(j);
    SCOPED_TRACE(e);
    // float32: 24-bit uniforms; a Box-Muller pair is elements 8 apart.
    const double u = (single_word(kGen, e) >> 8) * 0x1.0p-24;
    ASSERT_NEAR(u32[j], -2.0 + 5.0 * u, 5e-7);
    const uint64_t pair = e - ((e / 8) % 2) * 8;  // the element holding the pair's first word
    const double u1 = ((single_word(kGen, pair) >> 8) + 1) * 0x1.0p-24;
    const double u2 = (single_word(kGen, pair + 8) >> 8) * 0x1.0p-24;
    const double r = std::sqrt(-2.0 * std::log(u1));
    const double z = (e / 8) % 2 == 0 ? r * std::cos(two_pi * u2) : r * std::sin(two_pi * u2);
    ASSERT_NEAR(bm32[j], z, 1e-6 * std::max(1.0, std::abs(z)));
    const double zi = normal_quantile(((single_word(kGen, e) >> 8) + 0.5) * 0x1.0p-24);
    ASSERT_NEAR(it32[j], zi, 5e-7 * std::max(1.0, std::abs(zi)));
    // float64: 53-bit uniforms from word pairs.
    const double v = static_cast<double>(pair_bits(kGen, e) >> 11) * 0x1.0p-53;
    ASSERT_NEAR(u64[j], -2.0 + 5.0 * v, 1e-15);
    const uint64_t block = e / 16 * 8 + e % 8;
    const Counter c = kGen.block(block);
    const double d1 = 1.0 - static_cast<double>(((uint64_t{c[0]} << 32 | c[1]) >> 11)) * 0x1.0p-53;
    const double d2 = static_cast<double>(((uint64_t{c[2]} << 32 | c[3]) >> 11)) * 0x1.0p-53;
    const double rd = std::sqrt(-2.0 * std::log(d1));
    const double zd = (e / 8) % 2 == 0 ? rd * std::cos(two_pi * d2) : rd * std::sin(two_pi * d2);
    ASSERT_NEAR(bm64[j], zd, 1e-14 * std::max(1.0, std::abs(zd)));
    const double p = (static_cast<double>(pair_bits(kGen, e) >> 11) + 0.5) * 0x1.0p-53;
    ASSERT_NEAR(phi(it64[j]), p, 1e-14 * std::max(p, 1e-3));
    // Integers: the top 64 bits of word-pair x range.
    const auto pick =
        static_cast<int64_t>((static_cast<unsigned __int128>(pair_bits(kGen, e)) * 1007) >> 64);
    ASSERT_EQ(ints[j], -7 + pick);
  }
}

TEST(Samplers, TruncatedNormalInvertsItsDistributionFunction) {
  struct Case {
    TruncNormal t;
  } cases[] = {{{0.5, 2.0, -1.0, 4.0}},
               {{0.0, 1.0, 2.0, INFINITY}},  // both bounds above the mean: the mirrored branch
               {{0.0, 1.0, -INFINITY, -3.0}},
               {{1.0, 0.1, 1.5, 1.7}},  // five to seven std out
               {{0.0, 1.0, -2.0, 2.0}}};
  const int64_t n = 2000;
  for (const auto& c : cases) {
    const TruncNormal& t = c.t;
    SCOPED_TRACE(::testing::Message()
                 << t.mean << " " << t.std << " [" << t.a << ", " << t.b << "]");
    std::vector<double> x(n);
    generate_trunc_normal(kGen, 0, n, t, x.data());
    const double lo = phi((t.a - t.mean) / t.std), hi = phi((t.b - t.mean) / t.std);
    for (int64_t e = 0; e < n; ++e) {
      ASSERT_GE(x[e], t.a);
      ASSERT_LE(x[e], t.b);
      const double u =
          (static_cast<double>(pair_bits(kGen, static_cast<uint64_t>(e)) >> 11) + 0.5) * 0x1.0p-53;
      // The sample's conditional probability is the uniform it came from
      // (or its mirror image, 1 - u, on the mirrored branch).
      const double f = (phi((x[e] - t.mean) / t.std) - lo) / (hi - lo);
      const bool mirrored = t.a > t.mean;
      ASSERT_NEAR(f, mirrored ? 1.0 - u : u, 1e-7) << e;
    }
  }
  // std = 0: the mean, clamped to the bounds.
  std::vector<double> x(5);
  generate_trunc_normal(kGen, 0, 5, {3.0, 0.0, -1.0, 1.0}, x.data());
  EXPECT_EQ(x, std::vector<double>(5, 1.0));
}

// ---- the same bits whatever the path, the partition, the threads, the process --------

TEST(Samplers, VectorAndScalarPathsGiveTheSameBits) {
  if (!detail::vector_path_active()) GTEST_SKIP() << "built without AVX2";
  for (const auto& s : samplers()) {
    SCOPED_TRACE(s.name);
    const auto vec = run(s, 5, 100003);
    ScalarPath scalar;
    EXPECT_EQ(vec, run(s, 5, 100003));
  }
}

TEST(Samplers, AnyPartitionGivesTheSameValues) {
  std::mt19937 gen(3);
  for (const auto& s : samplers()) {
    SCOPED_TRACE(s.name);
    const uint64_t first = 1000003;
    const int64_t n = 5000;
    const auto whole = run(s, first, n);
    std::vector<unsigned char> pieces;
    for (int64_t at = 0; at < n;) {
      const int64_t len =
          std::min<int64_t>(n - at, std::uniform_int_distribution<int64_t>(1, 70)(gen));
      const auto part = run(s, first + static_cast<uint64_t>(at), len);
      pieces.insert(pieces.end(), part.begin(), part.end());
      at += len;
    }
    EXPECT_EQ(whole, pieces);
  }
}

TEST(MultithreadedRng, SameBitsForOneTwoThreeAndEightThreads) {
  const Dims shape{1000, 1003};
  for (DType dt : {DType::Float32, DType::BFloat16, DType::Float64}) {
    for (NormalMethod m : {NormalMethod::BoxMuller, NormalMethod::InverseTransform}) {
      SCOPED_TRACE(::testing::Message() << dtype_name(dt) << " " << normal_method_name(m));
      std::vector<unsigned char> first;
      for (int threads : {1, 2, 3, 8}) {
        Tensor t = Tensor::empty(shape, dt);
        MultithreadedRng(7, "encoder.weight", {threads, m, Bf16Rounding::NearestEven})
            .normal(t, 0.0, 0.02);
        if (first.empty())
          first = bytes_of(t);
        else
          EXPECT_EQ(bytes_of(t), first) << threads << " threads";
      }
    }
  }
  std::vector<unsigned char> first;
  for (int threads : {1, 8}) {
    Tensor t = Tensor::empty(shape, DType::Float32);
    MultithreadedRng(7, "encoder.weight", {threads}).uniform(t, -0.1, 0.1);
    if (first.empty())
      first = bytes_of(t);
    else
      EXPECT_EQ(bytes_of(t), first);
  }
}

// The child half of the next test: prints the values' hash when asked to.
TEST(RngProcess, PrintValues) {
  if (!std::getenv("SAMBA_RNG_TEST_CHILD")) GTEST_SKIP() << "run by SameValuesInAnotherProcess";
  Tensor t = Tensor::empty({4096}, DType::Float32);
  MultithreadedRng(99, "decoder.bias", {2}).normal(t, 0.0, 1.0);
  uint64_t h = 0;
  for (unsigned char b : bytes_of(t)) h = (h ^ b) * 0x100000001b3ull;
  std::printf("VALUES %016llx\n", static_cast<unsigned long long>(h));
}

TEST(RngProcess, SameValuesInAnotherProcess) {
  Tensor t = Tensor::empty({4096}, DType::Float32);
  MultithreadedRng(99, "decoder.bias", {1}).normal(t, 0.0, 1.0);
  uint64_t h = 0;
  for (unsigned char b : bytes_of(t)) h = (h ^ b) * 0x100000001b3ull;
  char want[64];
  std::snprintf(want, sizeof want, "VALUES %016llx", static_cast<unsigned long long>(h));

  char self[4096] = {};
  ASSERT_GT(readlink("/proc/self/exe", self, sizeof self - 1), 0);
  const std::string cmd = std::string("SAMBA_RNG_TEST_CHILD=1 '") + self +
                          "' --gtest_filter=RngProcess.PrintValues 2>&1";
  FILE* child = popen(cmd.c_str(), "r");
  ASSERT_NE(child, nullptr);
  std::string out;
  char buf[256];
  while (std::fgets(buf, sizeof buf, child)) out += buf;
  EXPECT_EQ(pclose(child), 0) << out;
  EXPECT_NE(out.find(want), std::string::npos) << out;
}

// ---- distributions -------------------------------------------------------------------

TEST(Distributions, KolmogorovSmirnov) {
  const int64_t n = int64_t{1} << 20;
  std::vector<float> f(n);
  std::vector<double> d(n);
  auto check = [&](const char* what, const std::vector<double>& x,
                   const std::function<double(double)>& cdf) {
    const double ks = ks_statistic(x, cdf);
    EXPECT_LT(ks, ks_limit(x.size())) << what;
  };
  generate_uniform(kGen, 0, n, -2.0f, 3.0f, f.data());
  check("uniform f32", as_doubles(f),
        [](double x) { return std::clamp((x + 2.0) / 5.0, 0.0, 1.0); });
  generate_uniform(kGen, 0, n, -2.0, 3.0, d.data());
  check("uniform f64", d, [](double x) { return std::clamp((x + 2.0) / 5.0, 0.0, 1.0); });
  auto normal_cdf_of = [](double mean, double std) {
    return [=](double x) { return phi((x - mean) / std); };
  };
  for (NormalMethod m : {NormalMethod::BoxMuller, NormalMethod::InverseTransform}) {
    generate_normal(kGen, 0, n, 0.5f, 2.0f, m, f.data());
    check(normal_method_name(m).data(), as_doubles(f), normal_cdf_of(0.5, 2.0));
    generate_normal(kGen, 0, n, 0.5, 2.0, m, d.data());
    check(normal_method_name(m).data(), d, normal_cdf_of(0.5, 2.0));
  }
  for (TruncNormal t : {TruncNormal{0.5, 2.0, -1.0, 4.0}, TruncNormal{0.0, 1.0, 2.0, INFINITY},
                        TruncNormal{0.0, 0.02, -0.04, 0.04}}) {
    generate_trunc_normal(kGen, 0, n, t, d.data());
    const double lo = phi((t.a - t.mean) / t.std), hi = phi((t.b - t.mean) / t.std);
    check("trunc normal", d,
          [&](double x) { return (phi((x - t.mean) / t.std) - lo) / (hi - lo); });
  }
}

TEST(Distributions, MomentsWithinFiveStandardErrors) {
  const int64_t n = int64_t{1} << 20;
  const double sn = std::sqrt(static_cast<double>(n));
  std::vector<float> f(n);
  auto moments = [&](const std::vector<float>& v) {
    double m = 0, s = 0;
    for (float x : v) m += x;
    m /= static_cast<double>(v.size());
    for (float x : v) s += (x - m) * (x - m);
    return std::pair(m, std::sqrt(s / static_cast<double>(v.size() - 1)));
  };
  for (NormalMethod method : {NormalMethod::BoxMuller, NormalMethod::InverseTransform}) {
    SCOPED_TRACE(normal_method_name(method));
    generate_normal(kGen, 0, n, 3.0f, 0.5f, method, f.data());
    auto [m, s] = moments(f);
    EXPECT_NEAR(m, 3.0, 5 * 0.5 / sn);                   // SE of the mean: std / sqrt(n)
    EXPECT_NEAR(s, 0.5, 5 * 0.5 / std::sqrt(2.0) / sn);  // SE of the std: std / sqrt(2n)
  }
  generate_uniform(kGen, 0, n, -1.0f, 1.0f, f.data());
  auto [m, s] = moments(f);
  const double sd = 2.0 / std::sqrt(12.0);
  EXPECT_NEAR(m, 0.0, 5 * sd / sn);
  // SE of the std of a uniform: std sqrt((kurtosis - 1) / 4n), kurtosis 9/5.
  EXPECT_NEAR(s, sd, 5 * sd * std::sqrt(0.8 / 4) / sn);
}

// Neighbours, the Box-Muller partner (8 apart) and the next group must not be
// correlated: |r| < 5 / sqrt(n).
TEST(Distributions, NoCorrelationAtLagsOfTheLayout) {
  const int64_t n = int64_t{1} << 20;
  std::vector<float> f(n);
  for (NormalMethod method : {NormalMethod::BoxMuller, NormalMethod::InverseTransform}) {
    generate_normal(kGen, 0, n, 0.0f, 1.0f, method, f.data());
    for (int lag : {1, 4, 8, 16, 32}) {
      double sxy = 0, sxx = 0;
      for (int64_t i = 0; i + lag < n; ++i) sxy += f[i] * f[i + lag], sxx += f[i] * f[i];
      EXPECT_LT(std::abs(sxy / sxx), 5 / std::sqrt(static_cast<double>(n)))
          << normal_method_name(method) << " lag " << lag;
    }
  }
  // The squares too: Box-Muller partners share a radius, which a dependence
  // through r^2 would show (they are independent, so it must not).
  generate_normal(kGen, 0, n, 0.0f, 1.0f, NormalMethod::BoxMuller, f.data());
  double sxy = 0, sxx = 0;
  for (int64_t i = 0; i + 8 < n; ++i) {
    const double a = f[i] * f[i] - 1, b = f[i + 8] * f[i + 8] - 1;
    sxy += a * b, sxx += a * a;
  }
  EXPECT_LT(std::abs(sxy / sxx), 5 / std::sqrt(static_cast<double>(n)));
}

TEST(Distributions, IntegersCoverTheRangeUniformly) {
  const int64_t n = 1000000;
  std::vector<int64_t> v(n);
  generate_integers(kGen, 0, n, -3, 7, v.data());
  std::vector<double> count(10);
  for (int64_t x : v) {
    ASSERT_GE(x, -3);
    ASSERT_LT(x, 7);
    count[x + 3] += 1;
  }
  double chi2 = 0;
  for (double c : count) chi2 += (c - n / 10.0) * (c - n / 10.0) / (n / 10.0);
  EXPECT_LT(chi2, 27.88);  // chi-square, 9 degrees of freedom, significance 0.001
  // The widest range an int64 allows.
  const int64_t lo = std::numeric_limits<int64_t>::min(), hi = std::numeric_limits<int64_t>::max();
  generate_integers(kGen, 0, 1000, lo, hi, v.data());
  int negative = 0;
  for (int i = 0; i < 1000; ++i) {
    negative += v[i] < 0;
    ASSERT_LT(v[i], hi);
  }
  EXPECT_GT(negative, 400);
  EXPECT_LT(negative, 600);
}

// ---- MultithreadedRng -----------------------------------------------------------------

TEST(MultithreadedRng, ValuesDependOnlyOnSeedAndName) {
  auto draw = [](uint64_t seed, const char* name) {
    Tensor t = Tensor::empty({100000}, DType::Float32);
    MultithreadedRng(seed, name).normal(t, 0.0, 1.0);
    return values(t);
  };
  const auto a = draw(5, "fc1.weight");
  // Other generation in between changes nothing: there is no hidden state.
  draw(5, "fc2.weight");
  draw(6, "fc1.weight");
  EXPECT_EQ(draw(5, "fc1.weight"), a);
  const auto other_name = draw(5, "fc1.bias"), other_seed = draw(6, "fc1.weight");
  EXPECT_NE(other_name, a);
  EXPECT_NE(other_seed, a);
  // Different streams are uncorrelated: |r| < 5 / sqrt(n).
  for (const auto* b : {&other_name, &other_seed}) {
    double sxy = 0, sxx = 0, syy = 0;
    for (size_t i = 0; i < a.size(); ++i)
      sxy += a[i] * (*b)[i], sxx += a[i] * a[i], syy += (*b)[i] * (*b)[i];
    EXPECT_LT(std::abs(sxy / std::sqrt(sxx * syy)), 5 / std::sqrt(1e5));
  }
  const MultithreadedRng rng(5, "fc1.weight");
  EXPECT_EQ(rng.stream().stream, stream_of("fc1.weight"));
  EXPECT_NE(rng.derive("second").stream().stream, rng.stream().stream);
  EXPECT_EQ(rng.derive("second").stream().seed, 5u);
}

TEST(MultithreadedRng, ReducedFloatsAreRoundedFloat32Draws) {
  const Dims shape{333, 101};
  Tensor f32 = Tensor::empty(shape, DType::Float32);
  MultithreadedRng(3, "w").normal(f32, 0.0, 1.0);
  const float* ref = f32.data<float>();
  for (Bf16Rounding r : {Bf16Rounding::NearestEven, Bf16Rounding::Truncation}) {
    Tensor b = Tensor::empty(shape, DType::BFloat16);
    MultithreadedRng(3, "w", {0, NormalMethod::BoxMuller, r}).normal(b, 0.0, 1.0);
    const bf16* p = b.data<bf16>();
    for (int64_t i = 0; i < b.numel(); ++i)
      ASSERT_EQ(std::bit_cast<uint16_t>(p[i]), bf16_bits(ref[i], r)) << i;
  }
  Tensor h = Tensor::empty(shape, DType::Float16);
  MultithreadedRng(3, "w").normal(h, 0.0, 1.0);
  for (int64_t i = 0; i < h.numel(); ++i)
    ASSERT_EQ(std::bit_cast<uint16_t>(h.data<f16>()[i]), std::bit_cast<uint16_t>(f16(ref[i]))) << i;
}

TEST(MultithreadedRng, NonContiguousTensorsGetRowMajorElements) {
  Tensor base = Tensor::zeros({40, 60}, DType::Float32);
  Tensor view = base.as_strided({60, 40}, {1, 60}, 0);  // the transpose
  MultithreadedRng(1, "w").uniform(view, -1.0, 1.0);
  Tensor ref = Tensor::empty({60, 40}, DType::Float32);
  MultithreadedRng(1, "w").uniform(ref, -1.0, 1.0);
  EXPECT_EQ(values(view.contiguous()), values(ref));
}

TEST(MultithreadedRng, IntegersIntoEveryNumericDtype) {
  Tensor ref = Tensor::empty({1000}, DType::Int64);
  MultithreadedRng(1, "idx").integers(ref, 0, 100);
  for (DType dt :
       {DType::Int32, DType::Int16, DType::Int8, DType::UInt8, DType::Float32, DType::BFloat16}) {
    Tensor t = Tensor::empty({1000}, dt);
    MultithreadedRng(1, "idx", {2}).integers(t, 0, 100);
    EXPECT_EQ(values(t), values(ref)) << dtype_name(dt);
  }
}

TEST(MultithreadedRng, RejectsBadArguments) {
  auto status = [](const std::function<void()>& f) {
    try {
      f();
    } catch (const Error& e) {
      return e.code();
    }
    return Status::Ok;
  };
  Tensor f = Tensor::empty({4}, DType::Float32), i = Tensor::empty({4}, DType::Int32);
  const MultithreadedRng rng(1, "w");
  EXPECT_EQ(status([&] { rng.normal(i, 0, 1); }), Status::DTypeMismatch);
  EXPECT_EQ(status([&] { rng.uniform(i, 0, 1); }), Status::DTypeMismatch);
  EXPECT_EQ(status([&] { rng.normal(f, 0, -1); }), Status::InvalidArgument);
  EXPECT_EQ(status([&] { rng.normal(f, NAN, 1); }), Status::InvalidArgument);
  EXPECT_EQ(status([&] { rng.uniform(f, 1, 0); }), Status::InvalidArgument);
  EXPECT_EQ(status([&] { rng.uniform(f, 0, INFINITY); }), Status::InvalidArgument);
  EXPECT_EQ(status([&] { rng.trunc_normal(f, {0, 1, 2, 1}); }), Status::InvalidArgument);
  EXPECT_EQ(status([&] {
              rng.trunc_normal(f, {0, 1, -INFINITY, -INFINITY});
            }),
            Status::InvalidArgument);
  EXPECT_EQ(status([&] { rng.integers(i, 3, 3); }), Status::InvalidArgument);
  EXPECT_EQ(status([&] { rng.integers(Tensor::empty({4}, DType::Bool), 0, 2); }),
            Status::DTypeMismatch);
  EXPECT_EQ(status([&] { MultithreadedRng(1, "w", {-1}); }), Status::InvalidArgument);
  EXPECT_EQ(status([&] { pool_with_threads(0); }), Status::InvalidArgument);
  EXPECT_EQ(status([&] { rng.normal(Tensor::symbolic({4}, DType::Float32), 0, 1); }),
            Status::InvalidState);
}
