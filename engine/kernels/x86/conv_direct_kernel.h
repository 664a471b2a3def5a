// The direct convolution kernel (conv_direct.h), written once for any vector
// width and included by each level's file (conv_direct_avx2.cpp,
// conv_direct_avx512.cpp), which compiles it with that level's flags. Like
// packed_sgemm.h, everything is in an unnamed namespace and uses only
// intrinsics and plain loops, so no library template is instantiated with a
// level's instructions.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "engine/kernels/conv_direct.h"

namespace samba::ops::detail {
namespace {

template <class Vec>
struct DirectConv {
  using V = typename Vec::V;
  static constexpr int64_t kLanes = Vec::kLanes;

  static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
  static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

  // An output value: the sum plus the bias, then the relu where the output's
  // tail is one (DirectConvImage::relu): max(0, y) is y < 0 ? 0 : y, NaN and
  // -0 kept, as the registry's relu.
  static V finish(V sum, V b, bool relu) {
    const V y = Vec::add(sum, b);
    return relu ? Vec::max(Vec::zero(), y) : y;
  }
  static float finish(float sum, float b, bool relu) {
    const float y = sum + b;
    return relu && y < 0.0f ? 0.0f : y;
  }

  // dst[0, n) = finish(src[0, n) + b); the tail masked, so nothing past dst
  // + n is written (the output rows are as short as 1 float).
  static void store_row(float* dst, const float* src, int64_t n, V b, bool relu) {
    int64_t k = 0;
    for (; k + kLanes <= n; k += kLanes) Vec::storeu(dst + k, finish(Vec::loadu(src + k), b, relu));
    if (k < n) Vec::storeu_n(dst + k, finish(Vec::loadu_n(src + k, n - k), b, relu), n - k);
  }

  // `rows` rows of `len` floats from src (rows src_pitch apart) to dst (rows
  // dst_pitch apart): the rows of small images are a few floats, too short
  // for a call to memcpy each.
  static void copy_rows(const float* src, int64_t src_pitch, float* dst, int64_t dst_pitch,
                        int64_t rows, int64_t len) {
    for (int64_t r = 0; r < rows; ++r, src += src_pitch, dst += dst_pitch) {
      int64_t k = 0;
      for (; k + kLanes <= len; k += kLanes) Vec::storeu(dst + k, Vec::loadu(src + k));
      if (k < len) Vec::storeu_n(dst + k, Vec::loadu_n(src + k, len - k), len - k);
    }
  }

  // Output pixels [q0, q0 + PV lanes) (in the pitch's numbering) of output
  // channels [oc0, oc0 + OB), with w the block's packed weight: stored to
  // the output, or staged at staged + q0 in OB planes staged_plane floats
  // apart where the numbering has the pitch's extra columns.
  template <int PV, int OB>
  static void block(const DirectConvImage& a, const float* w, int64_t q0, int64_t oc0,
                    float* staged, int64_t staged_plane) {
    V acc[OB][PV];
#pragma GCC unroll 32
    for (int o = 0; o < OB; ++o)
#pragma GCC unroll 8
      for (int v = 0; v < PV; ++v) acc[o][v] = Vec::zero();
    const int64_t kw = a.kernel_w, row_taps = kw * OB;
    for (int64_t c = 0; c < a.in_channels; ++c) {
      const float* xc = a.input + c * a.channel_step + q0;
      const float* wc = w + c * a.kernel_h * row_taps;
      for (int64_t i = 0; i < a.kernel_h; ++i) {
        const float* xr = xc + i * a.pitch;
        const float* wr = wc + i * row_taps;
        for (int64_t j = 0; j < kw; ++j, xr += a.column_step) {
          V in[PV];
#pragma GCC unroll 8
          for (int v = 0; v < PV; ++v) {
            in[v] = Vec::loadu(xr + v * kLanes);
            // Held in a register: folded into each FMA instead, the unaligned
            // load (split across cache lines) would run once per channel.
            asm("" : "+v"(in[v]));
          }
          const float* wt = wr + j * OB;
#pragma GCC unroll 32
          for (int o = 0; o < OB; ++o) {
            const V wv = Vec::set1(wt[o]);
#pragma GCC unroll 8
            for (int v = 0; v < PV; ++v) acc[o][v] = Vec::fmadd(in[v], wv, acc[o][v]);
          }
        }
      }
    }
    if (a.pitch == a.out_w) {  // numbered as stored: straight to the output
      const int64_t plane = a.out_h * a.out_w;
      for (int o = 0; o < OB && oc0 + o < a.out_channels; ++o) {
        const V b = Vec::set1(a.bias ? a.bias[oc0 + o] : 0.0f);
        float* dst = a.out + (oc0 + o) * plane + q0;
#pragma GCC unroll 8
        for (int v = 0; v < PV; ++v) {
          const int64_t n = plane - q0 - v * kLanes;
          if (n >= kLanes)
            Vec::storeu(dst + v * kLanes, finish(acc[o][v], b, a.relu));
          else if (n > 0)
            Vec::storeu_n(dst + v * kLanes, finish(acc[o][v], b, a.relu), n);
        }
      }
      return;
    }
#pragma GCC unroll 32
    for (int o = 0; o < OB; ++o)
#pragma GCC unroll 8
      for (int v = 0; v < PV; ++v) Vec::storeu(staged + o * staged_plane + v * kLanes, acc[o][v]);
  }

