#include "engine/memory/staged_copy.h"

#include <algorithm>
#include <cstring>

#include "engine/core/error.h"
#include "engine/core/parallel.h"

namespace samba {

void staged_copy(void* dst, const void* src, size_t n, PinnedPool& pool,
                 const StagedCopyOptions& options) {
  if (n == 0) return;
  SAMBA_CHECK(dst && src, Status::NullPointer, "staged copy of {} bytes: {} is null", n,
              dst ? "the source" : "the destination");
  const size_t chunk = std::max<size_t>(options.chunk_bytes, 4096);
  const auto chunks = static_cast<int64_t>((n + chunk - 1) / chunk);
  char* d = static_cast<char*>(dst);
  const char* s = static_cast<const char*>(src);
  // Four chunks per task at least: about 100 us of copying, and a staging
  // block taken from the pool per task, not per chunk.
  parallel_for(chunks, 4, [&](int64_t b, int64_t e) {
    void* stage = pool.allocate(chunk);
    for (int64_t c = b; c < e; ++c) {
      const size_t off = static_cast<size_t>(c) * chunk, len = std::min(chunk, n - off);
      std::memcpy(stage, s + off, len);
      std::memcpy(d + off, stage, len);
    }
    pool.deallocate(stage, chunk);
  });
}

}  // namespace samba
