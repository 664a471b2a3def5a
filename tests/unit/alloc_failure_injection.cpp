// The replaced global operator new/delete of alloc_failure_test: a counter
// shared by all threads decides which allocation fails.
#include "alloc_failure_injection.h"

#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <new>

namespace samba::testing {
namespace {

std::atomic<bool> armed{false};
std::atomic<int64_t> fail_at{0};
std::atomic<int64_t> counted{0};
std::atomic<bool> fired{false};
std::atomic<int64_t> live{0};
std::atomic<std::size_t> counted_size{0};

// True when this allocation is the one that fails.
bool should_fail(std::size_t size) {
  if (!armed.load(std::memory_order_acquire)) return false;
  if (size < counted_size.load(std::memory_order_relaxed)) return false;
  const int64_t n = counted.fetch_add(1, std::memory_order_acq_rel) + 1;
  if (n != fail_at.load(std::memory_order_acquire)) return false;
  fired.store(true, std::memory_order_release);
  return true;
}

void* allocate(std::size_t size, std::size_t align) noexcept {
  if (should_fail(size)) return nullptr;
  void* p = nullptr;
  if (size == 0) size = 1;
  if (align <= alignof(std::max_align_t)) {
    p = std::malloc(size);
  } else if (posix_memalign(&p, align, size) != 0) {
    p = nullptr;
  }
  if (p) live.fetch_add(1, std::memory_order_relaxed);
  return p;
}

void release(void* p) noexcept {
  if (!p) return;
  live.fetch_sub(1, std::memory_order_relaxed);
  std::free(p);
}

void* allocate_or_throw(std::size_t size, std::size_t align) {
  void* p = allocate(size, align);
  if (!p) throw std::bad_alloc();
  return p;
}

}  // namespace

void arm_allocation_failure(int64_t nth) {
  counted.store(0);
  fired.store(false);
  fail_at.store(nth);
  armed.store(true, std::memory_order_release);
}

InjectionResult disarm_allocation_failure() {
  armed.store(false, std::memory_order_release);
  return {counted.load(), fired.load()};
}

void set_counted_allocation_size(std::size_t bytes) { counted_size.store(bytes); }

int64_t live_allocations() { return live.load(); }

}  // namespace samba::testing

using samba::testing::allocate;
using samba::testing::allocate_or_throw;
using samba::testing::release;
constexpr std::size_t kDefaultAlign = alignof(std::max_align_t);

void* operator new(std::size_t n) { return allocate_or_throw(n, kDefaultAlign); }
void* operator new[](std::size_t n) { return allocate_or_throw(n, kDefaultAlign); }
void* operator new(std::size_t n, std::align_val_t a) { return allocate_or_throw(n, static_cast<std::size_t>(a)); }
void* operator new[](std::size_t n, std::align_val_t a) { return allocate_or_throw(n, static_cast<std::size_t>(a)); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept { return allocate(n, kDefaultAlign); }
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept { return allocate(n, kDefaultAlign); }
void* operator new(std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return allocate(n, static_cast<std::size_t>(a));
}
void* operator new[](std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return allocate(n, static_cast<std::size_t>(a));
}
void operator delete(void* p) noexcept { release(p); }
void operator delete[](void* p) noexcept { release(p); }
void operator delete(void* p, std::size_t) noexcept { release(p); }
void operator delete[](void* p, std::size_t) noexcept { release(p); }
void operator delete(void* p, std::align_val_t) noexcept { release(p); }
void operator delete[](void* p, std::align_val_t) noexcept { release(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { release(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { release(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { release(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { release(p); }
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept { release(p); }
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept { release(p); }
