// The GEMM layer (engine/ops/gemm_util.h) against a naive triple loop in
// double: every transpose combination, padded leading dims, alpha/beta, the
// bias + activation epilogue, batches with repeated (broadcast) operands, and
// tilings across pools of different sizes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <memory>
#include <random>
#include <type_traits>
#include <vector>

#include "engine/core/parallel.h"
#include "engine/kernels/gemm.h"
#include "gemm_reference.h"

using namespace samba;
using namespace samba::ops;

namespace {

// A stored operand: op(X) is rows x cols; stored row-major as rows x cols
// (or cols x rows when transposed) with `pad` extra elements per stored row.
template <typename T>
struct Stored {
  std::vector<T> data;
  int64_t ld;
  bool trans;
  double at(int64_t i, int64_t j) const {
    return static_cast<double>(trans ? data[j * ld + i] : data[i * ld + j]);
  }
};

template <typename T>
Stored<T> make_operand(int64_t rows, int64_t cols, bool trans, int64_t pad, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> u(-1, 1);
  Stored<T> s;
  const int64_t srows = trans ? cols : rows, scols = trans ? rows : cols;
  s.ld = scols + pad;
  s.trans = trans;
  s.data.resize(static_cast<size_t>(std::max<int64_t>(srows * s.ld, 1)));
  for (auto& v : s.data) v = static_cast<T>(u(gen));
  return s;
}

struct Case {
  int64_t m, n, k;
  bool ta, tb;
  double alpha, beta;
  bool bias;
  Activation act;
};

// A 64-byte aligned buffer for an operand packed by prepack_b.
struct PackBuffer {
  explicit PackBuffer(size_t floats)
      : p(static_cast<float*>(std::aligned_alloc(64, (floats * sizeof(float) + 63) / 64 * 64))) {}
  PackBuffer(const PackBuffer&) = delete;
  PackBuffer& operator=(const PackBuffer&) = delete;
  ~PackBuffer() { std::free(p); }
  float* p;
};

// With `prepack`, op(B) is packed first (as at a PEF's load) and the product
// is given the packed copy as well as B.
template <typename T>
void check_case(const Case& cs, double tol, bool prepack = false) {
  SCOPED_TRACE(::testing::Message()
               << "m=" << cs.m << " n=" << cs.n << " k=" << cs.k << " ta=" << cs.ta
               << " tb=" << cs.tb << " alpha=" << cs.alpha << " beta=" << cs.beta
               << " bias=" << cs.bias << " act=" << activation_name(cs.act)
               << " prepack=" << prepack);
  const Stored<T> a = make_operand<T>(cs.m, cs.k, cs.ta, 3, 1);
  const Stored<T> b = make_operand<T>(cs.k, cs.n, cs.tb, 5, 2);
  Stored<T> c = make_operand<T>(cs.m, cs.n, false, 2, 3);
  const std::vector<T> c0 = c.data;
  std::vector<T> bias(cs.n);
  for (int64_t j = 0; j < cs.n; ++j)
    bias[j] = static_cast<T>(0.25 * std::sin(static_cast<double>(j)));

  GemmArgs<T> g;
  g.m = cs.m, g.n = cs.n, g.k = cs.k;
  g.a = {a.data.data(), a.ld, a.trans};
  g.b = {b.data.data(), b.ld, b.trans};
  g.c = c.data.data();
  g.ldc = c.ld;
  g.alpha = static_cast<T>(cs.alpha);
  g.beta = static_cast<T>(cs.beta);
  g.bias = cs.bias ? bias.data() : nullptr;
  g.act = cs.act;
  std::unique_ptr<PackBuffer> packed;
  if constexpr (std::is_same_v<T, float>) {
    if (prepack) {
      packed = std::make_unique<PackBuffer>(prepacked_b_floats(cs.k, cs.n));
      prepack_b(g.b, cs.k, cs.n, packed->p);
      g.b_packed = packed->p;
    }
  }
  gemm(g);

  for (int64_t i = 0; i < cs.m; ++i) {
    for (int64_t j = 0; j < cs.n; ++j) {
      double acc = 0;
      for (int64_t p = 0; p < cs.k; ++p) acc += a.at(i, p) * b.at(p, j);
      double want = cs.alpha * acc + cs.beta * static_cast<double>(c0[i * c.ld + j]);
      if (cs.bias) want += static_cast<double>(bias[j]);
      want = reference_activation(want, cs.act);
      ASSERT_NEAR(static_cast<double>(c.data[i * c.ld + j]), want,
                  tol * std::max(1.0, std::abs(want)))
          << "at (" << i << ", " << j << ")";
    }
    // The padding between rows of C is never written.
    for (int64_t j = cs.n; j < c.ld; ++j) ASSERT_EQ(c.data[i * c.ld + j], c0[i * c.ld + j]);
  }
}

// Runs f once per float kernel (the packed one where built, then Eigen's).
template <typename F>
void for_each_kernel(F f) {
  for (GemmKernel k : {GemmKernel::Auto, GemmKernel::Eigen}) {
    SCOPED_TRACE(k == GemmKernel::Auto ? "kernel=auto" : "kernel=eigen");
    set_gemm_kernel(k);
    f();
  }
  set_gemm_kernel(GemmKernel::Auto);
}

}  // namespace

