// The fp32 GEMM kernels of one ISA level, as a table of function pointers:
// the kernel files of engine/kernels/x86/ are compiled once per level with
// that level's flags (cmake/SambaIsa.cmake), and the GEMM layer calls the
// table of the level chosen at load (engine/core/isa.h). A null kernel means
// the level has none for that case, and the tile goes to Eigen.
#pragma once

#include <cstddef>
#include <cstdint>

#include "engine/core/isa.h"
#include "engine/kernels/gemm_args.h"

namespace samba::ops::detail {

using SgemmTileFn = void (*)(const GemmArgs<float>& g, const float* a, const float* b, float* c,
                             int64_t r0, int64_t rows, int64_t c0, int64_t cols);

struct SgemmKernels {
  IsaLevel level = IsaLevel::Generic;
  // Columns of the packed kernel's register block: tiles are cut at multiples.
  int64_t col_block = 16;
  // The packed kernel (gemm_packed in the level's file): operands packed into
  // cache-sized panels, a register-blocked micro-kernel, the epilogue applied
  // to each block while it is in L1. For the tile shapes `prefer_packed` accepts.
  bool (*prefer_packed)(int64_t rows, int64_t cols, int64_t k) = nullptr;
  SgemmTileFn packed_tile = nullptr;
  // Products with few rows against a weight stored as rows (x @ Wᵀ at small
  // batch): dot products of contiguous rows, the weight read once, straight
  // from memory, unpacked. Writes alpha * op(A) op(B) + beta * C; the caller
  // applies the epilogue.
  bool (*prefer_dot)(const GemmArgs<float>& g, int64_t rows) = nullptr;
  SgemmTileFn dot_tile = nullptr;
  // Small products of row-major operands, read in place without packing
  // (the direct kernel in packed_sgemm.h). Applies the epilogue itself.
  bool (*prefer_direct)(const GemmArgs<float>& g, int64_t rows, int64_t cols) = nullptr;
  SgemmTileFn direct_tile = nullptr;
  // x @ Wᵀ with few rows of x, computed as (W xᵀ)ᵀ: the weight read in place,
  // only x transposed (transposed_tile in packed_sgemm.h). Applies the
  // epilogue itself.
  bool (*prefer_transposed)(const GemmArgs<float>& g, int64_t rows, int64_t cols) = nullptr;
  SgemmTileFn transposed_tile = nullptr;
};

// The table of the level in use (active_isa(), or the highest level below
// it that has one).
const SgemmKernels& sgemm_kernels();
// The table of one level; the generic one (all null) for a level this build
// did not compile.
const SgemmKernels& sgemm_kernels_for(IsaLevel level);

// Defined by the per-level files (only where built).
const SgemmKernels& sgemm_kernels_avx2();
const SgemmKernels& sgemm_kernels_avx512();

// A 64-byte aligned packing buffer of at least `floats` floats, one of two
// (`which`) per thread, kept for the thread's next tile. Lives in the
// baseline-compiled GEMM layer, so no library code is compiled with a level's
// flags (see engine/kernels/x86/packed_sgemm.h).
float* gemm_scratch(int which, size_t floats);

}  // namespace samba::ops::detail
