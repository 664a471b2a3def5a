// The direct convolution kernel (engine/kernels/conv_direct.h) at the ISA
// level in use (the test runs once per level the machine has): forward,
// input gradient and weight gradient against loops written here in double, over channel counts
// around the register blocks, images smaller and larger than one vector row,
// every padding the kernel sees, and output buffers fenced by guard values
// that must survive the masked row tails. At the generic level there is no
// direct kernel and conv2d keeps im2col.
#include "engine/kernels/conv_direct.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "conv_test_util.h"
#include "engine/core/isa.h"
#include "engine/core/parallel.h"
#include "engine/kernels/conv_geometry.h"
#include "op_test_util.h"

using namespace samba;
using namespace samba::testing;
using samba::ops::ConvGeometry;
using samba::ops::ConvParams;

namespace {

// The sweep: every image size with every kernel and padding that gives an
// output, channel counts cycling through 1, 3, 16, 32 and 33 (in and out
// differing), bias and batch (1, 3, 20) alternating.
std::vector<Shape> sweep() {
  const std::vector<std::pair<int64_t, int64_t>> sides = {
      {1, 1}, {5, 7}, {8, 8}, {17, 9}, {32, 32}};
  const std::vector<std::pair<int64_t, int64_t>> kernels = {{1, 1}, {3, 3}, {5, 5}, {3, 1}};
  const std::vector<int64_t> channels = {1, 3, 16, 32, 33};
  const std::vector<int64_t> batches = {1, 3, 20};
  std::vector<Shape> shapes;
  size_t k = 0;
  for (auto [h, w] : sides)
    for (auto [kh, kw] : kernels)
      for (int64_t pad : {0, 1, 2}) {
        if (h + 2 * pad < kh || w + 2 * pad < kw) continue;
        const int64_t in = channels[k % channels.size()], out = channels[(k + 2) % channels.size()];
        int64_t batch = batches[k % batches.size()];
        if (h * w >= 256) batch = std::min<int64_t>(batch, 3);  // keeps the double loops short
        shapes.push_back({batch, in, out, h, w, kh, kw, pad, k % 2 == 0});
        ++k;
      }
  return shapes;
}

using ops::DirectLayout;

std::string layout_name(DirectLayout l) {
  switch (l) {
    case DirectLayout::Cheapest:
      return "cheapest layout";
    case DirectLayout::PaddedPlanes:
      return "padded planes";
    case DirectLayout::ColumnCopies:
      return "column copies";
    case DirectLayout::ChannelLanes:
      return "channel lanes";
    case DirectLayout::Winograd:
      return "Winograd";
  }
  return "?";
}

bool has_winograd_kernel() {
  const ops::detail::ConvDirectKernels* k = ops::detail::conv_direct_kernels();
  return k && k->winograd_image;
}

// Each sweep runs on 1 and 2 threads with the layout chosen by cost and
// with each layout forced (a forced layout declines the shapes whose copy
// would not fit in L2).
std::vector<std::pair<int, DirectLayout>> runs() {
  std::vector<std::pair<int, DirectLayout>> r;
  for (int threads : {1, 2})
    for (DirectLayout l :
         {DirectLayout::Cheapest, DirectLayout::PaddedPlanes, DirectLayout::ColumnCopies,
          DirectLayout::ChannelLanes, DirectLayout::Winograd})
      r.push_back({threads, l});
  return r;
}

// Calls one(shape, geometry, layout, seed) for every shape of the sweep in
// every run; `one` returns whether the direct kernel ran, which each layout
// must have done for at least `minimum` shapes (none at the generic level),
// the channel lanes for `lanes_minimum` (they need images of at least one
// block of pixels), Winograd for `winograd_minimum` (3 x 3 kernels, at
// least one image per thread, and only at the levels that have it), or
// kLayoutIgnored where `one` does not read the layout (each layout's run
// then repeats the shapes and must reach `minimum`).
constexpr int64_t kLayoutIgnored = -1;
template <typename One>
void for_each_run(int64_t minimum, int64_t lanes_minimum, int64_t winograd_minimum, One one) {
  const bool has_winograd = has_winograd_kernel();
  const bool has_kernel = ops::detail::conv_direct_kernels() != nullptr;
  uint32_t seed = 1;
  for (auto [threads, layout] : runs()) {
    ThreadPool pool(threads);
    ThreadPool::Scope scope(&pool);
    int64_t ran = 0;
    for (const Shape& s : sweep()) {
      SCOPED_TRACE(shape_str(s) + fmt::format(", {} threads, {}", threads, layout_name(layout)));
      ran += one(s, geometry(s), layout, seed) ? 1 : 0;
      seed += 3;
    }
    if (winograd_minimum == kLayoutIgnored) {
      EXPECT_GE(ran, has_kernel ? minimum : 0);
      EXPECT_TRUE(has_kernel || ran == 0);
    } else if (layout == DirectLayout::Winograd && !has_winograd)
      EXPECT_EQ(ran, 0);
    else if (has_kernel)
      EXPECT_GE(ran, layout == DirectLayout::ChannelLanes ? lanes_minimum
                     : layout == DirectLayout::Winograd   ? winograd_minimum
                                                          : minimum)
          << layout_name(layout) << " ran for too few shapes: " << ran;
    else
      EXPECT_EQ(ran, 0);
  }
}

// Runs the direct forward of shape s in `layout` on random inputs from
// `seed`, checks it against the direct sums when it ran; whether it ran.
bool forward_in_layout(const Shape& s, DirectLayout layout, uint32_t seed) {
  const ConvGeometry g = geometry(s);
  const std::vector<float> x = random_floats(g.batch * g.in_channels * g.in_pixels(), seed);
  const std::vector<float> w = random_floats(s.out * s.in * s.kh * s.kw, seed + 1);
  const std::vector<float> b = random_floats(s.out, seed + 2);
  const std::vector<double> want = forward_sums(g, x, w, s.bias ? b.data() : nullptr);
  Fenced out(static_cast<int64_t>(want.size()));
  const bool ran = ops::conv2d_direct_forward(g, x.data(), w.data(), s.bias ? b.data() : nullptr,
                                              out.data(), layout);
  out.expect_written(ran, want);
  return ran;
}

}  // namespace