TEST(Gemm, AllTransposeCombinationsMatchNaiveLoop) {
  for_each_kernel([] {
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        check_case<double>({7, 5, 9, ta, tb, 1.0, 0.0, false, Activation::None}, 1e-12);
        check_case<float>({13, 17, 11, ta, tb, 1.0, 0.0, false, Activation::None}, 1e-5);
        check_case<float>({6, 16, 8, ta, tb, 1.0, 0.0, false, Activation::None}, 1e-5);
      }
  });
}

TEST(Gemm, PackedKernelBlockEdges) {
  // Rows, columns and depth that cross every cache block and register block
  // boundary of the packed kernel, with partial blocks at each edge.
  check_case<float>({151, 2070, 70, false, true, 1.0, 0.0, true, Activation::None}, 1e-4);
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      check_case<float>({151, 35, 270, ta, tb, 1.0, 0.0, false, Activation::None}, 1e-4);
      check_case<float>({20, 35, 300, ta, tb, 0.5, 2.0, true, Activation::Tanh}, 1e-4);
    }
}

TEST(Gemm, FewRowsAgainstRowStoredWeights) {
  // The dot kernel (x @ Wᵀ with few rows): every row count up to and past its
  // limit (blocks of four rows and each remainder), column counts leaving
  // each remainder of a group of three, depths with and without a partial
  // vector, and the epilogue after it.
  for (int64_t m : {1, 2, 3, 4, 5, 7, 16, 31, 32, 33})
    for (int64_t n : {1, 2, 4, 6, 13})
      for (int64_t k : {8, 11, 16, 21, 64}) check_case<float>({m, n, k, false, true, 1.0, 0.0, false, Activation::None}, 1e-5);
  check_case<float>({5, 9, 40, false, true, 0.5, 2.0, true, Activation::Sigmoid}, 1e-5);
  check_case<float>({16, 300, 784, false, true, 1.0, 0.0, true, Activation::Relu}, 1e-4);
}

TEST(Gemm, NarrowOutputsAtManyRows) {
  // x @ Wᵀ with fewer columns than the packed kernel's panel (a classifier
  // head) past the dot kernel's row limit: tiles of many rows split across
  // threads, each column remainder of a group of three, depths with and
  // without a partial vector, alpha, beta and the epilogue.
  for (int64_t m : {33, 100, 256})
    for (int64_t n : {1, 2, 10, 17, 31})
      for (int64_t k : {8, 21, 512}) check_case<float>({m, n, k, false, true, 1.0, 0.0, false, Activation::None}, 1e-4);
  check_case<float>({256, 10, 512, false, true, 0.5, 2.0, true, Activation::Sigmoid}, 1e-4);
  check_case<float>({70, 15, 1024, false, true, 1.0, 0.0, true, Activation::Relu}, 1e-4);
}

