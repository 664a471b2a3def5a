#include "tests/pef_mutate/pef_layout.h"

#include <xxhash.h>

#include <algorithm>
#include <map>
#include <tuple>

#include "engine/pef/program.h"

namespace samba::testing::pef_edit {

size_t element_size(fb::DType d) {
  switch (d) {
    case fb::DType::Float64:
    case fb::DType::Int64:
      return 8;
    case fb::DType::Float32:
    case fb::DType::Int32:
      return 4;
    case fb::DType::BFloat16:
    case fb::DType::Float16:
    case fb::DType::Int16:
      return 2;
    default:
      return 1;
  }
}

int64_t numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    if (d < 0 || __builtin_mul_overflow(n, d, &n)) return INT64_MAX;
  return n;
}

std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> s(shape.size());
  // Wrapping: a mutated shape's strides may overflow; the verifier refuses them.
  uint64_t step = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    s[i] = static_cast<int64_t>(step);
    step *= static_cast<uint64_t>(std::max<int64_t>(shape[i], 1));
  }
  return s;
}

namespace {

bool in_activation_area(fb::TensorRole r) {
  return pef::in_activation_area(static_cast<pef::TensorRole>(r));
}

// A blob of `nbytes` made of the old contents repeated (zeros when there
// were none), stored raw with its checksum.
// A size past kMaxRewrittenBlob (never a fuzz input's) leaves the blob as it
// was: the mismatch is then the verifier's to find.
constexpr uint64_t kMaxRewrittenBlob = 16ull << 20;

void rewrite_blob(fb::BlobT& b, uint64_t nbytes) {
  if (nbytes > kMaxRewrittenBlob) return;
  std::vector<uint8_t> old = b.compression == fb::Compression::None ? b.data : std::vector<uint8_t>{};
  b.data.assign(nbytes, 0);
  for (size_t i = 0; !old.empty() && i < b.data.size(); ++i) b.data[i] = old[i % old.size()];
  b.compression = fb::Compression::None;
  b.uncompressed_size = nbytes;
  b.checksum = XXH64(b.data.data(), b.data.size(), 0);
}

}  // namespace

void replan(fb::ProgramT& p) {
  using Key = std::tuple<bool, int, uint64_t>;  // (activation area, memory type, old offset)
  std::map<Key, uint64_t> extent;
  for (auto& t : p.tensors) {
    if (t->role == fb::TensorRole::Alias) continue;
    const uint64_t n = static_cast<uint64_t>(numel(t->shape)) * element_size(t->dtype);
    if (t->blob >= 0 && static_cast<size_t>(t->blob) < p.blobs.size() && n != t->nbytes)
      rewrite_blob(*p.blobs[static_cast<size_t>(t->blob)], n);
    t->nbytes = n;
    if (!t->strides.empty()) t->strides = contiguous_strides(t->shape);
    Key k{in_activation_area(t->role), static_cast<int>(t->mem), t->arena_offset};
    extent[k] = std::max(extent[k], n);
  }
  std::map<Key, uint64_t> placed;
  uint64_t end[2][pef::kNumMemTypes] = {};
  for (auto [k, n] : extent) {
    auto [activation, mem, offset] = k;
    if (mem < 0 || mem >= pef::kNumMemTypes) continue;
    uint64_t& cursor = end[activation][mem];
    placed[k] = cursor;
    cursor += (n + 63) / 64 * 64;
  }
  for (auto& t : p.tensors) {
    if (t->role == fb::TensorRole::Alias) continue;
    auto it = placed.find(Key{in_activation_area(t->role), static_cast<int>(t->mem), t->arena_offset});
    if (it != placed.end()) t->arena_offset = it->second;
  }
  if (!p.memory) p.memory = std::make_unique<fb::MemoryPlanT>();
  p.memory->arena_bytes.assign(end[0], end[0] + pef::kNumMemTypes);
  p.memory->activation_bytes.assign(end[1], end[1] + pef::kNumMemTypes);
  uint64_t peak = 0;
  for (int m = 0; m < pef::kNumMemTypes; ++m) peak += end[0][m] + end[1][m];
  p.memory->peak_bytes = peak;
  p.memory->lower_bound_bytes = std::min(p.memory->lower_bound_bytes, peak);
}

}  // namespace samba::testing::pef_edit
