// The bf16 GEMM (bf16 operands, fp32 accumulation, C in bf16 or fp32)
// against a double-precision product of the same bf16 inputs: shapes with
// edges in every dimension, transposed operands, alpha/beta, the bias +
// activation epilogue, tiling across pools, batches with broadcast operands
// at the tensor level; every ISA level's kernel this CPU runs against the
// others, exactly where the sums are exact in fp32; and the one rounding of
// a bf16 C to nearest even.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <array>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "engine/core/error.h"
#include "engine/core/isa.h"
#include "engine/core/parallel.h"
#include "engine/kernels/gemm.h"
#include "gemm_reference.h"
#include "engine/kernels/sgemm_kernels.h"

using namespace samba;
using namespace samba::ops;

namespace {

uint16_t to_bits(double x) {
  return Eigen::numext::bit_cast<uint16_t>(bf16(static_cast<float>(x)));
}
double from_bits(uint16_t h) { return static_cast<double>(Eigen::numext::bit_cast<bf16>(h)); }
double value(float x) { return x; }
double value(uint16_t h) { return from_bits(h); }


// op(X) is rows x cols, stored row-major (cols x rows when transposed) with
// `pad` extra elements per stored row; bf16 values uniform in [-1, 1], or
// small integers (every sum of their products exact in fp32).
struct Operand {
  std::vector<uint16_t> data;
  int64_t ld;
  bool trans;
  double at(int64_t i, int64_t j) const {
    return from_bits(trans ? data[j * ld + i] : data[i * ld + j]);
  }
  GemmOperand<uint16_t> op() const { return {data.data(), ld, trans}; }
};

Operand make_operand(int64_t rows, int64_t cols, bool trans, int64_t pad, uint32_t seed,
                     bool integers = false) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> u(-1, 1);
  std::uniform_int_distribution<int> small(-4, 4);
  Operand s;
  const int64_t srows = trans ? cols : rows, scols = trans ? rows : cols;
  s.ld = scols + pad;
  s.trans = trans;
  s.data.resize(static_cast<size_t>(std::max<int64_t>(srows * s.ld, 1)));
  for (auto& v : s.data) v = to_bits(integers ? small(gen) : u(gen));
  return s;
}

struct Case {
  int64_t m, n, k;
  bool ta, tb;
  double alpha = 1, beta = 0;
  bool bias = false;
  Activation act = Activation::None;
};

std::string describe(const Case& cs) {
  return fmt::format("m={} n={} k={} ta={} tb={} alpha={} beta={} bias={} act={}", cs.m, cs.n, cs.k,
                     cs.ta, cs.tb, cs.alpha, cs.beta, cs.bias, activation_name(cs.act));
}

// One product with C of type TC through `run` (the GEMM layer, or one
// level's tile), checked against the double reference: the fp32 sums may be
// off by the accumulation error bound (k + 2 roundings of 2^-24 relative to
// the sum of the magnitudes), a bf16 C by half an ulp (2^-8 relative) more.
template <typename TC, typename Run>
void check_case(const Case& cs, Run run) {
  SCOPED_TRACE(describe(cs) + (std::is_same_v<TC, float> ? " out=f32" : " out=bf16"));
  const Operand a = make_operand(cs.m, cs.k, cs.ta, 3, 1);
  const Operand b = make_operand(cs.k, cs.n, cs.tb, 5, 2);
  const int64_t ldc = cs.n + 2;
  std::vector<TC> c(static_cast<size_t>(std::max<int64_t>(cs.m * ldc, 1)));
  std::vector<TC> bias(cs.n);
  std::mt19937 gen(3);
  std::uniform_real_distribution<double> u(-1, 1);
  for (auto& v : c) v = static_cast<TC>(std::is_same_v<TC, float> ? u(gen) : to_bits(u(gen)));
  for (auto& v : bias) v = static_cast<TC>(std::is_same_v<TC, float> ? u(gen) : to_bits(u(gen)));
  const std::vector<TC> c0 = c;

  Bf16GemmArgs<TC> g;
  g.m = cs.m, g.n = cs.n, g.k = cs.k;
  g.a = a.op();
  g.b = b.op();
  g.c = c.data();
  g.ldc = ldc;
  g.alpha = static_cast<float>(cs.alpha);
  g.beta = static_cast<float>(cs.beta);
  g.bias = cs.bias ? bias.data() : nullptr;
  g.act = cs.act;
  run(g);

  for (int64_t i = 0; i < cs.m; ++i) {
    for (int64_t j = 0; j < cs.n; ++j) {
      double sum = 0, magnitude = 0;
      for (int64_t p = 0; p < cs.k; ++p) {
        sum += a.at(i, p) * b.at(p, j);
        magnitude += std::abs(a.at(i, p) * b.at(p, j));
      }
      const double addend = cs.beta * value(c0[i * ldc + j]) + (cs.bias ? value(bias[j]) : 0.0);
      const double pre = cs.alpha * sum + addend;
      const double want = reference_activation(pre, cs.act);
      // Every activation here has a slope of at most 1.1.
      const double bound = std::abs(cs.alpha) * magnitude + std::abs(addend);
      double tol = 1.1 * static_cast<double>(cs.k + 3) * std::ldexp(bound, -24);
      if (!std::is_same_v<TC, float>) tol += std::ldexp(std::abs(want) + tol, -8);
      ASSERT_NEAR(value(c[i * ldc + j]), want, tol + 1e-30) << "at (" << i << ", " << j << ")";
    }
    // The padding between rows of C is never written.
    for (int64_t j = cs.n; j < ldc; ++j) ASSERT_EQ(c[i * ldc + j], c0[i * ldc + j]);
  }
}

