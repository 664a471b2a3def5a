#include "engine/kernels/conv_im2col.h"

#include <Eigen/Core>
#include <algorithm>
#include <type_traits>
#include <vector>

#include "engine/core/dispatch.h"
#include "engine/core/parallel.h"
#include "engine/core/scratch.h"
#include "engine/kernels/conv_depthwise.h"
#include "engine/kernels/conv_direct.h"
#include "engine/kernels/conv_dtype.h"

namespace samba::ops {
namespace {

template <typename T>
using RowMajor = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <typename T>
using MatMap = Eigen::Map<RowMajor<T>, 0, Eigen::OuterStride<>>;
template <typename T>
using ConstMatMap = Eigen::Map<const RowMajor<T>, 0, Eigen::OuterStride<>>;
using Stride = Eigen::OuterStride<>;

// About 10 us of GEMM on one core: the least work worth a task.
constexpr int64_t kTaskFlops = int64_t{1} << 18;
// An im2col tile stays in L2 while the GEMM streams over it.
constexpr int64_t kColumnTileBytes = int64_t{256} << 10;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

int64_t chunk_grain(int64_t flops_per_task) {
  return std::max<int64_t>(1, kTaskFlops / std::max<int64_t>(flops_per_task, 1));
}

// Output pixels per im2col tile for a matrix of `rows` rows: bounded by the
// cache budget, and smaller when `units` independent products are too few to
// keep every thread busy (as long as a tile stays worth a task).
int64_t column_tile(int64_t rows, int64_t cols, size_t elem, int64_t units, int64_t flops_per_col) {
  const int64_t budget = kColumnTileBytes / static_cast<int64_t>(elem) / std::max<int64_t>(rows, 1);
  int64_t tile = std::clamp<int64_t>(budget, std::min<int64_t>(64, cols), cols);
  const int64_t want = 4 * static_cast<int64_t>(current_pool().threads());
  if (units > 0 && units * ceil_div(cols, tile) < want) {
    const int64_t balanced = ceil_div(cols, ceil_div(want, units));
    const int64_t worth = ceil_div(kTaskFlops, std::max<int64_t>(flops_per_col, 1));
    tile = std::min(tile, std::max({balanced, worth, std::min<int64_t>(16, cols)}));
  }
  return tile;
}

// Per-thread scratch that only grows: the run path allocates once per thread
// and shape, not per call. A task body never waits on other tasks (its GEMM
// is single-threaded), so a thread uses slot `which` for one task at a time.
template <typename T>
T* scratch(int which, int64_t elems) {
  thread_local std::vector<T> buf[2];
  std::vector<T>& b = buf[which];
  if (static_cast<int64_t>(b.size()) < elems) b.resize(static_cast<size_t>(elems));
  return b.data();
}

// Images per task when a whole image's output is one column tile: several
// small images (8 x 8 digits: 64 pixels) make one product wide enough for the
// GEMM to run near its peak, as long as there are still tasks for every
// thread and the im2col block stays in L2.
int64_t images_per_task(int64_t images, int64_t pixels, int64_t rows, size_t elem) {
  const int64_t budget = kColumnTileBytes / static_cast<int64_t>(elem) / std::max<int64_t>(rows, 1);
  int64_t per = std::max<int64_t>(1, std::min<int64_t>(budget, 512) / std::max<int64_t>(pixels, 1));
  const int64_t want = 4 * static_cast<int64_t>(current_pool().threads());
  per = std::min(per, std::max<int64_t>(1, images / want));
  return per;
}

// A run of output pixels on one output row, for one im2col row (channel c,
// kernel tap (i, j)). Columns ow in [lo, hi) read input element
// `input + ow * stride_w`; the others read padding.
struct Segment {
  int64_t row;  // im2col row
  int64_t col;  // im2col column of ow = 0 (ow0 is the first one present)
  int64_t ow0, ow1;
  int64_t lo, hi;
  int64_t input;  // input index (channel plane included) of ow = 0; only used in [lo, hi)
};

// Visits the im2col matrix of `channels` input channels, output pixels
// [p0, p0 + len), one segment at a time.
template <typename F>
void for_each_segment(const ConvGeometry& g, int64_t channels, int64_t p0, int64_t len, F&& f) {
  const ConvParams& p = g.p;
  const int64_t H = g.in_h, W = g.in_w, Wo = g.out_w, sw = p.stride.w;
  for (int64_t c = 0; c < channels; ++c)
    for (int64_t i = 0; i < g.kernel_h; ++i)
      for (int64_t j = 0; j < g.kernel_w; ++j) {
        const int64_t first = j * p.dilation.w - p.padding.w;  // input column of ow = 0
        int64_t valid_lo = first >= 0 ? 0 : ceil_div(-first, sw);
        int64_t valid_hi = first >= W ? 0 : (W - 1 - first) / sw + 1;
        Segment s{};
        s.row = (c * g.kernel_h + i) * g.kernel_w + j;
        for (int64_t q = p0, end = p0 + len; q < end;) {
          const int64_t oh = q / Wo;
          s.ow0 = q - oh * Wo;
          s.ow1 = std::min(Wo, s.ow0 + end - q);
          s.col = q - p0 - s.ow0;
          const int64_t ih = oh * p.stride.h - p.padding.h + i * p.dilation.h;
          if (ih >= 0 && ih < H) {
            s.lo = std::clamp(valid_lo, s.ow0, s.ow1);
            s.hi = std::clamp(valid_hi, s.lo, s.ow1);
            s.input = (c * H + ih) * W + first;
          } else {
            s.lo = s.hi = s.ow1;
            s.input = 0;
          }
          f(s);
          q += s.ow1 - s.ow0;
        }
      }
}

// The valid output columns [lo, hi) of kernel column j: those whose input
// column is inside the image (the others read padding).
struct ColumnRange {
  int64_t first;  // input column of ow = 0
  int64_t lo, hi;
};

ColumnRange column_range(const ConvGeometry& g, int64_t j) {
  const int64_t W = g.in_w, sw = g.p.stride.w;
  ColumnRange r;
  r.first = j * g.p.dilation.w - g.p.padding.w;
  r.lo = std::min(g.out_w, r.first >= 0 ? 0 : ceil_div(-r.first, sw));
  r.hi = std::clamp<int64_t>(r.first >= W ? 0 : (W - 1 - r.first) / sw + 1, r.lo, g.out_w);
  return r;
}

// Visits every (im2col row, output row) of a whole image: f(row, oh, ih,
// range) with ih the input row (outside [0, H) for padding rows). No
// division per segment: small images have many short rows.
template <typename F>
void for_each_image_row(const ConvGeometry& g, int64_t channels, F&& f) {
  const ConvParams& p = g.p;
  for (int64_t c = 0; c < channels; ++c)
    for (int64_t i = 0; i < g.kernel_h; ++i)
      for (int64_t j = 0; j < g.kernel_w; ++j) {
        const ColumnRange r = column_range(g, j);
        const int64_t row = (c * g.kernel_h + i) * g.kernel_w + j;
        for (int64_t oh = 0; oh < g.out_h; ++oh) f(c, row, oh, oh * p.stride.h - p.padding.h + i * p.dilation.h, r);
      }
}

// im2col of a whole image (all output pixels), rows of col ld apart.
template <typename T>
void im2col_image(const ConvGeometry& g, const T* x, T* col, int64_t ld) {
  const int64_t H = g.in_h, W = g.in_w, Wo = g.out_w, sw = g.p.stride.w;
  for_each_image_row(g, g.in_per_group(), [&](int64_t c, int64_t row, int64_t oh, int64_t ih, const ColumnRange& r) {
    T* d = col + row * ld + oh * Wo;
    if (ih < 0 || ih >= H) {
      std::fill_n(d, Wo, T(0));
      return;
    }
    const T* src = x + (c * H + ih) * W + r.first;
    std::fill_n(d, r.lo, T(0));
    if (sw == 1)
      std::copy(src + r.lo, src + r.hi, d + r.lo);
    else
      for (int64_t ow = r.lo; ow < r.hi; ++ow) d[ow] = src[ow * sw];
    std::fill(d + r.hi, d + Wo, T(0));
  });
}

// dx (`channels` channels of one image) += the patches of a whole image in
// col (rows ld apart).
template <typename T>
void col2im_image(const ConvGeometry& g, int64_t channels, const T* col, int64_t ld, T* dx) {
  const int64_t H = g.in_h, W = g.in_w, Wo = g.out_w, sw = g.p.stride.w;
  for_each_image_row(g, channels, [&](int64_t c, int64_t row, int64_t oh, int64_t ih, const ColumnRange& r) {
    if (ih < 0 || ih >= H) return;
    const T* s = col + row * ld + oh * Wo;
    T* d = dx + (c * H + ih) * W + r.first;
    for (int64_t ow = r.lo; ow < r.hi; ++ow) d[ow * sw] += s[ow];
  });
}

// col (rows x len, rows ld apart) = the patches of x (channels of one group)
// under output pixels [p0, p0 + len).
template <typename T>
void im2col(const ConvGeometry& g, const T* x, int64_t p0, int64_t len, T* col, int64_t ld) {
  const int64_t sw = g.p.stride.w;
  for_each_segment(g, g.in_per_group(), p0, len, [&](const Segment& s) {
    const int64_t base = s.row * ld + s.col;  // index of ow = 0 (may precede the row)
    for (int64_t ow = s.ow0; ow < s.lo; ++ow) col[base + ow] = T(0);
    if (sw == 1) {
      for (int64_t ow = s.lo; ow < s.hi; ++ow) col[base + ow] = x[s.input + ow];
    } else {
      for (int64_t ow = s.lo; ow < s.hi; ++ow) col[base + ow] = x[s.input + ow * sw];
    }
    for (int64_t ow = s.hi; ow < s.ow1; ++ow) col[base + ow] = T(0);
  });
}

// dx (`channels` channels) += the patches in col (rows ld apart) scattered
// back to the input.
template <typename T>
void col2im(const ConvGeometry& g, int64_t channels, const T* col, int64_t p0, int64_t len, int64_t ld,
            T* dx) {
  const int64_t sw = g.p.stride.w;
  for_each_segment(g, channels, p0, len, [&](const Segment& s) {
    const int64_t base = s.row * ld + s.col;
    for (int64_t ow = s.lo; ow < s.hi; ++ow) dx[s.input + ow * sw] += col[base + ow];
  });
}

// Tasks: (group, run of images, tile of output pixels); a run has several
// images only when each image is a single tile.
template <typename T>
void forward_impl(const ConvGeometry& g, const T* x, const T* w, const T* bias, T* out) {
  const int64_t Cg = g.in_per_group(), Og = g.out_per_group(), K = g.col_rows();
  const int64_t P = g.out_pixels(), HW = g.in_pixels();
  const bool pointwise = g.pointwise();
  const int64_t units = g.batch * g.groups;
  const int64_t tile = column_tile(K, P, sizeof(T), units, 2 * Og * K);
  const int64_t tiles = ceil_div(P, tile);
  const int64_t per = tiles == 1 && !pointwise ? images_per_task(g.batch, P, K, sizeof(T)) : 1;
  const int64_t runs = ceil_div(g.batch, per);
  parallel_for(g.groups * runs * tiles, chunk_grain(2 * Og * K * tile * per), [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      const int64_t p0 = (t % tiles) * tile, len = std::min(tile, P - p0);
      const int64_t grp = (t / tiles) % g.groups, run = t / tiles / g.groups;
      const int64_t n0 = run * per, images = std::min(per, g.batch - n0);
      ConstMatMap<T> wm(w + grp * Og * K, Og, K, Stride(K));
      auto out_block = [&](int64_t n) { return out + (n * g.out_channels + grp * Og) * P + p0; };
      if (images > 1) {
        // col: K x (images * P), image i in columns [i P, (i + 1) P).
        const int64_t cols = images * P;
        T* col = scratch<T>(0, K * cols);
        T* prod = scratch<T>(1, Og * cols);
        for (int64_t i = 0; i < images; ++i)
          im2col_image(g, x + ((n0 + i) * g.in_channels + grp * Cg) * HW, col + i * P, cols);
        MatMap<T> pm(prod, Og, cols, Stride(cols));
        pm.noalias() = wm * ConstMatMap<T>(col, K, cols, Stride(cols));
        for (int64_t i = 0; i < images; ++i) {
          T* og = out_block(n0 + i);
          for (int64_t o = 0; o < Og; ++o) {
            const T* src = prod + o * cols + i * P;
            T* dst = og + o * P;
            if (bias) {
              const T bv = bias[grp * Og + o];
              for (int64_t q = 0; q < P; ++q) dst[q] = src[q] + bv;
            } else {
              std::copy_n(src, P, dst);
            }
          }
        }
        continue;
      }
      const T* xg = x + (n0 * g.in_channels + grp * Cg) * HW;
      T* og = out_block(n0);
      MatMap<T> om(og, Og, len, Stride(P));
      const T* cols = xg + p0;
      int64_t col_stride = HW;
      if (!pointwise) {
        T* col = scratch<T>(0, K * tile);
        im2col(g, xg, p0, len, col, len);
        cols = col;
        col_stride = len;
      }
      ConstMatMap<T> cm(cols, K, len, Stride(col_stride));
      if (bias) {
        for (int64_t o = 0; o < Og; ++o) std::fill_n(og + o * P, len, bias[grp * Og + o]);
        om.noalias() += wm * cm;
      } else {
        om.noalias() = wm * cm;
      }
    }
  });
}

// Copies the output gradient of images [n0, n0 + images), one group, into
// g_run (Og x (images * P)): image i in columns [i P, (i + 1) P).
template <typename T>
void gather_grad(const ConvGeometry& g, const T* grad, int64_t grp, int64_t n0, int64_t images, T* g_run) {
  const int64_t Og = g.out_per_group(), P = g.out_pixels(), cols = images * P;
  for (int64_t i = 0; i < images; ++i)
    for (int64_t o = 0; o < Og; ++o)
      std::copy_n(grad + ((n0 + i) * g.out_channels + grp * Og + o) * P, P, g_run + o * cols + i * P);
}

// Tasks: (image, group, block of input channels), so col2im of different
// tasks never writes the same input element; small images go several to a
// task (all channels), each product then as wide as the run.
template <typename T>
void input_grad_impl(const ConvGeometry& g, const T* grad, const T* w, T* dx) {
  const int64_t Cg = g.in_per_group(), Og = g.out_per_group(), K = g.col_rows();
  const int64_t P = g.out_pixels(), HW = g.in_pixels(), taps = g.kernel_h * g.kernel_w;
  const bool pointwise = g.pointwise();
  const int64_t units = g.batch * g.groups;
  const int64_t channel_flops = 2 * Og * taps * P;
  const int64_t per = !pointwise && column_tile(K, P, sizeof(T), 0, 0) >= P
                          ? images_per_task(g.batch, P, K, sizeof(T))
                          : 1;
  if (per > 1) {
    const int64_t runs = ceil_div(g.batch, per);
    parallel_for(g.groups * runs, chunk_grain(Cg * channel_flops * per), [&](int64_t b, int64_t e) {
      for (int64_t t = b; t < e; ++t) {
        const int64_t grp = t % g.groups, n0 = (t / g.groups) * per, images = std::min(per, g.batch - n0);
        const int64_t cols = images * P;
        T* g_run = scratch<T>(1, Og * cols);
        T* col = scratch<T>(0, K * cols);
        gather_grad(g, grad, grp, n0, images, g_run);
        ConstMatMap<T> wm(w + grp * Og * K, Og, K, Stride(K));
        MatMap<T> cm(col, K, cols, Stride(cols));
        cm.noalias() = wm.transpose() * ConstMatMap<T>(g_run, Og, cols, Stride(cols));
        for (int64_t i = 0; i < images; ++i) {
          T* dxc = dx + ((n0 + i) * g.in_channels + grp * Cg) * HW;
          std::fill_n(dxc, Cg * HW, T(0));
          col2im_image(g, Cg, col + i * P, cols, dxc);
        }
      }
    });
    return;
  }
  const int64_t want = 4 * static_cast<int64_t>(current_pool().threads());
  const int64_t worth = std::max<int64_t>(1, Cg * channel_flops / kTaskFlops);
  const int64_t block =
      ceil_div(Cg, std::clamp<int64_t>(ceil_div(want, units), 1, std::min(Cg, worth)));
  const int64_t blocks = ceil_div(Cg, block);
  const int64_t tile = column_tile(block * taps, P, sizeof(T), 0, 0);
  parallel_for(units * blocks, chunk_grain(block * channel_flops), [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      const int64_t c0 = (t % blocks) * block, cn = std::min(block, Cg - c0), rows = cn * taps;
      const int64_t grp = (t / blocks) % g.groups, n = t / blocks / g.groups;
      T* dxc = dx + (n * g.in_channels + grp * Cg + c0) * HW;
      const T* gg = grad + (n * g.out_channels + grp * Og) * P;
      ConstMatMap<T> wm(w + grp * Og * K, Og, K, Stride(K));
      if (pointwise) {  // P == HW: the column matrix is dx itself
        MatMap<T> dm(dxc, cn, P, Stride(HW));
        dm.noalias() = wm.middleCols(c0, cn).transpose() * ConstMatMap<T>(gg, Og, P, Stride(P));
        continue;
      }
      T* col = scratch<T>(0, rows * tile);
      std::fill_n(dxc, cn * HW, T(0));
      for (int64_t p0 = 0; p0 < P; p0 += tile) {
        const int64_t len = std::min(tile, P - p0);
        MatMap<T> cm(col, rows, len, Stride(len));
        cm.noalias() = wm.middleCols(c0 * taps, rows).transpose() *
                       ConstMatMap<T>(gg + p0, Og, len, Stride(P));
        col2im(g, cn, col, p0, len, len, dxc);
      }
    }
  });
}

