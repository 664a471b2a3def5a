// verify_program, storage half: tensors, their views, arenas, regions,
// overlap, the memory plan and blob sizes.
#include <algorithm>
#include <unordered_map>

#include "engine/pef/verify_internal.h"

namespace samba::pef::verify_detail {
namespace {

bool owns_persistent_bytes(TensorRole r) {
  return r != TensorRole::Intermediate && r != TensorRole::Alias;
}

// Element count and byte size of a shape whose dims are known non-negative;
// false when either does not fit in 64 bits.
bool shape_sizes(const Dims& shape, DType dtype, uint64_t& numel, uint64_t& bytes) {
  uint64_t n = 1;
  for (int64_t d : shape)
    if (__builtin_mul_overflow(n, static_cast<uint64_t>(d), &n)) return false;
  if (n > static_cast<uint64_t>(INT64_MAX)) return false;
  numel = n;
  return !__builtin_mul_overflow(n, uint64_t{element_size(dtype)}, &bytes);
}

void check_shape_of(const TensorDesc& t, const std::string& label, uint64_t& numel,
                    uint64_t& bytes) {
  if (t.shape.size() > static_cast<size_t>(kMaxRank))
    corrupt("{}: rank {} exceeds the maximum of {}", label, t.shape.size(), kMaxRank);
  for (size_t d = 0; d < t.shape.size(); ++d)
    if (t.shape[d] < 0) corrupt("{}: shape {} has negative dim {}", label, dims_str(t.shape), d);
  if (!shape_sizes(t.shape, t.dtype, numel, bytes))
    corrupt("{}: shape {} of {} has more elements or bytes than fit in 64 bits", label,
            dims_str(t.shape), dtype_name(t.dtype));
}

// An alias's strided view must read only bytes of its base.
void check_alias(const ProgramDesc& p, size_t i, const std::string& label, uint64_t numel) {
  const TensorDesc& t = p.tensors[i];
  check_index(t.alias_of, p.tensors.size(), false, label, "alias_of", "tensors");
  if (static_cast<size_t>(t.alias_of) == i) corrupt("{}: is an alias of itself", label);
  const TensorDesc& base = p.tensors[static_cast<size_t>(t.alias_of)];
  std::string base_label = tensor_label(p, t.alias_of);
  if (base.role == TensorRole::Alias || base.alias_of >= 0)
    corrupt("{}: alias_of {} is itself an alias; aliases must view a tensor that owns its bytes",
            label, base_label);
  if (t.nbytes != 0 || t.arena_offset != 0 || !t.region.empty())
    corrupt("{}: an alias owns no bytes, but has nbytes {}, arena_offset {}, region '{}'", label,
            t.nbytes, t.arena_offset, t.region);
  if (t.blob >= 0 || t.materializer >= 0)
    corrupt("{}: an alias cannot have a blob or a materializer (its base's bytes are its contents)",
            label);
  if (t.mem != base.mem)
    corrupt("{}: mem {} differs from its base {}'s {}", label, mem_type_name(t.mem), base_label,
            mem_type_name(base.mem));
  // The runtime builds a view from its base's tensor, which keeps the base's
  // dtype: strides and offset then count elements of the base's size.
  if (t.dtype != base.dtype)
    corrupt("{}: dtype {} differs from its base {}'s {}; a view cannot reinterpret its base's bytes",
            label, dtype_name(t.dtype), base_label, dtype_name(base.dtype));
  if (t.strides.size() != t.shape.size())
    corrupt("{}: {} strides for a shape of rank {}", label, t.strides.size(), t.shape.size());
  if (t.view_offset < 0) corrupt("{}: view_offset {} is negative", label, t.view_offset);
  for (size_t d = 0; d < t.strides.size(); ++d)
    if (t.strides[d] < 0) corrupt("{}: stride {} of dim {} is negative", label, t.strides[d], d);
  if (numel == 0) return;
  // The last element read, in elements of the alias's dtype.
  uint64_t last = static_cast<uint64_t>(t.view_offset);
  bool overflow = false;
  for (size_t d = 0; d < t.shape.size(); ++d) {
    uint64_t step = 0;
    overflow |= __builtin_mul_overflow(static_cast<uint64_t>(t.shape[d] - 1),
                                       static_cast<uint64_t>(t.strides[d]), &step);
    overflow |= __builtin_add_overflow(last, step, &last);
  }
  uint64_t end_bytes = 0;
  overflow |= __builtin_add_overflow(last, uint64_t{1}, &last);
  overflow |= __builtin_mul_overflow(last, uint64_t{element_size(t.dtype)}, &end_bytes);
  if (overflow || end_bytes > base.nbytes)
    corrupt("{}: view (offset {}, strides {}, shape {}) reads past the {} bytes of its base {}",
            label, t.view_offset, dims_str(t.strides), dims_str(t.shape), base.nbytes, base_label);
}

// Whether `strides` are the row-major strides of `shape`. Computed with
// overflow checks: a shape with a zero dim has numel 0 but may still have
// trailing dims whose product overflows.
bool is_contiguous(const Dims& shape, const Dims& strides) {
  if (strides.size() != shape.size()) return false;
  int64_t expected = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    if (strides[d] != expected) return false;
    if (d > 0 && __builtin_mul_overflow(expected, std::max<int64_t>(shape[d], 1), &expected))
      return false;
  }
  return true;
}

void check_owner_storage(const ProgramDesc& p, size_t i, const std::string& label, uint64_t numel,
                         uint64_t bytes) {
  const TensorDesc& t = p.tensors[i];
  if (t.alias_of != -1)
    corrupt("{}: alias_of is {} but the role is {}, not alias", label, t.alias_of,
            tensor_role_name(t.role));
  if (t.view_offset != 0)
    corrupt("{}: view_offset {} on a tensor that owns its bytes", label, t.view_offset);
  if (!t.strides.empty() && !is_contiguous(t.shape, t.strides))
    corrupt(
        "{}: strides {} on a tensor that owns its bytes; they must be empty or the contiguous "
        "strides of shape {}",
        label, dims_str(t.strides), dims_str(t.shape));
  if (t.nbytes != bytes)
    corrupt("{}: nbytes {} but its {} elements of {} take {} bytes", label, t.nbytes, numel,
            dtype_name(t.dtype), bytes);
  const bool activation = in_activation_area(t.role);
  uint64_t arena = (activation ? p.memory.activation_bytes : p.memory.arena_bytes)[static_cast<size_t>(t.mem)];
  uint64_t end = 0;
  if (__builtin_add_overflow(t.arena_offset, t.nbytes, &end) || end > arena)
    corrupt("{}: arena_offset {} + nbytes {} exceeds the {} {} area of {} bytes", label, t.arena_offset, t.nbytes,
            mem_type_name(t.mem), activation ? "activation" : "state", arena);
  // Kernels read elements in place through typed pointers: an offset that
  // splits an element is a misaligned load or store in every kernel.
  if (t.arena_offset % element_size(t.dtype) != 0)
    corrupt("{}: arena_offset {} is not a multiple of the {} bytes of a {} element", label, t.arena_offset,
            element_size(t.dtype), dtype_name(t.dtype));
}

void check_references(const ProgramDesc& p, size_t i, const std::string& label) {
  const TensorDesc& t = p.tensors[i];
  check_index(t.blob, p.blobs.size(), true, label, "blob", "blobs");
  check_index(t.materializer, p.materializers.size(), true, label, "materializer", "materializers");
  check_index(t.grad, p.tensors.size(), true, label, "grad", "tensors");
  if (t.blob >= 0 && t.materializer >= 0)
    corrupt("{}: has both blob {} and materializer {}; its contents come from one", label, t.blob,
            t.materializer);
  if (t.blob >= 0) {
    if (t.role == TensorRole::Intermediate)
      corrupt("{}: an intermediate cannot have initial contents (blob {})", label, t.blob);
    uint64_t size = p.blobs[static_cast<size_t>(t.blob)].data.size();
    if (size != t.nbytes)
      corrupt("{}: blob {} holds {} bytes, but the tensor has nbytes {}", label, t.blob, size,
              t.nbytes);
  }
  if (t.materializer >= 0 && t.role != TensorRole::Parameter && t.role != TensorRole::Buffer &&
      t.role != TensorRole::OptimizerState)
    corrupt(
        "{}: materializer {} on a {}; only parameters, buffers and optimizer state are "
        "materialized",
        label, t.materializer, tensor_role_name(t.role));
  if (t.role == TensorRole::Parameter && t.grad >= 0 &&
      p.tensors[static_cast<size_t>(t.grad)].role != TensorRole::Gradient)
    corrupt("{}: grad {} is a {}, not a gradient", label, tensor_label(p, t.grad),
            tensor_role_name(p.tensors[static_cast<size_t>(t.grad)].role));
  if (t.batch_dim < -1 || t.batch_dim >= static_cast<int64_t>(t.shape.size()))
    corrupt("{}: batch_dim {} is not -1 or a dim of its rank-{} shape", label, t.batch_dim,
            t.shape.size());
}

struct Extent {
  uint64_t begin, end;
  size_t tensor;
};

std::string extent_str(const Extent& e) { return fmt::format("[{}, {})", e.begin, e.end); }

// A tensor without a region name is its own region, named after itself (as
// the compiler's memory plan keys regions), so `region_name="t0"` on t2
// shares t0's bytes.
const std::string& region_of(const TensorDesc& t) { return t.region.empty() ? t.name : t.region; }

bool same_region(const ProgramDesc& p, const Extent& a, const Extent& b) {
  return region_of(p.tensors[a.tensor]) == region_of(p.tensors[b.tensor]);
}

// Persistent tensors never share bytes (but for one region), and no
// intermediate's bytes fall on a persistent tensor's.
// Each memory type has a state and an activation area: index 2 * mem + area.
void check_overlap(const ProgramDesc& p) {
  constexpr int kSpaces = 2 * kNumMemTypes;
  std::vector<Extent> persistent[kSpaces], scratch[kSpaces];
  for (size_t i = 0; i < p.tensors.size(); ++i) {
    const TensorDesc& t = p.tensors[i];
    if (t.role == TensorRole::Alias || t.nbytes == 0) continue;
    Extent e{t.arena_offset, t.arena_offset + t.nbytes, i};
    const size_t space = 2 * static_cast<size_t>(t.mem) + (in_activation_area(t.role) ? 1 : 0);
    (owns_persistent_bytes(t.role) ? persistent : scratch)[space].push_back(e);
  }
  for (int sp = 0; sp < kSpaces; ++sp) {
    const int m = sp / 2;
    auto& ps = persistent[sp];
    std::sort(ps.begin(), ps.end(), [](const Extent& a, const Extent& b) {
      return a.begin != b.begin ? a.begin < b.begin : a.tensor < b.tensor;
    });
    std::string_view arena = mem_type_name(static_cast<MemType>(m));
    size_t reach = 0;  // the extent so far that ends last
    for (size_t k = 1; k < ps.size(); ++k) {
      const Extent& prev = ps[reach];
      if (ps[k].begin < prev.end && !same_region(p, ps[k], prev))
        corrupt("{} {} and {} {} overlap in the {} arena; persistent tensors need their own bytes",
                tensor_label(p, static_cast<int64_t>(prev.tensor)), extent_str(prev),
                tensor_label(p, static_cast<int64_t>(ps[k].tensor)), extent_str(ps[k]), arena);
      if (ps[k].end > prev.end) reach = k;
    }
    // Persistent extents now overlap only within a region, so their ends
    // grow with their beginnings: the first ending after a scratch extent's
    // beginning is the only one that could meet it.
    for (const Extent& s : scratch[sp]) {
      auto it = std::upper_bound(ps.begin(), ps.end(), s.begin,
                                 [](uint64_t v, const Extent& e) { return v < e.end; });
      if (it != ps.end() && it->begin < s.end && !same_region(p, s, *it))
        corrupt(
            "{} {} overlaps {} {} in the {} arena; intermediates may reuse only each other's bytes",
            tensor_label(p, static_cast<int64_t>(s.tensor)), extent_str(s),
            tensor_label(p, static_cast<int64_t>(it->tensor)), extent_str(*it), arena);
    }
  }
}

void check_memory_plan(const ProgramDesc& p) {
  uint64_t sum = 0;
  for (int m = 0; m < kNumMemTypes; ++m)
    if (__builtin_add_overflow(sum, p.memory.arena_bytes[m], &sum) ||
        __builtin_add_overflow(sum, p.memory.activation_bytes[m], &sum))
      corrupt("memory plan: the area sizes add up to more than 64 bits");
  if (p.memory.peak_bytes != sum)
    corrupt("memory plan: peak_bytes {} is not the sum {} of the state areas (DDR {}, HBM {}, HOST {}) and the "
            "activation areas (DDR {}, HBM {}, HOST {})",
            p.memory.peak_bytes, sum, p.memory.arena_bytes[0], p.memory.arena_bytes[1], p.memory.arena_bytes[2],
            p.memory.activation_bytes[0], p.memory.activation_bytes[1], p.memory.activation_bytes[2]);
  if (p.memory.lower_bound_bytes > p.memory.peak_bytes)
    corrupt("memory plan: lower_bound_bytes {} exceeds peak_bytes {}", p.memory.lower_bound_bytes,
            p.memory.peak_bytes);
}

}  // namespace

