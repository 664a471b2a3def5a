#include "engine/kernels/reduce_layout.h"

#include "engine/core/error.h"

namespace samba::ops {
namespace {

ReduceDims finish(const Dims& shape, std::vector<bool> mask, bool keepdim) {
  ReduceDims r;
  r.mask = std::move(mask);
  for (size_t d = 0; d < shape.size(); ++d) {
    if (r.mask[d]) {
      r.count *= shape[d];
      r.kept_shape.push_back(1);
      if (keepdim) r.out_shape.push_back(1);
    } else {
      r.kept_shape.push_back(shape[d]);
      r.out_shape.push_back(shape[d]);
    }
  }
  return r;
}

// A run of neighbouring dims that are all reduced or all kept, merged into one.
struct Group {
  bool reduced;
  int64_t size, stride;
};

}  // namespace

ReduceDims reduce_dims(const Dims& shape, const std::vector<int64_t>& dims, bool all, bool keepdim,
                       const char* op) {
  const int64_t rank = static_cast<int64_t>(shape.size());
  std::vector<bool> mask(rank, all || dims.empty());
  if (!all) {
    std::vector<bool> seen(std::max<int64_t>(rank, 1), false);
    for (int64_t d : dims) {
      int64_t w = wrap_dim(d, rank, op);
      SAMBA_CHECK(!seen[w], Status::InvalidArgument, "{}: dim {} appears more than once in {}", op,
                  d, dims_str(dims));
      seen[w] = true;
      if (rank > 0) mask[w] = true;
    }
  }
  return finish(shape, std::move(mask), keepdim);
}

ReduceDims reduce_dims(const Dims& shape, const Attrs& a, const char* op) {
  static const std::vector<int64_t> kNone;
  const bool given = a.has("dim");
  return reduce_dims(shape, given ? a.ints("dim") : kNone, !given, a.b("keepdim"), op);
}

ReduceDims reduce_one_dim(const Dims& shape, const Attrs& a, const char* op) {
  if (!a.has("dim")) return reduce_dims(shape, {}, true, a.b("keepdim"), op);
  return reduce_dims(shape, {a.i("dim")}, false, a.b("keepdim"), op);
}

ReduceLayout reduce_layout(const Tensor& x, const std::vector<bool>& mask, bool segmented) {
  std::vector<Group> groups;
  bool mergeable = true;
  for (int64_t d = 0; d < x.dim(); ++d) {
    const int64_t size = x.shape()[d], stride = x.strides()[d];
    if (size == 1) continue;
    if (!groups.empty() && groups.back().reduced == mask[d]) {
      Group& g = groups.back();
      if (g.stride != stride * size) mergeable = false;
      g.size *= size;
      g.stride = stride;
      continue;
    }
    groups.push_back({mask[d], size, stride});
  }
  ReduceLayout l;
  // Patterns [kept? reduced? kept?] read in place.
  size_t at = 0;
  Group outer{false, 1, 0}, red{true, 1, 1}, inner{false, 1, 1};
  if (at < groups.size() && !groups[at].reduced) outer = groups[at++];
  if (at < groups.size() && groups[at].reduced) red = groups[at++];
  if (at < groups.size() && !groups[at].reduced) inner = groups[at++];
  if (mergeable && at == groups.size()) {
    // [reduced, kept] with unit-stride rows: the kept dim becomes the outer one.
    if (outer.size == 1 && inner.size > 1 && inner.stride != 1 && red.stride == 1)
      std::swap(outer, inner);
    const bool in_place = inner.size > 1 ? inner.stride == 1 : (red.size == 1 || red.stride == 1);
    if (in_place) {
      l.source = x;
      l.outer = outer.size;
      l.outer_stride = outer.stride;
      l.reduce = red.size;
      l.reduce_stride = red.size == 1 ? 1 : red.stride;
      l.inner = inner.size;
      return l;
    }
  }
  // [reduced, kept, reduced] with unit-stride runs: the kept dim is the outer one.
  if (segmented && mergeable && groups.size() == 3 && groups[0].reduced && groups[2].stride == 1) {
    l.source = x;
    l.outer = groups[1].size;
    l.outer_stride = groups[1].stride;
    l.segments = groups[0].size;
    l.segment_stride = groups[0].stride;
    l.reduce = groups[0].size * groups[2].size;
    return l;
  }
  // Permuted copy: kept dims first, reduced dims last, so each result reads one row.
  Dims shape, strides;
  int64_t kept = 1, reduced = 1;
  for (int pass = 0; pass < 2; ++pass)
    for (int64_t d = 0; d < x.dim(); ++d) {
      if (mask[d] != (pass == 1)) continue;
      shape.push_back(x.shape()[d]);
      strides.push_back(x.strides()[d]);
      (pass == 0 ? kept : reduced) *= x.shape()[d];
    }
  l.source = x.as_strided(shape, strides, x.offset()).contiguous();
  l.outer = kept;
  l.outer_stride = reduced;
  l.reduce = reduced;
  l.reduce_stride = 1;
  l.inner = 1;
  return l;
}

Tensor reshaped(const Tensor& t, const Dims& shape) {
  Tensor c = t.contiguous();
  return c.as_strided(shape, contiguous_strides(shape), c.offset());
}

}  // namespace samba::ops