// Tasks: (group, part of the images x pixel tiles); parts accumulate into
// their own buffers, summed in a fixed order so results do not depend on
// scheduling. Small images go through in runs, each run one wide product.
template <typename T>
void weight_grad_impl(const ConvGeometry& g, const T* grad, const T* x, T* dw) {
  const int64_t Cg = g.in_per_group(), Og = g.out_per_group(), K = g.col_rows();
  const int64_t P = g.out_pixels(), HW = g.in_pixels();
  const bool pointwise = g.pointwise();
  const int64_t tile = column_tile(K, P, sizeof(T), 0, 0);
  const int64_t tiles = ceil_div(P, tile);
  const int64_t per = tiles == 1 && !pointwise ? images_per_task(g.batch, P, K, sizeof(T)) : 1;
  const int64_t units = g.batch * tiles;
  const int64_t group_flops = 2 * Og * K * P * g.batch;
  const int64_t want = 2 * static_cast<int64_t>(current_pool().threads());
  const int64_t parts = std::clamp<int64_t>(
      ceil_div(want, g.groups), 1, std::max<int64_t>(1, std::min(units, group_flops / kTaskFlops)));
  const int64_t wsize = Og * K;
  // Held across the parallel loop, during which this thread may run other
  // kernels' tasks: a frame's buffer, not the thread's scratch (each part
  // zeroes its sums first).
  ScratchFrame frame;
  T* partial = frame.get<T>(0, static_cast<size_t>((parts - 1) * g.groups * wsize));
  parallel_for(g.groups * parts, chunk_grain(group_flops / parts), [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      const int64_t grp = t / parts, part = t % parts;
      T* acc = part == 0 ? dw + grp * wsize : partial + ((part - 1) * g.groups + grp) * wsize;
      MatMap<T> am(acc, Og, K, Stride(K));
      am.setZero();
      const int64_t u_begin = units * part / parts, u_end = units * (part + 1) / parts;
      if (per > 1) {  // units are images
        for (int64_t n0 = u_begin; n0 < u_end; n0 += per) {
          const int64_t images = std::min(per, u_end - n0), cols = images * P;
          T* g_run = scratch<T>(1, Og * cols);
          T* col = scratch<T>(0, K * cols);
          gather_grad(g, grad, grp, n0, images, g_run);
          for (int64_t i = 0; i < images; ++i)
            im2col_image(g, x + ((n0 + i) * g.in_channels + grp * Cg) * HW, col + i * P, cols);
          am.noalias() += ConstMatMap<T>(g_run, Og, cols, Stride(cols)) *
                          ConstMatMap<T>(col, K, cols, Stride(cols)).transpose();
        }
        continue;
      }
      for (int64_t u = u_begin; u < u_end; ++u) {
        const int64_t n = u / tiles, p0 = (u % tiles) * tile, len = std::min(tile, P - p0);
        ConstMatMap<T> gm(grad + (n * g.out_channels + grp * Og) * P + p0, Og, len, Stride(P));
        const T* xg = x + (n * g.in_channels + grp * Cg) * HW;
        if (pointwise) {
          am.noalias() += gm * ConstMatMap<T>(xg + p0, Cg, len, Stride(HW)).transpose();
        } else {
          T* col = scratch<T>(0, K * tile);
          im2col(g, xg, p0, len, col, len);
          am.noalias() += gm * ConstMatMap<T>(col, K, len, Stride(len)).transpose();
        }
      }
    }
  });
  for (int64_t part = 1; part < parts; ++part)
    for (int64_t grp = 0; grp < g.groups; ++grp) {
      const T* src = partial + ((part - 1) * g.groups + grp) * wsize;
      T* dst = dw + grp * wsize;
      for (int64_t i = 0; i < wsize; ++i) dst[i] += src[i];
    }
}

}  // namespace

