// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2,
// 3", SC'11): a counter-based generator. The value at a counter depends only
// on (key, counter), so any element can be generated independently: results
// are identical for any thread count and any partitioning of the work.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

namespace samba::rng {

using Counter = std::array<uint32_t, 4>;
using Key = std::array<uint32_t, 2>;

inline constexpr uint32_t kPhiloxM0 = 0xD2511F53u, kPhiloxM1 = 0xCD9E8D57u;
inline constexpr uint32_t kPhiloxW0 = 0x9E3779B9u, kPhiloxW1 = 0xBB67AE85u;

inline Counter philox4x32_10(Counter c, Key k) {
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = uint64_t{kPhiloxM0} * c[0];
    const uint64_t p1 = uint64_t{kPhiloxM1} * c[2];
    c = {static_cast<uint32_t>(p1 >> 32) ^ c[1] ^ k[0], static_cast<uint32_t>(p1),
         static_cast<uint32_t>(p0 >> 32) ^ c[3] ^ k[1], static_cast<uint32_t>(p0)};
    k[0] += kPhiloxW0;
    k[1] += kPhiloxW1;
  }
  return c;
}

// The 64-bit stream id of a tensor name (XXH3), so a tensor's values depend
// on (seed, name) and not on what else the program generated before.
uint64_t stream_of(std::string_view name);
// A stream id derived from another one and a tag (XXH3 of the tag seeded
// with `stream`): a further independent stream for the same tensor.
uint64_t derive_stream(uint64_t stream, std::string_view tag);

// One random stream: key = seed, counter = (block index, stream id).
//
// How elements map to words, for every generator in engine/rng: blocks are
// taken eight at a time (a "group", one 8-lane vector of Philox), so
//  - single-word values (float32 draws, raw words): element e is word
//    (e / 8) % 4 of block (e / 32) * 8 + e % 8;
//  - two-word values (float64 draws, integers): element e is words 2h and
//    2h + 1, h = (e / 8) % 2, of block (e / 16) * 8 + e % 8 (the first word
//    is the high half).
// A Box-Muller pair uses the two words of one block that its two elements
// (8 apart) would each use, so element values stay a function of e alone.
struct Philox {
  uint64_t seed = 0;
  uint64_t stream = 0;

  Counter block(uint64_t i) const {
    return philox4x32_10({static_cast<uint32_t>(i), static_cast<uint32_t>(i >> 32),
                          static_cast<uint32_t>(stream), static_cast<uint32_t>(stream >> 32)},
                         {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)});
  }
};

}  // namespace samba::rng
