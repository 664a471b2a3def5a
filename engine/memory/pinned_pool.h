// PinnedPool: page-locked host buffers for fast host <-> device transfers
// (enable_pinned_memory, fast_access tensors, staging of other transfers).
//
// Memory comes from mmap and is locked with mlock. When the lock is refused
// (RLIMIT_MEMLOCK), the pool keeps the memory unlocked and goes on pooling
// it: it says so once with log::warn, and stats().locked turns false.
//
// Sizes are rounded to classes that waste at most 1/16 of the request above
// 1 KiB (classes of 64-byte units: exact up to 16 units, then 16 classes per
// power of two), so there is no power-of-two rounding of large blocks; below
// 1 KiB the 64-byte alignment dominates. Blocks under 64 KiB are carved from
// shared slabs; larger ones are mappings of their own. A freed block is kept
// for the next request of its class (a hit); a request with no cached block
// of its class maps or carves a new one (a miss).
//
// Thread-safe: any thread may allocate and free. The pool plugs into tensors
// as an Allocator of MemoryKind::Pinned: Storage::allocate(n, false, pool).
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>

#include "engine/core/shape.h"
#include "engine/core/storage.h"
#include "engine/core/tensor.h"

namespace samba {

struct PinnedPoolStats {
  size_t bytes_reserved = 0;   // mapped by the pool (blocks in use, cached blocks, slab space)
  size_t bytes_locked = 0;     // of those, page-locked
  size_t bytes_in_use = 0;     // block bytes handed out and not yet freed
  size_t bytes_requested = 0;  // what callers asked for in those blocks
  size_t bytes_cached = 0;     // block bytes freed and kept for reuse
  size_t blocks_in_use = 0;
  uint64_t hits = 0;    // allocations served by a cached block
  uint64_t misses = 0;  // allocations that needed a new block
  bool locked = true;   // every reserved byte is page-locked
};

class PinnedPool final : public Allocator {
 public:
  // mlock's signature: returns 0 or -1 with errno set. Tests pass a function
  // that refuses, to exercise the fallback without changing the real limit.
  using LockFn = int (*)(const void* addr, size_t len);

  struct Options {
    LockFn lock = nullptr;  // nullptr: mlock
    size_t slab_bytes = size_t{2} << 20;
    // Freed large blocks beyond this many cached bytes are unmapped at once.
    size_t max_cached_bytes = std::numeric_limits<size_t>::max();
  };

  PinnedPool();
  explicit PinnedPool(Options options);
  ~PinnedPool() override;  // unmaps everything; blocks still in use are reported
  PinnedPool(const PinnedPool&) = delete;
  PinnedPool& operator=(const PinnedPool&) = delete;

  // 64-byte aligned; throws Error{OutOfMemory} when the system has no memory.
  void* allocate(size_t nbytes) override;
  // `nbytes` as given to allocate. Freeing a pointer the pool did not hand
  // out (or twice) is reported with log::error and otherwise ignored.
  void deallocate(void* p, size_t nbytes) override;
  MemoryKind kind() const override { return MemoryKind::Pinned; }

  PinnedPoolStats stats() const;
  // Unmaps cached blocks that have a mapping of their own; returns the bytes
  // released. Slab blocks stay cached.
  size_t release_cached();

  // The block size a request of `nbytes` gets.
  static size_t block_size(size_t nbytes);
  static constexpr size_t kLargeBlock = size_t{64} << 10;  // from here, a mapping per block

 private:
  struct State;
  std::unique_ptr<State> s_;
};

// The process-wide pool (never destroyed, so storages may outlive main).
PinnedPool& pinned_pool();

// A contiguous tensor whose storage lives in `pool`.
Tensor pinned_empty(const Dims& shape, DType dtype, PinnedPool& pool = pinned_pool());

}  // namespace samba
