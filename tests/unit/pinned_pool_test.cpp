// The pinned-memory pool: size classes within their waste bound, reuse of
// freed blocks, stats, real page locking (checked against the kernel's VmLck),
// the fallback when locking is refused (simulated through the lock hook),
// misuse reported without crashing, tensors in pinned storage, thread safety
// under concurrent allocate/free, and the staged copy.
#include "engine/memory/pinned_pool.h"

#include "engine/core/sanitizers.h"

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "engine/core/error.h"
#include "engine/core/log.h"
#include "engine/core/parallel.h"
#include "engine/memory/staged_copy.h"

using namespace samba;

namespace {

// Collects log messages for the life of the object.
struct LogCapture {
  std::mutex m;
  std::vector<std::pair<log::Level, std::string>> messages;
  LogCapture() {
    log::set_sink([this](log::Level l, std::string_view msg) {
      std::lock_guard<std::mutex> g(m);
      messages.emplace_back(l, std::string(msg));
    });
  }
  ~LogCapture() { log::set_sink({}); }
  int count(log::Level l) {
    std::lock_guard<std::mutex> g(m);
    int n = 0;
    for (auto& [level, msg] : messages) n += level == l;
    return n;
  }
};

int refuse_lock(const void*, size_t) {
  errno = EPERM;
  return -1;
}
int refuse_lock_above_2mib(const void*, size_t n) {
  if (n <= (size_t{2} << 20)) return 0;  // pretend: the pool's bookkeeping is what is tested
  errno = ENOMEM;
  return -1;
}

// Locked memory of this process, from the kernel (kB).
long vm_locked_kb() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmLck:", 0) == 0) return std::stol(line.substr(6));
  return -1;
}

size_t memlock_limit() {
  rlimit r{};
  getrlimit(RLIMIT_MEMLOCK, &r);
  return r.rlim_cur == RLIM_INFINITY ? SIZE_MAX : r.rlim_cur;
}

}  // namespace

TEST(PinnedPool, SizeClassesWasteAtMostASixteenth) {
  std::vector<size_t> sizes;
  for (size_t n = 1; n <= 5000; ++n) sizes.push_back(n);
  for (double n = 5000; n < 8e9; n *= 1.0123) sizes.push_back(static_cast<size_t>(n));
  std::mt19937_64 gen(1);
  for (int i = 0; i < 100000; ++i) sizes.push_back(gen() % (size_t{1} << 33));
  for (int k = 10; k < 33; ++k)  // just above powers of two, where rounding up would double
    for (size_t d : {size_t{1}, size_t{64}, size_t{4097}}) sizes.push_back((size_t{1} << k) + d);
  size_t prev_block = 0;
  std::sort(sizes.begin(), sizes.end());
  for (size_t n : sizes) {
    const size_t b = PinnedPool::block_size(n);
    ASSERT_GE(b, n);
    ASSERT_EQ(b % 64, 0u) << n;
    if (n >= 1024) {
      ASSERT_LE(static_cast<double>(b - n), static_cast<double>(n) / 16) << n;
    }
    if (n >= 640) {
      ASSERT_LE(static_cast<double>(b - n), static_cast<double>(n) / 10) << n;
    }
    if (b >= PinnedPool::kLargeBlock) {
      ASSERT_EQ(b % 4096, 0u) << n;  // whole pages
    }
    ASSERT_GE(b, prev_block) << n;  // monotonic (sizes are sorted)
    prev_block = b;
  }
  EXPECT_EQ(PinnedPool::block_size(0), 64u);
  EXPECT_EQ(PinnedPool::block_size(64), 64u);
  EXPECT_EQ(PinnedPool::block_size(65), 128u);
  EXPECT_EQ(PinnedPool::block_size(size_t{1} << 26), size_t{1} << 26);
  EXPECT_EQ(PinnedPool::block_size((size_t{1} << 26) + 1), (size_t{1} << 26) + (size_t{1} << 22));
}

