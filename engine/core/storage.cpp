#include "engine/core/storage.h"

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>

#include "engine/core/allocation_limit.h"
#include "engine/core/error.h"

namespace samba {
namespace {

std::atomic<size_t> g_host_allocation_limit{SIZE_MAX};

class HostAllocator final : public Allocator {
 public:
  void* allocate(size_t nbytes) override {
    if (const size_t limit = host_allocation_limit(); nbytes > limit)
      fail(Status::OutOfMemory, "cannot allocate {} bytes: above the host allocation limit of {} bytes",
           nbytes, limit);
    size_t rounded = (nbytes + Storage::kAlignment - 1) / Storage::kAlignment * Storage::kAlignment;
    if (rounded < nbytes) fail(Status::OutOfMemory, "cannot allocate {} bytes: size overflows", nbytes);
    void* p = std::aligned_alloc(Storage::kAlignment, rounded == 0 ? Storage::kAlignment : rounded);
    if (!p) fail(Status::OutOfMemory, "out of host memory allocating {} bytes", nbytes);
    return p;
  }
  void deallocate(void* p, size_t) override { std::free(p); }
  MemoryKind kind() const override { return MemoryKind::Host; }
};

}  // namespace

void set_host_allocation_limit(size_t bytes) { g_host_allocation_limit.store(bytes); }
size_t host_allocation_limit() { return g_host_allocation_limit.load(std::memory_order_relaxed); }

Allocator& host_allocator() {
  static HostAllocator a;
  return a;
}

Ref<Storage> Storage::allocate(size_t nbytes, bool zero, Allocator& alloc) {
  // Until a Storage owns the bytes, a failed allocation of the Storage
  // itself gives them back.
  struct Held {
    Allocator& alloc;
    void* p;
    size_t nbytes;
    ~Held() {
      if (p) alloc.deallocate(p, nbytes);
    }
  } held{alloc, alloc.allocate(nbytes), nbytes};
  if (zero && nbytes) std::memset(held.p, 0, nbytes);
  Ref<Storage> s(new Storage(held.p, nbytes, alloc.kind()));
  s->allocator_ = &alloc;
  held.p = nullptr;
  return s;
}

Ref<Storage> Storage::borrow(void* data, size_t nbytes) {
  return Ref<Storage>(new Storage(data, nbytes, MemoryKind::Borrowed));
}

Ref<Storage> Storage::adopt(void* data, size_t nbytes, std::function<void()> deleter) {
  Ref<Storage> s(new Storage(data, nbytes, MemoryKind::Adopted));
  s->deleter_ = std::move(deleter);
  return s;
}

Storage::~Storage() {
  if (allocator_) allocator_->deallocate(data_, nbytes_);
  if (deleter_) deleter_();
}

}  // namespace samba
