// Shape ops: views where the layout allows, copies otherwise.
#include <algorithm>
#include <utility>

#include "engine/ops/operands.h"

namespace samba::ops {
namespace {

// Resolves one -1 in a requested shape against the element count.
Dims infer_reshape(const Tensor& x, const std::vector<int64_t>& req) {
  Dims out(req.begin(), req.end());
  int64_t known = 1, infer_at = -1;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == -1) {
      SAMBA_CHECK(infer_at < 0, Status::InvalidArgument, "reshape: shape {} has more than one -1",
                  dims_str(out));
      infer_at = static_cast<int64_t>(i);
    } else {
      SAMBA_CHECK(out[i] >= 0, Status::InvalidArgument, "reshape: shape {} has a negative size",
                  dims_str(out));
      known *= out[i];
    }
  }
  if (infer_at >= 0) {
    SAMBA_CHECK(known != 0 && x.numel() % known == 0, Status::ShapeMismatch,
                "reshape: cannot reshape tensor of shape {} ({} elements) to {}",
                dims_str(x.shape()), x.numel(), dims_str(out));
    out[infer_at] = x.numel() / known;
  }
  SAMBA_CHECK(numel_of(out) == x.numel(), Status::ShapeMismatch,
              "reshape: cannot reshape tensor of shape {} ({} elements) to {} ({} elements)",
              dims_str(x.shape()), x.numel(), dims_str(out), numel_of(out));
  return out;
}

Dims infer_expand(const Tensor& x, const std::vector<int64_t>& req) {
  SAMBA_CHECK(req.size() >= static_cast<size_t>(x.dim()), Status::ShapeMismatch,
              "expand: target {} has fewer dims than the tensor's shape {}", dims_str(Dims(req)),
              dims_str(x.shape()));
  Dims out(req.begin(), req.end());
  const size_t lead = req.size() - x.dim();
  for (size_t i = 0; i < out.size(); ++i) {
    if (i < lead) {
      SAMBA_CHECK(out[i] >= 0, Status::InvalidArgument,
                  "expand: size -1 not allowed in new leading dim {}", i);
      continue;
    }
    int64_t have = x.shape()[i - lead];
    if (out[i] == -1) out[i] = have;
    SAMBA_CHECK(have == out[i] || have == 1, Status::ShapeMismatch,
                "expand: dimension {} of size {} cannot expand to {} (shape {} to {})", i - lead,
                have, out[i], dims_str(x.shape()), dims_str(Dims(req)));
  }
  return out;
}

// The dims of `x` in the order `dims` names them; every dim exactly once.
std::vector<int64_t> checked_permutation(const Tensor& x, const std::vector<int64_t>& dims) {
  SAMBA_CHECK(static_cast<int64_t>(dims.size()) == x.dim(), Status::InvalidArgument,
              "permute: dims [{}] name {} dims; the tensor of shape {} has {}",
              fmt::join(dims, ", "), dims.size(), dims_str(x.shape()), x.dim());
  std::vector<int64_t> perm(dims.size());
  std::vector<bool> seen(dims.size(), false);
  for (size_t i = 0; i < dims.size(); ++i) {
    perm[i] = wrap_dim(dims[i], x.dim(), "permute");
    SAMBA_CHECK(x.dim() == 0 || !seen[perm[i]], Status::InvalidArgument,
                "permute: dim {} appears more than once in [{}]", dims[i], fmt::join(dims, ", "));
    if (x.dim() > 0) seen[perm[i]] = true;
  }
  return perm;
}

Dims permuted(const Dims& d, const std::vector<int64_t>& perm) {
  Dims out(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) out[i] = d[perm[i]];
  return out;
}

std::vector<int64_t> inverse_permutation(const std::vector<int64_t>& perm) {
  std::vector<int64_t> inv(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) inv[perm[i]] = static_cast<int64_t>(i);
  return inv;
}