TEST(PinnedPool, FreedBlocksAreReusedAndCounted) {
  PinnedPool pool;
  void* a = pool.allocate(100000);
  const size_t block = PinnedPool::block_size(100000);
  auto st = pool.stats();
  EXPECT_EQ(st.misses, 1u);
  EXPECT_EQ(st.hits, 0u);
  EXPECT_EQ(st.bytes_in_use, block);
  EXPECT_EQ(st.bytes_requested, 100000u);
  EXPECT_EQ(st.bytes_reserved, block);  // a large block: a mapping of its own
  EXPECT_EQ(st.blocks_in_use, 1u);
  pool.deallocate(a, 100000);
  st = pool.stats();
  EXPECT_EQ(st.bytes_in_use, 0u);
  EXPECT_EQ(st.bytes_cached, block);
  // The same class (not the same size) gets the cached block back.
  void* b = pool.allocate(block - 10);
  EXPECT_EQ(b, a);
  st = pool.stats();
  EXPECT_EQ(st.hits, 1u);
  EXPECT_EQ(st.misses, 1u);
  EXPECT_EQ(st.bytes_cached, 0u);
  // Another class is a miss.
  void* c = pool.allocate(block + 1);
  EXPECT_NE(c, b);
  EXPECT_EQ(pool.stats().misses, 2u);
  // Small blocks share a slab, 64-byte aligned.
  void* s1 = pool.allocate(1000);
  void* s2 = pool.allocate(1000);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(s1) % 64, 0u);
  EXPECT_EQ(static_cast<char*>(s2) - static_cast<char*>(s1),
            static_cast<ptrdiff_t>(PinnedPool::block_size(1000)));
  EXPECT_EQ(pool.stats().bytes_reserved,
            block + PinnedPool::block_size(block + 1) + (size_t{2} << 20));
  pool.deallocate(s1, 1000);
  EXPECT_EQ(pool.allocate(990), s1);
  pool.deallocate(s1, 990);
  pool.deallocate(s2, 1000);
  pool.deallocate(b, block - 10);
  pool.deallocate(c, block + 1);
  st = pool.stats();
  EXPECT_EQ(st.blocks_in_use, 0u);
  EXPECT_EQ(st.bytes_in_use, 0u);
  EXPECT_EQ(st.bytes_requested, 0u);
  // Releasing the cache unmaps the large blocks; slab blocks stay.
  const size_t before = st.bytes_reserved;
  EXPECT_EQ(pool.release_cached(), block + PinnedPool::block_size(block + 1));
  EXPECT_EQ(pool.stats().bytes_reserved, before - block - PinnedPool::block_size(block + 1));
  EXPECT_EQ(pool.stats().bytes_cached, 2 * PinnedPool::block_size(1000));
}

TEST(PinnedPool, CacheLimitUnmapsLargeBlocksOnFree) {
  PinnedPool pool({nullptr, size_t{2} << 20, 0});
  void* a = pool.allocate(size_t{1} << 20);
  pool.deallocate(a, size_t{1} << 20);
  EXPECT_EQ(pool.stats().bytes_reserved, 0u);
  EXPECT_EQ(pool.stats().bytes_cached, 0u);
}

TEST(PinnedPool, MemoryIsReallyLockedWithinTheLimit) {
  if (SAMBA_ASAN || SAMBA_TSAN) GTEST_SKIP() << "the sanitizer runtime turns mlock into a no-op";
  const long before = vm_locked_kb();
  if (before < 0 || memlock_limit() < (size_t{4} << 20) + static_cast<size_t>(before) * 1024)
    GTEST_SKIP() << "RLIMIT_MEMLOCK leaves less than 4 MiB to lock";
  LogCapture logs;
  PinnedPool pool;
  void* p = pool.allocate(size_t{3} << 20);
  const auto st = pool.stats();
  EXPECT_TRUE(st.locked);
  EXPECT_EQ(st.bytes_locked, st.bytes_reserved);
  EXPECT_EQ(vm_locked_kb() - before,
            static_cast<long>(PinnedPool::block_size(size_t{3} << 20) / 1024));
  std::memset(p, 0xab, size_t{3} << 20);
  pool.deallocate(p, size_t{3} << 20);
  pool.release_cached();
  EXPECT_EQ(vm_locked_kb(), before);
  EXPECT_EQ(logs.count(log::Level::Warning), 0);
}

TEST(PinnedPool, FallsBackToUnlockedMemoryAndSaysSoOnce) {
  LogCapture logs;
  PinnedPool pool({refuse_lock});
  std::vector<std::pair<void*, size_t>> blocks;
  for (size_t n : {size_t{100}, size_t{1} << 20, size_t{5} << 20, size_t{3000}}) {
    void* p = pool.allocate(n);
    std::memset(p, 0x5a, n);  // usable memory
    blocks.emplace_back(p, n);
  }
  const auto st = pool.stats();
  EXPECT_FALSE(st.locked);
  EXPECT_EQ(st.bytes_locked, 0u);
  EXPECT_GT(st.bytes_reserved, size_t{6} << 20);
  ASSERT_EQ(logs.count(log::Level::Warning), 1);
  EXPECT_NE(logs.messages[0].second.find("RLIMIT_MEMLOCK"), std::string::npos)
      << logs.messages[0].second;
  EXPECT_NE(logs.messages[0].second.find("pageable"), std::string::npos) << logs.messages[0].second;
  // Still a pool: freed blocks come back.
  pool.deallocate(blocks[1].first, blocks[1].second);
  EXPECT_EQ(pool.allocate(size_t{1} << 20), blocks[1].first);
  EXPECT_EQ(pool.stats().hits, 1u);
  for (auto [p, n] : blocks) pool.deallocate(p, n);
  EXPECT_EQ(logs.count(log::Level::Warning), 1);

  // Refused only for the large mapping: partly locked, and the stats say so.
  LogCapture logs2;
  PinnedPool partly({refuse_lock_above_2mib});
  void* small = partly.allocate(4096);
  EXPECT_TRUE(partly.stats().locked);
  void* large = partly.allocate(size_t{3} << 20);
  const auto ps = partly.stats();
  EXPECT_FALSE(ps.locked);
  EXPECT_EQ(ps.bytes_locked, size_t{2} << 20);  // the slab
  EXPECT_EQ(ps.bytes_reserved, (size_t{2} << 20) + PinnedPool::block_size(size_t{3} << 20));
  EXPECT_EQ(logs2.count(log::Level::Warning), 1);
  partly.deallocate(small, 4096);
  partly.deallocate(large, size_t{3} << 20);
}