TEST(Gemm, SmallProductsReadAInPlace) {
  // The direct kernel (A read in place; a row-major B too, a transposed B
  // one transposed panel at a time), for products small enough that packing
  // would cost as much as the arithmetic: every row remainder of its 6-row
  // blocks, columns that end inside the first or the second vector of a
  // panel or on its edge (at 8 and 16 lanes), depths from one up to its
  // limit (with and without a partial 8 x 8 transpose), and the epilogue.
  for (bool tb : {false, true})
    for (int64_t m : {1, 2, 3, 4, 5, 6, 7, 8, 13, 32, 40})
      for (int64_t n : {1, 5, 8, 9, 16, 17, 31, 32, 33, 70})
        for (int64_t k : {1, 3, 8, 13, 32, 100})
          check_case<float>({m, n, k, false, tb, 1.0, 0.0, false, Activation::None}, 1e-5);
  for (bool tb : {false, true}) {
    check_case<float>({8, 32, 32, false, tb, 1.0, 0.0, true, Activation::Relu}, 1e-5);
    check_case<float>({11, 45, 20, false, tb, 0.5, 2.0, true, Activation::GeluTanh}, 1e-5);
    check_case<float>({9, 7, 5, false, tb, -1.0, 1.0, true, Activation::Sigmoid}, 1e-5);
    // The deepest panel it takes (32 KiB at 16 lanes), and one row past a block.
    check_case<float>({16, 40, 256, false, tb, 1.0, 0.0, true, Activation::None}, 1e-4);
    check_case<float>({7, 33, 255, false, tb, 1.0, 0.0, false, Activation::None}, 1e-4);
  }
  // A transposed B deeper than one L1 panel (256 deep at 16 lanes, 512 at 8):
  // the depth in equal blocks, the later ones adding to C (beta applied once),
  // on full and edge panels; 16 x 784 is a linear's first layer at batch 16.
  check_case<float>({16, 256, 784, false, true, 1.0, 0.0, true, Activation::None}, 1e-4);
  check_case<float>({9, 45, 1100, false, true, 0.5, 2.0, true, Activation::Tanh}, 1e-4);
  check_case<float>({32, 33, 513, false, true, -1.0, 1.0, false, Activation::None}, 1e-4);
  check_case<float>({13, 7, 257, false, true, 1.0, -0.5, true, Activation::Sigmoid}, 1e-4);
}

TEST(Gemm, FewRowsAsTransposedProduct) {
  // x @ Wᵀ at 12 to 32 rows, computed as (W xᵀ)ᵀ: one and two panels of rows
  // (the second partial), every remainder of the 6-column blocks, depths of
  // one and of several blocks, written back transposed with alpha, beta and
  // each epilogue.
  for (int64_t m : {12, 16, 24, 28, 32})
    for (int64_t n : {6, 10, 13, 17, 40})
      for (int64_t k : {8, 30, 600})
        check_case<float>({m, n, k, false, true, 1.0, 0.0, false, Activation::None}, 1e-4);
  for (Activation act : {Activation::None, Activation::Relu, Activation::Tanh, Activation::GeluErf})
    check_case<float>({28, 23, 100, false, true, 0.5, 2.0, true, act}, 1e-4);
  check_case<float>({16, 10, 256, false, true, -1.0, 1.0, true, Activation::Sigmoid}, 1e-4);
}