template <typename TC>
void check_layer(const Case& cs) {
  check_case<TC>(cs, [](const Bf16GemmArgs<TC>& g) { gemm(g); });
}

// Both output types, through the layer with each kernel choice (the level's
// bf16 kernel, then Eigen on widened blocks).
void check_both(const Case& cs) {
  for (GemmKernel k : {GemmKernel::Auto, GemmKernel::Eigen}) {
    SCOPED_TRACE(k == GemmKernel::Auto ? "kernel=auto" : "kernel=eigen");
    set_gemm_kernel(k);
    check_layer<uint16_t>(cs);
    check_layer<float>(cs);
  }
  set_gemm_kernel(GemmKernel::Auto);
}

TEST(Bf16Gemm, ShapesWithEdgesInEveryDimension) {
  for (const auto& [m, n, k] : std::vector<std::array<int64_t, 3>>{
           {1, 1, 1}, {7, 13, 5}, {64, 64, 64}, {100, 300, 257}, {9, 33, 2}, {8, 32, 16}}) {
    check_both({m, n, k, false, true});
    check_both({m, n, k, false, false});
  }
}

TEST(Bf16Gemm, TallAndSkinnyAndDeep) {
  check_both({1000, 3, 40, false, false});
  check_both({3, 1000, 40, false, true});
  check_both({2000, 16, 8, true, false});
  check_both({8, 17, 3001, false, true});  // one deep register block
  check_both({600, 1, 300, false, false});  // GEMV
}

TEST(Bf16Gemm, AllTransposeCombinations) {
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      check_both({37, 70, 53, ta, tb});
      check_both({12, 64, 701, ta, tb});
    }
}

TEST(Bf16Gemm, AlphaBetaBiasAndEveryActivation) {
  check_both({50, 40, 30, false, true, 1.0, 0.0, true, Activation::Relu});
  check_both({50, 40, 30, true, false, 0.5, 1.0, false, Activation::None});
  check_both({23, 45, 67, false, false, -2.0, 0.25, true, Activation::Relu});
  for (const EpilogueActivation& e : epilogue_activations())
    check_both({19, 35, 21, false, true, 1.0, 0.5, true, e.act});
}

TEST(Bf16Gemm, EmptyDepthAppliesOnlyBetaAndBias) {
  check_both({4, 3, 0, false, false, 1.0, 2.0, true, Activation::Sigmoid});
  check_both({0, 3, 4, false, false});
  check_both({3, 0, 4, false, false});
}

TEST(Bf16Gemm, BigProductsAreTiledAcrossThreads) {
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    ThreadPool::Scope scope(&pool);
    SCOPED_TRACE(threads);
    check_both({301, 1001, 120, false, true, 1.0, 0.0, true, Activation::Relu});
    check_both({1003, 70, 530, true, false, 1.0, 1.0, false, Activation::None});
    check_both({16, 250, 784, false, true, 1.0, 0.0, true, Activation::Tanh});
  }
}

TEST(Bf16Gemm, BetaZeroIgnoresNaNsInC) {
  const std::vector<uint16_t> a{to_bits(1), to_bits(2), to_bits(3), to_bits(4)};
  const std::vector<uint16_t> b{to_bits(1), to_bits(0), to_bits(0), to_bits(1)};
  std::vector<uint16_t> c(4, to_bits(std::numeric_limits<double>::quiet_NaN()));
  Bf16GemmArgs<uint16_t> g;
  g.m = g.n = g.k = 2;
  g.a = {a.data(), 2, false};
  g.b = {b.data(), 2, false};
  g.c = c.data();
  g.ldc = 2;
  gemm(g);
  EXPECT_EQ(c, a);
}

