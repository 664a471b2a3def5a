// Products with few rows against a weight stored as rows (x @ Wᵀ with W of
// shape n x k, the forward of linear at small batch): each output is a dot
// product of two contiguous rows, so the weight is read once, straight from
// memory, with no packing. Packing it (what the packed kernel and Eigen do)
// costs as much as the arithmetic when there are only a few rows.
#pragma once

#include "engine/kernels/gemm.h"

namespace samba::ops::detail {

// Rows up to which the dot kernel is used (when the build has it).
constexpr int64_t kDotMaxRows = 32;

// True when this build has the kernel and the product suits it: op(A) with
// rows contiguous in k, op(B) with columns contiguous in k, few rows.
bool prefer_dot_sgemm(const GemmArgs<float>& g, int64_t rows);

// Rows [r0, r0 + rows) x cols [c0, c0 + cols) of alpha * op(A) op(B) + beta * C
// (no bias or activation: the caller applies the epilogue).
void dot_sgemm_tile(const GemmArgs<float>& g, const float* a, const float* b, float* c, int64_t r0,
                    int64_t rows, int64_t c0, int64_t cols);

}  // namespace samba::ops::detail