TEST(ConvDirect, KernelOfTheLevelInUse) {
  const ops::detail::ConvDirectKernels* k = ops::detail::conv_direct_kernels();
  if (active_isa() == IsaLevel::Generic) {
    EXPECT_EQ(k, nullptr);
    return;
  }
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(k->level, std::min(active_isa(), IsaLevel::Avx512));
  EXPECT_EQ(k->lanes, k->level == IsaLevel::Avx2 ? 8 : 16);
  // The Winograd kernel is the AVX2 level's (measured faster there than its
  // direct blocks on the digits net's second layer, docs/PERFORMANCE.md).
  EXPECT_EQ(k->winograd_image != nullptr, k->level == IsaLevel::Avx2);
}

TEST(ConvDirect, ForwardMatchesDirectSumsWithoutWritingOutsideTheOutput) {
  const bool has_kernel = ops::detail::conv_direct_kernels() != nullptr;
  for_each_run(50, 35, 7,
               [&](const Shape& s, const ConvGeometry&, DirectLayout layout, uint32_t seed) {
                 const bool ran = forward_in_layout(s, layout, seed);
                 if (layout == DirectLayout::Cheapest) {
                   EXPECT_EQ(ran, has_kernel);
                 }
                 return ran;
               });
}

TEST(ConvDirect, InputGradMatchesTheAdjointWithoutWritingOutsideIt) {
  const bool has_kernel = ops::detail::conv_direct_kernels() != nullptr;
  for_each_run(
      30, 20, 7, [&](const Shape& s, const ConvGeometry& g, DirectLayout layout, uint32_t seed) {
        const std::vector<float> grad =
            random_floats(g.batch * g.out_channels * g.out_pixels(), seed);
        const std::vector<float> w = random_floats(s.out * s.in * s.kh * s.kw, seed + 1);
        std::vector<double> want(static_cast<size_t>(g.batch * g.in_channels * g.in_pixels()), 0.0);
        for_each_product(g, [&](int64_t xi, int64_t wi, int64_t oi) {
          want[xi] += static_cast<double>(grad[oi]) * w[wi];
        });
        Fenced dx(static_cast<int64_t>(want.size()));
        const bool ran = ops::conv2d_direct_input_grad(g, grad.data(), w.data(), dx.data(), layout);
        // A padding wider than kernel - 1 makes the adjoint a cropped convolution: im2col's.
        const bool uncropped = s.pad < s.kh && s.pad < s.kw;
        if (layout == DirectLayout::Cheapest) {
          EXPECT_EQ(ran, has_kernel && uncropped);
        }
        if (!uncropped) {
          EXPECT_FALSE(ran);
        }
        dx.expect_written(ran, want);
        return ran;
      });
}

