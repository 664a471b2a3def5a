#include "engine/runtime/device.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <utility>

#include "engine/core/error.h"
#include "engine/core/sanitizers.h"

#if SAMBA_ASAN
#include <sanitizer/asan_interface.h>
#endif

namespace samba::runtime {

namespace {

// Arena starts keep the plan's 64-byte alignment.
constexpr size_t kArenaAlignment = 64;

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

size_t page_size() {
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return page;
}

// Under AddressSanitizer the alignment slack after an arena's last byte is
// poisoned too, so an overrun of even one byte is reported.
void poison(const std::byte* p, size_t n) {
#if SAMBA_ASAN
  ASAN_POISON_MEMORY_REGION(p, n);
#else
  (void)p, (void)n;
#endif
}
void unpoison(const std::byte* p, size_t n) {
#if SAMBA_ASAN
  ASAN_UNPOISON_MEMORY_REGION(p, n);
#else
  (void)p, (void)n;
#endif
}

}  // namespace

// An arena is mapped between two inaccessible guard pages, its end flush
// against the second (up to the alignment slack): a kernel that reads or
// writes past either end of the device memory it was given faults at once
// instead of touching other memory.
DeviceArena::DeviceArena(size_t nbytes) : size_(nbytes) {
  if (nbytes == 0) return;
  const size_t page = page_size();
  SAMBA_CHECK(nbytes <= SIZE_MAX - 3 * page, Status::OutOfMemory, "device memory: an arena of {} bytes", nbytes);
  const size_t body = round_up(nbytes, page);
  mapped_size_ = body + 2 * page;
  void* p = mmap(nullptr, mapped_size_, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  SAMBA_CHECK(p != MAP_FAILED, Status::OutOfMemory,
              "device memory: could not reserve an arena of {} bytes", nbytes);
  mapping_ = static_cast<std::byte*>(p);
  if (mprotect(mapping_ + page, body, PROT_READ | PROT_WRITE) != 0) {
    munmap(mapping_, mapped_size_);
    fail(Status::OutOfMemory, "device memory: could not map an arena of {} bytes", nbytes);
  }
  const size_t used = round_up(nbytes, kArenaAlignment);
  data_ = mapping_ + page + (body - used);
  poison(mapping_ + page, body - used);
  poison(data_ + nbytes, used - nbytes);
}

void DeviceArena::release() noexcept {
  if (!mapping_) return;
  // Shadow memory outlives the mapping: a later mapping at this address
  // must not inherit the fence.
  unpoison(mapping_, mapped_size_);
  munmap(mapping_, mapped_size_);
  mapping_ = data_ = nullptr;
  mapped_size_ = size_ = 0;
}

DeviceArena::~DeviceArena() { release(); }

DeviceArena::DeviceArena(DeviceArena&& o) noexcept
    : data_(std::exchange(o.data_, nullptr)),
      size_(std::exchange(o.size_, 0)),
      mapping_(std::exchange(o.mapping_, nullptr)),
      mapped_size_(std::exchange(o.mapped_size_, 0)) {}

DeviceArena& DeviceArena::operator=(DeviceArena&& o) noexcept {
  if (this != &o) {
    release();
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
    mapping_ = std::exchange(o.mapping_, nullptr);
    mapped_size_ = std::exchange(o.mapped_size_, 0);
  }
  return *this;
}

void DeviceArena::fence_outside([[maybe_unused]] const std::vector<std::pair<uint64_t, uint64_t>>& used) const {
#if SAMBA_ASAN
  if (!data_) return;
  poison(data_, size_);
  // ASan tracks 8-byte granules: an extent unpoisons its granules whole, so
  // a gap shorter than a granule next to a buffer stays addressable.
  for (auto [offset, nbytes] : used) {
    if (offset >= size_ || nbytes == 0) continue;
    unpoison(data_ + offset, std::min<uint64_t>(nbytes, size_ - offset));
  }
#endif
}

DeviceMemory::DeviceMemory(const uint64_t (&bytes)[pef::kNumMemTypes]) {
  for (int m = 0; m < pef::kNumMemTypes; ++m) arenas_[m] = DeviceArena(bytes[m]);
}

void DeviceMemory::fence_to_plan([[maybe_unused]] const pef::ProgramDesc& program,
                                 [[maybe_unused]] bool activation) const {
#if SAMBA_ASAN
  std::vector<std::pair<uint64_t, uint64_t>> used[pef::kNumMemTypes];
  for (const auto& t : program.tensors)
    if (t.role != pef::TensorRole::Alias && pef::in_activation_area(t.role) == activation)
      used[static_cast<int>(t.mem)].emplace_back(t.arena_offset, t.nbytes);
  // A REDUCE bucket is all-reduced whole: its gradients and the alignment
  // gaps between them, which the verifier checked no other tensor uses.
  if (!activation)
    for (const auto& b : program.data_parallel.buckets)
      used[static_cast<int>(b.mem)].emplace_back(b.arena_offset, b.nbytes);
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

void write_initial_values(const pef::ProgramDesc& d, const DeviceMemory& state) {
  for (const auto& t : d.tensors) {
    if (t.blob < 0 || t.role == pef::TensorRole::Alias || pef::in_activation_area(t.role)) continue;
    const auto& blob = d.blobs[static_cast<size_t>(t.blob)].data;
    Tensor dst = device_view(state, t);
    SAMBA_CHECK(blob.size() == dst.nbytes(), Status::CorruptFile,
                "PEF: blob of tensor '{}' has {} bytes; the tensor has {}", t.name, blob.size(), dst.nbytes());
    if (!blob.empty()) std::memcpy(dst.raw_data(), blob.data(), blob.size());
  }
}

}  // namespace samba::runtime
