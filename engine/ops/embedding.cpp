// embedding: gathers rows of a table by integer indices; its backward
// scatter-adds gradient rows into a table-shaped gradient.
#include <cstring>

#include "engine/kernels/row_stats.h"
#include "engine/ops/operands.h"

namespace samba::ops {
namespace {

void check_indices_dtype(const Tensor& indices, const char* op) {
  SAMBA_CHECK(is_integral(indices.dtype(), false), Status::DTypeMismatch,
              "{}: indices must have an integer dtype, got {}", op, dtype_name(indices.dtype()));
}

// padding_idx wrapped into [0, rows), or -1 when absent.
int64_t padding_row(const Attrs& a, int64_t rows, const char* op) {
  if (!a.has("padding_idx")) return -1;
  const int64_t p = a.i("padding_idx");
  SAMBA_CHECK(p >= -rows && p < rows, Status::OutOfRange,
              "{}: padding_idx {} is out of range for a table of {} rows (expected {} to {})", op,
              p, rows, -rows, rows - 1);
  return p < 0 ? p + rows : p;
}

// The indices as int64, each checked against the table size.
std::vector<int64_t> checked_indices(const Tensor& indices, int64_t rows, const char* op) {
  std::vector<int64_t> idx(indices.numel());
  SAMBA_DISPATCH_INTEGRAL(indices.dtype(), op, [&] {
    const scalar_t* p = indices.data<scalar_t>();
    for (size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<int64_t>(p[i]);
  });
  for (size_t i = 0; i < idx.size(); ++i)
    SAMBA_CHECK(
        idx[i] >= 0 && idx[i] < rows, Status::OutOfRange,
        "{}: index {} (at flat position {} of indices) is out of range for a table of {} rows", op,
        idx[i], i, rows);
  return idx;
}

void embedding_kernel(KernelContext& c) {
  const Tensor &weight = c.inputs[0], &out = c.outputs[0];
  const int64_t rows = weight.shape()[0], dim = weight.shape()[1];
  const std::vector<int64_t> idx = checked_indices(c.inputs[1], rows, "embedding");
  const size_t row_bytes = static_cast<size_t>(dim) * element_size(weight.dtype());
  const char* src = static_cast<const char*>(weight.raw_data());
  char* dst = static_cast<char*>(out.raw_data());
  parallel_for(static_cast<int64_t>(idx.size()), nn::rows_grain(dim), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      std::memcpy(dst + i * row_bytes, src + idx[i] * row_bytes, row_bytes);
  });
}

// Each table row sums its gradient rows in the order they occur, so the
// result is the same for any thread count: positions are bucketed by row
// (a counting sort) and rows are processed in parallel.
template <typename C>
void scatter_add_rows(const C* g, const std::vector<int64_t>& idx, int64_t rows, int64_t dim,
                      int64_t pad, C* out) {
  std::vector<int64_t> start(rows + 1, 0);
  for (int64_t v : idx) ++start[v + 1];
  for (int64_t v = 0; v < rows; ++v) start[v + 1] += start[v];
  std::vector<int64_t> order(idx.size());
  std::vector<int64_t> fill(start.begin(), start.end() - 1);
  for (size_t i = 0; i < idx.size(); ++i) order[fill[idx[i]]++] = static_cast<int64_t>(i);
  const int64_t per_row =
      std::max<int64_t>(1, static_cast<int64_t>(idx.size()) / std::max<int64_t>(rows, 1));
  parallel_for(rows, nn::rows_grain(dim * per_row), [&](int64_t r0, int64_t r1) {
    for (int64_t v = r0; v < r1; ++v) {
      nn::ArrayMap<C> o(out + v * dim, dim);
      o.setZero();
      if (v == pad) continue;
      for (int64_t k = start[v]; k < start[v + 1]; ++k)
        o += nn::ConstArrayMap<C>(g + order[k] * dim, dim);
    }
  });
}

void embedding_backward_kernel(KernelContext& c) {
  const Tensor& out = c.outputs[0];
  const int64_t rows = out.shape()[0], dim = out.shape()[1];
  const char* op = "embedding_backward";
  const std::vector<int64_t> idx = checked_indices(c.inputs[1], rows, op);
  const int64_t pad = padding_row(c.attrs, rows, op);
  const DType cdt = nn::compute_dtype(out.dtype());
  Tensor g = nn::compute_input(c.inputs[0], cdt);
  nn::ComputeOutput o(out, cdt);
  nn::with_compute_type(cdt, [&]<typename C>() {
    scatter_add_rows<C>(g.data<C>(), idx, rows, dim, pad, o.data<C>());
  });
  o.commit();
}

}  // namespace

void register_embedding(OpRegistry& r) {
  r.def("embedding")
      .doc(
          "Rows of weight (num_weights, dim) picked by indices of any integer dtype and shape; the "
          "result has shape indices.shape + [dim]. Rows at padding_idx get no gradient.")
      .input("weight", "the table, (num_weights, dim)")
      .input("indices", "integer row numbers in [0, num_weights)")
      .optional_attr("padding_idx", AttrType::Int,
                     "a row that receives no gradient (may be negative)")
      .fusion(Fusion::Opaque)
      .infer([](const InferContext& c) -> std::vector<TensorMeta> {
        const Tensor &w = c.inputs[0], &idx = c.inputs[1];
        SAMBA_CHECK(w.dim() == 2, Status::ShapeMismatch,
                    "embedding: weight must be 2-D (num_weights, dim), got shape {}",
                    dims_str(w.shape()));
        check_indices_dtype(idx, "embedding");
        padding_row(c.attrs, w.shape()[0], "embedding");
        Dims shape = idx.shape();
        shape.push_back(w.shape()[1]);
        return {{w.dtype(), shape}};
      })
      .kernel(embedding_kernel)
      .grad([](const GradContext& c) -> std::vector<Tensor> {
        if (!c.needs_grad(0)) return {Tensor(), Tensor()};
        Attrs a{{"num_weights", c.inputs[0].shape()[0]}};
        if (c.attrs.has("padding_idx")) a.set("padding_idx", c.attrs.i("padding_idx"));
        return {call1("embedding_backward", {c.grad_outputs[0], c.inputs[1]}, a), Tensor()};
      });

  r.def("embedding_backward")
      .doc(
          "Gradient of embedding to its table: grad rows scatter-added into a (num_weights, dim) "
          "tensor at their indices; the padding_idx row stays zero.")
      .input("grad", "shape indices.shape + [dim]")
      .input("indices")
      .required_attr("num_weights", AttrType::Int, "rows of the table")
      .optional_attr("padding_idx", AttrType::Int, "a row that gets zero gradient")
      .fusion(Fusion::Opaque)
      .infer([](const InferContext& c) -> std::vector<TensorMeta> {
        const char* op = "embedding_backward";
        const Tensor &g = c.inputs[0], &idx = c.inputs[1];
        check_indices_dtype(idx, op);
        nn::require_floating(g, op, "grad");
        const int64_t rows = c.attrs.i("num_weights");
        SAMBA_CHECK(rows >= 0, Status::InvalidArgument, "{}: num_weights must be >= 0, got {}", op,
                    rows);
        Dims lead = g.shape();
        if (!lead.empty()) lead.pop_back();
        SAMBA_CHECK(g.dim() >= 1 && lead == idx.shape(), Status::ShapeMismatch,
                    "{}: grad of shape {} does not match indices of shape {} plus an embedding dim",
                    op, dims_str(g.shape()), dims_str(idx.shape()));
        padding_row(c.attrs, rows, op);
        return {{g.dtype(), {rows, g.shape().back()}}};
      })
      .kernel(embedding_backward_kernel);
}

}  // namespace samba::ops