TEST(ConvDirect, WeightGradMatchesTheAdjoint) {
  // Only the column-copies layout serves the weight gradient: the layout
  // argument of the sweep does not apply, so each run repeats the shapes.
  const bool has_kernel = ops::detail::conv_direct_kernels() != nullptr;
  for_each_run(40, 40, kLayoutIgnored,
               [&](const Shape& s, const ConvGeometry& g, DirectLayout, uint32_t seed) {
                 const std::vector<float> grad =
                     random_floats(g.batch * g.out_channels * g.out_pixels(), seed);
                 const std::vector<float> x =
                     random_floats(g.batch * g.in_channels * g.in_pixels(), seed + 1);
                 std::vector<double> want(static_cast<size_t>(s.out * s.in * s.kh * s.kw), 0.0);
                 for_each_product(g, [&](int64_t xi, int64_t wi, int64_t oi) {
                   want[wi] += static_cast<double>(grad[oi]) * x[xi];
                 });
                 Fenced dw(static_cast<int64_t>(want.size()));
                 const bool ran =
                     ops::conv2d_direct_weight_grad(g, grad.data(), x.data(), dw.data());
                 if (!has_kernel) {
                   EXPECT_FALSE(ran);
                 }
                 dw.expect_written(ran, want);
                 return ran;
               });
}

// max_pool2d's rule, tap after tap in window order: a later value replaces
// the running maximum when it is larger or NaN.
float pick(float earlier, float later) {
  return later > earlier || std::isnan(later) ? later : earlier;
}

// The pooled forward (relu or not) against the kernel's own unpooled output
// in the same layout, relu'd and pooled here over 2x2 windows, bit for bit:
// NaNs in half the inputs, signed zeros from the relu, odd output sizes
// whose last row or column no window covers, and guards around the output.
TEST(ConvDirect, PooledForwardIsTheTwoByTwoMaxPoolingOfTheOutputBitForBit) {
  const bool has_kernel = ops::detail::conv_direct_kernels() != nullptr;
  for_each_run(
      40, 20, 7, [&](const Shape& s, const ConvGeometry& g, DirectLayout layout, uint32_t seed) {
        std::vector<float> x = random_floats(g.batch * g.in_channels * g.in_pixels(), seed);
        if (seed % 2 == 1)
          for (size_t i = seed % 37; i < x.size(); i += 211) x[i] = std::nanf("");
        const std::vector<float> w = random_floats(s.out * s.in * s.kh * s.kw, seed + 1);
        const std::vector<float> b = random_floats(s.out, seed + 2);
        const float* bias = s.bias ? b.data() : nullptr;
        const int64_t ph = g.out_h / 2, pw = g.out_w / 2, planes = g.batch * g.out_channels;
        bool ran = false;
        for (bool relu : {false, true}) {
          SCOPED_TRACE(relu ? "relu" : "no relu");
          std::vector<float> full(static_cast<size_t>(planes * g.out_pixels()));
          const bool unpooled =
              ops::conv2d_direct_forward(g, x.data(), w.data(), bias, full.data(), layout);
          Fenced out(planes * ph * pw);
          ran = ops::conv2d_direct_pool_forward(g, x.data(), w.data(), bias, relu, out.data(),
                                                layout);
          EXPECT_EQ(ran, unpooled && ph > 0 && pw > 0);
          if (layout == DirectLayout::Cheapest) {
            EXPECT_EQ(ran, has_kernel && ph > 0 && pw > 0);
          }
          if (!ran) {
            EXPECT_TRUE(out.untouched());
            continue;
          }
          out.expect_guards_intact();
          auto at = [&](int64_t plane, int64_t h, int64_t c) {
            const float v = full[static_cast<size_t>((plane * g.out_h + h) * g.out_w + c)];
            return relu && v < 0.0f ? 0.0f : v;
          };
          int64_t reported = 0;
          for (int64_t p = 0; p < planes; ++p)
            for (int64_t i = 0; i < ph; ++i)
              for (int64_t j = 0; j < pw; ++j) {
                const float want = pick(pick(at(p, 2 * i, 2 * j), at(p, 2 * i, 2 * j + 1)),
                                        pick(at(p, 2 * i + 1, 2 * j), at(p, 2 * i + 1, 2 * j + 1)));
                const float got = out.data()[(p * ph + i) * pw + j];
                if (std::memcmp(&got, &want, sizeof(float)) != 0 && reported++ < 5)
                  ADD_FAILURE() << "plane " << p << " window (" << i << ", " << j << "): got "
                                << got << ", want " << want;
              }
        }
        return ran;
      });
}

