// The bf16 GEMM (Bf16GemmArgs: bf16 operands, fp32 accumulation, C in fp32
// or bf16), written once around a level's micro-kernel and included by each
// x86 level file, which compiles it with that level's flags: the
// AVX512_BF16 file plugs in vdpbf16ps on k-pair panels, the AVX2 and
// AVX-512 files the packed fp32 micro-kernel on panels widened from bf16
// (WidenedBf16Kernel below). sgemm_kernels.h says what each computes bit for
// bit. Like packed_sgemm.h, everything is TU-local, intrinsics and plain
// loops only (that header says why).
//
// Unlike the fp32 kernel, K is never split: a micro-kernel call runs the
// whole depth, so the sums stay in registers until the epilogue and a bf16
// C is written (rounded) once, with no fp32 copy of C. Its B panel (kNr
// columns, all of K: 50 KiB of bf16 pairs at K = 784) is then read from L2
// rather than L1, at well under L2's bandwidth (128 bytes per 16 vdpbf16ps).
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "engine/kernels/sgemm_kernels.h"
#include "engine/kernels/x86/packed_sgemm.h"

namespace samba::ops::detail {
namespace {

inline float bf16_bits_to_float(uint16_t h) {
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// Loads and stores of 8 values of C, bias or the addend, in their type, as fp32.
struct Bf16Io {
  static __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
  static __m256 load8(const uint16_t* p) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
  static float load1(const float* p) { return *p; }
  static float load1(const uint16_t* p) { return bf16_bits_to_float(*p); }

  static void store8(float* p, __m256 v) { _mm256_storeu_ps(p, v); }
  // Round to nearest even as Eigen::bfloat16(float) does: NaN becomes the
  // quiet NaN of its sign, everything else (denormals too) rounds on the bits.
  static void store8(uint16_t* p, __m256 v) {
    const __m256i u = _mm256_castps_si256(v);
    const __m256i hi = _mm256_srli_epi32(u, 16);
    const __m256i lsb = _mm256_and_si256(hi, _mm256_set1_epi32(1));
    const __m256i biased = _mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7fff)), lsb);
    const __m256i rounded = _mm256_srli_epi32(biased, 16);
    const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff)),
                                           _mm256_set1_epi32(0x7f800000));
    const __m256i quiet = _mm256_or_si256(_mm256_and_si256(hi, _mm256_set1_epi32(0x8000)),
                                          _mm256_set1_epi32(0x7fc0));
    const __m256i r = _mm256_blendv_epi8(rounded, quiet, nan);
    // 32 -> 16 bits (every value fits): packus works per 128-bit half.
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0xD8);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_castsi256_si128(packed));
  }
  static void store1(float* p, float v) { *p = v; }
  static void store1(uint16_t* p, float v) {
    uint32_t u;
    std::memcpy(&u, &v, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u)
      *p = static_cast<uint16_t>(((u >> 16) & 0x8000u) | 0x7fc0u);
    else
      *p = static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
  }
};

// A finished block of sums (mr x nr, rows `ld` apart in acc, which it
// overwrites) into C: act(alpha * sum + beta * C + bias) in C's type. Bias
// and relu run here in vector registers; other activations go to the GEMM
// layer's general epilogue on the fp32 block, before the one rounding.
template <typename TC>
void finish_block(const Bf16GemmArgs<TC>& g, float* acc, int64_t ld, TC* c, int64_t col,
                  int64_t mr, int64_t nr) {
  const TC* bias = g.bias ? g.bias + col : nullptr;
  const bool relu = g.act == Activation::Relu;
  const bool general = g.act != Activation::None && !relu;
  const __m256 alpha = _mm256_set1_ps(g.alpha), beta = _mm256_set1_ps(g.beta);
  const __m256 zero = _mm256_setzero_ps();
  for (int64_t r = 0; r < mr; ++r) {
    float* s = acc + r * ld;
    TC* out = c + r * g.ldc;
    int64_t j = 0;
    for (; j + 8 <= nr; j += 8) {
      __m256 v = _mm256_mul_ps(alpha, _mm256_loadu_ps(s + j));
      if (g.beta != 0.0f) v = _mm256_fmadd_ps(beta, Bf16Io::load8(out + j), v);  // C unread at 0
      if (bias) v = _mm256_add_ps(v, Bf16Io::load8(bias + j));
      if (relu) v = _mm256_max_ps(zero, v);  // a NaN in v comes out (the second operand)
      if (general)
        _mm256_storeu_ps(s + j, v);
      else
        Bf16Io::store8(out + j, v);
    }
    for (; j < nr; ++j) {
      float v = g.alpha * s[j];
      if (g.beta != 0.0f) v += g.beta * Bf16Io::load1(out + j);
      if (bias) v += Bf16Io::load1(bias + j);
      if (relu) v = v < 0.0f ? 0.0f : v;  // NaN stays NaN
      if (general)
        s[j] = v;
      else
        Bf16Io::store1(out + j, v);
    }
  }
  if (!general) return;
  apply_epilogue(acc, mr, nr, ld, static_cast<const float*>(nullptr), g.act);
  for (int64_t r = 0; r < mr; ++r) {
    int64_t j = 0;
    const float* s = acc + r * ld;
    TC* out = c + r * g.ldc;
    for (; j + 8 <= nr; j += 8) Bf16Io::store8(out + j, _mm256_loadu_ps(s + j));
    for (; j < nr; ++j) Bf16Io::store1(out + j, s[j]);
  }
}