// Every kernel a bf16 tile can run on this CPU: each level's own (the
// AVX512_BF16 one and the widened fp32 ones) and the generic widened one.
template <typename TC>
std::vector<std::pair<std::string, detail::Bf16TileFn<TC>>> every_bf16_kernel() {
  std::vector<std::pair<std::string, detail::Bf16TileFn<TC>>> out{
      {"generic", &detail::bf16_tile_widened<TC>}};
  for (IsaLevel l : isa_levels()) {
    if (l > isa_best_supported()) continue;
    const detail::SgemmKernels& kern = detail::sgemm_kernels_for(l);
    detail::Bf16TileFn<TC> fn;
    if constexpr (std::is_same_v<TC, float>)
      fn = kern.bf16_tile_f32;
    else
      fn = kern.bf16_tile_bf16;
    if (fn && kern.level == l) out.emplace_back(std::string(isa_name(l)), fn);
  }
  return out;
}

template <typename TC>
void run_tile(detail::Bf16TileFn<TC> fn, const Bf16GemmArgs<TC>& g) {
  fn(g, g.a.data, g.b.data, g.c, 0, g.m, 0, g.n);
}

TEST(Bf16Gemm, EveryLevelThisCpuRunsMatchesTheReference) {
  const auto kernels16 = every_bf16_kernel<uint16_t>();
  const auto kernels32 = every_bf16_kernel<float>();
#if defined(__x86_64__)
  if (isa_best_supported() >= IsaLevel::Avx2) {
    EXPECT_GE(kernels16.size(), 2u);
  }
  if (isa_best_supported() >= IsaLevel::Avx512Bf16) {
    EXPECT_EQ(kernels16.back().first, "avx512_bf16");
  }
#endif
  for (size_t i = 0; i < kernels16.size(); ++i) {
    SCOPED_TRACE(kernels16[i].first);
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        const Case cs{37, 70, 53, ta, tb, 1.0, 0.5, true, Activation::Relu};
        check_case<uint16_t>(cs, [&](const auto& g) { run_tile(kernels16[i].second, g); });
        check_case<float>(cs, [&](const auto& g) { run_tile(kernels32[i].second, g); });
      }
  }
}

// With small integers every product and partial sum is exact in fp32, so
// the vdpbf16ps kernel, the widened fp32 kernels and Eigen must agree bit
// for bit, in fp32 and after the bf16 rounding.
TEST(Bf16Gemm, EveryLevelAgreesExactlyWhereTheSumsAreExact) {
  const int64_t m = 45, n = 70, k = 301;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      SCOPED_TRACE(testing::Message() << "ta=" << ta << " tb=" << tb);
      const Operand a = make_operand(m, k, ta, 1, 11, true);
      const Operand b = make_operand(k, n, tb, 2, 12, true);
      std::vector<float> ref32;
      std::vector<uint16_t> ref16;
      for (const auto& [name, fn] : every_bf16_kernel<float>()) {
        SCOPED_TRACE(name);
        std::vector<float> c(m * n);
        const Bf16GemmArgs<float> g{m, n, k, a.op(), b.op(), c.data(), n};
        run_tile(fn, g);
        if (ref32.empty()) {
          for (int64_t i = 0; i < m; ++i)
            for (int64_t j = 0; j < n; ++j) {
              double want = 0;
              for (int64_t p = 0; p < k; ++p) want += a.at(i, p) * b.at(p, j);
              ASSERT_EQ(c[i * n + j], want);
            }
          ref32 = c;
        }
        EXPECT_EQ(c, ref32);
      }
      for (const auto& [name, fn] : every_bf16_kernel<uint16_t>()) {
        SCOPED_TRACE(name);
        std::vector<uint16_t> c(m * n);
        const Bf16GemmArgs<uint16_t> g{m, n, k, a.op(), b.op(), c.data(), n};
        run_tile(fn, g);
        if (ref16.empty()) {
          for (size_t i = 0; i < c.size(); ++i) ASSERT_EQ(c[i], to_bits(ref32[i]));
          ref16 = c;
        }
        EXPECT_EQ(c, ref16);
      }
    }
}