// The permutation that swaps dim0 and dim1 (both wrapped against the rank).
std::vector<int64_t> transposition(const Tensor& x, int64_t dim0, int64_t dim1, const char* what) {
  std::vector<int64_t> perm(x.dim());
  for (int64_t i = 0; i < x.dim(); ++i) perm[i] = i;
  const int64_t a = wrap_dim(dim0, x.dim(), what), b = wrap_dim(dim1, x.dim(), what);
  if (x.dim() > 0) std::swap(perm[a], perm[b]);
  return perm;
}

std::vector<int64_t> t_permutation(const Tensor& x) {
  SAMBA_CHECK(x.dim() <= 2, Status::InvalidArgument,
              "t: expects a tensor with at most 2 dims, got shape {} (use transpose or permute)",
              dims_str(x.shape()));
  return x.dim() == 2 ? std::vector<int64_t>{1, 0} : transposition(x, 0, 0, "t");
}

Tensor permute_view(const Tensor& x, const std::vector<int64_t>& perm) {
  return x.as_strided(permuted(x.shape(), perm), permuted(x.strides(), perm), x.offset());
}

// Which dims squeeze removes: the size-1 dims among `dim` (all dims when absent).
std::vector<bool> squeezed_mask(const Tensor& x, const Attrs& a) {
  std::vector<bool> mask(x.dim(), false);
  if (!a.has("dim")) {
    for (int64_t d = 0; d < x.dim(); ++d) mask[d] = x.shape()[d] == 1;
    return mask;
  }
  for (int64_t d : a.ints("dim")) {
    const int64_t w = wrap_dim(d, x.dim(), "squeeze");
    if (x.dim() > 0) mask[w] = x.shape()[w] == 1;
  }
  return mask;
}

Tensor squeeze_view(const Tensor& x, const Attrs& a) {
  auto mask = squeezed_mask(x, a);
  Dims shape, strides;
  for (int64_t d = 0; d < x.dim(); ++d)
    if (!mask[d]) shape.push_back(x.shape()[d]), strides.push_back(x.strides()[d]);
  return x.as_strided(shape, strides, x.offset());
}

Tensor unsqueeze_view(const Tensor& x, int64_t dim) {
  const int64_t d = wrap_dim(dim, x.dim() + 1, "unsqueeze");
  Dims shape = x.shape(), strides = x.strides();
  // The new dim's stride only matters for layout checks: make it look contiguous.
  const int64_t st = d < x.dim() ? x.shape()[d] * x.strides()[d] : 1;
  shape.insert(shape.begin() + d, 1);
  strides.insert(strides.begin() + d, st);
  return x.as_strided(shape, strides, x.offset());
}

// [start, end] of flatten, wrapped; a 0-dim tensor flattens to [1].
std::pair<int64_t, int64_t> flatten_range(const Tensor& x, const Attrs& a) {
  const int64_t rank = std::max<int64_t>(x.dim(), 1);
  const int64_t s = wrap_dim(a.i("start_dim"), rank, "flatten");
  const int64_t e = wrap_dim(a.i("end_dim"), rank, "flatten");
  SAMBA_CHECK(s <= e, Status::InvalidArgument,
              "flatten: start_dim {} comes after end_dim {} for a tensor of shape {}",
              a.i("start_dim"), a.i("end_dim"), dims_str(x.shape()));
  return {s, e};
}

Dims flatten_shape(const Tensor& x, const Attrs& a) {
  if (x.dim() == 0) return {1};
  auto [s, e] = flatten_range(x, a);
  Dims out(x.shape().begin(), x.shape().begin() + s);
  int64_t n = 1;
  for (int64_t d = s; d <= e; ++d) n *= x.shape()[d];
  out.push_back(n);
  out.insert(out.end(), x.shape().begin() + e + 1, x.shape().end());
  return out;
}

