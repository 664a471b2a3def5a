// The Winograd F(2x2, 3x3) convolution (engine/kernels/conv_winograd.h) at
// the ISA level in use (the test runs once per level the machine has; only
// the levels whose table has the kernel run it, the others must decline):
// forward and input gradient against sums in double over channel counts
// that reach every register block of its products (1, 2 and 4 vectors of
// output channels and their mixes), odd and even images, one tile and many
// blocks of tiles, every padding; non-finite values reaching exactly the
// outputs conv2d's definition gives them; and when the cost picks it.
#include "engine/kernels/conv_winograd.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "conv_test_util.h"
#include "engine/core/parallel.h"
#include "engine/kernels/conv_direct.h"

using namespace samba;
using namespace samba::testing;
using samba::ops::ConvGeometry;
using samba::ops::DirectLayout;

namespace {

bool has_winograd() {
  const ops::detail::ConvDirectKernels* k = ops::detail::conv_direct_kernels();
  return k && k->winograd_image;
}

// Shapes for the forced kernel: output channels of 1 to 7 vectors (the
// products' blocks of 4, 2 and 1 vectors, alone and mixed), input channels
// off the vector width, images of one tile, odd sides (a tile row and
// column past the output) and one large enough for several blocks of tiles.
std::vector<Shape> shapes() {
  const std::vector<std::pair<int64_t, int64_t>> channels = {{1, 8},   {3, 16}, {16, 32}, {17, 24},
                                                             {32, 40}, {8, 48}, {33, 56}, {16, 5}};
  const std::vector<std::pair<int64_t, int64_t>> sides = {{1, 1}, {2, 3},  {8, 8},
                                                          {7, 5}, {9, 12}, {20, 20}};
  std::vector<Shape> r;
  size_t k = 0;
  for (auto [in, out] : channels)
    for (auto [h, w] : sides) {
      const int64_t pad = static_cast<int64_t>(k % 3);
      if (h + 2 * pad < 3 || w + 2 * pad < 3) {
        ++k;
        continue;
      }
      r.push_back({h * w >= 400 ? 2 : 3, in, out, h, w, 3, 3, pad, k % 2 == 0});
      ++k;
    }
  return r;
}

// Checks got against the sums in double where finite, and that each
// infinity and NaN is where the sums have it (the tolerance check alone
// passes a NaN).
void expect_values(const float* got, const std::vector<double>& want) {
  int64_t reported = 0;
  for (size_t i = 0; i < want.size() && reported < 5; ++i) {
    const double g = got[i], w = want[i];
    const bool same = std::isnan(w)   ? std::isnan(g)
                      : std::isinf(w) ? g == w
                                      : std::abs(g - w) <= 1e-4 * (1.0 + std::abs(w));
    if (!same) {
      ADD_FAILURE() << "element " << i << ": got " << g << ", want " << w;
      ++reported;
    }
  }
}

struct Output {
  bool ran;
  std::vector<float> out;
};

Output forward(const ConvGeometry& g, const std::vector<float>& x, const std::vector<float>& w,
               const float* bias, DirectLayout layout) {
  Fenced out(g.batch * g.out_channels * g.out_pixels());
  const bool ran = ops::conv2d_direct_forward(g, x.data(), w.data(), bias, out.data(), layout);
  if (ran)
    out.expect_guards_intact();
  else
    EXPECT_TRUE(out.untouched());
  return {ran, std::vector<float>(out.data(), out.data() + out.size())};
}

}  // namespace

