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

  // A new zero-filled mapping, locked if the system lets us. Touches no
  // shared state but `warned`, so large blocks are mapped (and locking
  // faults their pages in) without holding the mutex.
  std::pair<char*, bool> map_region(size_t size) {
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
    return {static_cast<char*>(p), locked};
  }

  // Under the mutex: the bookkeeping of a mapping made or about to be unmapped.
  void add_reserved(size_t size, bool locked) {
    stats.bytes_reserved += size;
    if (locked) stats.bytes_locked += size;
  }
  void remove_reserved(size_t size, bool locked) {
    stats.bytes_reserved -= size;
    if (locked) stats.bytes_locked -= size;
  }

  // A new block of `size` (< kLargeBlock) from the current slab, or a new slab.
  std::pair<char*, bool> carve(size_t size) {
    if (slabs.empty() || slabs.back().used + size > slabs.back().size) {
      const size_t bytes = std::max(options.slab_bytes, size);
      auto [base, locked] = map_region(bytes);
      add_reserved(bytes, locked);
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
  auto hand_out = [&](void* p) {
    s.stats.bytes_in_use += size;
    s.stats.bytes_requested += nbytes;
    ++s.stats.blocks_in_use;
    return p;
  };
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    if (auto it = s.cached.find(size); it != s.cached.end() && !it->second.empty()) {
      void* p = it->second.back();
      it->second.pop_back();
      s.stats.bytes_cached -= size;
      ++s.stats.hits;
      State::Block& b = s.blocks.at(p);
      b.live = true;
      b.requested = nbytes;
      return hand_out(p);
    }
    if (size < kLargeBlock) {
      auto [p, locked] = s.carve(size);
      ++s.stats.misses;
      s.blocks.emplace(p, State::Block{size, nbytes, true, false, locked});
      return hand_out(p);
    }
  }
  auto [p, locked] = s.map_region(size);
  std::lock_guard<std::mutex> lock(s.mutex);
  s.add_reserved(size, locked);
  ++s.stats.misses;
  s.blocks.emplace(p, State::Block{size, nbytes, true, true, locked});
  return hand_out(p);
}

void PinnedPool::deallocate(void* p, size_t nbytes) {
  if (!p) return;
  State& s = *s_;
  std::unique_lock<std::mutex> lock(s.mutex);
  auto it = s.blocks.find(p);
  if (it == s.blocks.end() || !it->second.live) {
    const bool unknown = it == s.blocks.end();
    lock.unlock();
    log::error("pinned memory pool: freeing {} ({} bytes), which {}", p, nbytes,
               unknown ? "the pool did not hand out" : "is already free");
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
    const size_t size = b.size;
    s.remove_reserved(size, b.locked);
    s.blocks.erase(it);
    lock.unlock();
    munmap(p, size);
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
  std::vector<std::pair<void*, size_t>> unmapping;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    for (auto& [size, list] : s.cached) {
      if (size < kLargeBlock) continue;
      for (void* p : list) {
        s.remove_reserved(size, s.blocks.at(p).locked);
        s.blocks.erase(p);
        unmapping.emplace_back(p, size);
      }
      s.stats.bytes_cached -= size * list.size();
      list.clear();
    }
  }
  size_t released = 0;
  for (auto [p, size] : unmapping) {
    munmap(p, size);
    released += size;
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
