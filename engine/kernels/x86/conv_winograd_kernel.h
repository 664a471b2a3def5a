// The Winograd F(2x2, 3x3) kernel (conv_winograd.h), written once for any
// vector width and included by a level's file, which compiles it with that
// level's flags. Like conv_direct_kernel.h, everything is in an unnamed
// namespace and uses only intrinsics and plain loops.
#pragma once

#include <cstdint>

#include "engine/kernels/conv_winograd.h"
#include "engine/kernels/x86/conv_direct_kernel.h"

namespace samba::ops::detail {
namespace {

// P4, P2, P1: the tiles of a register block against 4, 2 and 1 vectors of
// output channels (P x KV accumulators).
template <class Vec, int P4, int P2, int P1>
struct WinogradConv {
  using V = typename Vec::V;
  static constexpr int64_t kLanes = Vec::kLanes;

  static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

  // The image, channels-last, into the zeroed padded copy: kLanes channel
  // rows of kLanes pixels transposed at a time. False when the image holds
  // an infinity or a NaN (each value times zero is summed: zero for finite
  // values, NaN otherwise).
  static bool to_channels_last(const WinogradImage& a) {
    V probe = Vec::zero();
    // Zeros where the image is not copied: whole rows above and below it,
    // the columns left and right of it in its rows.
    auto zero = [&](int64_t row, int64_t col, int64_t pixels) {
      float* dst = a.padded + (row * a.cols + col) * a.cp;
      for (int64_t i = 0; i < pixels * a.cp; i += kLanes) Vec::storeu(dst + i, Vec::zero());
    };
    zero(0, 0, a.pad_h * a.cols);
    for (int64_t h = 0; h < a.in_h; ++h) {
      zero(a.pad_h + h, 0, a.pad_w);
      zero(a.pad_h + h, a.pad_w + a.in_w, a.cols - a.pad_w - a.in_w);
    }
    zero(a.pad_h + a.in_h, 0, (a.rows - a.pad_h - a.in_h) * a.cols);
    const int64_t plane = a.in_h * a.in_w;
    for (int64_t c0 = 0; c0 < a.in_channels; c0 += kLanes) {
      const int64_t n = min64(kLanes, a.in_channels - c0);
      for (int64_t h = 0; h < a.in_h; ++h) {
        const float* src = a.x + c0 * plane + h * a.in_w;
        float* dst = a.padded + ((h + a.pad_h) * a.cols + a.pad_w) * a.cp + c0;
        for (int64_t w0 = 0; w0 < a.in_w; w0 += kLanes) {
          const int64_t wn = min64(kLanes, a.in_w - w0);
          V r[kLanes];
          for (int64_t i = 0; i < kLanes; ++i)
            r[i] = i >= n         ? Vec::zero()
                   : wn == kLanes ? Vec::loadu(src + i * plane + w0)
                                  : Vec::loadu_n(src + i * plane + w0, wn);
          for (int64_t i = 0; i < kLanes; ++i) probe = Vec::add(probe, Vec::mul(r[i], Vec::zero()));
          Vec::transpose(r);
          for (int64_t q = 0; q < wn; ++q) Vec::storeu(dst + (w0 + q) * a.cp, r[q]);
        }
      }
    }
    float lanes[kLanes];
    Vec::storeu(lanes, probe);
    for (int64_t i = 0; i < kLanes; ++i)
      if (lanes[i] != lanes[i]) return false;
    return true;
  }