TEST(PinnedPool, MisuseIsReportedNotFatal) {
  LogCapture logs;
  PinnedPool pool;
  int not_ours = 0;
  pool.deallocate(&not_ours, sizeof not_ours);
  void* p = pool.allocate(256);
  pool.deallocate(p, 256);
  pool.deallocate(p, 256);  // twice
  pool.deallocate(nullptr, 0);
  EXPECT_EQ(logs.count(log::Level::Error), 2);
  EXPECT_EQ(pool.stats().blocks_in_use, 0u);
  EXPECT_THROW(pool.allocate(SIZE_MAX - 10), Error);
  EXPECT_THROW(PinnedPool({nullptr, 1000}), Error);
}

TEST(PinnedPool, TensorsLiveInPinnedStorage) {
  PinnedPool pool;
  {
    Tensor t = pinned_empty({256, 1024}, DType::Float32, pool);
    EXPECT_EQ(t.impl()->storage->kind(), MemoryKind::Pinned);
    EXPECT_TRUE(t.is_contiguous());
    t.copy_from(Tensor::scalar(2.5, DType::Float32));
    EXPECT_EQ(t.data<float>()[256 * 1024 - 1], 2.5f);
    EXPECT_EQ(pool.stats().bytes_requested, size_t{1} << 20);
    Ref<Storage> zeroed = Storage::allocate(1000, true, pool);
    EXPECT_EQ(static_cast<unsigned char*>(zeroed->data())[999], 0);
  }
  EXPECT_EQ(pool.stats().blocks_in_use, 0u);
  Tensor again = pinned_empty({1024, 256}, DType::Float32, pool);
  EXPECT_EQ(pool.stats().hits, 1u);
  EXPECT_EQ(pinned_empty({3}, DType::Int64).impl()->storage->kind(),
            MemoryKind::Pinned);  // the process pool
}

TEST(PinnedPool, ConcurrentAllocateAndFree) {
  PinnedPool pool;
  constexpr int kThreads = 6, kOps = 4000;
  std::atomic<int> corrupt{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 gen(static_cast<unsigned>(t));
      std::vector<std::pair<unsigned char*, size_t>> held;
      for (int i = 0; i < kOps; ++i) {
        if (held.size() < 8 && gen() % 2 == 0) {
          // Mostly small blocks, some large ones; few classes, so blocks move between threads.
          const size_t n =
              gen() % 4 == 0 ? (size_t{64} << 10) * (1 + gen() % 4) : 64 * (1 + gen() % 32);
          auto* p = static_cast<unsigned char*>(pool.allocate(n));
          std::memset(p, t + 1, n);
          held.emplace_back(p, n);
        } else if (!held.empty()) {
          auto [p, n] = held[gen() % held.size()];
          for (size_t j = 0; j < n; j += 61)
            if (p[j] != t + 1) corrupt.fetch_add(1);  // another thread wrote into our block
          pool.deallocate(p, n);
          held.erase(std::find(held.begin(), held.end(), std::pair(p, n)));
        }
      }
      for (auto [p, n] : held) pool.deallocate(p, n);
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(corrupt.load(), 0);
  const auto st = pool.stats();
  EXPECT_EQ(st.blocks_in_use, 0u);
  EXPECT_EQ(st.bytes_in_use, 0u);
  EXPECT_GT(st.hits, st.misses);  // a pool of a few classes mostly reuses
}

TEST(StagedCopy, CopiesEveryByteForAnySizeAndThreadCount) {
  PinnedPool pool;
  std::mt19937 gen(5);
  const size_t chunk = StagedCopyOptions{}.chunk_bytes;
  for (size_t n :
       {size_t{0}, size_t{1}, size_t{4095}, chunk - 1, chunk, chunk + 1, (size_t{10} << 20) + 3}) {
    std::vector<unsigned char> src(n), dst(n + 1, 0xee);
    for (auto& b : src) b = static_cast<unsigned char>(gen());
    for (int threads : {1, 2}) {
      ThreadPool tp(threads);
      ThreadPool::Scope scope(&tp);
      std::fill(dst.begin(), dst.end(), 0xee);
      staged_copy(dst.data(), src.data(), n, pool);
      EXPECT_TRUE(std::equal(src.begin(), src.end(), dst.begin()))
          << n << " bytes, " << threads << " threads";
      EXPECT_EQ(dst[n], 0xee) << "wrote past the end";
    }
  }
  const auto st = pool.stats();
  EXPECT_EQ(st.blocks_in_use, 0u);
  EXPECT_GT(st.hits, 0u);  // staging blocks are reused copy after copy
  EXPECT_TRUE(st.locked || memlock_limit() < (size_t{2} << 20));
  EXPECT_THROW(staged_copy(nullptr, &gen, 4, pool), Error);
}
