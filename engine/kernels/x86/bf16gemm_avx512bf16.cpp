// The AVX512_BF16 level (compiled with the AVX-512 flags plus -mavx512bf16,
// the auto-vectorizer off, see cmake/SambaIsa.cmake): bf16 products by
// vdpbf16ps, which multiplies 16 pairs of bf16 values and adds both products
// to 16 fp32 sums, twice the fp32 FMA's flops per instruction. Operands are
// packed in k-pairs, the instruction's layout: each 32-bit unit of a panel
// holds elements 2p (low half) and 2p + 1 of one row of A or column of B,
// an odd depth padded with a zero. fp32 products keep the AVX-512 level's
// kernels.
#include <immintrin.h>

#include <cstring>

#include "engine/kernels/sgemm_kernels.h"
#include "engine/kernels/x86/bf16_gemm.h"

namespace samba::ops::detail {

namespace {

uint32_t bf16_pair(uint16_t even, uint16_t odd) {
  return static_cast<uint32_t>(even) | (static_cast<uint32_t>(odd) << 16);
}

struct DpBf16Kernel {
  // 8 x 32: 16 accumulators, enough independent sums to cover the
  // instruction's latency at one per cycle, with 8 broadcasts and 2 loads of
  // B per 16 of them.
  static constexpr int64_t kMr = 8, kNr = 32;

  static int64_t depth_units(int64_t k) { return (k + 1) / 2; }

  // Packing reads each operand in one of two ways. Where op(A)'s rows or
  // op(B)'s columns are contiguous in k (A as stored, a linear's weight),
  // each pair is one 32-bit word of a stored row: `count` such rows go to
  // dst[p * stride + r].
  // Groups of 8 rows go 8 pairs at a time through an 8 x 8 transpose of
  // 32-bit units in registers (A's every panel, B's full ones: the bulk of
  // the packing, which one word at a time took about a tenth of a
  // b1024 h2048 product's time); the rest one word at a time.
  static void pack_pair_rows(const uint16_t* x, int64_t ld, int64_t count, int64_t k, uint32_t* dst,
                             int64_t stride) {
    const int64_t full = k / 2, full8 = full / 8 * 8;
    for (int64_t r = 0; r < count; ++r) {
      const uint16_t* src = x + r * ld;
      uint32_t* d = dst + r;
      const int64_t p0 = r < count / 8 * 8 ? full8 : 0;  // the transposes wrote pairs [0, full8)
      for (int64_t p = p0; p < full; ++p) std::memcpy(d + p * stride, src + 2 * p, sizeof(uint32_t));
      if (k % 2) d[full * stride] = src[k - 1];  // the odd depth's zero above it
    }
    for (int64_t r = 0; r + 8 <= count; r += 8)
      for (int64_t p = 0; p < full8; p += 8)
        transpose8x8(x + r * ld + 2 * p, ld, dst + p * stride + r, stride);
  }