void conv2d_forward(const ConvGeometry& g, const Tensor& x, const Tensor& weight,
                    const Tensor& bias, const Tensor& out, OutputTail* tail) {
  if (out.numel() == 0) return;
  in_compute_type("conv2d", {x, weight, bias}, out,
                  [&](auto tag, const std::vector<Tensor>& in, const Tensor& o) {
                    using T = decltype(tag);
                    const T* bias_data = in[2].defined() ? in[2].data<T>() : nullptr;
                    if (is_depthwise(g))
                      return depthwise_forward<T>(g, in[0].data<T>(), in[1].data<T>(), bias_data,
                                                  o.data<T>());
                    if constexpr (std::is_same_v<T, float>)
                      if (conv2d_direct_forward(g, in[0].data<T>(), in[1].data<T>(), bias_data,
                                                o.data<T>(), DirectLayout::Cheapest,
                                                o.raw_data() == out.raw_data() ? tail : nullptr))
                        return;
                    forward_impl<T>(g, in[0].data<T>(), in[1].data<T>(), bias_data, o.data<T>());
                  });
}

void conv2d_input_grad(const ConvGeometry& g, const Tensor& grad, const Tensor& weight,
                       const Tensor& grad_input) {
  if (grad_input.numel() == 0) return;
  in_compute_type("conv2d_backward_input", {grad, weight}, grad_input,
                  [&](auto tag, const std::vector<Tensor>& in, const Tensor& o) {
                    using T = decltype(tag);
                    if (is_depthwise(g))
                      return depthwise_input_grad<T>(g, in[0].data<T>(), in[1].data<T>(),
                                                     o.data<T>());
                    if constexpr (std::is_same_v<T, float>)
                      if (conv2d_direct_input_grad(g, in[0].data<T>(), in[1].data<T>(),
                                                   o.data<T>()))
                        return;
                    input_grad_impl<T>(g, in[0].data<T>(), in[1].data<T>(), o.data<T>());
                  });
}