TEST(Gemm, RowsAgainstAPrepackedWeight) {
  if (prepacked_b_floats(8, 8) == 0) GTEST_SKIP() << "no packed kernel at this ISA level";
  // x @ Wᵀ (and x @ W) with B packed at load, at 1 to 32 rows: whole register
  // blocks and every remainder, edge panels of columns, one and several
  // depth blocks, with alpha, beta, the bias and each epilogue, on one
  // thread and cut into column panels across two. Then many rows: at the
  // AVX-512 levels the kernel for rows against a packed B takes every tile
  // (prepacked_rows.h), going through A in runs of rows that stay in L2 (at
  // k = 2048, 128 rows a run: 300 rows are two runs and a remainder, none a
  // whole number of register blocks), tiles cut along rows or columns.
  for (int threads : {1, 2}) {
    ThreadPool pool(threads);
    ThreadPool::Scope scope(&pool);
    SCOPED_TRACE(threads);
    for (int64_t m : {1, 3, 7, 8, 9, 15, 16, 17, 24, 31, 32})
      for (int64_t n : {32, 45, 64, 256})
        for (int64_t k : {8, 13, 300, 784})
          check_case<float>({m, n, k, false, true, 1.0, 0.0, false, Activation::None}, 1e-4,
                            true);
    for (Activation act : {Activation::None, Activation::Relu, Activation::Tanh,
                           Activation::Sigmoid, Activation::GeluErf}) {
      check_case<float>({16, 250, 784, false, true, 1.0, 0.0, true, act}, 1e-4, true);
      check_case<float>({13, 70, 100, false, true, 0.5, 2.0, true, act}, 1e-4, true);
      check_case<float>({20, 90, 300, false, false, -1.0, 1.0, true, act}, 1e-4, true);
    }
    check_case<float>({300, 70, 2048, false, true, 1.0, 0.0, true, Activation::None}, 1e-4, true);
    check_case<float>({300, 70, 2048, false, false, 0.5, 2.0, true, Activation::Relu}, 1e-4, true);
    check_case<float>({1000, 96, 40, false, true, 1.0, 0.0, true, Activation::Tanh}, 1e-4, true);
    check_case<float>({77, 300, 784, false, true, -1.0, 1.0, false, Activation::GeluErf}, 1e-4,
                      true);
  }
}

TEST(Gemm, AlphaBetaAndBias) {
  for_each_kernel([] {
    check_case<double>({6, 4, 5, false, true, 0.5, 2.0, true, Activation::None}, 1e-12);
    check_case<double>({6, 4, 5, true, false, -1.5, 1.0, false, Activation::None}, 1e-12);
    check_case<float>({9, 10, 3, false, false, 2.0, -0.5, true, Activation::None}, 1e-5);
    check_case<float>({19, 40, 30, true, false, 2.0, -0.5, true, Activation::None}, 1e-5);
    check_case<float>({19, 40, 30, false, true, 1.0, 1.0, false, Activation::None}, 1e-5);
  });
}

TEST(Gemm, EveryActivationInTheEpilogue) {
  for (Activation act : {Activation::Relu, Activation::GeluTanh, Activation::GeluErf,
                         Activation::Tanh, Activation::Sigmoid}) {
    check_case<double>({5, 12, 7, false, true, 1.0, 0.0, true, act}, 1e-12);
    for_each_kernel([&] {
      check_case<float>({25, 37, 17, true, false, 1.0, 0.5, true, act}, 2e-5);
    });
  }
}

TEST(Gemm, BigProductsAreTiledAcrossThreads) {
  // Large enough to be split into tiles, with edges that are not multiples of the tile alignment.
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    ThreadPool::Scope scope(&pool);
    SCOPED_TRACE(threads);
    check_case<float>({37, 1001, 50, false, true, 1.0, 0.0, true, Activation::Relu}, 1e-4);
    check_case<float>({301, 45, 120, true, false, 1.0, 1.0, false, Activation::None}, 1e-4);
    // A tall output is split along its rows (the LM head's weight gradient):
    // op(A) read transposed, tiles and register blocks ending mid-panel, and
    // several depth blocks, with the epilogue.
    check_case<float>({1003, 70, 530, true, false, 1.0, 0.0, true, Activation::Relu}, 1e-4);
    check_case<float>({1003, 70, 530, false, false, 0.5, 1.0, false, Activation::None}, 1e-4);
    check_case<double>({150, 140, 96, true, true, 0.5, 0.0, true, Activation::GeluErf}, 1e-11);
    check_case<float>({2000, 1, 800, false, false, 1.0, 0.0, false, Activation::None},
                      1e-4);  // GEMV
    // A short output (a linear at batch 16) in narrow column panels, the last
    // one partial, against a weight stored transposed and one stored as is.
    check_case<float>({16, 250, 784, false, true, 1.0, 0.0, true, Activation::Tanh}, 1e-4);
    check_case<float>({30, 300, 200, false, false, 1.0, 0.5, true, Activation::None}, 1e-4);
  }
}

