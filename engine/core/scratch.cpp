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

struct Buffer {
  void* data = nullptr;
  size_t size = 0;
};

}  // namespace

// A depth's buffers; a kept level's (and the level itself) count in
// cached_blocks_held().
struct ScratchFrame::Level {
  explicit Level(bool keep) : kept(keep) {
    if (kept) note_cached_blocks(1);
  }
  Level(const Level&) = delete;
  Level& operator=(const Level&) = delete;
  ~Level() {
    for (Buffer& b : slots) replace(b, nullptr, 0);
    if (kept) note_cached_blocks(-1);
  }
  // b takes the n bytes at p (nullptr: none), freeing what it held.
  void replace(Buffer& b, void* p, size_t n) {
    if (b.data) {
      ::operator delete(b.data, kAlign);
      if (kept) note_cached_blocks(-1);
    }
    b = {p, n};
    if (p && kept) note_cached_blocks(1);
  }
  const bool kept;
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
    level_->replace(b, p, size);
  }
  return b.data;
}

int64_t cached_blocks_held() { return g_cached_blocks.load(std::memory_order_relaxed); }

void note_cached_blocks(int64_t delta) {
  g_cached_blocks.fetch_add(delta, std::memory_order_relaxed);
}

}  // namespace samba
