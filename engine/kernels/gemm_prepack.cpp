// Pre-packed B (gemm.h): the level's packing of a whole operand and how a
// tensor is read as one. Which products pack (gemm_packs_b) is decided in
// gemm.cpp, beside the tiling it depends on.
#include <cstdint>

#include "engine/core/error.h"
#include "engine/kernels/gemm.h"
#include "engine/kernels/sgemm_kernels.h"

namespace samba::ops {

size_t prepacked_b_floats(int64_t k, int64_t n) {
  const detail::SgemmKernels& kern = detail::sgemm_kernels();
  return kern.prepacked_b_floats ? kern.prepacked_b_floats(k, n) : 0;
}

void prepack_b(const GemmOperand<float>& b, int64_t k, int64_t n, float* dst) {
  const detail::SgemmKernels& kern = detail::sgemm_kernels();
  SAMBA_CHECK(kern.prepack_b && reinterpret_cast<uintptr_t>(dst) % 64 == 0, Status::Internal,
              "prepack_b: the {} level has no packed kernel or the buffer is not 64-byte aligned",
              isa_name(kern.level));
  kern.prepack_b(b, k, n, dst);
}

std::optional<GemmOperand<float>> product_operand_b(const Tensor& b, bool trans_b) {
  if (b.dtype() != DType::Float32 || b.dim() != 2) return std::nullopt;
  std::optional<MatrixLayout> lay =
      matrix_layout(b.shape()[0], b.shape()[1], b.strides()[0], b.strides()[1]);
  if (!lay) return std::nullopt;
  // (Xᵀ)ᵀ = X, as the product reads its operands (prepare in gemm.cpp).
  return GemmOperand<float>{b.data<float>(), lay->ld, lay->trans != trans_b};
}

}  // namespace samba::ops