  // Pairs [0, 8) of 8 rows `ld` bf16 apart at x, to dst[p * stride + r].
  static void transpose8x8(const uint16_t* x, int64_t ld, uint32_t* dst, int64_t stride) {
    __m256i r[8];
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i * ld));
    // Per 128-bit lane: t holds pairs {0, 1} (lo) or {2, 3} (hi) of two rows
    // interleaved, u pair j of four rows.
    const __m256i t0 = _mm256_unpacklo_epi32(r[0], r[1]), t1 = _mm256_unpackhi_epi32(r[0], r[1]);
    const __m256i t2 = _mm256_unpacklo_epi32(r[2], r[3]), t3 = _mm256_unpackhi_epi32(r[2], r[3]);
    const __m256i t4 = _mm256_unpacklo_epi32(r[4], r[5]), t5 = _mm256_unpackhi_epi32(r[4], r[5]);
    const __m256i t6 = _mm256_unpacklo_epi32(r[6], r[7]), t7 = _mm256_unpackhi_epi32(r[6], r[7]);
    const __m256i u[8] = {_mm256_unpacklo_epi64(t0, t2), _mm256_unpackhi_epi64(t0, t2),
                          _mm256_unpacklo_epi64(t1, t3), _mm256_unpackhi_epi64(t1, t3),
                          _mm256_unpacklo_epi64(t4, t6), _mm256_unpackhi_epi64(t4, t6),
                          _mm256_unpacklo_epi64(t5, t7), _mm256_unpackhi_epi64(t5, t7)};
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      // Rows 0-3 of pair j (and j + 4) from u[j], rows 4-7 from u[j + 4].
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + j * stride),
                          _mm256_permute2x128_si256(u[j], u[j + 4], 0x20));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + (j + 4) * stride),
                          _mm256_permute2x128_si256(u[j], u[j + 4], 0x31));
    }
  }

  // Otherwise (A stored transposed, B as stored) each pair takes element r
  // of two consecutive stored rows, `count` (at most kNr) elements wide:
  // interleaved 32 at a time in registers (8 for A's panels), the rest one by one.
  static void pack_interleaved(const uint16_t* x, int64_t ld, int64_t count, int64_t k,
                               uint32_t* dst, int64_t stride) {
    const int64_t kp = depth_units(k);
    for (int64_t p = 0; p < kp; ++p) {
      const uint16_t* even = x + 2 * p * ld;
      const bool has_odd = 2 * p + 1 < k;
      uint32_t* d = dst + p * stride;
      int64_t r = 0;
      if (has_odd && count == 32) {
        const __m512i e = _mm512_loadu_si512(even), o = _mm512_loadu_si512(even + ld);
        // Per 128-bit lane L: lo holds elements 8L..8L+3, hi 8L+4..8L+7.
        const __m512i lo = _mm512_unpacklo_epi16(e, o), hi = _mm512_unpackhi_epi16(e, o);
        const __m512i l01h01 = _mm512_shuffle_i64x2(lo, hi, 0x44);  // lo0 lo1 hi0 hi1
        const __m512i l23h23 = _mm512_shuffle_i64x2(lo, hi, 0xEE);  // lo2 lo3 hi2 hi3
        _mm512_storeu_si512(d, _mm512_shuffle_i64x2(l01h01, l01h01, 0xD8));
        _mm512_storeu_si512(d + 16, _mm512_shuffle_i64x2(l23h23, l23h23, 0xD8));
        r = 32;
      } else if (has_odd && count == 8) {
        const __m128i e = _mm_loadu_si128(reinterpret_cast<const __m128i*>(even));
        const __m128i o = _mm_loadu_si128(reinterpret_cast<const __m128i*>(even + ld));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(d), _mm_unpacklo_epi16(e, o));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(d + 4), _mm_unpackhi_epi16(e, o));
        r = 8;
      }
      for (; r < count; ++r) d[r] = bf16_pair(even[r], has_odd ? even[ld + r] : uint16_t{0});
    }
  }

  // Lines [i0, i0 + count) of an operand (rows of op(A), columns of
  // op(B)) as panels [pair][line] of `width` lines, the last zero-padded.
  // `in_k` says each line is contiguous in k in memory (a stored row);
  // otherwise the lines run across the stored rows.
  template <int64_t width>
  static void pack_lines(const uint16_t* x, int64_t ld, bool in_k, int64_t k, int64_t i0,
                         int64_t count, float* buf) {
    uint32_t* dst = reinterpret_cast<uint32_t*>(buf);
    const int64_t kp = depth_units(k);
    for (int64_t ir = 0; ir < count; ir += width) {
      const int64_t n = count - ir < width ? count - ir : width;
      uint32_t* d = dst + ir * kp;
      if (in_k)
        pack_pair_rows(x + (i0 + ir) * ld, ld, n, k, d, width);
      else
        pack_interleaved(x + i0 + ir, ld, n, k, d, width);
      for (int64_t p = 0; p < kp; ++p)
        for (int64_t r = n; r < width; ++r) d[p * width + r] = 0;
    }
  }

  static void pack_a(const GemmOperand<uint16_t>& op, const uint16_t* a, int64_t k, int64_t i0,
                     int64_t mc, float* buf) {
    pack_lines<kMr>(a, op.ld, !op.trans, k, i0, mc, buf);
  }

  static void pack_b(const GemmOperand<uint16_t>& op, const uint16_t* b, int64_t k, int64_t j0,
                     int64_t nc, float* buf) {
    pack_lines<kNr>(b, op.ld, op.trans, k, j0, nc, buf);
  }

  static void micro(int64_t kp, const float* pa_buf, const float* pb_buf, float* out) {
    const auto* pa = reinterpret_cast<const int32_t*>(pa_buf);
    const auto* pb = reinterpret_cast<const __m512i*>(pb_buf);
    __m512 acc[kMr][2];
#pragma GCC unroll 8
    for (int r = 0; r < kMr; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
#pragma GCC unroll 2
    for (int64_t p = 0; p < kp; ++p) {
      const __m512bh b0 = (__m512bh)_mm512_load_si512(pb), b1 = (__m512bh)_mm512_load_si512(pb + 1);
#pragma GCC unroll 8
      for (int r = 0; r < kMr; ++r) {
        const __m512bh av = (__m512bh)_mm512_set1_epi32(pa[r]);
        acc[r][0] = _mm512_dpbf16_ps(acc[r][0], av, b0);
        acc[r][1] = _mm512_dpbf16_ps(acc[r][1], av, b1);
      }
      pa += kMr;
      pb += 2;
    }
#pragma GCC unroll 8
    for (int r = 0; r < kMr; ++r) {
      _mm512_store_ps(out + r * kNr, acc[r][0]);
      _mm512_store_ps(out + r * kNr + 16, acc[r][1]);
    }
  }
};

using DpBf16 = Bf16Gemm<DpBf16Kernel>;

}  // namespace

const SgemmKernels& sgemm_kernels_avx512_bf16() {
  static const SgemmKernels k = [] {
    SgemmKernels t = sgemm_kernels_avx512();
    t.level = IsaLevel::Avx512Bf16;
    t.bf16_tile_f32 = &DpBf16::tile<float>;
    t.bf16_tile_bf16 = &DpBf16::tile<uint16_t>;
    return t;
  }();
  return k;
}

}  // namespace samba::ops::detail