  // V = Bᵀ d B for `tiles` tiles from t0: the rows of Bᵀ are (1 0 -1 0),
  // (0 1 1 0), (0 -1 1 0), (0 1 0 -1).
  static void transform_input(const WinogradImage& a, int64_t t0, int64_t tiles) {
    const int64_t pos_step = a.block_tiles * a.cp;
    for (int64_t t = 0; t < tiles; ++t) {
      const int64_t ty = (t0 + t) / a.tiles_w, tx = (t0 + t) % a.tiles_w;
      const float* patch = a.padded + (2 * ty * a.cols + 2 * tx) * a.cp;
      float* dst = a.v + t * a.cp;
      for (int64_t c = 0; c < a.cp; c += kLanes) {
        V s[4][4];
#pragma GCC unroll 4
        for (int j = 0; j < 4; ++j) {
          const V d0 = Vec::loadu(patch + (0 * a.cols + j) * a.cp + c);
          const V d1 = Vec::loadu(patch + (1 * a.cols + j) * a.cp + c);
          const V d2 = Vec::loadu(patch + (2 * a.cols + j) * a.cp + c);
          const V d3 = Vec::loadu(patch + (3 * a.cols + j) * a.cp + c);
          s[0][j] = Vec::sub(d0, d2);
          s[1][j] = Vec::add(d1, d2);
          s[2][j] = Vec::sub(d2, d1);
          s[3][j] = Vec::sub(d1, d3);
        }
#pragma GCC unroll 4
        for (int i = 0; i < 4; ++i) {
          float* row = dst + 4 * i * pos_step + c;
          Vec::storeu(row, Vec::sub(s[i][0], s[i][2]));
          Vec::storeu(row + pos_step, Vec::add(s[i][1], s[i][2]));
          Vec::storeu(row + 2 * pos_step, Vec::sub(s[i][2], s[i][1]));
          Vec::storeu(row + 3 * pos_step, Vec::sub(s[i][1], s[i][3]));
        }
      }
    }
  }

  // m[p][kv] = Σ_c v[p][c] u[c][kv] for P tiles and KV vectors of output
  // channels: each V value broadcast, the U vectors the only loads.
  template <int P, int KV>
  static void block(const float* v, int64_t cp, const float* u, int64_t kp, int64_t channels,
                    float* m) {
    V acc[P][KV];
#pragma GCC unroll 16
    for (int p = 0; p < P; ++p)
#pragma GCC unroll 4
      for (int kv = 0; kv < KV; ++kv) acc[p][kv] = Vec::zero();
    for (int64_t c = 0; c < channels; ++c) {
      V w[KV];
#pragma GCC unroll 4
      for (int kv = 0; kv < KV; ++kv) w[kv] = Vec::loadu(u + c * kp + kv * kLanes);
#pragma GCC unroll 16
      for (int p = 0; p < P; ++p) {
        const V b = Vec::set1(v[p * cp + c]);
#pragma GCC unroll 4
        for (int kv = 0; kv < KV; ++kv) acc[p][kv] = Vec::fmadd(w[kv], b, acc[p][kv]);
      }
    }
#pragma GCC unroll 16
    for (int p = 0; p < P; ++p)
#pragma GCC unroll 4
      for (int kv = 0; kv < KV; ++kv) Vec::storeu(m + p * kp + kv * kLanes, acc[p][kv]);
  }

  // The last `rest` (< P) tiles, with a block of exactly that many.
  template <int P, int KV>
  static void rest_block(int64_t rest, const float* v, int64_t cp, const float* u, int64_t kp,
                         int64_t channels, float* m) {
    if constexpr (P > 0) {
      if (rest == P)
        block<P, KV>(v, cp, u, kp, channels, m);
      else
        rest_block<P - 1, KV>(rest, v, cp, u, kp, channels, m);
    }
  }

  // The tiles in blocks of P, the last one of what is left (16 tiles at P
  // = 3: five blocks of 3 and one of 1, measured 3% faster on the digits
  // net's layer than 3, 3, 3, 3, 2, 2).
  template <int P, int KV>
  static void tiles_block(const WinogradImage& a, const float* v, const float* u, float* m,
                          int64_t tiles) {
    for (int64_t t = 0; t < tiles; t += P) {
      if (t + P <= tiles)
        block<P, KV>(v + t * a.cp, a.cp, u, a.kp, a.in_channels, m + t * a.kp);
      else
        rest_block<P - 1, KV>(tiles - t, v + t * a.cp, a.cp, u, a.kp, a.in_channels, m + t * a.kp);
    }
  }