// The loops around a level's micro-kernel. Kernel provides kMr x kNr (the
// register block), depth_units(k) (4-byte units per row of a packed panel:
// k-pairs or widened floats), pack_a / pack_b (whole depth, panels
// zero-padded to kMr rows / kNr columns) and micro (one block's sums into a
// kMr x kNr fp32 array).
template <class Kernel>
struct Bf16Gemm {
  static constexpr int64_t kMr = Kernel::kMr, kNr = Kernel::kNr;
  // Cache blocks: the mc x K block of A in L2 beside the B panel being
  // read; the K x nc block of B (reused by every block of A) in L3.
  static constexpr int64_t kABlockBytes = 256 << 10, kBBlockBytes = 2 << 20;

  static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
  static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

  template <typename TC>
  static void tile(const Bf16GemmArgs<TC>& g, const uint16_t* a, const uint16_t* b, TC* c,
                   int64_t r0, int64_t rows, int64_t c0, int64_t cols) {
    const int64_t units = max64(1, Kernel::depth_units(g.k));
    const int64_t nc_max =
        min64(max64(kNr, kBBlockBytes / 4 / units / kNr * kNr), (cols + kNr - 1) / kNr * kNr);
    const int64_t mc_max =
        min64(max64(kMr, kABlockBytes / 4 / units / kMr * kMr), (rows + kMr - 1) / kMr * kMr);
    float* pa = gemm_scratch(0, static_cast<size_t>(mc_max * units));
    float* pb = gemm_scratch(1, static_cast<size_t>(nc_max * units));
    alignas(64) float acc[kMr * kNr];
    for (int64_t jc = 0; jc < cols; jc += nc_max) {
      const int64_t nc = min64(nc_max, cols - jc);
      Kernel::pack_b(g.b, b, g.k, c0 + jc, nc, pb);
      for (int64_t ic = 0; ic < rows; ic += mc_max) {
        const int64_t mc = min64(mc_max, rows - ic);
        Kernel::pack_a(g.a, a, g.k, r0 + ic, mc, pa);
        for (int64_t jr = 0; jr < nc; jr += kNr) {
          const int64_t col = c0 + jc + jr;
          for (int64_t ir = 0; ir < mc; ir += kMr) {
            Kernel::micro(units, pa + ir * units, pb + jr * units, acc);
            finish_block(g, acc, kNr, c + (r0 + ic + ir) * g.ldc + col, col, min64(kMr, mc - ir),
                         min64(kNr, nc - jr));
          }
        }
      }
    }
  }
};

// The AVX2 and AVX-512 levels: bf16 widened to fp32 (exactly) while packing,
// then the level's packed fp32 micro-kernel over the whole depth.
template <class Vec>
struct WidenedBf16Kernel {
  using Fp32 = PackedSgemm<Vec>;
  static constexpr int64_t kMr = detail::kMr, kNr = Fp32::kNr;

  static int64_t depth_units(int64_t k) { return k; }

  // Panels [p][r] of kMr rows, widened; zero rows pad the last one.
  static void pack_a(const GemmOperand<uint16_t>& op, const uint16_t* a, int64_t k, int64_t i0,
                     int64_t mc, float* dst) {
    for (int64_t ir = 0; ir < mc; ir += kMr) {
      const int64_t mr = min64(kMr, mc - ir);
      float* d = dst + ir * k;
      if (!op.trans) {
        for (int64_t r = 0; r < mr; ++r) {
          const uint16_t* src = a + (i0 + ir + r) * op.ld;
          for (int64_t p = 0; p < k; ++p) d[p * kMr + r] = bf16_bits_to_float(src[p]);
        }
      } else {
        for (int64_t p = 0; p < k; ++p) {
          const uint16_t* src = a + p * op.ld + i0 + ir;
          for (int64_t r = 0; r < mr; ++r) d[p * kMr + r] = bf16_bits_to_float(src[r]);
        }
      }
      for (int64_t p = 0; p < k; ++p)
        for (int64_t r = mr; r < kMr; ++r) d[p * kMr + r] = 0.0f;
    }
  }

  // Panels [p][j] of kNr columns, widened (8 at a time from the rows of a
  // non-transposed B); zero columns pad the last one.
  static void pack_b(const GemmOperand<uint16_t>& op, const uint16_t* b, int64_t k, int64_t j0,
                     int64_t nc, float* dst) {
    for (int64_t jr = 0; jr < nc; jr += kNr) {
      const int64_t nr = min64(kNr, nc - jr);
      float* d = dst + jr * k;
      if (op.trans) {
        for (int64_t j = 0; j < nr; ++j) {
          const uint16_t* src = b + (j0 + jr + j) * op.ld;
          for (int64_t p = 0; p < k; ++p) d[p * kNr + j] = bf16_bits_to_float(src[p]);
        }
      } else {
        for (int64_t p = 0; p < k; ++p) {
          const uint16_t* src = b + p * op.ld + j0 + jr;
          int64_t j = 0;
          for (; j + 8 <= nr; j += 8) _mm256_store_ps(d + p * kNr + j, Bf16Io::load8(src + j));
          for (; j < nr; ++j) d[p * kNr + j] = bf16_bits_to_float(src[j]);
        }
      }
      for (int64_t p = 0; p < k; ++p)
        for (int64_t j = nr; j < kNr; ++j) d[p * kNr + j] = 0.0f;
    }
  }

  static void micro(int64_t k, const float* pa, const float* pb, float* acc) {
    const typename Fp32::Store sums_only{1.0f, 0.0f, true};
    Fp32::micro_kernel(k, pa, pb, acc, kNr, kMr, kNr, sums_only);
  }

  static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
};

}  // namespace
}  // namespace samba::ops::detail
