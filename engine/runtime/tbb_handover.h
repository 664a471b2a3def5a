// Hand-overs oneTBB makes inside libtbb.so, told to ThreadSanitizer. Debian's
// libtbb.so is not built with TSan, so TSan cannot see that try_put or
// task_arena::execute hands work to a worker and that wait_for_all or the
// end of execute waits for it; without these, TSan takes the caller's writes
// before and reads after for races. `sync` is any address both sides agree
// on. Nothing without TSan.
//
// The flow graphs use one address per graph, which orders every node after
// every node that finished before it started: TSan then misses a race
// between two kernels of a section that no edge orders but that happened
// to run one after the other. Per-edge hand-overs would keep those.
#pragma once

#include "engine/core/sanitizers.h"

#if SAMBA_TSAN
#include <sanitizer/tsan_interface.h>
#endif

namespace samba::runtime {

// Everything this thread did so far happens before what a thread does after
// taken_over(sync).
inline void handed_over([[maybe_unused]] const void* sync) {
#if SAMBA_TSAN
  __tsan_release(const_cast<void*>(sync));
#endif
}

inline void taken_over([[maybe_unused]] const void* sync) {
#if SAMBA_TSAN
  __tsan_acquire(const_cast<void*>(sync));
#endif
}

}  // namespace samba::runtime
