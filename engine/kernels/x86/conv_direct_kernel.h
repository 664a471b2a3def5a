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

  // dst[0, n) = src[0, n) + b; the tail masked, so nothing past dst + n is
  // written (the output rows are as short as 1 float).
  static void store_row(float* dst, const float* src, int64_t n, V b) {
    int64_t k = 0;
    for (; k + kLanes <= n; k += kLanes) Vec::storeu(dst + k, Vec::add(Vec::loadu(src + k), b));
    if (k < n) Vec::storeu_n(dst + k, Vec::add(Vec::loadu_n(src + k, n - k), b), n - k);
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
            Vec::storeu(dst + v * kLanes, Vec::add(acc[o][v], b));
          else if (n > 0)
            Vec::storeu_n(dst + v * kLanes, Vec::add(acc[o][v], b), n);
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
        store_row(a.out + oc * plane + oh * a.out_w, src + oh * a.pitch, a.out_w, b);
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

  static void image(const DirectConvImage& a, int block) {
    int i = 0;
    ((i++ == block ? DirectConv<Vec>::template image<Bs.vectors, Bs.channels>(a) : void()), ...);
  }

  // Aggregate-initialized: no constructor of the shared struct is emitted
  // with this level's instructions.
  static ConvDirectKernels table(IsaLevel level) {
    return ConvDirectKernels{level,
                             Vec::kLanes,
                             kBlocks,
                             static_cast<int>(sizeof...(Bs)),
                             &image,
                             &DirectConv<Vec>::copy_rows,
                             &DirectConv<Vec>::template weight_grad<GradOB, GradRB>};
  }
};

}  // namespace
}  // namespace samba::ops::detail
