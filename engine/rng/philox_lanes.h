// Philox4x32-10 over lanes (lanes.h): one group of eight consecutive blocks,
// as rows of words. Row r, lane l holds word r of block 8 g + l, which is
// element 32 g + 8 r + l of a single-word stream (see philox.h), so a row is
// eight consecutive elements.
#pragma once

#include "engine/rng/lanes.h"
#include "engine/rng/philox.h"

namespace samba::rng {

// Ten rounds on n independent counters at once: interleaving them hides the
// multiply latency (two groups in flight run about 1.4x faster than one).
template <class L, int N>
inline void philox_rounds(typename L::U (&c)[N][4], uint32_t k0, uint32_t k1) {
  using U = typename L::U;
  for (int round = 0; round < 10; ++round) {
    for (int j = 0; j < N; ++j) {
      U hi0, lo0, hi1, lo1;
      lanes::mulhilo(c[j][0], kPhiloxM0, hi0, lo0);
      lanes::mulhilo(c[j][2], kPhiloxM1, hi1, lo1);
      c[j][0] = hi1 ^ c[j][1] ^ U(k0);
      c[j][1] = lo1;
      c[j][2] = hi0 ^ c[j][3] ^ U(k1);
      c[j][3] = lo0;
    }
    k0 += kPhiloxW0;
    k1 += kPhiloxW1;
  }
}

inline void philox_group(const Philox& p, uint64_t group, uint32_t rows[4][8]) {
  const uint64_t first = group * 8;  // a multiple of 8: adding l < 8 never carries
  const auto k0 = static_cast<uint32_t>(p.seed), k1 = static_cast<uint32_t>(p.seed >> 32);
  for (int l = 0; l < 8; ++l) {
    uint32_t c[1][4] = {{static_cast<uint32_t>(first) + static_cast<uint32_t>(l),
                         static_cast<uint32_t>(first >> 32), static_cast<uint32_t>(p.stream),
                         static_cast<uint32_t>(p.stream >> 32)}};
    philox_rounds<lanes::Scalar, 1>(c, k0, k1);
    for (int r = 0; r < 4; ++r) rows[r][l] = c[0][r];
  }
}

#if SAMBA_RNG_HAVE_AVX2
// Groups group .. group + N - 1, as rows[j] for group + j.
template <int N>
inline void philox_groups(const Philox& p, uint64_t group, lanes::U8 (&rows)[N][4]) {
  for (int j = 0; j < N; ++j) {
    const uint64_t first = (group + static_cast<uint64_t>(j)) * 8;
    rows[j][0] = _mm256_add_epi32(_mm256_set1_epi32(static_cast<int32_t>(first)),
                                  _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    rows[j][1] = lanes::U8(static_cast<uint32_t>(first >> 32));
    rows[j][2] = lanes::U8(static_cast<uint32_t>(p.stream));
    rows[j][3] = lanes::U8(static_cast<uint32_t>(p.stream >> 32));
  }
  philox_rounds<lanes::Avx2, N>(rows, static_cast<uint32_t>(p.seed),
                                static_cast<uint32_t>(p.seed >> 32));
}
#endif

}  // namespace samba::rng