TEST(Winograd, ForwardMatchesDirectSums) {
  uint32_t seed = 1;
  for (int threads : {1, 2}) {
    ThreadPool pool(threads);
    ThreadPool::Scope scope(&pool);
    int64_t ran = 0;
    for (const Shape& s : shapes()) {
      SCOPED_TRACE(shape_str(s) + fmt::format(", {} threads", threads));
      const ConvGeometry g = geometry(s);
      const std::vector<float> x = random_floats(g.batch * g.in_channels * g.in_pixels(), seed);
      const std::vector<float> w = random_floats(s.out * s.in * 9, seed + 1);
      const std::vector<float> b = random_floats(s.out, seed + 2);
      const float* bias = s.bias ? b.data() : nullptr;
      const Output r = forward(g, x, w, bias, DirectLayout::Winograd);
      EXPECT_EQ(r.ran, has_winograd());
      if (r.ran) {
        expect_values(r.out.data(), forward_sums(g, x, w, bias));
      }
      ran += r.ran ? 1 : 0;
      seed += 3;
    }
    if (has_winograd()) {
      EXPECT_EQ(ran, static_cast<int64_t>(shapes().size()));
    }
  }
}

TEST(Winograd, InputGradMatchesTheAdjoint) {
  // The input gradient's convolution of the output gradient (padded by 2 -
  // padding, the weight flipped and its channels swapped).
  uint32_t seed = 300;
  ThreadPool pool(2);
  ThreadPool::Scope scope(&pool);
  for (const Shape& s : shapes()) {
    SCOPED_TRACE(shape_str(s));
    const ConvGeometry g = geometry(s);
    const std::vector<float> grad = random_floats(g.batch * g.out_channels * g.out_pixels(), seed);
    const std::vector<float> w = random_floats(s.out * s.in * 9, seed + 1);
    std::vector<double> want(static_cast<size_t>(g.batch * g.in_channels * g.in_pixels()), 0.0);
    for_each_product(g, [&](int64_t xi, int64_t wi, int64_t oi) {
      want[xi] += static_cast<double>(grad[oi]) * w[wi];
    });
    Fenced dx(static_cast<int64_t>(want.size()));
    const bool ran =
        ops::conv2d_direct_input_grad(g, grad.data(), w.data(), dx.data(), DirectLayout::Winograd);
    EXPECT_EQ(ran, has_winograd());
    dx.expect_written(ran, want);
    seed += 3;
  }
}

TEST(Winograd, NonFiniteInputsReachTheOutputsConv2dGivesThem) {
  // A NaN and an infinity in some images: the transforms would spread them
  // over whole tiles (a NaN times a zero coefficient, ∞ - ∞), so those
  // images are summed tap by tap. Finite images of the same batch still go
  // through the transforms; the pooled and relu'd outputs follow.
  ThreadPool pool(2);
  ThreadPool::Scope scope(&pool);
  const Shape s{6, 16, 32, 8, 8, 3, 3, 1, true};
  const ConvGeometry g = geometry(s);
  std::vector<float> x = random_floats(g.batch * g.in_channels * g.in_pixels(), 5);
  const int64_t image = g.in_channels * g.in_pixels();
  x[static_cast<size_t>(0 * image + 3 * 64 + 2 * 8 + 5)] = std::nanf("");
  x[static_cast<size_t>(2 * image + 7 * 64 + 0 * 8 + 0)] = INFINITY;
  x[static_cast<size_t>(3 * image + 1 * 64 + 7 * 8 + 7)] = -INFINITY;
  x[static_cast<size_t>(3 * image + 2 * 64 + 7 * 8 + 6)] = INFINITY;
  const std::vector<float> w = random_floats(s.out * s.in * 9, 6);
  const std::vector<float> b = random_floats(s.out, 7);
  const std::vector<double> want = forward_sums(g, x, w, b.data());
  const Output r = forward(g, x, w, b.data(), DirectLayout::Winograd);
  ASSERT_EQ(r.ran, has_winograd());
  if (!r.ran) return;
  expect_values(r.out.data(), want);
  // Each non-finite input reaches its 3 x 3 neighbourhood and no further.
  int64_t non_finite = 0;
  for (float v : r.out) non_finite += std::isfinite(v) ? 0 : 1;
  EXPECT_EQ(non_finite, 32 * (9 + 4 + 6)) << "the NaN and infinities spread too far";
}

