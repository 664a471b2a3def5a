// Scratch memory for a kernel's temporaries (a weight packed for the
// kernel's register blocks, partial sums added after a parallel loop): kept
// per thread and only ever grown, so once a program has run, its kernels
// take their temporaries without allocating.
//
// A kernel opens a ScratchFrame on the thread that calls it and takes its
// buffers from it; the frame's buffers stay the kernel's until the frame
// closes, and the tasks the kernel hands to other threads may use them
// meanwhile. Frames nest: while a thread waits in parallel_for, oneTBB may
// have it run a task of another kernel, and a frame that kernel opens lies
// above the waiting one, with buffers of its own. So a buffer is never
// handed out twice at once, whatever the scheduling.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <type_traits>

namespace samba {

class ScratchFrame {
 public:
  // Buffers a frame hands out: get() with slot 0 .. kSlots - 1.
  static constexpr int kSlots = 4;

  ScratchFrame();
  ~ScratchFrame();
  ScratchFrame(const ScratchFrame&) = delete;
  ScratchFrame& operator=(const ScratchFrame&) = delete;

  // Frames nested deeper than this on one thread keep nothing after they
  // close (their buffers are freed with them); shallower ones keep theirs
  // for the next frame at their depth.
  static constexpr int kKeptDepth = 16;

  // `count` elements of T, 64-byte aligned, holding whatever they last held
  // (zero them where that matters); valid until the frame closes or get()
  // is called again with the same slot. Called on the thread that opened
  // the frame (the pointer may then go to any thread). Grows the slot's
  // buffer when it is too small (the only time it allocates); throws
  // OutOfMemory when that fails, keeping the old buffer. count 0 gives a
  // valid pointer.
  template <typename T>
  T* get(int slot, size_t count) {
    static_assert(std::is_trivially_copyable_v<T> && alignof(T) <= 64);
    return static_cast<T*>(bytes(slot, count * sizeof(T)));
  }

  struct Level;  // a thread's buffers at one depth (scratch.cpp)

 private:
  void* bytes(int slot, size_t n);
  Level* level_;  // the buffers of this frame's depth on the opening thread
  std::unique_ptr<Level> own_;  // a frame deeper than kKeptDepth: its own
};

// Blocks of memory all threads keep as per-thread caches between calls:
// the frames' kept buffers and levels, and the GEMM's packing buffers
// (note_cached_blocks). The allocation-failure tests subtract them: a
// thread's cache growing during a call is not a leak of the call.
int64_t cached_blocks_held();
void note_cached_blocks(int64_t delta);

}  // namespace samba
