#include "engine/core/scratch.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <new>

#include "engine/core/error.h"

namespace samba {
namespace {

constexpr std::align_val_t kAlign{64};

std::atomic<int64_t> g_cached_blocks{0};

// A slot's buffer; `cached` ones count in cached_blocks_held().
struct Buffer {
  void* data = nullptr;
  size_t size = 0;
  bool cached = false;
  Buffer() = default;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() { reset(nullptr, 0); }
  void reset(void* p, size_t n) {
    if (data) {
      ::operator delete(data, kAlign);
      if (cached) note_cached_blocks(-1);
    }
    data = p;
    size = n;
    if (data && cached) note_cached_blocks(1);
  }
};

}  // namespace

struct ScratchFrame::Level {
  explicit Level(bool kept) {
    for (Buffer& b : slots) b.cached = kept;
    if (kept) note_cached_blocks(1);
  }
  ~Level() {
    if (slots[0].cached) note_cached_blocks(-1);
  }
  Buffer slots[kSlots];
};

namespace {

// The kept levels of the thread, one per depth reached so far; a level's
// buffers outlive its frames, so the next frame at that depth reuses them.
struct ThreadScratch {
  std::unique_ptr<ScratchFrame::Level> levels[ScratchFrame::kKeptDepth];
  int depth = 0;
};

ThreadScratch& thread_scratch() {
  thread_local ThreadScratch s;
  return s;
}

}  // namespace

ScratchFrame::ScratchFrame() {
  ThreadScratch& s = thread_scratch();
  if (s.depth < kKeptDepth) {
    if (!s.levels[s.depth]) s.levels[s.depth] = std::make_unique<Level>(true);
    level_ = s.levels[s.depth].get();
  } else {
    own_ = std::make_unique<Level>(false);
    level_ = own_.get();
  }
  ++s.depth;
}

ScratchFrame::~ScratchFrame() { --thread_scratch().depth; }

void* ScratchFrame::bytes(int slot, size_t n) {
  SAMBA_CHECK(slot >= 0 && slot < kSlots, Status::Internal, "scratch slot {} is not in [0, {})",
              slot, kSlots);
  Buffer& b = level_->slots[slot];
  if (b.size < n || !b.data) {
    const size_t size = (std::max<size_t>(n, 64) + 63) / 64 * 64;
    // The old buffer stays until the new one exists: a failed growth keeps it.
    void* p = ::operator new(size, kAlign, std::nothrow);
    SAMBA_CHECK(p, Status::OutOfMemory, "cannot allocate {} bytes of kernel scratch memory", size);
    b.reset(p, size);
  }
  return b.data;
}

size_t scratch_bytes_held() {
  size_t total = 0;
  for (const auto& level : thread_scratch().levels)
    if (level)
      for (const Buffer& b : level->slots) total += b.size;
  return total;
}

int64_t cached_blocks_held() { return g_cached_blocks.load(std::memory_order_relaxed); }

void note_cached_blocks(int64_t delta) {
  g_cached_blocks.fetch_add(delta, std::memory_order_relaxed);
}

}  // namespace samba
