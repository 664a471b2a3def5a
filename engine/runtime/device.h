// The emulated RDU's memory. Device memory is separate from host memory: an
// arena per memory type (DDR, HBM, HOST), laid out by the PEF's memory plan,
// so moving data between a host tensor and a device tensor is a real copy,
// as on hardware. Arenas are anonymous mappings: their pages are zero until
// written and cost nothing until touched. Each lies between two guard pages,
// its end against the second, so an access past either end faults (and,
// under ASan, is reported from the first byte past the end).
//
// Under AddressSanitizer an arena is also fenced to the memory plan: every
// byte of it that no planned buffer covers (alignment gaps, the slack before
// its start) is poisoned, so a kernel that reads or writes outside the
// buffers the plan gave it is reported where it does so, even inside the
// arena. In other builds the fence compiles to nothing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "engine/core/tensor.h"
#include "engine/pef/program.h"

namespace samba::runtime {

class DeviceArena {
 public:
  DeviceArena() = default;
  explicit DeviceArena(size_t nbytes);  // throws OutOfMemory
  ~DeviceArena();
  DeviceArena(DeviceArena&& o) noexcept;
  DeviceArena& operator=(DeviceArena&& o) noexcept;
  DeviceArena(const DeviceArena&) = delete;
  DeviceArena& operator=(const DeviceArena&) = delete;

  std::byte* data() const { return data_; }
  size_t size() const { return size_; }

  // Under AddressSanitizer: makes only the `used` (offset, byte count)
  // extents of the arena addressable; everything else in it is poisoned.
  // Extents are clipped to the arena. Does nothing in other builds.
  void fence_outside(const std::vector<std::pair<uint64_t, uint64_t>>& used) const;

 private:
  void release() noexcept;

  std::byte* data_ = nullptr;
  size_t size_ = 0;
  std::byte* mapping_ = nullptr;  // the guard pages included
  size_t mapped_size_ = 0;
};

// One area (state or activation) of every memory type.
class DeviceMemory {
 public:
  DeviceMemory() = default;
  // Sizes per memory type, from the memory plan.
  explicit DeviceMemory(const uint64_t (&bytes)[pef::kNumMemTypes]);
  std::byte* base(pef::MemType m) const { return arenas_[static_cast<int>(m)].data(); }
  size_t size(pef::MemType m) const { return arenas_[static_cast<int>(m)].size(); }
  // Fences each arena to the root tensors of `program` that live in it:
  // the activation area's tensors when `activation`, the state area's
  // otherwise (see DeviceArena::fence_outside). Nothing in other builds.
  void fence_to_plan(const pef::ProgramDesc& program, bool activation) const;

 private:
  DeviceArena arenas_[pef::kNumMemTypes];
};

// A tensor viewing device bytes of `memory` (which must outlive it): the
// root tensor `t` of the program, contiguous at its planned offset.
Tensor device_view(const DeviceMemory& memory, const pef::TensorDesc& t);

// Writes every blob of `program` (constants, output gradients of ones,
// weights embedded at compile time) to its tensor in the state area
// `state`: the values a loaded program starts from, every other device byte
// being zero. Throws CorruptFile when a blob's size is not its tensor's.
void write_initial_values(const pef::ProgramDesc& program, const DeviceMemory& state);

}  // namespace samba::runtime