TEST(Winograd, NonFiniteWeightsAreLeftToTheDirectKernel) {
  ThreadPool pool(2);
  ThreadPool::Scope scope(&pool);
  const Shape s{4, 16, 32, 8, 8, 3, 3, 1, false};
  const ConvGeometry g = geometry(s);
  const std::vector<float> x = random_floats(g.batch * g.in_channels * g.in_pixels(), 8);
  std::vector<float> w = random_floats(s.out * s.in * 9, 9);
  w[5] = INFINITY;          // output channel 0, input channel 0, tap (1, 2)
  w[9 * 16 * 3 + 4] = NAN;  // output channel 3, centre tap
  EXPECT_FALSE(forward(g, x, w, nullptr, DirectLayout::Winograd).ran);
  // The cheapest plan is then one of the direct kernel's layouts, bit for
  // bit (NaNs included: that kernel multiplies the padding's zeros too).
  const Output r = forward(g, x, w, nullptr, DirectLayout::Cheapest);
  ASSERT_EQ(r.ran, ops::detail::conv_direct_kernels() != nullptr);
  if (!r.ran) return;
  bool direct = false;
  for (DirectLayout l :
       {DirectLayout::PaddedPlanes, DirectLayout::ColumnCopies, DirectLayout::ChannelLanes}) {
    const Output d = forward(g, x, w, nullptr, l);
    direct = direct ||
             (d.ran && std::memcmp(d.out.data(), r.out.data(), r.out.size() * sizeof(float)) == 0);
  }
  EXPECT_TRUE(direct);
}

TEST(Winograd, TheCheapestPlanPicksItForTheDigitsNetsSecondLayerOnly) {
  // 16 -> 32 channels of 8 x 8 (the digits net's second layer) at batch 256:
  // the transforms cost less than the products they save. One input
  // channel (the first layer) saves too few; fewer images than threads
  // would leave a core idle; other kernels are not 3 x 3.
  ThreadPool pool(2);
  ThreadPool::Scope scope(&pool);
  const ops::detail::ConvDirectKernels* k = ops::detail::conv_direct_kernels();
  if (!k || !k->winograd_image) {
    if (k) {
      EXPECT_LT(ops::detail::winograd_cycles(*k, {256, 16, 8, 8, 1, 1, 32}), 0);
    }
    GTEST_SKIP() << "no Winograd kernel at " << isa_name(active_isa());
  }
  EXPECT_GT(ops::detail::winograd_cycles(*k, {256, 16, 8, 8, 1, 1, 32}), 0);
  EXPECT_LT(ops::detail::winograd_cycles(*k, {1, 16, 8, 8, 1, 1, 32}), 0);
  // A 100 x 100 image's copies would not stay in L2.
  EXPECT_LT(ops::detail::winograd_cycles(*k, {4, 16, 100, 100, 1, 1, 32}), 0);
  // Which kernel ran shows in the bits: the forced kernels give different
  // roundings of the same sums on these random inputs.
  auto picks = [&](const Shape& s) {
    const ConvGeometry g = geometry(s);
    const std::vector<float> x = random_floats(g.batch * g.in_channels * g.in_pixels(), 11);
    const std::vector<float> w = random_floats(s.out * s.in * 9, 12);
    const Output cheapest = forward(g, x, w, nullptr, DirectLayout::Cheapest);
    const Output winograd = forward(g, x, w, nullptr, DirectLayout::Winograd);
    return cheapest.out == winograd.out;
  };
  EXPECT_TRUE(picks({256, 16, 32, 8, 8, 3, 3, 1, false}));
  EXPECT_FALSE(picks({256, 1, 16, 8, 8, 3, 3, 1, false}));
  EXPECT_FALSE(picks({1, 16, 32, 8, 8, 3, 3, 1, false}));
}
