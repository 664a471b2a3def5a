#include "engine/memory/pinned_pool.h"

#include <sys/mman.h>
#include <sys/resource.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "engine/core/error.h"
#include "engine/core/log.h"

namespace samba {

struct PinnedPool::State {
  struct Block {
    size_t size;
    size_t requested;
    bool live;
    bool large;  // a mapping of its own
    bool locked;
  };
  struct Slab {
    char* base;
    size_t size;
    size_t used;
    bool locked;
  };

  Options options;
  mutable std::mutex mutex;
  std::unordered_map<void*, Block> blocks;                // every block the pool has made
  std::unordered_map<size_t, std::vector<void*>> cached;  // free blocks by size
  std::vector<Slab> slabs;
  PinnedPoolStats stats;
  std::atomic<bool> warned{false};

  // A new zero-filled mapping, locked if the system lets us.
  std::pair<char*, bool> map(size_t size) {
    void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
      fail(Status::OutOfMemory, "pinned memory pool: cannot map {} bytes: {}", size,
           std::strerror(errno));
    const LockFn lock = options.lock ? options.lock : &::mlock;
    const bool locked = lock(p, size) == 0;
    if (!locked && !warned.exchange(true)) {
      const int err = errno;
      rlimit limit{};
      getrlimit(RLIMIT_MEMLOCK, &limit);
      log::warn(
          "pinned memory: locking {} bytes failed ({}; RLIMIT_MEMLOCK is {} bytes); falling back "
          "to pageable pooled memory, so transfers will not use page-locked buffers",
          size, std::strerror(err),
          limit.rlim_cur == RLIM_INFINITY ? std::string("unlimited")
                                          : std::to_string(limit.rlim_cur));
    }
    stats.bytes_reserved += size;
    if (locked) stats.bytes_locked += size;
    return {static_cast<char*>(p), locked};
  }

  void unmap(void* p, size_t size, bool locked) {
    munmap(p, size);
    stats.bytes_reserved -= size;
    if (locked) stats.bytes_locked -= size;
  }

  // A new block of `size` (< kLargeBlock) from the current slab, or a new slab.
  std::pair<char*, bool> carve(size_t size) {
    if (slabs.empty() || slabs.back().used + size > slabs.back().size) {
      const size_t bytes = std::max(options.slab_bytes, size);
      auto [base, locked] = map(bytes);
      slabs.push_back({base, bytes, 0, locked});
    }
    Slab& s = slabs.back();
    char* p = s.base + s.used;
    s.used += size;
    return {p, s.locked};
  }
};

size_t PinnedPool::block_size(size_t nbytes) {
  const size_t units = nbytes == 0 ? 1 : (nbytes + 63) / 64;
  if (units <= 16) return units * 64;
  const int k = 63 - __builtin_clzll(units);  // units in [2^k, 2^(k+1))
  const size_t step = size_t{1} << (k - 4);   // 16 classes per power of two
  return (units + step - 1) / step * step * 64;
}

PinnedPool::PinnedPool() : PinnedPool(Options{}) {}

PinnedPool::PinnedPool(Options options) : s_(std::make_unique<State>()) {
  SAMBA_CHECK(options.slab_bytes >= kLargeBlock && options.slab_bytes % 4096 == 0,
              Status::InvalidArgument,
              "pinned memory pool: slab size {} must be a multiple of 4096 and at least {}",
              options.slab_bytes, kLargeBlock);
  s_->options = options;
}

PinnedPool::~PinnedPool() {
  if (s_->stats.blocks_in_use > 0)
    log::error("pinned memory pool destroyed with {} blocks ({} bytes) still in use",
               s_->stats.blocks_in_use, s_->stats.bytes_in_use);
  for (auto& [p, b] : s_->blocks)
    if (b.large) munmap(p, b.size);
  for (auto& slab : s_->slabs) munmap(slab.base, slab.size);
}

void* PinnedPool::allocate(size_t nbytes) {
  SAMBA_CHECK(nbytes <= (std::numeric_limits<size_t>::max() >> 2), Status::OutOfMemory,
              "pinned memory pool: cannot allocate {} bytes", nbytes);
  const size_t size = block_size(nbytes);
  State& s = *s_;
  std::lock_guard<std::mutex> lock(s.mutex);
  void* p;
  if (auto it = s.cached.find(size); it != s.cached.end() && !it->second.empty()) {
    p = it->second.back();
    it->second.pop_back();
    s.stats.bytes_cached -= size;
    ++s.stats.hits;
    State::Block& b = s.blocks.at(p);
    b.live = true;
    b.requested = nbytes;
  } else {
    const bool large = size >= kLargeBlock;
    auto [q, locked] = large ? s.map(size) : s.carve(size);
    p = q;
    ++s.stats.misses;
    s.blocks.emplace(p, State::Block{size, nbytes, true, large, locked});
  }
  s.stats.bytes_in_use += size;
  s.stats.bytes_requested += nbytes;
  ++s.stats.blocks_in_use;
  return p;
}

void PinnedPool::deallocate(void* p, size_t nbytes) {
  if (!p) return;
  State& s = *s_;
  std::lock_guard<std::mutex> lock(s.mutex);
  auto it = s.blocks.find(p);
  if (it == s.blocks.end() || !it->second.live) {
    log::error("pinned memory pool: freeing {} ({} bytes), which {}", p, nbytes,
               it == s.blocks.end() ? "the pool did not hand out" : "is already free");
    return;
  }
  State::Block& b = it->second;
  if (block_size(nbytes) != b.size)
    log::error("pinned memory pool: freeing {} as {} bytes; it was allocated as {}", p, nbytes,
               b.requested);
  b.live = false;
  s.stats.bytes_in_use -= b.size;
  s.stats.bytes_requested -= b.requested;
  --s.stats.blocks_in_use;
  if (b.large && s.stats.bytes_cached + b.size > s.options.max_cached_bytes) {
    s.unmap(p, b.size, b.locked);
    s.blocks.erase(it);
    return;
  }
  s.cached[b.size].push_back(p);
  s.stats.bytes_cached += b.size;
}

PinnedPoolStats PinnedPool::stats() const {
  std::lock_guard<std::mutex> lock(s_->mutex);
  PinnedPoolStats st = s_->stats;
  st.locked = st.bytes_locked == st.bytes_reserved;
  return st;
}

size_t PinnedPool::release_cached() {
  State& s = *s_;
  std::lock_guard<std::mutex> lock(s.mutex);
  size_t released = 0;
  for (auto& [size, list] : s.cached) {
    if (size < kLargeBlock) continue;
    for (void* p : list) {
      const State::Block b = s.blocks.at(p);
      s.unmap(p, b.size, b.locked);
      s.blocks.erase(p);
      released += b.size;
    }
    s.stats.bytes_cached -= size * list.size();
    list.clear();
  }
  return released;
}

PinnedPool& pinned_pool() {
  static auto* pool = new PinnedPool();
  return *pool;
}

Tensor pinned_empty(const Dims& shape, DType dtype, PinnedPool& pool) {
  check_shape(shape);
  const size_t nbytes = checked_nbytes(shape, dtype);
  return Tensor::view_of(Storage::allocate(nbytes, false, pool), dtype, shape,
                         contiguous_strides(shape), 0);
}

}  // namespace samba
