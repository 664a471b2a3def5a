// The GEMM layer: C = act(alpha * op(A) * op(B) + beta * C + bias) on row-major
// strided operands, split into big tiles across the session's thread pool,
// each tile computed by the fp32 kernels of the CPU's ISA level (sgemm_kernels.h)
// or Eigen's single-threaded GEMM. A transposed operand is
// read in place (as a column-major view), never copied. The epilogue (bias per
// column of C, then an activation) runs on each tile right after it is
// computed, while it is still in cache; the compiler fuses "linear + bias +
// activation" into it.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "engine/core/tensor.h"
#include "engine/kernels/gemm_args.h"

namespace samba::ops {

// The epilogue's activations and the registry op each one computes: the one
// list that the kernels, linear's schema and the compiler's epilogue fusion
// read, so an activation added here is fused, documented and run at once.
struct EpilogueActivation {
  Activation act;
  std::string_view name;         // linear's `activation` value
  std::string_view op;           // the op it stands for ("" for none)
  std::string_view approximate;  // gelu's `approximate` value; "" for other ops
};
std::span<const EpilogueActivation> epilogue_activations();
std::string epilogue_activation_names();  // "none, relu, ...", for docs and errors

std::string_view activation_name(Activation a);  // "none", "relu", "gelu_tanh", ...
std::optional<Activation> activation_from_name(std::string_view name);

// One GEMM, tiled across the current thread pool when it is big enough.
// Instantiated for float and double.
template <typename T>
void gemm(const GemmArgs<T>& g);

// `batch` GEMMs of the same shape: product i reads A at g.a.data + a_off[i],
// B at g.b.data + b_off[i] and writes C at g.c + c_off[i] (element offsets;
// broadcasting operands repeat offsets). Bias and epilogue are shared.
template <typename T>
void gemm_batched(const GemmArgs<T>& g, int64_t batch, const int64_t* a_off, const int64_t* b_off,
                  const int64_t* c_off);

// The same for bf16 operands with fp32 accumulation (Bf16GemmArgs), C in
// float (TC = float) or bf16 (TC = uint16_t, bf16 bits). Tiled like the fp32
// GEMM; each tile runs the ISA level's bf16 kernel (vdpbf16ps at the
// AVX512_BF16 level, the fp32 micro-kernel on panels widened while packing
// at AVX2 and AVX-512; sgemm_kernels.h says what each rounds), or Eigen on
// widened blocks at the generic level and under GemmKernel::Eigen. No
// tensor is converted or allocated per call.
template <typename TC>
void gemm(const Bf16GemmArgs<TC>& g);
template <typename TC>
void gemm_batched(const Bf16GemmArgs<TC>& g, int64_t batch, const int64_t* a_off,
                  const int64_t* b_off, const int64_t* c_off);

// Which kernel computes float tiles. Auto uses the active ISA level's kernels
// (sgemm_kernels.h) where it has them and the tile shape suits them;
// Eigen forces Eigen's GEMM everywhere (for comparisons in tests and
// benchmarks). Process-wide.
enum class GemmKernel { Auto, Eigen };
void set_gemm_kernel(GemmKernel k);
GemmKernel gemm_kernel();

// ---- pre-packed B -------------------------------------------------------------
//
// A weight that does not change between runs (an inference PEF's) is packed
// once, at load, in the layout the packed kernel reads, instead of in every
// tile of every call (engine/runtime/prepacked_weights.h).

// Whether a float product of this shape, run on the current thread pool,
// has tiles that take the active level's packed kernel (and so would pack
// op(B)) or its kernel for few rows against a packed B: false where the
// direct, dot or transposed kernels read B in place, at the generic level
// and under GemmKernel::Eigen.
bool gemm_packs_b(int64_t m, int64_t n, int64_t k, bool trans_a, bool trans_b);
// Floats prepack_b writes for op(B) of k x n (0 at a level without a packed kernel).
size_t prepacked_b_floats(int64_t k, int64_t n);
// Packs all of op(B) (k x n) into dst, 64-byte aligned and
// prepacked_b_floats(k, n) long, for GemmArgs::b_packed.
void prepack_b(const GemmOperand<float>& b, int64_t k, int64_t n, float* dst);

// ---- tensor level ------------------------------------------------------------

// How the last two dims (rows x cols, with the given strides) are read as a
// GEMM operand without copying; nullopt when neither dim has unit stride.
struct MatrixLayout {
  int64_t ld = 0;
  bool trans = false;
};
std::optional<MatrixLayout> matrix_layout(int64_t rows, int64_t cols, int64_t row_stride,
                                          int64_t col_stride);

// A float32 matrix b as op(b) of a product, packed by prepack_b: `source`
// is the first element of b it was packed from, so a product given another
// tensor ignores it.
struct PackedOperand {
  const float* data = nullptr;
  const float* source = nullptr;
  int64_t k = 0, n = 0;
  GemmOperand<float> layout;  // how op(b) was read while packing
};

// How the last two dims of a 2-D float32 `b` are read as op(b) (trans_b: b
// is (n, k)) without copying; nullopt for another dtype or rank, or a layout
// the product would copy.
std::optional<GemmOperand<float>> product_operand_b(const Tensor& b, bool trans_b);

// What is folded into a product: out = act(alpha * A@B + beta * out + bias).
struct ProductEpilogue {
  double alpha = 1.0;
  double beta = 0.0;  // non-zero: `out` holds the addend on entry
  Tensor bias;        // optional, n elements (broadcast over rows)
  Activation act = Activation::None;
  // Optional: b packed at load, read in place of packing it per call when
  // it is this product's shared float32 B (same source, shape and layout).
  const PackedOperand* packed_b = nullptr;
  // Run on each finished block of a float32 out; sets tail->applied when
  // it is (output_tail.h).
  OutputTail* tail = nullptr;
  // Run on finished rows of a float32 out when the product reads B packed
  // at load; sets rows->applied when it is (output_tail.h).
  RowsWork* rows = nullptr;
};

// out[..., m, n] = op(a)[..., m, k] @ op(b)[..., k, n] with the epilogue.
// a and b have rank >= 2 and any strides; their batch dims broadcast to
// out's. trans_a says a's last two dims are (k, m) and op(a) is their
// transpose (likewise trans_b: (n, k)). out is contiguous with a's dtype,
// which b and bias share; or, for bf16 a and b, float32 (bias too): the
// fp32 sums before any rounding, for mixed precision. Floating dtypes go
// through the GEMM (bf16 through its bf16 kernels with fp32 accumulation,
// rounded once; fp16 converted to fp32), integer ones through a plain loop
// with int64 accumulation.
void batched_product(const Tensor& out, const Tensor& a, bool trans_a, const Tensor& b,
                     bool trans_b, const ProductEpilogue& ep = {});

}  // namespace samba::ops
