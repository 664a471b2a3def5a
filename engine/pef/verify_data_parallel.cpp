// The data-parallel fields: the REDUCE buckets all-reduce device memory in
// place, so each must be exactly the bytes of the gradients it lists, inside
// the state area, and overlap nothing else.
#include <unordered_map>

#include "engine/pef/verify_internal.h"

namespace samba::pef::verify_detail {

void verify_data_parallel(const ProgramDesc& p) {
  const DataParallelDesc& dp = p.data_parallel;
  size_t reduce_sections = 0;
  for (const SectionDesc& s : p.sections)
    if (s.type == SectionType::REDUCE) {
      ++reduce_sections;
      if (!s.kernels.empty())
        corrupt(
            "section {} '{}': a REDUCE section has no kernels (the runtime all-reduces its "
            "buckets); it "
            "lists {}",
            s.id, s.name, s.kernels.size());
    }
  if (dp.world_size == 0) {
    if (!dp.buckets.empty() || dp.bucket_bytes != 0)
      corrupt("data parallel: world size 0 (not data parallel) with {} buckets of {} bytes",
              dp.buckets.size(), dp.bucket_bytes);
    if (reduce_sections > 0)
      corrupt("data parallel: a REDUCE section in a program that is not data parallel");
    return;
  }
  if (dp.world_size < 0 || dp.world_size > (1 << 20))
    corrupt("data parallel: world size {} is not 1..{}", dp.world_size, 1 << 20);
  std::unordered_map<int32_t, size_t> bucket_of;
  for (size_t b = 0; b < dp.buckets.size(); ++b) {
    const ReduceBucketDesc& bd = dp.buckets[b];
    const std::string where = fmt::format("data parallel bucket {}", b);
    if (static_cast<int>(bd.mem) >= kNumMemTypes)
      corrupt("{}: mem code {} is not a memory type", where, static_cast<int>(bd.mem));
    if (bd.dtype != DType::Float32 && bd.dtype != DType::Float64)
      corrupt("{}: dtype code {} is not float32 or float64", where, static_cast<int32_t>(bd.dtype));
    if (bd.gradients.empty()) corrupt("{}: lists no gradient", where);
    const uint64_t arena = p.memory.arena_bytes[static_cast<size_t>(bd.mem)];
    uint64_t end = 0;
    if (__builtin_add_overflow(bd.arena_offset, bd.nbytes, &end) || end > arena)
      corrupt("{}: bytes [{}, {}+{}) are outside the {} state area of {} bytes", where,
              bd.arena_offset, bd.arena_offset, bd.nbytes, mem_type_name(bd.mem), arena);
    uint64_t at = bd.arena_offset;
    for (int32_t g : bd.gradients) {
      check_index(g, p.tensors.size(), false, where, "gradient", "tensors");
      const TensorDesc& t = p.tensors[static_cast<size_t>(g)];
      if (t.role != TensorRole::Gradient)
        corrupt("{}: {} is a {}, not a gradient", where, tensor_label(p, g),
                tensor_role_name(t.role));
      if (t.dtype != bd.dtype || t.mem != bd.mem)
        corrupt("{}: {} is {} in {}; the bucket is {} in {}", where, tensor_label(p, g),
                dtype_name(t.dtype), mem_type_name(t.mem), dtype_name(bd.dtype),
                mem_type_name(bd.mem));
      // In order, from the bucket's start; the plan's alignment may leave a
      // gap, which no other tensor may use (checked below).
      if (t.arena_offset < at || (at == bd.arena_offset && t.arena_offset != at))
        corrupt(
            "{}: {} is at offset {}; the bucket's gradients are in memory order from offset {}, so "
            "it "
            "must be at {}{}",
            where, tensor_label(p, g), t.arena_offset, bd.arena_offset, at,
            at == bd.arena_offset ? "" : " or after");
      at = t.arena_offset + t.nbytes;
      auto [it, fresh] = bucket_of.emplace(g, b);
      if (!fresh) corrupt("{}: {} is in bucket {} already", where, tensor_label(p, g), it->second);
    }
    if (at != end) corrupt("{}: ends at offset {}; its last gradient ends at {}", where, end, at);
    if (bd.arena_offset % element_size(bd.dtype) != 0 || bd.nbytes % element_size(bd.dtype) != 0)
      corrupt("{}: offset {} and size {} are not whole {} elements", where, bd.arena_offset,
              bd.nbytes, dtype_name(bd.dtype));
    // Nothing else may live in the bytes the all-reduce overwrites.
    for (size_t i = 0; i < p.tensors.size(); ++i) {
      const TensorDesc& t = p.tensors[i];
      if (t.role == TensorRole::Alias || in_activation_area(t.role) || t.mem != bd.mem ||
          t.nbytes == 0)
        continue;
      const bool overlaps = t.arena_offset < end && bd.arena_offset < t.arena_offset + t.nbytes;
      if (overlaps && !bucket_of.contains(static_cast<int32_t>(i)))
        corrupt("{}: its bytes overlap {}, which it does not list", where,
                tensor_label(p, static_cast<int64_t>(i)));
    }
  }
  for (size_t i = 0; i < p.tensors.size(); ++i)
    if (p.tensors[i].role == TensorRole::Gradient && !bucket_of.contains(static_cast<int32_t>(i)))
      corrupt("data parallel: {} is in no bucket (every gradient is averaged over the replicas)",
              tensor_label(p, static_cast<int64_t>(i)));
}

}  // namespace samba::pef::verify_detail