  // In the padded planes' numbering, every block of the image is staged
  // first, then copied to the output rows with the bias: read right after
  // its stores, the unaligned row parts would wait for them to reach the
  // cache.
  template <int PV, int OB>
  static void image(const DirectConvImage& a) {
    constexpr int64_t chunk = PV * kLanes;
    const int64_t pixels = a.out_h * a.pitch, staged_plane = (pixels + chunk - 1) / chunk * chunk;
    const int64_t block_weight = a.in_channels * a.kernel_h * a.kernel_w * OB;
    const bool direct = a.pitch == a.out_w;
    for (int64_t blk = a.block_begin; blk < a.block_end; ++blk) {
      float* staged = direct ? nullptr : a.staged + (blk - a.block_begin) * OB * staged_plane;
      for (int64_t q0 = 0; q0 < pixels; q0 += chunk)
        block<PV, OB>(a, a.weight + blk * block_weight, q0, blk * OB,
                      direct ? nullptr : staged + q0, staged_plane);
    }
    if (direct) return;
    const int64_t oc_end = min64(a.block_end * OB, a.out_channels), plane = a.out_h * a.out_w;
    for (int64_t oc = a.block_begin * OB; oc < oc_end; ++oc) {
      const float* src = a.staged + (oc - a.block_begin * OB) * staged_plane;
      const V b = Vec::set1(a.bias ? a.bias[oc] : 0.0f);
      for (int64_t oh = 0; oh < a.out_h; ++oh)
        store_row(a.out + oc * plane + oh * a.out_w, src + oh * a.pitch, a.out_w, b, a.relu);
    }
  }

  // acc[p] += the taps of one kernel position over the n input channels
  // (x and w stepping by x_step and w_step), for the block's pixels [S, P
  // - E): the pixels whose tap falls on the padding are left out here, so
  // the choice of S and E is made once per kernel position, not per tap.
  template <int P, int CV, int S, int E>
  [[gnu::always_inline]] static inline void lanes_taps(V (&acc)[P][CV], const float* x,
                                                       int64_t x_step, const float* w,
                                                       int64_t w_step, int64_t n) {
    for (int64_t c = 0; c < n; ++c, x += x_step, w += w_step) {
      V wv[CV];
#pragma GCC unroll 4
      for (int v = 0; v < CV; ++v) wv[v] = Vec::loadu(w + v * kLanes);
#pragma GCC unroll 32
      for (int p = S; p < P - E; ++p) {
        const V xv = Vec::set1(x[p]);
#pragma GCC unroll 4
        for (int v = 0; v < CV; ++v) acc[p][v] = Vec::fmadd(wv[v], xv, acc[p][v]);
      }
    }
  }

