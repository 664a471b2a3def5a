// What the two halves of verify_program share: the program's storage
// (verify_storage.cpp) and its computation (verify_compute.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "engine/core/error.h"
#include "engine/pef/program.h"

namespace samba::pef::verify_detail {

template <typename... Args>
[[noreturn]] void corrupt(fmt::format_string<Args...> f, Args&&... args) {
  fail(Status::CorruptFile, f, std::forward<Args>(args)...);
}

// "tensor 12 'gemm1.weight'", or "tensor 12" when out of range.
std::string tensor_label(const ProgramDesc& p, int64_t i);

// Throws unless 0 <= index < count (or index == -1 when `allow_none`):
// "<where>: <field> 57 is out of range (the program has 50 tensors)".
void check_index(int64_t index, size_t count, bool allow_none, std::string_view where,
                 std::string_view field, std::string_view items);

// Throws unless the value's dtype (when it holds one) is a valid code.
void check_attr_value(const AttrValue& v, std::string_view where);

// Whether a kernel can treat a tensor of `shape` viewed with `strides` as
// one contiguous run of numel elements from its offset, as Tensor's
// is_contiguous does: dims of size 1 may have any stride, and an empty
// tensor touches nothing. Computed with overflow checks.
bool is_contiguous_run(const Dims& shape, const Dims& strides);

void verify_tensors(const ProgramDesc& p);  // tensors, regions, overlap, memory plan, blobs
void verify_materializers(const ProgramDesc& p);
void verify_kernels(const ProgramDesc& p);
void verify_sections_and_schedule(const ProgramDesc& p);
void verify_argins(const ProgramDesc& p);
void verify_graphs(const ProgramDesc& p);
void verify_data_parallel(const ProgramDesc& p);  // buckets and REDUCE sections

}  // namespace samba::pef::verify_detail
