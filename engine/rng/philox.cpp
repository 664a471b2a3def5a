#include "engine/rng/philox.h"

#include <xxhash.h>

namespace samba::rng {

uint64_t stream_of(std::string_view name) { return XXH3_64bits(name.data(), name.size()); }

uint64_t derive_stream(uint64_t stream, std::string_view tag) {
  return XXH3_64bits_withSeed(tag.data(), tag.size(), stream);
}

}  // namespace samba::rng