// 257 and 259 lie halfway between bf16 neighbours (8 significant bits): the
// sum is exact in fp32 and rounds once, to the even one (256, 260); a
// truncating or twice-rounding kernel gets one of them wrong.
TEST(Bf16Gemm, ABf16OutputIsRoundedOnceToNearestEven) {
  const int64_t k = 5;
  // Row 0: 128 + 128 + 1 = 257; row 1: 128 + 128 + 2 + 1 = 259; row 2: -(257).
  const std::vector<uint16_t> a{to_bits(128), to_bits(128), to_bits(1), to_bits(0),  to_bits(0),
                                to_bits(128), to_bits(128), to_bits(2), to_bits(1),  to_bits(0),
                                to_bits(-128), to_bits(-128), to_bits(-1), to_bits(0), to_bits(0)};
  const std::vector<uint16_t> b(k, to_bits(1));
  for (const auto& [name, fn] : every_bf16_kernel<uint16_t>()) {
    SCOPED_TRACE(name);
    std::vector<uint16_t> c(3);
    const Bf16GemmArgs<uint16_t> g{3, 1, k, {a.data(), k, false}, {b.data(), 1, false},
                                   c.data(), 1};
    run_tile(fn, g);
    EXPECT_EQ(from_bits(c[0]), 256);
    EXPECT_EQ(from_bits(c[1]), 260);
    EXPECT_EQ(from_bits(c[2]), -256);
  }
}

// ---- tensor level ------------------------------------------------------------

Tensor bf16_tensor(const Dims& shape, uint32_t seed) {
  Tensor t = Tensor::empty(shape, DType::BFloat16);
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<bf16>()[i] = bf16(u(gen));
  return t;
}

// out[b0, b1] = a[b0 or 0, b1] @ op(b)[b1] for a of (2 or 1, 3, m, k).
TEST(Bf16Gemm, BatchedProductsBroadcastAndWriteBf16OrFp32) {
  const int64_t m = 9, n = 21, k = 35;
  for (int64_t a_batch : {2, 1}) {
    SCOPED_TRACE(a_batch);
    const Tensor a = bf16_tensor({a_batch, 3, m, k}, 1);
    const Tensor b = bf16_tensor({3, n, k}, 2);  // read transposed: op(b) is k x n
    Tensor bias16 = bf16_tensor({n}, 3);
    Tensor bias32 = Tensor::empty({n}, DType::Float32);
    for (int64_t j = 0; j < n; ++j)
      bias32.data<float>()[j] = static_cast<float>(bias16.data<bf16>()[j]);
    Tensor out16 = Tensor::empty({2, 3, m, n}, DType::BFloat16);
    Tensor out32 = Tensor::empty({2, 3, m, n}, DType::Float32);
    batched_product(out16, a, false, b, true, {1.0, 0.0, bias16, Activation::Relu});
    batched_product(out32, a, false, b, true, {1.0, 0.0, bias32, Activation::Relu});
    for (int64_t b0 = 0; b0 < 2; ++b0)
      for (int64_t b1 = 0; b1 < 3; ++b1)
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j < n; ++j) {
            double want = static_cast<float>(bias16.data<bf16>()[j]);
            const bf16* ar = a.data<bf16>() + ((a_batch == 1 ? 0 : b0) * 3 + b1) * m * k + i * k;
            const bf16* br = b.data<bf16>() + b1 * n * k + j * k;
            for (int64_t p = 0; p < k; ++p)
              want += static_cast<double>(static_cast<float>(ar[p])) * static_cast<float>(br[p]);
            want = std::max(want, 0.0);
            const int64_t at = ((b0 * 3 + b1) * m + i) * n + j;
            ASSERT_NEAR(out32.data<float>()[at], want, 1e-5) << at;
            ASSERT_NEAR(static_cast<float>(out16.data<bf16>()[at]), want,
                        1e-5 + std::abs(want) / 256)
                << at;
            // The bf16 result is the fp32 one rounded once.
            ASSERT_EQ(Eigen::numext::bit_cast<uint16_t>(out16.data<bf16>()[at]),
                      to_bits(out32.data<float>()[at]))
                << at;
          }
  }
}

TEST(Bf16Gemm, AFloat32OutputNeedsBf16OperandsOfTheSameKind) {
  const Tensor a = bf16_tensor({4, 5}, 1);
  Tensor b32 = Tensor::empty({5, 6}, DType::Float32);
  Tensor out = Tensor::empty({4, 6}, DType::Float32);
  EXPECT_THROW(batched_product(out, a, false, b32, false), Error);
}

}  // namespace
