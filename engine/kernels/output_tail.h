// A computation a producing kernel (a GEMM, a convolution) runs on each block
// of its float32 output right after computing it, while the block is still in
// cache: the runtime's fused epilogue chains (fused_elementwise.h). A kernel
// that takes the tail calls it on every block it writes exactly once and sets
// `applied`; one that does not (another dtype, another path) leaves it unset
// and the caller runs the tail over the whole output afterwards.
#pragma once

#include <cstdint>

namespace samba::ops {

// The activation applied by the GEMM epilogue, and one a tail may be (below).
// Values are stable: the compiler records them in kernel attributes.
enum class Activation : int32_t {
  None = 0,
  Relu = 1,
  GeluTanh = 2,
  GeluErf = 3,
  Tanh = 4,
  Sigmoid = 5
};

struct OutputTail {
  // rows x cols floats at c, rows ldc apart, all of them final values of the
  // output whose first element is at `base`.
  void (*fn)(const void* ctx, float* c, int64_t rows, int64_t cols, int64_t ldc) = nullptr;
  const void* ctx = nullptr;
  bool applied = false;
  // Relu when the whole tail is the registry's relu (x < 0 ? 0 : x, so NaN
  // and -0 stay) applied to each output element in place: a kernel may then
  // apply it to its registers as it stores them instead of calling fn (and
  // still sets `applied`). None otherwise, and no other value is set.
  Activation in_registers = Activation::None;

  void operator()(float* c, int64_t rows, int64_t cols, int64_t ldc) const {
    fn(ctx, c, rows, cols, ldc);
  }
};

// A row-wise op's work (layer_norm over the last dim) set up once for one
// call and run on ranges of its rows, in any order, on any thread: the
// runtime hands it to the product that computes the op's input (linear), so
// that each run of rows is normalized right after the product finished it,
// while it is in cache, instead of in a pass of its own over memory. A
// product that takes it calls it once on every row of its output, after all
// of that row's columns are final, and sets `applied`; one that does not
// leaves `applied` unset and the caller runs the op itself afterwards.
struct RowsWork {
  void (*fn)(const RowsWork& w, int64_t row0, int64_t rows) = nullptr;
  const float* x = nullptr;  // rows x len floats, contiguous: the op's input
  float* y = nullptr;        // the same for its output
  const float* weight = nullptr;  // optional, len floats
  const float* bias = nullptr;    // optional, len floats
  int64_t rows = 0, len = 0;
  double eps = 0;
  const OutputTail* tail = nullptr;  // run on each piece of y once it is stored
  const void* ctx = nullptr;         // anything else fn needs
  bool applied = false;

  void operator()(int64_t row0, int64_t n) const { fn(*this, row0, n); }
};

}  // namespace samba::ops
