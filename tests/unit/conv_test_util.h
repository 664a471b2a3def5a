// What the convolution kernel tests share: a shape of the sweeps, its
// geometry, random inputs, every product of a convolution (for sums in
// double), and output buffers fenced by guard values.
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "engine/kernels/conv_geometry.h"

namespace samba::testing {

// A convolution of the sweep: x (batch, in, side_h, side_w), weight (out,
// in, kernel_h, kernel_w), unit stride, symmetric padding.
struct Shape {
  int64_t batch, in, out, h, w, kh, kw, pad;
  bool bias;
};

inline std::string shape_str(const Shape& s) {
  return fmt::format("x [{}, {}, {}, {}] w [{}, {}, {}, {}] pad {}{}", s.batch, s.in, s.h, s.w,
                     s.out, s.in, s.kh, s.kw, s.pad, s.bias ? " bias" : "");
}

inline ops::ConvGeometry geometry(const Shape& s) {
  ops::ConvParams p;
  p.padding = {s.pad, s.pad};
  return ops::conv_geometry("conv2d", {s.batch, s.in, s.h, s.w}, {s.out, s.in, s.kh, s.kw}, p);
}

inline std::vector<float> random_floats(int64_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& f : v) f = u(gen);
  return v;
}

// Calls f(x_index, w_index, out_index) for every product of the convolution.
template <typename F>
void for_each_product(const ops::ConvGeometry& g, F f) {
  const int64_t ph = g.p.padding.h, pw = g.p.padding.w;
  for (int64_t n = 0; n < g.batch; ++n)
    for (int64_t o = 0; o < g.out_channels; ++o)
      for (int64_t oh = 0; oh < g.out_h; ++oh)
        for (int64_t ow = 0; ow < g.out_w; ++ow)
          for (int64_t c = 0; c < g.in_channels; ++c)
            for (int64_t i = 0; i < g.kernel_h; ++i)
              for (int64_t j = 0; j < g.kernel_w; ++j) {
                const int64_t ih = oh - ph + i, iw = ow - pw + j;
                if (ih < 0 || ih >= g.in_h || iw < 0 || iw >= g.in_w) continue;
                f(((n * g.in_channels + c) * g.in_h + ih) * g.in_w + iw,
                  ((o * g.in_channels + c) * g.kernel_h + i) * g.kernel_w + j,
                  ((n * g.out_channels + o) * g.out_h + oh) * g.out_w + ow);
              }
}

// A buffer of n floats with kGuard sentinel floats on each side.
constexpr int64_t kGuard = 64;
constexpr float kSentinel = -12345.0f;
struct Fenced {
  std::vector<float> buf;
  explicit Fenced(int64_t n) : buf(static_cast<size_t>(n + 2 * kGuard), kSentinel) {}
  float* data() { return buf.data() + kGuard; }
  int64_t size() const { return static_cast<int64_t>(buf.size()) - 2 * kGuard; }
  // What a kernel that `ran` must have left: `want` inside, the guards
  // intact; or everything untouched when it declined.
  void expect_written(bool ran, const std::vector<double>& want) const {
    if (!ran) {
      EXPECT_TRUE(untouched());
      return;
    }
    expect_guards_intact();
    expect_near(want);
  }
  bool untouched() const {
    return std::all_of(buf.begin(), buf.end(), [](float v) { return v == kSentinel; });
  }
  void expect_guards_intact() const {
    for (int64_t k = 0; k < kGuard; ++k) {
      EXPECT_EQ(buf[static_cast<size_t>(k)], kSentinel)
          << "written " << kGuard - k << " floats before the output";
      EXPECT_EQ(buf[buf.size() - 1 - static_cast<size_t>(k)], kSentinel)
          << "written " << kGuard - k << " floats past the output";
    }
  }
  void expect_near(const std::vector<double>& want) const {
    ASSERT_EQ(static_cast<int64_t>(want.size()), size());
    int64_t reported = 0;
    for (int64_t k = 0; k < size() && reported < 5; ++k) {
      const double got = buf[static_cast<size_t>(k + kGuard)];
      if (std::abs(got - want[k]) > 1e-4 * (1.0 + std::abs(want[k]))) {
        ADD_FAILURE() << "element " << k << ": got " << got << ", want " << want[k];
        ++reported;
      }
    }
  }
};

// conv2d of x with w (+ bias when not null), summed in double.
inline std::vector<double> forward_sums(const ops::ConvGeometry& g, const std::vector<float>& x,
                                        const std::vector<float>& w, const float* bias) {
  std::vector<double> out(static_cast<size_t>(g.batch * g.out_channels * g.out_pixels()), 0.0);
  for_each_product(g, [&](int64_t xi, int64_t wi, int64_t oi) {
    out[oi] += static_cast<double>(x[xi]) * w[wi];
  });
  if (bias)
    for (size_t i = 0; i < out.size(); ++i) out[i] += bias[(i / g.out_pixels()) % g.out_channels];
  return out;
}

}  // namespace samba::testing
