// The packed fp32 GEMM kernel used for the tiles of the GEMM layer when the
// build targets AVX2 + FMA: operands are packed into cache-sized panels and a
// 6 x 16 register-blocked micro-kernel computes C, applying the epilogue to
// each 6 x 16 block right after its last update (while it is in L1). It reaches
// a larger fraction of the FMA peak than Eigen's GEMM on this class of CPU
// (see bench/linear_bench.cpp); other builds and dtypes use Eigen.
#pragma once

#include "engine/kernels/gemm.h"

namespace samba::ops::detail {

// True when this build contains the packed kernel.
bool has_packed_sgemm();

// True when the packed kernel is the better choice for a tile of this shape
// (matrix-vector shapes and tiny products stay with Eigen).
bool prefer_packed_sgemm(int64_t rows, int64_t cols, int64_t k);

// Rows [r0, r0 + rows) x cols [c0, c0 + cols) of
// C = act(alpha * op(A) op(B) + beta * C + bias), with A, B and C at the
// given base pointers and the shapes, strides and epilogue of g. Requires
// g.k > 0 and has_packed_sgemm().
void packed_sgemm_tile(const GemmArgs<float>& g, const float* a, const float* b, float* c,
                       int64_t r0, int64_t rows, int64_t c0, int64_t cols);

}  // namespace samba::ops::detail
