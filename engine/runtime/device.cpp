#include "engine/runtime/device.h"

#include <sys/mman.h>

#include <utility>

#include "engine/core/error.h"

namespace samba::runtime {

DeviceArena::DeviceArena(size_t nbytes) : size_(nbytes) {
  if (nbytes == 0) return;
  void* p = mmap(nullptr, nbytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  SAMBA_CHECK(p != MAP_FAILED, Status::OutOfMemory,
              "device memory: could not reserve an arena of {} bytes", nbytes);
  data_ = static_cast<std::byte*>(p);
}

DeviceArena::~DeviceArena() {
  if (data_) munmap(data_, size_);
}

DeviceArena::DeviceArena(DeviceArena&& o) noexcept
    : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)) {}

DeviceArena& DeviceArena::operator=(DeviceArena&& o) noexcept {
  if (this != &o) {
    if (data_) munmap(data_, size_);
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
  }
  return *this;
}

DeviceMemory::DeviceMemory(const uint64_t (&bytes)[pef::kNumMemTypes]) {
  for (int m = 0; m < pef::kNumMemTypes; ++m) arenas_[m] = DeviceArena(bytes[m]);
}

Tensor device_view(const DeviceMemory& memory, const pef::TensorDesc& t) {
  std::byte* base = memory.base(t.mem);
  SAMBA_CHECK(t.nbytes == 0 || (base && t.arena_offset + t.nbytes <= memory.size(t.mem)), Status::Internal,
              "device memory: tensor '{}' at {} + {} bytes is outside its {} arena of {} bytes", t.name,
              t.arena_offset, t.nbytes, pef::mem_type_name(t.mem), memory.size(t.mem));
  // Borrowed: the arena owns the bytes; the storage keeps no reference to it.
  void* p = t.nbytes ? static_cast<void*>(base + t.arena_offset) : static_cast<void*>(base);
  Ref<Storage> storage = Storage::borrow(p, t.nbytes);
  return Tensor::view_of(std::move(storage), t.dtype, t.shape, contiguous_strides(t.shape), 0);
}

}  // namespace samba::runtime