  // M[pos] = the product of V[pos] and U[pos] for the block's tiles: U's 16
  // positions each stay in L1 while every tile of the block reads them.
  static void products(const WinogradImage& a, int64_t tiles) {
    const int64_t vectors = a.kp / kLanes;
    for (int64_t pos = 0; pos < 16; ++pos) {
      const float* v = a.v + pos * a.block_tiles * a.cp;
      const float* u = a.u + pos * a.in_channels * a.kp;
      float* m = a.m + pos * a.block_tiles * a.kp;
      int64_t kv = 0;
      for (; kv + 4 <= vectors; kv += 4)
        tiles_block<P4, 4>(a, v, u + kv * kLanes, m + kv * kLanes, tiles);
      if (kv + 2 <= vectors) {
        tiles_block<P2, 2>(a, v, u + kv * kLanes, m + kv * kLanes, tiles);
        kv += 2;
      }
      if (kv < vectors) tiles_block<P1, 1>(a, v, u + kv * kLanes, m + kv * kLanes, tiles);
    }
  }

  // The outputs Aᵀ M A of the block's tiles, staged pixel-major (the rows of
  // Aᵀ are (1 1 1 0) and (0 1 -1 -1)); a tile's row or column past the
  // output (odd sizes) is dropped.
  static void transform_output(const WinogradImage& a, int64_t t0, int64_t tiles) {
    const int64_t pos_step = a.block_tiles * a.kp;
    for (int64_t t = 0; t < tiles; ++t) {
      const int64_t ty = (t0 + t) / a.tiles_w, tx = (t0 + t) % a.tiles_w;
      const int64_t oh = 2 * ty, ow = 2 * tx;
      const int64_t rows = min64(2, a.out_h - oh), cols = min64(2, a.out_w - ow);
      const float* src = a.m + t * a.kp;
      float* dst = a.stage + (oh * a.out_w + ow) * a.kp;
      for (int64_t k = 0; k < a.kp; k += kLanes) {
        V s[2][4];
#pragma GCC unroll 4
        for (int j = 0; j < 4; ++j) {
          const V m0 = Vec::loadu(src + (0 + j) * pos_step + k);
          const V m1 = Vec::loadu(src + (4 + j) * pos_step + k);
          const V m2 = Vec::loadu(src + (8 + j) * pos_step + k);
          const V m3 = Vec::loadu(src + (12 + j) * pos_step + k);
          s[0][j] = Vec::add(Vec::add(m0, m1), m2);
          s[1][j] = Vec::sub(Vec::sub(m1, m2), m3);
        }
        for (int64_t r = 0; r < rows; ++r) {
          float* out = dst + r * a.out_w * a.kp + k;
          Vec::storeu(out, Vec::add(Vec::add(s[r][0], s[r][1]), s[r][2]));
          if (cols == 2) Vec::storeu(out + a.kp, Vec::sub(Vec::sub(s[r][1], s[r][2]), s[r][3]));
        }
      }
    }
  }

  // False, with nothing written to the output, when the image holds an
  // infinity or a NaN: the transforms would spread it (a NaN to the whole
  // tile, an infinity minus itself to NaN) to outputs whose taps do not
  // read it.
  static bool image(const WinogradImage& a) {
    if (!to_channels_last(a)) return false;
    const int64_t tiles = a.tiles_h * a.tiles_w;
    for (int64_t t0 = 0; t0 < tiles; t0 += a.block_tiles) {
      const int64_t n = min64(a.block_tiles, tiles - t0);
      transform_input(a, t0, n);
      products(a, n);
      transform_output(a, t0, n);
    }
    if (a.pool)
      DirectConv<Vec>::transpose_pooled(a.stage, a.kp, a.out_h, a.out_w, a.out_channels, a.bias,
                                        a.relu, a.out);
    else
      DirectConv<Vec>::transpose_out(a.stage, a.kp, a.out_h * a.out_w, a.out_channels, a.bias,
                                     a.relu, a.out);
    return true;
  }
};

}  // namespace
}  // namespace samba::ops::detail
