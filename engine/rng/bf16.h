// float32 -> bfloat16 conversion with a chosen rounding, as
// enable_lazy_param's fp32_to_bf16_rounding: round to nearest, ties to even
// (what tensor.bfloat16() does), or truncation (the upper 16 bits). Both keep
// a NaN a NaN: its sign and upper payload bits, with the quiet bit set
// (truncating 0x7f800001 alone would give infinity).
#pragma once

#include <cstdint>
#include <string_view>

#include "engine/core/dtype.h"

namespace samba::rng {

enum class Bf16Rounding : uint8_t { NearestEven = 0, Truncation = 1 };

std::string_view bf16_rounding_name(Bf16Rounding r);  // "nearest_even", "truncation"
// Parses "nearest_even" or "truncation"; throws InvalidArgument naming both otherwise.
Bf16Rounding bf16_rounding_from_name(std::string_view name);

inline uint16_t bf16_bits(float x, Bf16Rounding r) {
  uint32_t u;
  __builtin_memcpy(&u, &x, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);
  if (r == Bf16Rounding::NearestEven) u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

// out[i] = in[i] rounded, for i < n (AVX2 when the build has it).
void to_bf16(const float* in, int64_t n, Bf16Rounding r, bf16* out);

}  // namespace samba::rng
