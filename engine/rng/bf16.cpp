#include "engine/rng/bf16.h"

#include <bit>

#include "engine/core/error.h"
#include "engine/rng/lanes.h"

namespace samba::rng {

std::string_view bf16_rounding_name(Bf16Rounding r) {
  return r == Bf16Rounding::NearestEven ? "nearest_even" : "truncation";
}

Bf16Rounding bf16_rounding_from_name(std::string_view name) {
  if (name == "nearest_even") return Bf16Rounding::NearestEven;
  if (name == "truncation") return Bf16Rounding::Truncation;
  fail(Status::InvalidArgument,
       "fp32_to_bf16_rounding: unknown rounding '{}'; expected 'nearest_even' or 'truncation'",
       name);
}

namespace {

#if SAMBA_RNG_HAVE_AVX2
// The upper halves of eight floats, rounded, in the low 16 bits of each lane.
inline __m256i round_lanes(__m256 x, bool nearest_even) {
  const __m256i u = _mm256_castps_si256(x);
  __m256i hi;
  if (nearest_even) {
    const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    hi = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7fff)), odd),
                           16);
  } else {
    hi = _mm256_srli_epi32(u, 16);
  }
  const __m256i quiet = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x0040));
  const __m256 nan = _mm256_cmp_ps(x, x, _CMP_UNORD_Q);
  return _mm256_castps_si256(
      _mm256_blendv_ps(_mm256_castsi256_ps(hi), _mm256_castsi256_ps(quiet), nan));
}
#endif

}  // namespace

void to_bf16(const float* in, int64_t n, Bf16Rounding r, bf16* out) {
  int64_t i = 0;
#if SAMBA_RNG_HAVE_AVX2
  const bool ne = r == Bf16Rounding::NearestEven;
  for (; i + 16 <= n; i += 16) {
    const __m256i a = round_lanes(_mm256_loadu_ps(in + i), ne);
    const __m256i b = round_lanes(_mm256_loadu_ps(in + i + 8), ne);
    // packus works within 128-bit halves: a0 b0 a1 b1 -> a0 a1 b0 b1.
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(a, b), 0xD8);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), packed);
  }
#endif
  for (; i < n; ++i) out[i] = std::bit_cast<bf16>(bf16_bits(in[i], r));
}

}  // namespace samba::rng
