// Shape ops: views where the layout allows, copies otherwise.
#include "engine/ops/op_util.h"

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
                "reshape: cannot reshape tensor of shape {} ({} elements) to {}", dims_str(x.shape()),
                x.numel(), dims_str(out));
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
      SAMBA_CHECK(out[i] >= 0, Status::InvalidArgument, "expand: size -1 not allowed in new leading dim {}", i);
      continue;
    }
    int64_t have = x.shape()[i - lead];
    if (out[i] == -1) out[i] = have;
    SAMBA_CHECK(have == out[i] || have == 1, Status::ShapeMismatch,
                "expand: dimension {} of size {} cannot expand to {} (shape {} to {})", i - lead, have,
                out[i], dims_str(x.shape()), dims_str(Dims(req)));
  }
  return out;
}

}  // namespace

void register_shape(OpRegistry& r) {
  r.def("reshape")
      .doc("The same elements in a new shape (one size may be -1); a view when the layout allows.")
      .input("x")
      .required_attr("shape", AttrType::Ints, "the new shape")
      .fusion(Fusion::View)
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
        return {in[0].as_strided(shape, broadcast_strides(in[0].shape(), in[0].strides(), shape), in[0].offset())};
      })
      .grad([](const GradContext& c) -> std::vector<Tensor> {
        return {sum_to(c.grad_outputs[0], c.inputs[0].shape())};
      });
}

}  // namespace samba::ops
