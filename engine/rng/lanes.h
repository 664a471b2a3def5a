// Lanes: the two element types the RNG's math is written for once and
// instantiated twice. `Scalar` is one float / uint32_t; `Avx2` is eight of
// each in a ymm register. The generic code (philox_lanes.h, unit_math.h)
// uses only operations both provide, each of which is exactly rounded IEEE
// arithmetic or exact bit manipulation, so the two instantiations give the
// same bits. No fused multiply-add is used anywhere: the files that
// instantiate this code are built with -ffp-contract=off, so values are also
// the same on machines with and without FMA.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

#if defined(__AVX2__)
#include <immintrin.h>
#define SAMBA_RNG_HAVE_AVX2 1
#else
#define SAMBA_RNG_HAVE_AVX2 0
#endif

namespace samba::rng::lanes {

// ---- one lane ---------------------------------------------------------------

struct Scalar {
  using F = float;
  using U = uint32_t;
  using M = bool;
  static constexpr int kWidth = 1;
};

inline float as_float(uint32_t u) { return std::bit_cast<float>(u); }
inline uint32_t as_bits(float f) { return std::bit_cast<uint32_t>(f); }
// Lanes hold values below 2^31 when converted.
inline float signed_to_float(uint32_t u) { return static_cast<float>(static_cast<int32_t>(u)); }
inline uint32_t shift_right_arith(uint32_t u, int n) {
  return static_cast<uint32_t>(static_cast<int32_t>(u) >> n);
}
inline float square_root(float x) { return std::sqrt(x); }
inline float select(bool m, float a, float b) { return m ? a : b; }
inline bool nonzero(uint32_t u) { return u != 0; }
inline bool less(float a, float b) { return a < b; }
inline bool less_equal(float a, float b) { return a <= b; }
inline void mulhilo(uint32_t a, uint32_t m, uint32_t& hi, uint32_t& lo) {
  const uint64_t p = uint64_t{a} * m;
  hi = static_cast<uint32_t>(p >> 32);
  lo = static_cast<uint32_t>(p);
}

// ---- eight lanes ------------------------------------------------------------

#if SAMBA_RNG_HAVE_AVX2

struct F8 {
  __m256 v;
  F8() = default;
  F8(__m256 x) : v(x) {}  // NOLINT: implicit by design, like float
  F8(float x) : v(_mm256_set1_ps(x)) {}
};
struct U8 {
  __m256i v;
  U8() = default;
  U8(__m256i x) : v(x) {}
  U8(uint32_t x) : v(_mm256_set1_epi32(static_cast<int32_t>(x))) {}
};
struct M8 {
  __m256 v;  // all-ones lanes where true
};

struct Avx2 {
  using F = F8;
  using U = U8;
  using M = M8;
  static constexpr int kWidth = 8;
};

inline F8 operator+(F8 a, F8 b) { return _mm256_add_ps(a.v, b.v); }
inline F8 operator-(F8 a, F8 b) { return _mm256_sub_ps(a.v, b.v); }
inline F8 operator*(F8 a, F8 b) { return _mm256_mul_ps(a.v, b.v); }
inline F8 operator/(F8 a, F8 b) { return _mm256_div_ps(a.v, b.v); }
inline F8 operator-(F8 a) { return _mm256_xor_ps(a.v, _mm256_set1_ps(-0.0f)); }

inline U8 operator+(U8 a, U8 b) { return _mm256_add_epi32(a.v, b.v); }
inline U8 operator-(U8 a, U8 b) { return _mm256_sub_epi32(a.v, b.v); }
inline U8 operator&(U8 a, U8 b) { return _mm256_and_si256(a.v, b.v); }
inline U8 operator|(U8 a, U8 b) { return _mm256_or_si256(a.v, b.v); }
inline U8 operator^(U8 a, U8 b) { return _mm256_xor_si256(a.v, b.v); }
inline U8 operator>>(U8 a, int n) { return _mm256_srli_epi32(a.v, n); }
inline U8 operator<<(U8 a, int n) { return _mm256_slli_epi32(a.v, n); }

inline F8 as_float(U8 u) { return _mm256_castsi256_ps(u.v); }
inline U8 as_bits(F8 f) { return _mm256_castps_si256(f.v); }
inline F8 signed_to_float(U8 u) { return _mm256_cvtepi32_ps(u.v); }
inline U8 shift_right_arith(U8 u, int n) { return _mm256_srai_epi32(u.v, n); }
inline F8 square_root(F8 x) { return _mm256_sqrt_ps(x.v); }
inline F8 select(M8 m, F8 a, F8 b) { return _mm256_blendv_ps(b.v, a.v, m.v); }
inline M8 nonzero(U8 u) {
  const __m256i zero = _mm256_cmpeq_epi32(u.v, _mm256_setzero_si256());
  return {_mm256_castsi256_ps(_mm256_xor_si256(zero, _mm256_set1_epi32(-1)))};
}
inline M8 less(F8 a, F8 b) { return {_mm256_cmp_ps(a.v, b.v, _CMP_LT_OQ)}; }
inline M8 less_equal(F8 a, F8 b) { return {_mm256_cmp_ps(a.v, b.v, _CMP_LE_OQ)}; }

// 32 x 32 -> 64-bit products of all eight lanes: vpmuludq multiplies the even
// lanes, so the odd ones are shifted down for a second multiply.
inline void mulhilo(U8 a, uint32_t m, U8& hi, U8& lo) {
  const __m256i mv = _mm256_set1_epi32(static_cast<int32_t>(m));
  const __m256i even = _mm256_mul_epu32(a.v, mv);
  const __m256i odd = _mm256_mul_epu32(_mm256_srli_epi64(a.v, 32), mv);
  hi.v = _mm256_blend_epi32(_mm256_srli_epi64(even, 32), odd, 0xAA);
  lo.v = _mm256_blend_epi32(even, _mm256_slli_epi64(odd, 32), 0xAA);
}

#endif  // SAMBA_RNG_HAVE_AVX2

}  // namespace samba::rng::lanes
