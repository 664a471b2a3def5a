// The AVX-512 level's direct convolution (conv_direct.h): 16 output pixels
// per vector, masked row tails. The register blocks keep 16 to 24
// accumulators of the 32 registers (one FMA per cycle of 4 cycles' latency
// needs at least 4); the broadcast weights fold into the FMAs.
#include <immintrin.h>

#include "engine/kernels/x86/conv_direct_kernel.h"

namespace samba::ops::detail {

namespace {

struct ConvVec512 {
  using V = __m512;
  static constexpr int64_t kLanes = 16;
  static V zero() { return _mm512_setzero_ps(); }
  static V set1(float x) { return _mm512_set1_ps(x); }
  static V loadu(const float* p) { return _mm512_loadu_ps(p); }
  static void storeu(float* p, V v) { _mm512_storeu_ps(p, v); }
  static V add(V a, V b) { return _mm512_add_ps(a, b); }
  // a > b ? a : b, so b where either is NaN.
  static V max(V a, V b) { return _mm512_max_ps(a, b); }
  // 2x2 max pooling's rule: `later` where it is larger or NaN, else `earlier`.
  static V pick(V earlier, V later) {
    const __mmask16 take = _mm512_cmp_ps_mask(later, earlier, _CMP_GT_OQ) |
                           _mm512_cmp_ps_mask(later, later, _CMP_UNORD_Q);
    return _mm512_mask_blend_ps(take, earlier, later);
  }
  static V fmadd(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  // The first n (1 to 15) lanes; nothing past them is read or written.
  static __mmask16 first(int64_t n) { return static_cast<__mmask16>((1u << n) - 1u); }
  static V loadu_n(const float* p, int64_t n) { return _mm512_maskz_loadu_ps(first(n), p); }
  static void storeu_n(float* p, V v, int64_t n) { _mm512_mask_storeu_ps(p, first(n), v); }
  // r[i][j] becomes r[j][i].
  static void transpose(V r[16]) {
    V t[16];
    for (int k = 0; k < 8; ++k) {
      t[2 * k] = _mm512_unpacklo_ps(r[2 * k], r[2 * k + 1]);
      t[2 * k + 1] = _mm512_unpackhi_ps(r[2 * k], r[2 * k + 1]);
    }
    for (int k = 0; k < 4; ++k) {
      r[4 * k] = _mm512_shuffle_ps(t[4 * k], t[4 * k + 2], 0x44);
      r[4 * k + 1] = _mm512_shuffle_ps(t[4 * k], t[4 * k + 2], 0xEE);
      r[4 * k + 2] = _mm512_shuffle_ps(t[4 * k + 1], t[4 * k + 3], 0x44);
      r[4 * k + 3] = _mm512_shuffle_ps(t[4 * k + 1], t[4 * k + 3], 0xEE);
    }
    for (int h = 0; h < 16; h += 8)
      for (int m = 0; m < 4; ++m) {
        t[h + m] = _mm512_shuffle_f32x4(r[h + m], r[h + 4 + m], 0x88);
        t[h + 4 + m] = _mm512_shuffle_f32x4(r[h + m], r[h + 4 + m], 0xDD);
      }
    for (int m = 0; m < 8; ++m) {
      r[m] = _mm512_shuffle_f32x4(t[m], t[8 + m], 0x88);
      r[8 + m] = _mm512_shuffle_f32x4(t[m], t[8 + m], 0xDD);
    }
  }
  static float hsum(V v) { return _mm512_reduce_add_ps(v); }
};

// The channel-lanes blocks: 8 or 12 pixels by 2 vectors of channels, 8, 16
// or 24 by 1 (8 pixels, the rows of 8 x 8 images, skip the padding's taps:
// conv_direct_kernel.h).
// The weight gradient: 4 x 6 accumulators, 4 gradient vectors and 1 input.
using Level = DirectConvLevel<ConvVec512, 4, 6, DirectConvBlock{1, 16}, DirectConvBlock{2, 8},
                              DirectConvBlock{2, 12}, DirectConvBlock{3, 8}, DirectConvBlock{4, 4},
                              DirectConvBlock{4, 6}, DirectConvBlock{5, 4}, DirectConvBlock{6, 4},
                              DirectConvBlock{8, 32, true}, DirectConvBlock{12, 32, true},
                              DirectConvBlock{8, 16, true}, DirectConvBlock{16, 16, true},
                              DirectConvBlock{24, 16, true}>;

}  // namespace

const ConvDirectKernels& conv_direct_kernels_avx512() {
  static const ConvDirectKernels k = Level::table(IsaLevel::Avx512);
  return k;
}

}  // namespace samba::ops::detail
