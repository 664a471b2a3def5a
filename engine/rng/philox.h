// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2,
// 3", SC'11): a counter-based generator. The value at a counter depends only
// on (key, counter), so any element can be generated independently: results
// are identical for any thread count and any partitioning of the work.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <string_view>

namespace samba::rng {

using Counter = std::array<uint32_t, 4>;
using Key = std::array<uint32_t, 2>;

inline Counter philox4x32_10(Counter c, Key k) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = uint64_t{kM0} * c[0];
    const uint64_t p1 = uint64_t{kM1} * c[2];
    c = {static_cast<uint32_t>(p1 >> 32) ^ c[1] ^ k[0], static_cast<uint32_t>(p1),
         static_cast<uint32_t>(p0 >> 32) ^ c[3] ^ k[1], static_cast<uint32_t>(p0)};
    k[0] += kW0;
    k[1] += kW1;
  }
  return c;
}

// A 64-bit stream id from a name (FNV-1a), so a tensor's values depend on
// (seed, name) and not on what else the program generated before.
inline uint64_t stream_of(std::string_view name) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char ch : name) h = (h ^ ch) * 0x100000001b3ull;
  return h;
}

// One generator: key = seed, counter = (block index, stream). Block i yields
// four 32-bit words, for elements 4i .. 4i+3.
struct Philox {
  uint64_t seed = 0;
  uint64_t stream = 0;

  Counter block(uint64_t i) const {
    return philox4x32_10({static_cast<uint32_t>(i), static_cast<uint32_t>(i >> 32),
                          static_cast<uint32_t>(stream), static_cast<uint32_t>(stream >> 32)},
                         {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)});
  }
};

// Uniform float in [0, 1) from 24 random bits; double in [0, 1) from 53.
inline float to_unit_float(uint32_t x) { return static_cast<float>(x >> 8) * 0x1.0p-24f; }
inline double to_unit_double(uint32_t hi, uint32_t lo) {
  return static_cast<double>(((uint64_t{hi} << 32) | lo) >> 11) * 0x1.0p-53;
}

// Fills out[0..n) (elements `first`..`first+n` of the stream) with uniform
// floats in [0, 1). Element e always comes from word e % 4 of block e / 4.
inline void uniform_floats(const Philox& g, uint64_t first, int64_t n, float* out) {
  for (int64_t j = 0; j < n;) {
    const uint64_t e = first + static_cast<uint64_t>(j);
    const Counter c = g.block(e / 4);
    for (uint64_t w = e % 4; w < 4 && j < n; ++w, ++j) out[j] = to_unit_float(c[w]);
  }
}

// Standard normal pairs by Box-Muller: block i gives normals for elements
// 2i and 2i+1 (two words each for the two uniforms).
inline void normal_floats(const Philox& g, uint64_t first, int64_t n, float* out) {
  for (int64_t j = 0; j < n;) {
    const uint64_t e = first + static_cast<uint64_t>(j);
    const Counter c = g.block(e / 2);
    const float u1 = (static_cast<float>(c[0] >> 8) + 1.0f) * 0x1.0p-24f;  // (0, 1]
    const float u2 = to_unit_float(c[1]);
    const float r = std::sqrt(-2.0f * std::log(u1));
    const float th = 6.2831853071795864f * u2;
    if (e % 2 == 0) out[j++] = r * std::cos(th);
    if (j < n && (first + static_cast<uint64_t>(j)) % 2 == 1) out[j++] = r * std::sin(th);
  }
}

}  // namespace samba::rng
