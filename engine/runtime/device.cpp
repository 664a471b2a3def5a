#include "engine/runtime/device.h"

#include <sys/mman.h>

#include <algorithm>
#include <utility>

#include "engine/core/error.h"

#if defined(__SANITIZE_ADDRESS__)
#define SAMBA_FENCE_ARENAS 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SAMBA_FENCE_ARENAS 1
#endif
#endif
#ifdef SAMBA_FENCE_ARENAS
#include <sanitizer/asan_interface.h>
#endif

namespace samba::runtime {

namespace {

#ifdef SAMBA_FENCE_ARENAS
// A page of poisoned bytes on each side of an arena: an overrun of up to a
// page is reported as such instead of landing in a neighbouring mapping.
constexpr size_t kRedzone = 4096;
#else
constexpr size_t kRedzone = 0;
#endif

size_t mapping_bytes(size_t nbytes) { return kRedzone + (nbytes + 4095) / 4096 * 4096 + kRedzone; }

void unmap(std::byte* data, size_t nbytes) {
  if (!data) return;
  std::byte* start = data - kRedzone;
#ifdef SAMBA_FENCE_ARENAS
  // Shadow memory outlives the mapping: a later mapping at this address
  // must not inherit the fence.
  ASAN_UNPOISON_MEMORY_REGION(start, mapping_bytes(nbytes));
#endif
  munmap(start, mapping_bytes(nbytes));
}

}  // namespace

DeviceArena::DeviceArena(size_t nbytes) : size_(nbytes) {
  if (nbytes == 0) return;
  SAMBA_CHECK(nbytes <= (size_t{1} << 62), Status::OutOfMemory,
              "device memory: could not reserve an arena of {} bytes", nbytes);
  void* p = mmap(nullptr, mapping_bytes(nbytes), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  SAMBA_CHECK(p != MAP_FAILED, Status::OutOfMemory,
              "device memory: could not reserve an arena of {} bytes", nbytes);
  data_ = static_cast<std::byte*>(p) + kRedzone;
#ifdef SAMBA_FENCE_ARENAS
  ASAN_POISON_MEMORY_REGION(p, kRedzone);
  ASAN_POISON_MEMORY_REGION(data_ + nbytes, mapping_bytes(nbytes) - kRedzone - nbytes);
#endif
}

DeviceArena::~DeviceArena() { unmap(data_, size_); }

DeviceArena::DeviceArena(DeviceArena&& o) noexcept
    : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)) {}

DeviceArena& DeviceArena::operator=(DeviceArena&& o) noexcept {
  if (this != &o) {
    unmap(data_, size_);
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
  }
  return *this;
}

void DeviceArena::fence_outside([[maybe_unused]] const std::vector<std::pair<uint64_t, uint64_t>>& used) const {
#ifdef SAMBA_FENCE_ARENAS
  if (!data_) return;
  ASAN_POISON_MEMORY_REGION(data_, size_);
  // ASan tracks 8-byte granules: an extent unpoisons its granules whole, so
  // a gap shorter than a granule next to a buffer stays addressable.
  for (auto [offset, nbytes] : used) {
    if (offset >= size_ || nbytes == 0) continue;
    ASAN_UNPOISON_MEMORY_REGION(data_ + offset, std::min<uint64_t>(nbytes, size_ - offset));
  }
#endif
}

DeviceMemory::DeviceMemory(const uint64_t (&bytes)[pef::kNumMemTypes]) {
  for (int m = 0; m < pef::kNumMemTypes; ++m) arenas_[m] = DeviceArena(bytes[m]);
}

void DeviceMemory::fence_to_plan([[maybe_unused]] const pef::ProgramDesc& program,
                                 [[maybe_unused]] bool activation) const {
#ifdef SAMBA_FENCE_ARENAS
  std::vector<std::pair<uint64_t, uint64_t>> used[pef::kNumMemTypes];
  for (const auto& t : program.tensors)
    if (t.role != pef::TensorRole::Alias && pef::in_activation_area(t.role) == activation)
      used[static_cast<int>(t.mem)].emplace_back(t.arena_offset, t.nbytes);
  for (int m = 0; m < pef::kNumMemTypes; ++m) arenas_[m].fence_outside(used[m]);
#endif
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