void conv2d_weight_grad(const ConvGeometry& g, const Tensor& grad, const Tensor& x,
                        const Tensor& grad_weight) {
  in_compute_type("conv2d_backward_weight", {grad, x}, grad_weight,
                  [&](auto tag, const std::vector<Tensor>& in, const Tensor& o) {
                    using T = decltype(tag);
                    if (g.batch == 0) {
                      std::fill_n(o.data<T>(), o.numel(), T(0));
                      return;
                    }
                    if (is_depthwise(g))
                      return depthwise_weight_grad<T>(g, in[0].data<T>(), in[1].data<T>(),
                                                      o.data<T>());
                    if constexpr (std::is_same_v<T, float>)
                      if (conv2d_direct_weight_grad(g, in[0].data<T>(), in[1].data<T>(),
                                                    o.data<T>()))
                        return;
                    weight_grad_impl<T>(g, in[0].data<T>(), in[1].data<T>(), o.data<T>());
                  });
}

void add_channel_bias(const Tensor& out, const Tensor& bias, int64_t batch) {
  if (out.numel() == 0) return;
  const Tensor b = bias.contiguous();
  const int64_t channels = b.numel(), plane = out.numel() / std::max<int64_t>(batch * channels, 1);
  SAMBA_DISPATCH_FLOAT(out.dtype(), "add_channel_bias", [&] {
    using A = acc_t<scalar_t>;
    scalar_t* po = out.data<scalar_t>();
    const scalar_t* pb = b.data<scalar_t>();
    parallel_for(batch * channels, std::max<int64_t>(1, kMinGrain / plane),
                 [&](int64_t s, int64_t e) {
                   for (int64_t i = s; i < e; ++i) {
                     const A v = static_cast<A>(pb[i % channels]);
                     scalar_t* row = po + i * plane;
                     for (int64_t k = 0; k < plane; ++k)
                       row[k] = static_cast<scalar_t>(static_cast<A>(row[k]) + v);
                   }
                 });
  });
}

}  // namespace samba::ops
