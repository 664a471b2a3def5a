// The AVX512_BF16 level (compiled with the AVX-512 flags plus -mavx512bf16,
// the auto-vectorizer off, see cmake/SambaIsa.cmake): bf16 products by
// vdpbf16ps, which multiplies 16 pairs of bf16 values and adds both products
// to 16 fp32 sums, twice the fp32 FMA's flops per instruction. Operands are
// packed in k-pairs, the instruction's layout: each 32-bit unit of a panel
// holds elements 2p (low half) and 2p + 1 of one row of A or column of B,
// an odd depth padded with a zero. fp32 products keep the AVX-512 level's
// kernels.
#include <immintrin.h>

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

  // Elements 2p and 2p + 1 of row i of op(X) (column i of op(B) read as
  // its transpose), the second zero past an odd depth.
  static uint32_t pair_at(const GemmOperand<uint16_t>& op, const uint16_t* x, int64_t i, int64_t p,
                          int64_t k) {
    if (!op.trans) {
      const uint16_t* row = x + i * op.ld + 2 * p;
      if (2 * p + 1 < k) {
        uint32_t u;
        std::memcpy(&u, row, sizeof u);
        return u;
      }
      return bf16_pair(row[0], 0);
    }
    return bf16_pair(x[2 * p * op.ld + i], 2 * p + 1 < k ? x[(2 * p + 1) * op.ld + i] : uint16_t{0});
  }

  // Panels [pair][r] of kMr rows of op(A).
  static void pack_a(const GemmOperand<uint16_t>& op, const uint16_t* a, int64_t k, int64_t i0,
                     int64_t mc, float* buf) {
    uint32_t* dst = reinterpret_cast<uint32_t*>(buf);
    const int64_t kp = depth_units(k);
    for (int64_t ir = 0; ir < mc; ir += kMr) {
      const int64_t mr = mc - ir < kMr ? mc - ir : kMr;
      uint32_t* d = dst + ir * kp;
      for (int64_t p = 0; p < kp; ++p) {
        for (int64_t r = 0; r < mr; ++r) d[p * kMr + r] = pair_at(op, a, i0 + ir + r, p, k);
        for (int64_t r = mr; r < kMr; ++r) d[p * kMr + r] = 0;
      }
    }
  }

  // Panels [pair][j] of kNr columns of op(B). A transposed B (a linear's
  // weight) has each pair contiguous in a stored row; a row-major one
  // interleaves two stored rows, 32 columns at a time in registers.
  static void pack_b(const GemmOperand<uint16_t>& op, const uint16_t* b, int64_t k, int64_t j0,
                     int64_t nc, float* buf) {
    uint32_t* dst = reinterpret_cast<uint32_t*>(buf);
    const int64_t kp = depth_units(k);
    const GemmOperand<uint16_t> cols{op.data, op.ld, !op.trans};  // columns of op(B) as rows
    for (int64_t jr = 0; jr < nc; jr += kNr) {
      const int64_t nr = nc - jr < kNr ? nc - jr : kNr;
      uint32_t* d = dst + jr * kp;
      if (op.trans) {
        for (int64_t j = 0; j < nr; ++j)
          for (int64_t p = 0; p < kp; ++p) d[p * kNr + j] = pair_at(cols, b, j0 + jr + j, p, k);
      } else {
        for (int64_t p = 0; p < kp; ++p) {
          int64_t j = 0;
          if (nr == kNr && 2 * p + 1 < k) {
            const __m512i even = _mm512_loadu_si512(b + 2 * p * op.ld + j0 + jr);
            const __m512i odd = _mm512_loadu_si512(b + (2 * p + 1) * op.ld + j0 + jr);
            // Per 128-bit lane L: lo holds columns 8L..8L+3, hi 8L+4..8L+7.
            const __m512i lo = _mm512_unpacklo_epi16(even, odd);
            const __m512i hi = _mm512_unpackhi_epi16(even, odd);
            const __m512i l01h01 = _mm512_shuffle_i64x2(lo, hi, 0x44);  // lo0 lo1 hi0 hi1
            const __m512i l23h23 = _mm512_shuffle_i64x2(lo, hi, 0xEE);  // lo2 lo3 hi2 hi3
            _mm512_store_si512(d + p * kNr, _mm512_shuffle_i64x2(l01h01, l01h01, 0xD8));
            _mm512_store_si512(d + p * kNr + 16, _mm512_shuffle_i64x2(l23h23, l23h23, 0xD8));
            j = kNr;
          }
          for (; j < nr; ++j) d[p * kNr + j] = pair_at(cols, b, j0 + jr + j, p, k);
        }
      }
      for (int64_t p = 0; p < kp; ++p)
        for (int64_t j = nr; j < kNr; ++j) d[p * kNr + j] = 0;
    }
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
