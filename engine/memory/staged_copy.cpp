#include "engine/memory/staged_copy.h"

#include <algorithm>
#include <cstring>

#include "engine/core/error.h"
#include "engine/core/parallel.h"

#if defined(__AVX2__)
#include <immintrin.h>
#endif

namespace samba {
namespace {

// Copies a staging block (in cache) to its destination with non-temporal
// stores: the destination's lines are written without being read first, so
// the staged copy moves no more memory traffic than one memcpy.
void copy_out(char* dst, const char* src, size_t n) {
#if defined(__AVX2__)
  const size_t head = std::min(n, (32 - reinterpret_cast<uintptr_t>(dst) % 32) % 32);
  std::memcpy(dst, src, head);
  size_t i = head;
  for (; i + 128 <= n; i += 128) {
    const auto* s = reinterpret_cast<const __m256i*>(src + i);
    auto* d = reinterpret_cast<__m256i*>(dst + i);
    const __m256i a = _mm256_loadu_si256(s), b = _mm256_loadu_si256(s + 1);
    const __m256i c = _mm256_loadu_si256(s + 2), e = _mm256_loadu_si256(s + 3);
    _mm256_stream_si256(d, a);
    _mm256_stream_si256(d + 1, b);
    _mm256_stream_si256(d + 2, c);
    _mm256_stream_si256(d + 3, e);
  }
  std::memcpy(dst + i, src + i, n - i);
  _mm_sfence();  // the streamed stores are visible before the copy returns
#else
  std::memcpy(dst, src, n);
#endif
}

}  // namespace

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
      copy_out(d + off, static_cast<const char*>(stage), len);
    }
    pool.deallocate(stage, chunk);
  });
}

}  // namespace samba
