// The bf16 GEMM where no ISA level has a kernel for it (the generic level,
// GemmKernel::Eigen, an empty depth): blocks of the tile's operands widened
// to fp32 into the thread's packing buffers (exact: no tensor is converted
// or allocated per call), Eigen's fp32 GEMM summing the blocks of the depth
// into an fp32 block of C, then the epilogue and one rounding to C's type.
#include <Eigen/Core>
#include <algorithm>

#include "engine/core/dtype.h"
#include "engine/kernels/sgemm_kernels.h"

namespace samba::ops::detail {

namespace {

using RowMajorF = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using BlockMap = Eigen::Map<RowMajorF>;

float widen(uint16_t h) { return static_cast<float>(Eigen::numext::bit_cast<bf16>(h)); }
float widen(float x) { return x; }

void store(float* p, float v) { *p = v; }
void store(uint16_t* p, float v) { *p = Eigen::numext::bit_cast<uint16_t>(bf16(v)); }

// Rows x cols of op(X) from (i0, p0), widened into dst (row-major, `cols` apart).
void widen_block(const GemmOperand<uint16_t>& op, const uint16_t* x, int64_t i0, int64_t rows,
                 int64_t p0, int64_t cols, float* dst) {
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t p = 0; p < cols; ++p)
      dst[i * cols + p] =
          widen(op.trans ? x[(p0 + p) * op.ld + i0 + i] : x[(i0 + i) * op.ld + p0 + p]);
}

// Blocks small enough for the packing buffers to stay in L2.
constexpr int64_t kRows = 64, kCols = 256, kDepth = 256;

}  // namespace

template <typename TC>
void bf16_tile_widened(const Bf16GemmArgs<TC>& g, const uint16_t* a, const uint16_t* b, TC* c,
                       int64_t r0, int64_t rows, int64_t c0, int64_t cols) {
  float* wa = gemm_scratch(0, kRows * kDepth);
  float* wb = gemm_scratch(1, kDepth * kCols);
  float* sum = gemm_scratch(2, kRows * kCols);
  for (int64_t jc = 0; jc < cols; jc += kCols) {
    const int64_t nc = std::min(kCols, cols - jc);
    for (int64_t ic = 0; ic < rows; ic += kRows) {
      const int64_t mc = std::min(kRows, rows - ic);
      BlockMap s(sum, mc, nc);
      s.setZero();
      for (int64_t pc = 0; pc < g.k; pc += kDepth) {
        const int64_t kc = std::min(kDepth, g.k - pc);
        widen_block(g.a, a, r0 + ic, mc, pc, kc, wa);
        for (int64_t p = 0; p < kc; ++p)
          for (int64_t j = 0; j < nc; ++j)
            wb[p * nc + j] = widen(g.b.trans ? b[(c0 + jc + j) * g.b.ld + pc + p]
                                             : b[(pc + p) * g.b.ld + c0 + jc + j]);
        s.noalias() += BlockMap(wa, mc, kc) * BlockMap(wb, kc, nc);
      }
      TC* ct = c + (r0 + ic) * g.ldc + c0 + jc;
      const TC* bias = g.bias ? g.bias + c0 + jc : nullptr;
      for (int64_t i = 0; i < mc; ++i)
        for (int64_t j = 0; j < nc; ++j) {
          float v = g.alpha * s(i, j);
          if (g.beta != 0.0f) v += g.beta * widen(ct[i * g.ldc + j]);  // C unread at 0
          if (bias) v += widen(bias[j]);
          s(i, j) = v;
        }
      apply_epilogue(sum, mc, nc, nc, static_cast<const float*>(nullptr), g.act);
      for (int64_t i = 0; i < mc; ++i)
        for (int64_t j = 0; j < nc; ++j) store(ct + i * g.ldc + j, s(i, j));
    }
  }
}

template void bf16_tile_widened<float>(const Bf16GemmArgs<float>&, const uint16_t*,
                                       const uint16_t*, float*, int64_t, int64_t, int64_t, int64_t);
template void bf16_tile_widened<uint16_t>(const Bf16GemmArgs<uint16_t>&, const uint16_t*,
                                          const uint16_t*, uint16_t*, int64_t, int64_t, int64_t,
                                          int64_t);

}  // namespace samba::ops::detail