void verify_tensors(const ProgramDesc& p) {
  check_memory_plan(p);
  std::unordered_map<std::string_view, size_t> names;
  std::unordered_map<std::string_view, size_t> regions;
  names.reserve(p.tensors.size());
  for (size_t i = 0; i < p.tensors.size(); ++i) {
    const TensorDesc& t = p.tensors[i];
    if (t.name.empty()) corrupt("tensor {}: name is empty", i);
    std::string label = tensor_label(p, static_cast<int64_t>(i));
    auto [it, fresh] = names.emplace(t.name, i);
    if (!fresh) corrupt("{}: name already used by tensor {}", label, it->second);
    if (!is_valid_dtype(static_cast<int32_t>(t.dtype)))
      corrupt("{}: dtype code {} is not a dtype (0..{})", label, static_cast<int32_t>(t.dtype),
              kNumDTypes - 1);
    if (static_cast<int>(t.role) >= kNumTensorRoles)
      corrupt("{}: role code {} is not a role (0..{})", label, static_cast<int>(t.role),
              kNumTensorRoles - 1);
    if (static_cast<int>(t.mem) >= kNumMemTypes)
      corrupt("{}: mem code {} is not a memory type (0..{})", label, static_cast<int>(t.mem),
              kNumMemTypes - 1);
    uint64_t numel = 0, bytes = 0;
    check_shape_of(t, label, numel, bytes);
    if (t.role == TensorRole::Alias)
      check_alias(p, i, label, numel);
    else
      check_owner_storage(p, i, label, numel, bytes);
    check_references(p, i, label);
    if (!t.region.empty()) {
      auto [r, first] = regions.emplace(t.region, i);
      const TensorDesc& o = p.tensors[r->second];
      if (!first && (o.mem != t.mem || o.arena_offset != t.arena_offset || o.nbytes != t.nbytes))
        corrupt("{}: region '{}' is {} [{}, +{}) here but {} [{}, +{}) in {}", label, t.region,
                mem_type_name(t.mem), t.arena_offset, t.nbytes, mem_type_name(o.mem),
                o.arena_offset, o.nbytes, tensor_label(p, static_cast<int64_t>(r->second)));
    }
  }
  for (size_t i = 0; i < p.tensors.size(); ++i) {
    const TensorDesc& t = p.tensors[i];
    if (!t.owner.empty() && !names.count(t.owner))
      corrupt("{}: owner '{}' is not a tensor of the program",
              tensor_label(p, static_cast<int64_t>(i)), t.owner);
  }
  check_overlap(p);
}

}  // namespace samba::pef::verify_detail
