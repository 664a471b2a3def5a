// The operands of one GEMM and its epilogue, apart from the GEMM layer
// (gemm.h): the per-ISA kernel files include only this, so no Eigen or
// tensor code is compiled with a level's flags (engine/kernels/x86/packed_sgemm.h
// says why that matters).
#pragma once

#include <cstdint>
#include <type_traits>

#include "engine/kernels/output_tail.h"

namespace samba::ops {

// One matrix operand as stored: `trans` false means op(X) is the row-major
// matrix at `data` with rows `ld` elements apart; true means op(X) is the
// transpose of such a matrix (so its columns are `ld` apart).
template <typename T>
struct GemmOperand {
  const T* data = nullptr;
  int64_t ld = 0;
  bool trans = false;
};

// C (m x n, row-major, rows ldc apart) = act(alpha * op(A) * op(B) + beta * C + bias).
// op(A) is m x k, op(B) is k x n, bias (optional) has n elements. When beta is
// 0, C is not read (NaNs in it do not propagate).
template <typename T>
struct GemmArgs {
  int64_t m = 0, n = 0, k = 0;
  GemmOperand<T> a, b;
  T* c = nullptr;
  int64_t ldc = 0;
  T alpha = 1, beta = 0;
  const T* bias = nullptr;
  Activation act = Activation::None;
  // Optional: all of op(B) packed once for the packed kernel of the active
  // ISA level (prepack_b in gemm.h; float only). Tiles that take the packed
  // kernel read their blocks from it instead of packing B; the others read
  // b as usual, so both must hold the same values.
  const T* b_packed = nullptr;
  const OutputTail* tail = nullptr;  // float only: run on each finished block after act
  // Float only, a single product: run on rows of C once every column of
  // them is final (after act and tail), each row exactly once.
  const RowsWork* rows = nullptr;
};

// A product of bf16 operands accumulated in fp32 (the real device's mixed
// precision): the operands are bf16 bit patterns (as Eigen::bfloat16 stores
// them), C, bias and the addend beta * C have C's type TC: float (the fp32
// sums themselves) or uint16_t (bf16, rounded to nearest even once, after the
// epilogue, as Eigen::bfloat16(float) rounds). What "fp32 accumulation"
// means bit for bit on each ISA level is said in sgemm_kernels.h.
template <typename TC>
struct Bf16GemmArgs {
  int64_t m = 0, n = 0, k = 0;
  GemmOperand<uint16_t> a, b;
  TC* c = nullptr;
  int64_t ldc = 0;
  float alpha = 1, beta = 0;
  const TC* bias = nullptr;
  Activation act = Activation::None;
};

// Applies bias (n elements, may be null) then `act` to the rows x cols block
// at c (rows ldc apart). Used by the GEMM tiles; exposed for kernels that
// produce a matrix another way.
template <typename T>
void apply_epilogue(T* c, int64_t rows, int64_t cols, int64_t ldc, const T* bias, Activation act);

// The rows x cols block at c is final: its epilogue, then the caller's tail.
template <typename T>
void finish_block(const GemmArgs<T>& g, T* c, int64_t rows, int64_t cols, const T* bias) {
  apply_epilogue(c, rows, cols, g.ldc, bias, g.act);
  if constexpr (std::is_same_v<T, float>)
    if (g.tail) (*g.tail)(c, rows, cols, g.ldc);
}

}  // namespace samba::ops