TEST(Gemm, ZeroSizes) {
  check_case<double>({4, 3, 0, false, false, 1.0, 0.0, true, Activation::Sigmoid},
                     1e-12);                                                            // bias only
  check_case<double>({4, 3, 0, true, true, 1.0, 2.0, false, Activation::None}, 1e-12);  // beta * C
  check_case<double>({0, 3, 4, false, false, 1.0, 0.0, true, Activation::None}, 1e-12);
  check_case<double>({3, 0, 4, false, false, 1.0, 0.0, true, Activation::None}, 1e-12);
}

TEST(Gemm, BetaZeroIgnoresNaNsInC) {
  std::vector<float> a{1, 2, 3, 4}, b{1, 0, 0, 1};
  std::vector<float> c(4, std::numeric_limits<float>::quiet_NaN());
  GemmArgs<float> g;
  g.m = g.n = g.k = 2;
  g.a = {a.data(), 2, false};
  g.b = {b.data(), 2, false};
  g.c = c.data();
  g.ldc = 2;
  gemm(g);
  EXPECT_EQ(c, (std::vector<float>{1, 2, 3, 4}));
}

TEST(Gemm, BatchedWithRepeatedOperands) {
  // Three products sharing one B (offset 0 repeated) and distinct A and C.
  const int64_t m = 4, n = 3, k = 5, batch = 3;
  std::mt19937 gen(7);
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<double> a(batch * m * k), b(k * n), c(batch * m * n, 0.0), bias{1, 2, 3};
  for (auto& v : a) v = u(gen);
  for (auto& v : b) v = u(gen);
  const std::vector<int64_t> ao{0, m * k, 2 * m * k}, bo{0, 0, 0}, co{0, m * n, 2 * m * n};
  GemmArgs<double> g;
  g.m = m, g.n = n, g.k = k;
  g.a = {a.data(), k, false};
  g.b = {b.data(), k, true};  // read as the transpose of a 3 x 5 matrix: op(B)(p, j) = b[j * 5 + p]
  g.c = c.data();
  g.ldc = n;
  g.bias = bias.data();
  gemm_batched(g, batch, ao.data(), bo.data(), co.data());
  for (int64_t t = 0; t < batch; ++t)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double want = bias[j];
        for (int64_t p = 0; p < k; ++p) want += a[t * m * k + i * k + p] * b[j * k + p];
        EXPECT_NEAR(c[t * m * n + i * n + j], want, 1e-12);
      }
}

TEST(Gemm, MatrixLayoutRecognisesRowAndColumnMajor) {
  auto lay = matrix_layout(3, 4, 4, 1);
  ASSERT_TRUE(lay);
  EXPECT_EQ(lay->ld, 4);
  EXPECT_FALSE(lay->trans);
  lay = matrix_layout(3, 4, 1, 3);  // the transpose of a contiguous 4 x 3
  ASSERT_TRUE(lay);
  EXPECT_EQ(lay->ld, 3);
  EXPECT_TRUE(lay->trans);
  lay = matrix_layout(3, 4, 10, 1);  // rows padded
  ASSERT_TRUE(lay && lay->ld == 10 && !lay->trans);
  lay = matrix_layout(1, 4, 0, 2);  // a strided row vector: the transpose of a strided column
  ASSERT_TRUE(lay && lay->ld == 2 && lay->trans);
  EXPECT_FALSE(matrix_layout(3, 4, 8, 2));  // neither dim has unit stride
  EXPECT_FALSE(matrix_layout(3, 4, 0, 1));  // broadcast rows
}

TEST(Gemm, ActivationNames) {
  for (Activation a : {Activation::None, Activation::Relu, Activation::GeluTanh,
                       Activation::GeluErf, Activation::Tanh, Activation::Sigmoid})
    EXPECT_EQ(activation_from_name(activation_name(a)), a);
  EXPECT_EQ(activation_from_name("gelu"), Activation::GeluErf);
  EXPECT_FALSE(activation_from_name("swish"));
}
