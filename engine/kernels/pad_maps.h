// Index maps behind pad and its gradient: for every padded dim, which input
// element each output element reads (or the constant), shared by the forward
// and the backward kernels so that the two can never disagree.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "engine/core/dispatch.h"
#include "engine/core/error.h"
#include "engine/core/parallel.h"
#include "engine/core/strided.h"
#include "engine/core/tensor.h"

namespace samba::ops::pad_detail {

enum class PadMode { Constant, Reflect, Replicate };

inline PadMode pad_mode(const std::string& m) {
  if (m == "constant") return PadMode::Constant;
  if (m == "reflect") return PadMode::Reflect;
  if (m == "replicate") return PadMode::Replicate;
  fail(Status::InvalidArgument, "pad: mode '{}' is not one of 'constant', 'reflect', 'replicate'",
       m);
}

// Where every output element of pad reads from: per padded dim, a map from
// output index to input index (-1: the constant value).
struct PadPlan {
  PadMode mode = PadMode::Constant;
  int64_t lead = 0;  // first padded dim; dims before it are copied whole
  Dims in_shape, out_shape;
  std::vector<std::vector<int64_t>> maps;        // for dims lead..rank-1
  int64_t mid_out = 0, mid_in = 0, mid_len = 0;  // the last dim's straight copy
};

inline PadPlan plan_pad(const Dims& in_shape, const std::vector<int64_t>& pad,
                        const std::string& mode_name, bool with_maps) {
  PadPlan p;
  p.mode = pad_mode(mode_name);
  const int64_t rank = static_cast<int64_t>(in_shape.size());
  const int64_t pairs = static_cast<int64_t>(pad.size() / 2);
  SAMBA_CHECK(pad.size() % 2 == 0 && pairs <= rank, Status::InvalidArgument,
              "pad: pad [{}] must hold (before, after) pairs for at most the {} dims of shape {}",
              fmt::join(pad, ", "), rank, dims_str(in_shape));
  p.lead = rank - pairs;
  p.in_shape = p.out_shape = in_shape;
  for (int64_t i = 0; i < pairs; ++i) {
    const int64_t d = rank - 1 - i, n = in_shape[d], lo = pad[2 * i], hi = pad[2 * i + 1];
    if (p.mode != PadMode::Constant) {
      SAMBA_CHECK(lo >= 0 && hi >= 0, Status::InvalidArgument,
                  "pad: {} mode needs non-negative padding, got ({}, {}) for dim {}", mode_name, lo,
                  hi, d);
      SAMBA_CHECK(p.mode != PadMode::Reflect || (lo < n && hi < n), Status::InvalidArgument,
                  "pad: reflect padding ({}, {}) of dim {} must be smaller than its size {}", lo,
                  hi, d, n);
      SAMBA_CHECK(n > 0 || (lo == 0 && hi == 0), Status::InvalidArgument,
                  "pad: {} mode cannot pad dim {} of size 0", mode_name, d);
    }
    p.out_shape[d] = n + lo + hi;
    SAMBA_CHECK(p.out_shape[d] >= 0, Status::InvalidArgument,
                "pad: padding ({}, {}) removes more than the {} elements of dim {}", lo, hi, n, d);
  }
  if (!with_maps || pairs == 0) return p;
  p.maps.resize(pairs);
  for (int64_t i = 0; i < pairs; ++i) {
    const int64_t d = rank - 1 - i, n = in_shape[d], lo = pad[2 * i];
    auto& m = p.maps[d - p.lead];
    m.resize(p.out_shape[d]);
    for (int64_t o = 0; o < p.out_shape[d]; ++o) {
      int64_t s = o - lo;
      if (p.mode == PadMode::Reflect) {
        if (s < 0) s = -s;
        if (s >= n) s = 2 * (n - 1) - s;
      } else if (p.mode == PadMode::Replicate) {
        s = std::clamp<int64_t>(s, 0, n - 1);
      } else if (s < 0 || s >= n) {
        s = -1;
      }
      m[o] = s;
    }
  }
  const int64_t n = in_shape.back(), lo = pad[0], hi = pad[1];
  p.mid_out = std::max<int64_t>(lo, 0);
  p.mid_in = std::max<int64_t>(-lo, 0);
  p.mid_len = std::max<int64_t>(0, n - p.mid_in - std::max<int64_t>(-hi, 0));
  return p;
}

// Calls row(out_row, in_offset) for output rows [b, e) (rows along the last
// dim); in_offset is -1 when the row lies wholly in constant padding.
template <typename F>
void for_pad_rows(const PadPlan& p, int64_t b, int64_t e, F&& row) {
  const int64_t rank = static_cast<int64_t>(p.out_shape.size());
  const Dims in_strides = contiguous_strides(p.in_shape);
  const int64_t in_block = p.lead > 0 ? in_strides[p.lead - 1] : numel_of(p.in_shape);
  for (int64_t r = b; r < e; ++r) {
    int64_t rem = r, off = 0;
    for (int64_t d = rank - 2; d >= p.lead && off >= 0; --d) {
      const int64_t src = p.maps[d - p.lead][rem % p.out_shape[d]];
      rem /= p.out_shape[d];
      off = src < 0 ? -1 : off + src * in_strides[d];
    }
    row(r, off < 0 ? -1 : off + rem * in_block);
  }
}

template <typename T>
void pad_rows(const PadPlan& p, const T* in, T* out, T value) {
  const int64_t width = p.out_shape.back();
  const int64_t rows = width == 0 ? 0 : numel_of(p.out_shape) / width;
  const auto& last = p.maps.back();
  parallel_for(rows, std::max<int64_t>(1, kMinGrain / std::max<int64_t>(width, 1)),
               [&](int64_t b, int64_t e) {
                 for_pad_rows(p, b, e, [&](int64_t r, int64_t off) {
                   T* dst = out + r * width;
                   if (off < 0) return std::fill(dst, dst + width, value);
                   const T* src = in + off;
                   for (int64_t j = 0; j < p.mid_out; ++j)
                     dst[j] = last[j] < 0 ? value : src[last[j]];
                   std::copy(src + p.mid_in, src + p.mid_in + p.mid_len, dst + p.mid_out);
                   for (int64_t j = p.mid_out + p.mid_len; j < width; ++j)
                     dst[j] = last[j] < 0 ? value : src[last[j]];
                 });
               });
}

// Gradient of pad: every output gradient added to the input element it read.
// Output rows of one outer block may read the same input row, so blocks are the
// unit of parallel work.
template <typename T>
void pad_backward_rows(const PadPlan& p, const T* g, T* gx) {
  const int64_t width = p.out_shape.back();
  if (width == 0) return;
  int64_t outer = 1;
  for (int64_t d = 0; d < p.lead; ++d) outer *= p.out_shape[d];
  const int64_t rows_per_block = outer == 0 ? 0 : numel_of(p.out_shape) / width / outer;
  const auto& last = p.maps.back();
  parallel_for(
      outer, std::max<int64_t>(1, kMinGrain / std::max<int64_t>(rows_per_block * width, 1)),
      [&](int64_t b, int64_t e) {
        for_pad_rows(p, b * rows_per_block, e * rows_per_block, [&](int64_t r, int64_t off) {
          if (off < 0) return;
          const T* src = g + r * width;
          T* dst = gx + off;
          for (int64_t j = 0; j < width; ++j)
            if (last[j] >= 0) dst[last[j]] += src[j];
        });
      });
}

}  // namespace samba::ops::pad_detail