TEST(ConvDirect, OutputsLargerThanTheStagingBudgetAreSplitByChannels) {
  // 64 output channels of a 32 x 32 image: more staged output than one
  // task holds, so the image's channel blocks go to several tasks even on
  // one thread with more images than tasks wanted.
  ThreadPool pool(1);
  ThreadPool::Scope scope(&pool);
  const Shape s{8, 8, 64, 32, 32, 3, 3, 1, true};
  const ConvGeometry g = geometry(s);
  const std::vector<float> x = random_floats(g.batch * g.in_channels * g.in_pixels(), 7);
  const std::vector<float> w = random_floats(s.out * s.in * s.kh * s.kw, 8);
  const std::vector<float> b = random_floats(s.out, 9);
  const std::vector<double> want = forward_sums(g, x, w, b.data());
  Fenced out(static_cast<int64_t>(want.size()));
  if (!ops::conv2d_direct_forward(g, x.data(), w.data(), b.data(), out.data(),
                                  DirectLayout::PaddedPlanes))
    GTEST_SKIP() << "no direct kernel at " << isa_name(active_isa());
  out.expect_written(true, want);
}

TEST(ConvDirect, DigitsNetLayersInChannelLanesMatchAtEveryBatch) {
  // The digits net's layers (1 -> 16 and 16 -> 32 channels of 8 x 8, 3 x 3,
  // padding 1) and a channel count past a whole vector, batch 1 included:
  // every output channel block, the last pixel block moved back over the
  // others, the transposition to channel planes with the bias.
  const bool has_kernel = ops::detail::conv_direct_kernels() != nullptr;
  uint32_t seed = 40;
  const Shape shapes[] = {{1, 1, 16, 8, 8, 3, 3, 1, true},
                         {1, 16, 32, 8, 8, 3, 3, 1, true},
                         {5, 16, 32, 8, 8, 3, 3, 1, false},
                         {3, 16, 33, 8, 8, 3, 3, 1, true},
                         {2, 3, 20, 7, 5, 3, 3, 1, true}};
  for (const Shape& s : shapes) {
    SCOPED_TRACE(shape_str(s));
    EXPECT_EQ(forward_in_layout(s, DirectLayout::ChannelLanes, seed), has_kernel);
    seed += 3;
  }
}

TEST(ConvDirect, ChannelLanesLeaveOutThePaddingAtEveryEdgeOfTheImage) {
  // The channel-lanes blocks multiply only the kernel rows that reach the
  // input for their output rows, and leave out a first or last pixel whose
  // tap falls on the padding columns: each padding at images of one pixel,
  // one row or column fewer than a block, rows of exactly one block (8 x 8)
  // and rows whose last block moves back over the first (5 x 12), with
  // kernels wider than the padding, as wide, and flat. Forward and input
  // gradient (a convolution padded by kernel - 1 - padding).
  const bool has_kernel = ops::detail::conv_direct_kernels() != nullptr;
  const std::vector<std::pair<int64_t, int64_t>> sides = {{1, 1}, {2, 2}, {3, 5}, {8, 8}, {5, 12}};
  const std::vector<std::pair<int64_t, int64_t>> kernels = {{3, 3}, {5, 5}, {1, 3}};
  uint32_t seed = 80;
  int64_t lanes_ran = 0, eight_ran = 0;
  for (auto [h, w] : sides)
    for (auto [kh, kw] : kernels)
      for (int64_t pad : {0, 1, 2}) {
        if (h + 2 * pad < kh || w + 2 * pad < kw) continue;
        for (auto [in, out] : {std::pair<int64_t, int64_t>{16, 32}, {3, 20}}) {
          const Shape s{2, in, out, h, w, kh, kw, pad, seed % 2 == 0};
          SCOPED_TRACE(shape_str(s));
          const bool ran = forward_in_layout(s, DirectLayout::ChannelLanes, seed);
          lanes_ran += ran ? 1 : 0;
          if (h == 8 && kh == 3 && pad == 1) eight_ran += ran ? 1 : 0;
          forward_in_layout(s, DirectLayout::Cheapest, seed + 1);
          const ConvGeometry g = geometry(s);
          const std::vector<float> grad =
              random_floats(g.batch * g.out_channels * g.out_pixels(), seed + 2);
          const std::vector<float> wt = random_floats(s.out * s.in * s.kh * s.kw, seed + 3);
          std::vector<double> want(static_cast<size_t>(g.batch * g.in_channels * g.in_pixels()));
          for_each_product(g, [&](int64_t xi, int64_t wi, int64_t oi) {
            want[xi] += static_cast<double>(grad[oi]) * wt[wi];
          });
          Fenced dx(static_cast<int64_t>(want.size()));
          dx.expect_written(ops::conv2d_direct_input_grad(g, grad.data(), wt.data(), dx.data(),
                                                          DirectLayout::ChannelLanes),
                            want);
          seed += 5;
        }
      }
  if (has_kernel) {
    EXPECT_EQ(eight_ran, 2) << "the digits net's 8 x 8 layers did not run in channel lanes";
    EXPECT_GE(lanes_ran, 20);
  } else {
    EXPECT_EQ(lanes_ran, 0);
  }
}

