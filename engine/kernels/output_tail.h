// A computation a producing kernel (a GEMM, a convolution) runs on each block
// of its float32 output right after computing it, while the block is still in
// cache: the runtime's fused epilogue chains (fused_elementwise.h). A kernel
// that takes the tail calls it on every block it writes exactly once and sets
// `applied`; one that does not (another dtype, another path) leaves it unset
// and the caller runs the tail over the whole output afterwards.
#pragma once

#include <cstdint>

namespace samba::ops {

struct OutputTail {
  // rows x cols floats at c, rows ldc apart, all of them final values of the
  // output whose first element is at `base`.
  void (*fn)(const void* ctx, float* c, int64_t rows, int64_t cols, int64_t ldc) = nullptr;
  const void* ctx = nullptr;
  bool applied = false;

  void operator()(float* c, int64_t rows, int64_t cols, int64_t ldc) const {
    fn(ctx, c, rows, cols, ldc);
  }
};

}  // namespace samba::ops
