#include "engine/kernels/conv_depthwise.h"

#include <algorithm>

#include "engine/core/parallel.h"

namespace samba::ops {
namespace {

// Calls f(out_row, in_row, lo, hi) for kernel tap (i, j) on every output row
// whose input row exists: output ow in [lo, hi) pairs input in_row + ow * stride_w.
template <typename F>
void for_each_tap_row(const ConvGeometry& g, int64_t i, int64_t j, F&& f) {
  const ConvParams& p = g.p;
  const int64_t sw = p.stride.w, first = j * p.dilation.w - p.padding.w;
  const int64_t lo = std::min(g.out_w, first >= 0 ? 0 : (-first + sw - 1) / sw);
  const int64_t hi = std::clamp(first >= g.in_w ? 0 : (g.in_w - 1 - first) / sw + 1, lo, g.out_w);
  if (lo >= hi) return;
  for (int64_t oh = 0; oh < g.out_h; ++oh) {
    const int64_t ih = oh * p.stride.h - p.padding.h + i * p.dilation.h;
    if (ih >= 0 && ih < g.in_h) f(oh * g.out_w, ih * g.in_w + first, lo, hi);
  }
}

int64_t plane_grain(const ConvGeometry& g) {
  const int64_t work = g.out_pixels() * g.kernel_h * g.kernel_w;
  return std::max<int64_t>(1, kMinGrain / std::max<int64_t>(work, 1));
}

}  // namespace

template <typename T>
void depthwise_forward(const ConvGeometry& g, const T* x, const T* w, const T* bias, T* out) {
  const int64_t P = g.out_pixels(), HW = g.in_pixels(), taps = g.kernel_h * g.kernel_w;
  const int64_t per_group = g.out_per_group(), sw = g.p.stride.w;
  parallel_for(g.batch * g.out_channels, plane_grain(g), [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      const int64_t o = t % g.out_channels, n = t / g.out_channels;
      const T* xp = x + (n * g.in_channels + o / per_group) * HW;
      T* op = out + t * P;
      std::fill_n(op, P, bias ? bias[o] : T(0));
      for (int64_t i = 0; i < g.kernel_h; ++i)
        for (int64_t j = 0; j < g.kernel_w; ++j) {
          const T wv = w[o * taps + i * g.kernel_w + j];
          for_each_tap_row(g, i, j, [&](int64_t orow, int64_t irow, int64_t lo, int64_t hi) {
            // Output and input never overlap; saying so lets the row vectorize.
            T* __restrict dst = op + orow + lo;
            const T* __restrict src = xp + (irow + lo * sw);
            const int64_t len = hi - lo;
            if (sw == 1) {
              for (int64_t k = 0; k < len; ++k) dst[k] += wv * src[k];
            } else {
              for (int64_t k = 0; k < len; ++k) dst[k] += wv * src[k * sw];
            }
          });
        }
    }
  });
}

// One task per input plane: it gathers from the outputs of its group.
template <typename T>
void depthwise_input_grad(const ConvGeometry& g, const T* grad, const T* w, T* dx) {
  const int64_t P = g.out_pixels(), HW = g.in_pixels(), taps = g.kernel_h * g.kernel_w;
  const int64_t per_group = g.out_per_group(), sw = g.p.stride.w;
  parallel_for(g.batch * g.in_channels, plane_grain(g), [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      const int64_t c = t % g.in_channels, n = t / g.in_channels;
      T* dp = dx + t * HW;
      std::fill_n(dp, HW, T(0));
      for (int64_t o = c * per_group; o < (c + 1) * per_group; ++o) {
        const T* gp = grad + (n * g.out_channels + o) * P;
        for (int64_t i = 0; i < g.kernel_h; ++i)
          for (int64_t j = 0; j < g.kernel_w; ++j) {
            const T wv = w[o * taps + i * g.kernel_w + j];
            for_each_tap_row(g, i, j, [&](int64_t orow, int64_t irow, int64_t lo, int64_t hi) {
              for (int64_t ow = lo; ow < hi; ++ow) dp[irow + ow * sw] += wv * gp[orow + ow];
            });
          }
      }
    }
  });
}

// One task per output channel, summing over the batch in order.
template <typename T>
void depthwise_weight_grad(const ConvGeometry& g, const T* grad, const T* x, T* dw) {
  const int64_t P = g.out_pixels(), HW = g.in_pixels(), taps = g.kernel_h * g.kernel_w;
  const int64_t per_group = g.out_per_group(), sw = g.p.stride.w;
  const int64_t grain = std::max<int64_t>(1, plane_grain(g) / std::max<int64_t>(g.batch, 1));
  parallel_for(g.out_channels, grain, [&](int64_t b, int64_t e) {
    for (int64_t o = b; o < e; ++o)
      for (int64_t i = 0; i < g.kernel_h; ++i)
        for (int64_t j = 0; j < g.kernel_w; ++j) {
          T acc = 0;
          for (int64_t n = 0; n < g.batch; ++n) {
            const T* gp = grad + (n * g.out_channels + o) * P;
            const T* xp = x + (n * g.in_channels + o / per_group) * HW;
            for_each_tap_row(g, i, j, [&](int64_t orow, int64_t irow, int64_t lo, int64_t hi) {
              T row = 0;
              for (int64_t ow = lo; ow < hi; ++ow) row += gp[orow + ow] * xp[irow + ow * sw];
              acc += row;
            });
          }
          dw[o * taps + i * g.kernel_w + j] = acc;
        }
  });
}

template void depthwise_forward<float>(const ConvGeometry&, const float*, const float*,
                                       const float*, float*);
template void depthwise_forward<double>(const ConvGeometry&, const double*, const double*,
                                        const double*, double*);
template void depthwise_input_grad<float>(const ConvGeometry&, const float*, const float*, float*);
template void depthwise_input_grad<double>(const ConvGeometry&, const double*, const double*,
                                           double*);
template void depthwise_weight_grad<float>(const ConvGeometry&, const float*, const float*, float*);
template void depthwise_weight_grad<double>(const ConvGeometry&, const double*, const double*,
                                            double*);

}  // namespace samba::ops