TEST(ConvDirect, PaddingStaysZeroWhenAnotherLayoutUsedTheThreadsCopyBetween) {
  // One thread: the padded copy of the first convolution is overwritten with
  // the unpadded one's data, then the first runs again in the same place.
  ThreadPool pool(1);
  ThreadPool::Scope scope(&pool);
  const Shape padded{2, 16, 32, 8, 8, 3, 3, 1, true}, unpadded{2, 16, 32, 12, 10, 3, 3, 0, false};
  uint32_t seed = 60;
  for (const Shape& s : {padded, unpadded, padded}) {
    SCOPED_TRACE(shape_str(s));
    forward_in_layout(s, DirectLayout::ColumnCopies, seed);
    seed += 3;
  }
}

TEST(ConvDirect, ChannelLanesDeclineImagesSmallerThanAPixelBlock) {
  // 2 x 2 output pixels: fewer than any channel-lanes block holds.
  const Shape s{2, 16, 32, 2, 2, 3, 3, 1, true};
  const ConvGeometry g = geometry(s);
  const std::vector<float> x(static_cast<size_t>(g.batch * g.in_channels * g.in_pixels()), 1.0f);
  const std::vector<float> w(static_cast<size_t>(s.out * s.in * s.kh * s.kw), 1.0f);
  Fenced out(g.batch * g.out_channels * g.out_pixels());
  EXPECT_FALSE(ops::conv2d_direct_forward(g, x.data(), w.data(), nullptr, out.data(),
                                          DirectLayout::ChannelLanes));
  EXPECT_TRUE(out.untouched());
}

TEST(ConvDirect, OtherGeometriesAreLeftToIm2col) {
  std::vector<std::pair<const char*, ConvGeometry>> cases;
  auto with = [](ConvParams p, const Dims& x, const Dims& w) {
    return ops::conv_geometry("conv2d", x, w, p);
  };
  cases.push_back({"stride 2", with({.stride = {2, 2}}, {1, 3, 8, 8}, {4, 3, 3, 3})});
  cases.push_back({"dilation 2", with({.dilation = {1, 2}}, {1, 3, 8, 8}, {4, 3, 3, 3})});
  cases.push_back({"2 groups", with({.groups = 2}, {1, 4, 8, 8}, {4, 2, 3, 3})});
  cases.push_back({"256 channels of 3 x 3 taps", with({}, {1, 256, 6, 6}, {4, 256, 3, 3})});
  cases.push_back({"a 300 x 300 image", with({}, {1, 1, 300, 300}, {2, 1, 3, 3})});
  for (auto& [what, g] : cases) {
    SCOPED_TRACE(what);
    const std::vector<float> x(static_cast<size_t>(g.batch * g.in_channels * g.in_pixels()), 1.0f);
    const std::vector<float> w(
        static_cast<size_t>(g.out_channels * g.in_per_group() * g.kernel_h * g.kernel_w), 1.0f);
    Fenced out(g.batch * g.out_channels * g.out_pixels());
    EXPECT_FALSE(ops::conv2d_direct_forward(g, x.data(), w.data(), nullptr, out.data()));
    EXPECT_TRUE(out.untouched());
  }
}
