// What the PEF mutator's consistent edits share: a deterministic random
// source and the re-planning that keeps a resized program's byte layout
// valid (offsets, arena sizes, blobs), so the edit under test is the only
// thing wrong with the file.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/pef/pef_generated.h"

namespace samba::testing::pef_edit {

namespace fb = samba::pef::fb;

// splitmix64: the same sequence on every platform.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed * 0x9E3779B97F4A7C15ull + 0x2545F4914F6CDD1Dull) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, n); 0 when n is 0.
  uint64_t below(uint64_t n) { return n ? next() % n : 0; }
  bool chance(unsigned percent) { return below(100) < percent; }
  template <typename T>
  const T& pick(const std::vector<T>& v) {
    return v[below(v.size())];
  }

 private:
  uint64_t state_;
};

size_t element_size(fb::DType d);
int64_t numel(const std::vector<int64_t>& shape);  // saturates instead of overflowing
std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& shape);

// After shapes or dtypes changed: every owning tensor's nbytes recomputed,
// offsets re-planned (tensors that shared an offset keep sharing it, as
// regions and reused intermediates do), arena sizes set to fit, and the
// blobs of resized tensors rewritten (raw, with a matching checksum).
void replan(fb::ProgramT& p);

}  // namespace samba::testing::pef_edit