  // Channel-lanes block (DirectConvBlock): output pixels [q0, q0 + P) by
  // the CV vectors of output channels of the block's weight w, stored
  // pixel-major to stage. Each input value is broadcast once per tap (on
  // AVX-512 folded into the FMA); the weight vectors are the only loads.
  // Only the kernel rows [i_lo, i_hi) reach the input for the block's
  // output rows; where the block is within one output row, `col` is its
  // first pixel's column, and a first or last pixel whose tap falls on the
  // padding columns is left out of that kernel column's products (-1: none
  // left out). The taps are summed by kernel position, then input channel.
  template <int P, int CV>
  static void lanes_block(const DirectConvImage& a, const float* w, const float* x, float* stage,
                          int64_t i_lo, int64_t i_hi, int64_t col) {
    constexpr int64_t cb = CV * kLanes;
    V acc[P][CV];
#pragma GCC unroll 32
    for (int p = 0; p < P; ++p)
#pragma GCC unroll 4
      for (int v = 0; v < CV; ++v) acc[p][v] = Vec::zero();
    const int64_t w_step = a.kernel_h * a.kernel_w * cb;
    for (int64_t i = i_lo; i < i_hi; ++i)
      for (int64_t j = 0; j < a.kernel_w; ++j) {
        // The block's pixels [first, P - last) read inside the input at (i, j).
        int64_t first = 0, last = 0;
        if (col >= 0) {
          first = a.pad_w - j - col;
          last = col + P + j - a.pad_w - a.in_w;
          if (first >= P - last) continue;
        }
        const float* xt = x + i * a.pitch + j * a.column_step;
        const float* wt = w + (i * a.kernel_w + j) * cb;
        const int64_t n = a.in_channels, x_step = a.channel_step;
        // One pixel off either end covers the 8 x 8 images' padding of 1; a
        // wider padding computes its other padded products as zeros.
        switch ((first > 0 ? 1 : 0) + (last > 0 ? 2 : 0)) {
          case 0:
            lanes_taps<P, CV, 0, 0>(acc, xt, x_step, wt, w_step, n);
            break;
          case 1:
            lanes_taps<P, CV, 1, 0>(acc, xt, x_step, wt, w_step, n);
            break;
          case 2:
            lanes_taps<P, CV, 0, 1>(acc, xt, x_step, wt, w_step, n);
            break;
          default:
            lanes_taps<P, CV, 1, 1>(acc, xt, x_step, wt, w_step, n);
        }
      }
#pragma GCC unroll 32
    for (int p = 0; p < P; ++p)
#pragma GCC unroll 4
      for (int v = 0; v < CV; ++v) Vec::storeu(stage + p * cb + v * kLanes, acc[p][v]);
  }

  // out[o][q] = finish(stage[q][o] + bias[o]) for the first n of the cb
  // channels, q < pixels; out's planes are pixels floats apart.
  static void transpose_out(const float* stage, int64_t cb, int64_t pixels, int64_t n,
                            const float* bias, bool relu, float* out) {
    for (int64_t o0 = 0; o0 < n; o0 += kLanes) {
      const int64_t rows = min64(kLanes, n - o0);
      int64_t q = 0;
      for (; q + kLanes <= pixels; q += kLanes) {
        V r[kLanes];
#pragma GCC unroll 16
        for (int p = 0; p < kLanes; ++p) r[p] = Vec::loadu(stage + (q + p) * cb + o0);
        Vec::transpose(r);
        for (int64_t o = 0; o < rows; ++o)
          Vec::storeu(out + (o0 + o) * pixels + q,
                      finish(r[o], Vec::set1(bias ? bias[o0 + o] : 0.0f), relu));
      }
      for (; q < pixels; ++q)
        for (int64_t o = 0; o < rows; ++o)
          out[(o0 + o) * pixels + q] =
              finish(stage[q * cb + o0 + o], bias ? bias[o0 + o] : 0.0f, relu);
    }
  }

