// Transfers between pageable host memory and device memory go through
// page-locked staging blocks, as a DMA engine needs: each chunk is copied
// into a pinned block and from there to its destination. Chunks are small
// enough to stay in a core's cache between the two copies, and are spread
// over the current thread pool, so the staging costs little over a plain
// copy. (A fast_access tensor already in pinned memory skips this.)
#pragma once

#include <cstddef>

#include "engine/memory/pinned_pool.h"

namespace samba {

struct StagedCopyOptions {
  // One staging block per task, reused chunk after chunk; small enough to
  // stay in a core's L2 between the copy in and the copy out.
  size_t chunk_bytes = size_t{128} << 10;
};

// Copies n bytes from src to dst (non-overlapping) through staging blocks
// from `pool`. Either side may be the device.
void staged_copy(void* dst, const void* src, size_t n, PinnedPool& pool = pinned_pool(),
                 const StagedCopyOptions& options = {});

}  // namespace samba
