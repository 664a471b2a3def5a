#include "engine/profile/memcpy_bandwidth.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "engine/core/parallel.h"

namespace samba {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;

// The last-level cache of the CPU running us, from sysfs: glibc's
// sysconf(_SC_LEVEL3_CACHE_SIZE) reports ten times the real size on some
// AMD virtual machines. 0 when unknown.
uint64_t last_level_cache_bytes() {
  uint64_t best = 0;
  for (int index = 0; index < 8; ++index) {
    std::ifstream f(fmt::format("/sys/devices/system/cpu/cpu0/cache/index{}/size", index));
    uint64_t n = 0;
    char unit = 0;
    if (!(f >> n)) continue;
    f >> unit;
    best = std::max(best, unit == 'K' ? n << 10 : unit == 'M' ? n << 20 : n);
  }
#ifdef _SC_LEVEL3_CACHE_SIZE
  if (best == 0) best = static_cast<uint64_t>(std::max(0L, sysconf(_SC_LEVEL3_CACHE_SIZE)));
#endif
  return best;
}

// Each buffer is four times the last-level cache, so no repetition is
// served from it; the bounds keep the measurement short where the cache
// size is unknown or huge.
uint64_t buffer_bytes() {
  const uint64_t cache = last_level_cache_bytes();
  return std::clamp<uint64_t>(4 * (cache > 0 ? cache : 32 * kMiB), 64 * kMiB, 256 * kMiB);
}

// Each of `threads` threads runs `part(i)` for its share i; returns when
// all have. Plain threads started and joined per pass, not the pool's
// arena: this runs once per process, a pass moves hundreds of MiB so the
// threads' start (tens of microseconds) does not show in its time, and
// start and join are the synchronisation ThreadSanitizer sees, where the
// end of a parallel_for is a wait inside libtbb, which it cannot see into.
template <class Part>
void on_threads(int threads, Part part) {
  std::vector<std::thread> pool;
  pool.reserve(static_cast<size_t>(threads));
  for (int i = 0; i < threads; ++i) pool.emplace_back(part, i);
  for (std::thread& t : pool) t.join();
}

MemcpyBandwidth measure() {
  constexpr int kRepetitions = 5;
  MemcpyBandwidth m;
  m.buffer_bytes = buffer_bytes();
  m.repetitions = kRepetitions;
  m.threads = std::max(1, default_pool().threads());
  const std::unique_ptr<char[]> src(new char[m.buffer_bytes]);
  const std::unique_ptr<char[]> dst(new char[m.buffer_bytes]);
  const uint64_t share = m.buffer_bytes / static_cast<uint64_t>(m.threads);
  auto range = [&](int i) {
    const uint64_t begin = share * static_cast<uint64_t>(i);
    const uint64_t end = i + 1 == m.threads ? m.buffer_bytes : begin + share;
    return std::pair{begin, end - begin};
  };
  // Touches every page of both buffers on the threads that copy, so page
  // faults are not timed.
  on_threads(m.threads, [&](int i) {
    const auto [begin, bytes] = range(i);
    std::memset(src.get() + begin, 1, bytes);
    std::memset(dst.get() + begin, 0, bytes);
  });
  double best_s = 0;
  for (int r = 0; r < kRepetitions; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    on_threads(m.threads, [&](int i) {
      const auto [begin, bytes] = range(i);
      std::memcpy(dst.get() + begin, src.get() + begin, bytes);
    });
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (r == 0 || s < best_s) best_s = s;
  }
  m.bytes_per_s = best_s > 0 ? 2.0 * static_cast<double>(m.buffer_bytes) / best_s : 0;
  return m;
}

}  // namespace

const MemcpyBandwidth& memcpy_bandwidth() {
  static const MemcpyBandwidth measured = measure();
  return measured;
}

}  // namespace samba