  // out[o][w] = the 2x2 max pooling, stride 2, of finish(stage[q][o] +
  // bias[o]) over the out_h x out_w pixels q, for the first n of the cb
  // channels: window w's four values in window order, picked as
  // max_pool_2x2 picks them (its first maximum, its last NaN). out's planes
  // are (out_h / 2) * (out_w / 2) floats apart. The windows are pooled on
  // the pixel-major rows, channels in the lanes, and only the pooled pixels
  // are transposed: a quarter of transpose_out's shuffles.
  static void transpose_pooled(const float* stage, int64_t cb, int64_t out_h, int64_t out_w,
                               int64_t n, const float* bias, bool relu, float* out) {
    const int64_t pw = out_w / 2, pooled = out_h / 2 * pw;
    for (int64_t o0 = 0; o0 < n; o0 += kLanes) {
      const int64_t rows = min64(kLanes, n - o0);
      const V b = !bias ? Vec::zero()
                  : rows == kLanes ? Vec::loadu(bias + o0)
                                   : Vec::loadu_n(bias + o0, rows);
      // The pick of a window row's two values, from s.
      auto pair = [&](const float* s) {
        return Vec::pick(finish(Vec::loadu(s), b, relu), finish(Vec::loadu(s + cb), b, relu));
      };
      auto window = [&](int64_t w) {
        const float* s = stage + ((w / pw) * 2 * out_w + (w % pw) * 2) * cb + o0;
        return Vec::pick(pair(s), pair(s + out_w * cb));
      };
      int64_t w = 0;
      for (; w + kLanes <= pooled; w += kLanes) {
        V r[kLanes];
#pragma GCC unroll 16
        for (int i = 0; i < kLanes; ++i) r[i] = window(w + i);
        Vec::transpose(r);
        for (int64_t o = 0; o < rows; ++o) Vec::storeu(out + (o0 + o) * pooled + w, r[o]);
      }
      for (; w < pooled; ++w) {
        float v[kLanes];
        Vec::storeu(v, window(w));
        for (int64_t o = 0; o < rows; ++o) out[(o0 + o) * pooled + w] = v[o];
      }
    }
  }

  // The channel-lanes image: per channel block, every pixel block, then the
  // staged pixel-major block transposed to the channel planes with the
  // bias (or pooled: DirectConvImage::pool). In the column copies (pitch ==
  // out_w) a block is any run of
  // pixels, in the padded planes a run within an output row; the last one
  // moves back over the others, recomputing a few, so one instantiation
  // serves any image of at least P pixels (P columns).
  template <int P, int CV>
  static void lanes_image(const DirectConvImage& a) {
    constexpr int64_t cb = CV * kLanes;
    const int64_t pixels = a.out_h * a.out_w;
    const bool flat = a.pitch == a.out_w;
    const int64_t rows = flat ? 1 : a.out_h, run = flat ? pixels : a.out_w;
    for (int64_t blk = a.block_begin; blk < a.block_end; ++blk) {
      const float* w = a.weight + blk * a.in_channels * a.kernel_h * a.kernel_w * cb;
      for (int64_t row = 0; row < rows; ++row)
        for (int64_t q0 = 0; q0 < run; q0 += P) {
          const int64_t q = min64(q0, run - P);
          // The output rows [oh0, oh1] the block spans read the input at
          // kernel rows [pad_h - oh1, in_h + pad_h - oh0).
          const int64_t oh0 = flat ? q / a.out_w : row, oh1 = flat ? (q + P - 1) / a.out_w : row;
          const int64_t i_lo = max64(0, a.pad_h - oh1);
          const int64_t i_hi = min64(a.kernel_h, a.in_h + a.pad_h - oh0);
          const int64_t col = oh0 == oh1 ? (flat ? q - oh0 * a.out_w : q) : -1;
          lanes_block<P, CV>(a, w, a.input + row * a.pitch + q, a.staged + (row * run + q) * cb,
                             i_lo, i_hi, col);
        }
      const int64_t oc0 = blk * cb, n = min64(cb, a.out_channels - oc0);
      const float* bias = a.bias ? a.bias + oc0 : nullptr;
      if (a.pool)
        transpose_pooled(a.staged, cb, a.out_h, a.out_w, n, bias, a.relu,
                         a.out + oc0 * (a.out_h / 2) * (a.out_w / 2));
      else
        transpose_out(a.staged, cb, pixels, n, bias, a.relu, a.out + oc0 * pixels);
    }
  }

