#include "engine/core/scratch.h"

#include <algorithm>
#include <memory>
#include <new>
#include <vector>

#include "engine/core/error.h"

namespace samba {
namespace {

constexpr std::align_val_t kAlign{64};

struct AlignedDelete {
  void operator()(void* p) const { ::operator delete(p, kAlign); }
};

struct Buffer {
  std::unique_ptr<void, AlignedDelete> data;
  size_t size = 0;
};

}  // namespace

struct ScratchFrame::Level {
  Buffer slots[kSlots];
};

namespace {

// One level per open frame of the thread; a level's buffers outlive its
// frames, so the next frame at that depth reuses them. Levels are held by
// pointer: opening a deeper frame may grow the vector, never move a level.
struct ThreadScratch {
  std::vector<std::unique_ptr<ScratchFrame::Level>> levels;
  size_t depth = 0;
};

ThreadScratch& thread_scratch() {
  thread_local ThreadScratch s;
  return s;
}

}  // namespace

ScratchFrame::ScratchFrame() {
  ThreadScratch& s = thread_scratch();
  if (s.depth == s.levels.size()) s.levels.push_back(std::make_unique<Level>());
  level_ = s.levels[s.depth++].get();
}

ScratchFrame::~ScratchFrame() { --thread_scratch().depth; }

void* ScratchFrame::bytes(int slot, size_t n) {
  SAMBA_CHECK(slot >= 0 && slot < kSlots, Status::Internal, "scratch slot {} is not in [0, {})",
              slot, kSlots);
  Buffer& b = level_->slots[slot];
  if (b.size < n || !b.data) {
    const size_t size = (std::max<size_t>(n, 64) + 63) / 64 * 64;
    void* p = ::operator new(size, kAlign, std::nothrow);
    SAMBA_CHECK(p, Status::OutOfMemory, "cannot allocate {} bytes of kernel scratch memory", size);
    b.data.reset(p);
    b.size = size;
  }
  return b.data.get();
}

size_t scratch_bytes_held() {
  size_t total = 0;
  for (const auto& level : thread_scratch().levels)
    for (const Buffer& b : level->slots) total += b.size;
  return total;
}

}  // namespace samba