// A view when dims [s, e] of x can be walked with one stride; a copy otherwise.
Tensor flatten_view(const Tensor& x, const Attrs& a) {
  Dims shape = flatten_shape(x, a);
  if (x.dim() == 0) return x.as_strided(shape, {1}, x.offset());
  auto [s, e] = flatten_range(x, a);
  int64_t inner = 1;  // stride of the merged dim: that of its last dim of size > 1
  bool mergeable = true;
  int64_t expected = -1;
  for (int64_t d = e; d >= s; --d) {
    if (x.shape()[d] == 1) continue;
    if (expected < 0) {
      inner = x.strides()[d];
    } else if (x.strides()[d] != expected) {
      mergeable = false;
      break;
    }
    expected = x.strides()[d] * x.shape()[d];
  }
  if (!mergeable) {
    Tensor c = x.contiguous();
    return c.as_strided(shape, contiguous_strides(shape), c.offset());
  }
  Dims strides(x.strides().begin(), x.strides().begin() + s);
  strides.push_back(inner);
  strides.insert(strides.end(), x.strides().begin() + e + 1, x.strides().end());
  return x.as_strided(shape, strides, x.offset());
}

Tensor reshape_to(const Tensor& g, const Dims& shape) {
  return call1("reshape", {g}, {{"shape", std::vector<int64_t>(shape.begin(), shape.end())}});
}

}  // namespace