  // DirectWeightGradRun with an OB x RB block of (output channel, weight
  // row) accumulators. Blocks at the edges repeat the last row and drop its
  // sums, so every block runs the same registers.
  template <int OB, int RB>
  static void weight_grad(const DirectWeightGradRun& a) {
    const int64_t full = a.pixels / kLanes * kLanes, tail = a.pixels - full;
    for (int64_t o0 = 0; o0 < a.out_channels; o0 += OB) {
      int64_t grad_row[OB];
      for (int o = 0; o < OB; ++o) grad_row[o] = min64(o0 + o, a.out_channels - 1) * a.pixels;
      for (int64_t r0 = 0; r0 < a.rows; r0 += RB) {
        int64_t input_row[RB];
        for (int r = 0; r < RB; ++r) input_row[r] = a.row_offsets[min64(r0 + r, a.rows - 1)];
        V acc[OB][RB];
#pragma GCC unroll 8
        for (int o = 0; o < OB; ++o)
#pragma GCC unroll 8
          for (int r = 0; r < RB; ++r) acc[o][r] = Vec::zero();
        auto step = [&](const float* g, const float* x, int64_t n) {
          V gv[OB];
#pragma GCC unroll 8
          for (int o = 0; o < OB; ++o) {
            gv[o] = n == kLanes ? Vec::loadu(g + grad_row[o]) : Vec::loadu_n(g + grad_row[o], n);
            asm("" : "+v"(gv[o]));  // loaded once, not folded into each FMA
          }
#pragma GCC unroll 8
          for (int r = 0; r < RB; ++r) {
            V xv = n == kLanes ? Vec::loadu(x + input_row[r]) : Vec::loadu_n(x + input_row[r], n);
            asm("" : "+v"(xv));
#pragma GCC unroll 8
            for (int o = 0; o < OB; ++o) acc[o][r] = Vec::fmadd(gv[o], xv, acc[o][r]);
          }
        };
        // The masked tails in a loop of their own: between the full
        // vectors of consecutive images they would push the accumulators
        // out of the registers.
        const int64_t grad_step = a.out_channels * a.pixels;
        for (int64_t n = 0; n < a.images; ++n)
          for (int64_t q = 0; q < full; q += kLanes)
            step(a.grad + n * grad_step + q, a.input + n * a.image_step + q, kLanes);
        if (tail)
          for (int64_t n = 0; n < a.images; ++n)
            step(a.grad + n * grad_step + full, a.input + n * a.image_step + full, tail);
        for (int o = 0; o < OB && o0 + o < a.out_channels; ++o)
          for (int r = 0; r < RB && r0 + r < a.rows; ++r)
            a.dw[(o0 + o) * a.rows + r0 + r] += Vec::hsum(acc[o][r]);
      }
    }
  }
};

// A level's table: the kernel instantiated for each register block Bs, the
// weight gradient for a GradOB x GradRB block.
template <class Vec, int GradOB, int GradRB, DirectConvBlock... Bs>
struct DirectConvLevel {
  static constexpr DirectConvBlock kBlocks[] = {Bs...};

  template <DirectConvBlock B>
  static void run(const DirectConvImage& a) {
    if constexpr (B.channel_lanes)
      DirectConv<Vec>::template lanes_image<B.vectors, B.channels / Vec::kLanes>(a);
    else
      DirectConv<Vec>::template image<B.vectors, B.channels>(a);
  }

  static void image(const DirectConvImage& a, int block) {
    int i = 0;
    ((i++ == block ? run<Bs>(a) : void()), ...);
  }

  // Aggregate-initialized: no constructor of the shared struct is emitted
  // with this level's instructions. `winograd`: the level's Winograd kernel,
  // if it has one.
  static ConvDirectKernels table(IsaLevel level, bool (*winograd)(const WinogradImage&) = nullptr) {
    return ConvDirectKernels{level,
                             Vec::kLanes,
                             kBlocks,
                             static_cast<int>(sizeof...(Bs)),
                             &image,
                             &DirectConv<Vec>::copy_rows,
                             &DirectConv<Vec>::template weight_grad<GradOB, GradRB>,
                             winograd};
  }
};

}  // namespace
}  // namespace samba::ops::detail
