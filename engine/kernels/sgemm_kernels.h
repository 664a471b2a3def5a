// The GEMM kernels of one ISA level (fp32, and bf16 with fp32 accumulation),
// as a table of function pointers: the kernel files of engine/kernels/x86/
// are compiled once per level with that level's flags (cmake/SambaIsa.cmake),
// and the GEMM layer calls the table of the level chosen at load
// (engine/core/isa.h). A null kernel means the level has none for that
// case, and the tile goes to Eigen.
#pragma once

#include <cstddef>
#include <cstdint>

#include "engine/core/isa.h"
#include "engine/kernels/gemm_args.h"

namespace samba::ops::detail {

using SgemmTileFn = void (*)(const GemmArgs<float>& g, const float* a, const float* b, float* c,
                             int64_t r0, int64_t rows, int64_t c0, int64_t cols);

// A tile of a bf16 product (Bf16GemmArgs): fp32 accumulation, the epilogue,
// then C written in its type. Applies the epilogue itself.
template <typename TC>
using Bf16TileFn = void (*)(const Bf16GemmArgs<TC>& g, const uint16_t* a, const uint16_t* b,
                            TC* c, int64_t r0, int64_t rows, int64_t c0, int64_t cols);

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
  // bf16 products (engine/kernels/x86/bf16_gemm.h), any tile shape: at the
  // AVX512_BF16 level with vdpbf16ps on operands packed in k-pairs; at the
  // AVX2 and AVX-512 levels by the packed fp32 micro-kernel on panels
  // widened from bf16 while packing. Null at the generic level, which widens
  // blocks for Eigen (gemm_bf16.cpp).
  //
  // What fp32 accumulation means on each path: widening bf16 to fp32 is
  // exact and so is the product of two bf16 values in fp32 (8-bit
  // significands, 16-bit product), so the widened paths compute exactly
  // what an fp32 GEMM of the widened operands computes: one fp32 rounding
  // per multiply-add, in the fp32 kernel's order. vdpbf16ps (Intel SDM,
  // VDPBF16PS) adds the pair's two exact products to the accumulator one
  // after the other, each addition rounded to nearest even: the same
  // roundings as two FMAs, in another order over k than the widened
  // kernels'. It also treats bf16 denormal inputs (below 2^-126) as zero
  // and flushes denormal results to zero, which the widened paths do not.
  // So the paths agree exactly where every partial sum is exact in fp32 and
  // otherwise within fp32 accumulation error; the bf16 output is rounded
  // once, by the same integer rule (Eigen's) on every path.
  Bf16TileFn<float> bf16_tile_f32 = nullptr;
  Bf16TileFn<uint16_t> bf16_tile_bf16 = nullptr;
  // All of op(B) (k x n) packed in the layout packed_tile reads through
  // GemmArgs::b_packed, into a 64-byte aligned buffer of prepacked_b_floats.
  size_t (*prepacked_b_floats)(int64_t k, int64_t n) = nullptr;
  void (*prepack_b)(const GemmOperand<float>& b, int64_t k, int64_t n, float* dst) = nullptr;
  // Few rows against a B packed at load (GemmArgs::b_packed): register
  // blocks that sum over the whole depth, A read in place
  // (engine/kernels/x86/prepacked_rows.h). Applies the epilogue itself.
  bool (*prefer_prepacked_rows)(const GemmArgs<float>& g, int64_t rows, int64_t cols) = nullptr;
  SgemmTileFn prepacked_rows_tile = nullptr;
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
const SgemmKernels& sgemm_kernels_avx512_bf16();

// A 64-byte aligned packing buffer of at least `floats` floats, one of three
// (`which`) per thread, kept for the thread's next tile. Lives in the
// baseline-compiled GEMM layer, so no library code is compiled with a level's
// flags (see engine/kernels/x86/packed_sgemm.h).
float* gemm_scratch(int which, size_t floats);

// A bf16 tile without a level's kernel (the generic level, GemmKernel::Eigen,
// an empty depth): blocks of A and B widened to fp32 (exactly) into packing
// buffers, multiplied by Eigen's fp32 GEMM, then the epilogue and C written
// in its type (gemm_bf16.cpp).
template <typename TC>
void bf16_tile_widened(const Bf16GemmArgs<TC>& g, const uint16_t* a, const uint16_t* b, TC* c,
                       int64_t r0, int64_t rows, int64_t c0, int64_t cols);

}  // namespace samba::ops::detail