void register_shape(OpRegistry& r) {
  r.def("reshape")
      .doc("The same elements in a new shape (one size may be -1); a view when the layout allows.")
      .input("x")
      .required_attr("shape", AttrType::Ints, "the new shape")
      .fusion(Fusion::View)
      .view_of_contiguous()
      .infer([](const InferContext& c) -> std::vector<TensorMeta> {
        return {{c.inputs[0].dtype(), infer_reshape(c.inputs[0], c.attrs.ints("shape"))}};
      })
      .view([](std::span<const Tensor> in, const Attrs& a) -> std::vector<Tensor> {
        Dims shape = infer_reshape(in[0], a.ints("shape"));
        Tensor x = in[0].contiguous();
        return {x.as_strided(shape, contiguous_strides(shape), x.offset())};
      })
      .grad([](const GradContext& c) -> std::vector<Tensor> {
        return {call1("reshape", {c.grad_outputs[0]}, {{"shape", c.inputs[0].shape()}})};
      });

  r.def("expand")
      .doc("A broadcast view of x with `shape` (-1 keeps a size); no copy.")
      .input("x")
      .required_attr("shape", AttrType::Ints, "target shape")
      .fusion(Fusion::View)
      .infer([](const InferContext& c) -> std::vector<TensorMeta> {
        return {{c.inputs[0].dtype(), infer_expand(c.inputs[0], c.attrs.ints("shape"))}};
      })
      .view([](std::span<const Tensor> in, const Attrs& a) -> std::vector<Tensor> {
        Dims shape = infer_expand(in[0], a.ints("shape"));
        return {in[0].as_strided(shape, broadcast_strides(in[0].shape(), in[0].strides(), shape),
                                 in[0].offset())};
      })
      .grad([](const GradContext& c) -> std::vector<Tensor> {
        return {sum_to(c.grad_outputs[0], c.inputs[0].shape())};
      });
  r.def("permute")
      .doc("A view of x with its dims reordered: out dim i is x dim dims[i]; no copy.")
      .input("x")
      .required_attr("dims", AttrType::Ints, "a permutation of the tensor's dims")
      .fusion(Fusion::View)
      .infer([](const InferContext& c) -> std::vector<TensorMeta> {
        const Tensor& x = c.inputs[0];
        return {{x.dtype(), permuted(x.shape(), checked_permutation(x, c.attrs.ints("dims")))}};
      })
      .view([](std::span<const Tensor> in, const Attrs& a) -> std::vector<Tensor> {
        return {permute_view(in[0], checked_permutation(in[0], a.ints("dims")))};
      })
      .grad([](const GradContext& c) -> std::vector<Tensor> {
        auto inv = inverse_permutation(checked_permutation(c.inputs[0], c.attrs.ints("dims")));
        return {call1("permute", {c.grad_outputs[0]}, {{"dims", inv}})};
      });

  r.def("transpose")
      .doc("A view of x with dims dim0 and dim1 swapped; no copy.")
      .input("x")
      .required_attr("dim0", AttrType::Int)
      .required_attr("dim1", AttrType::Int)
      .fusion(Fusion::View)
      .infer([](const InferContext& c) -> std::vector<TensorMeta> {
        const Tensor& x = c.inputs[0];
        auto perm = transposition(x, c.attrs.i("dim0"), c.attrs.i("dim1"), "transpose");
        return {{x.dtype(), permuted(x.shape(), perm)}};
      })
      .view([](std::span<const Tensor> in, const Attrs& a) -> std::vector<Tensor> {
        return {permute_view(in[0], transposition(in[0], a.i("dim0"), a.i("dim1"), "transpose"))};
      })
      .grad([](const GradContext& c) -> std::vector<Tensor> {
        return {call1("transpose", {c.grad_outputs[0]},
                      {{"dim0", c.attrs.i("dim0")}, {"dim1", c.attrs.i("dim1")}})};
      });

  r.def("t")
      .doc("Transpose of a matrix (a vector or scalar is returned as is); a view.")
      .input("x")
      .fusion(Fusion::View)
      .infer([](const InferContext& c) -> std::vector<TensorMeta> {
        const Tensor& x = c.inputs[0];
        return {{x.dtype(), permuted(x.shape(), t_permutation(x))}};
      })
      .view([](std::span<const Tensor> in, const Attrs&) -> std::vector<Tensor> {
        return {permute_view(in[0], t_permutation(in[0]))};
      })
      .grad([](const GradContext& c) -> std::vector<Tensor> {
        return {call1("t", {c.grad_outputs[0]})};
      });

  r.def("squeeze")
      .doc("A view of x without its size-1 dims (only those among `dim` when given).")
      .input("x")
      .optional_attr("dim", AttrType::Ints, "dims to remove if their size is 1; none: all")
      .fusion(Fusion::View)
      .infer([](const InferContext& c) -> std::vector<TensorMeta> {
        const Tensor& x = c.inputs[0];
        auto mask = squeezed_mask(x, c.attrs);
        Dims shape;
        for (int64_t d = 0; d < x.dim(); ++d)
          if (!mask[d]) shape.push_back(x.shape()[d]);
        return {{x.dtype(), shape}};
      })
      .view([](std::span<const Tensor> in, const Attrs& a) -> std::vector<Tensor> {
        return {squeeze_view(in[0], a)};
      })
      .grad([](const GradContext& c) -> std::vector<Tensor> {
        return {reshape_to(c.grad_outputs[0], c.inputs[0].shape())};
      });

  r.def("unsqueeze")
      .doc("A view of x with a new size-1 dim at `dim` (in [-rank-1, rank]).")
      .input("x")
      .required_attr("dim", AttrType::Int, "position of the new dim in the output")
      .fusion(Fusion::View)
      .infer([](const InferContext& c) -> std::vector<TensorMeta> {
        const Tensor& x = c.inputs[0];
        Dims shape = x.shape();
        shape.insert(shape.begin() + wrap_dim(c.attrs.i("dim"), x.dim() + 1, "unsqueeze"), 1);
        return {{x.dtype(), shape}};
      })
      .view([](std::span<const Tensor> in, const Attrs& a) -> std::vector<Tensor> {
        return {unsqueeze_view(in[0], a.i("dim"))};
      })
      .grad([](const GradContext& c) -> std::vector<Tensor> {
        return {reshape_to(c.grad_outputs[0], c.inputs[0].shape())};
      });

  r.def("flatten")
      .doc("Dims start_dim..end_dim merged into one; a view when the layout allows, else a copy.")
      .input("x")
      .attr("start_dim", AttrType::Int, int64_t{0})
      .attr("end_dim", AttrType::Int, int64_t{-1})
      .fusion(Fusion::View)
      .view_of_contiguous()
      .infer([](const InferContext& c) -> std::vector<TensorMeta> {
        return {{c.inputs[0].dtype(), flatten_shape(c.inputs[0], c.attrs)}};
      })
      .view([](std::span<const Tensor> in, const Attrs& a) -> std::vector<Tensor> {
        return {flatten_view(in[0], a)};
      })
      .grad([](const GradContext& c) -> std::vector<Tensor> {
        return {reshape_to(c.grad_outputs[0], c.inputs[0].shape())};
      });
}

}  // namespace samba::ops
