// Storage: a refcounted block of memory a tensor views. Who owns the bytes is
// the allocator's business (engine heap, caller-borrowed, adopted with a
// deleter, pinned pool, device arena), so new kinds plug in without touching
// Tensor.
#pragma once

#include <cstddef>
#include <functional>

#include "engine/core/refcount.h"

namespace samba {

enum class MemoryKind { Host, Pinned, Device, Borrowed, Adopted };

class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual void* allocate(size_t nbytes) = 0;  // throws Error{OutOfMemory}
  virtual void deallocate(void* p, size_t nbytes) = 0;
  virtual MemoryKind kind() const = 0;
};

// 64-byte aligned host memory.
Allocator& host_allocator();

class Storage : public RefCounted {
 public:
  static constexpr size_t kAlignment = 64;

  // Engine-owned memory from `alloc`, zero-filled when `zero` is set.
  static Ref<Storage> allocate(size_t nbytes, bool zero = false, Allocator& alloc = host_allocator());
  // Caller-owned memory the engine only borrows.
  static Ref<Storage> borrow(void* data, size_t nbytes);
  // Memory whose ownership moves to the engine; `deleter` runs once at the end.
  static Ref<Storage> adopt(void* data, size_t nbytes, std::function<void()> deleter);

  ~Storage() override;
  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  MemoryKind kind() const { return kind_; }

 private:
  Storage(void* data, size_t nbytes, MemoryKind kind) : data_(data), nbytes_(nbytes), kind_(kind) {}
  void* data_;
  size_t nbytes_;
  MemoryKind kind_;
  Allocator* allocator_ = nullptr;
  std::function<void()> deleter_;
};

}  // namespace samba
