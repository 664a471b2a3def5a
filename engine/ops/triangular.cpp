// tril and triu: the lower or upper triangle of the last two dims (a batch
// of matrices), the rest zeroed. Attention masks and causal biases are built
// from them.
#include "engine/ops/operands.h"

namespace samba::ops {
namespace {

// Element (i, j) of a matrix is kept by tril when j - i <= diagonal, by triu
// when j - i >= diagonal.
void triangle_kernel(KernelContext& c, bool lower) {
  const Tensor& x = c.inputs[0];
  const Tensor& out = c.outputs[0];
  const int64_t rows = x.shape()[x.dim() - 2], cols = x.shape()[x.dim() - 1];
  const int64_t matrices = rows * cols == 0 ? 0 : x.numel() / (rows * cols);
  const int64_t diagonal = c.attrs.i("diagonal");
  SAMBA_DISPATCH_ALL(x.dtype(), lower ? "tril" : "triu", [&] {
    const scalar_t* px = x.data<scalar_t>();
    scalar_t* po = out.data<scalar_t>();
    parallel_for(matrices * rows, std::max<int64_t>(1, kMinGrain / std::max<int64_t>(cols, 1)),
                 [&](int64_t r0, int64_t r1) {
                   for (int64_t r = r0; r < r1; ++r) {
                     const int64_t i = r % rows;
                     // Columns [0, split) are kept by tril, [split, cols) by triu.
                     const int64_t split =
                         std::clamp<int64_t>(i + diagonal + (lower ? 1 : 0), 0, cols);
                     const scalar_t* src = px + r * cols;
                     scalar_t* dst = po + r * cols;
                     for (int64_t j = 0; j < cols; ++j)
                       dst[j] = (j < split) == lower ? src[j] : scalar_t(0);
                   }
                 });
  });
}

void def_triangle(OpRegistry& r, const char* name, bool lower) {
  r.def(name)
      .doc(lower ? "The lower triangle of the last two dims of x: element (i, j) is kept when "
                   "j - i <= diagonal, zero otherwise."
                 : "The upper triangle of the last two dims of x: element (i, j) is kept when "
                   "j - i >= diagonal, zero otherwise.")
      .input("x", "at least 2-D; the last two dims are the matrices")
      .attr("diagonal", AttrType::Int, int64_t{0},
            "0: the main diagonal; positive: above it; negative: below it")
      .fusion(Fusion::Elementwise)
      .infer([name](const InferContext& c) -> std::vector<TensorMeta> {
        const Tensor& x = c.inputs[0];
        SAMBA_CHECK(x.dim() >= 2, Status::ShapeMismatch,
                    "{}: x must have at least 2 dims (a matrix or a batch of them), got shape {}",
                    name, dims_str(x.shape()));
        return {meta_of(x)};
      })
      .kernel([lower](KernelContext& c) { triangle_kernel(c, lower); })
      .grad([name](const GradContext& c) -> std::vector<Tensor> {
        return {call1(name, {c.grad_outputs[0]}, {{"diagonal", c.attrs.i("diagonal")}})};
      });
}

}  // namespace

void register_triangular(OpRegistry& r) {
  def_triangle(r, "tril", true);
  def_triangle(r, "triu", false);
}

}  // namespace samba::ops
