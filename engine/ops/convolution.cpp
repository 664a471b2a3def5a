// 2-D convolution and transposed convolution (NCHW, PyTorch semantics).
// Gradients are the two adjoints of conv2d, registered as ops of their own:
// conv2d_backward_input (which is also conv_transpose2d's forward) and
// conv2d_backward_weight. Each adjoint's gradient is again a convolution, so
// every op here can be differentiated twice.
#include "engine/kernels/conv_direct.h"
#include "engine/kernels/conv_im2col.h"
#include "engine/ops/operands.h"

namespace samba::ops {
namespace {

constexpr const char* kConv = "conv2d";
constexpr const char* kInputGrad = "conv2d_backward_input";
constexpr const char* kWeightGrad = "conv2d_backward_weight";
constexpr const char* kTranspose = "conv_transpose2d";
constexpr const char* kConvPool = "conv2d_max_pool2d";

OpBuilder& with_conv_attrs(OpBuilder& b) {
  return b
      .attr("stride", AttrType::Ints, std::vector<int64_t>{1, 1}, "step (h, w), or one for both")
      .attr("padding", AttrType::Ints, std::vector<int64_t>{0, 0},
            "zeros added on each side (h, w)")
      .attr("dilation", AttrType::Ints, std::vector<int64_t>{1, 1}, "spacing of kernel taps (h, w)")
      .attr("groups", AttrType::Int, int64_t{1}, "channel groups convolved independently");
}

const Tensor& optional_at(std::span<const Tensor> in, size_t i) {
  static const Tensor kNone;
  return i < in.size() ? in[i] : kNone;
}

Attrs with(Attrs a, const char* name, AttrValue v) {
  a.set(name, std::move(v));
  return a;
}

ConvGeometry conv2d_geometry(std::span<const Tensor> in, const Attrs& a) {
  const Tensor& x = in[0];
  const Tensor& w = in[1];
  const Tensor& bias = optional_at(in, 2);
  check_conv_dtypes(kConv, x, "x", w, "weight", bias);
  ConvGeometry g = conv_geometry(kConv, x.shape(), w.shape(), conv_params(a, kConv));
  check_bias(kConv, bias, g.out_channels, w.shape());
  return g;
}

// The conv2d whose output gradient `grad` is, for an input of `input_size`.
ConvGeometry input_grad_geometry(const Tensor& grad, const Tensor& w, const Attrs& a) {
  check_conv_dtypes(kInputGrad, grad, "grad", w, "weight", Tensor());
  const Dims input_size = input_size_attr(a, kInputGrad);
  ConvGeometry g =
      conv_geometry(kInputGrad, input_size, w.shape(), conv_params(a, kInputGrad), "input_size");
  SAMBA_CHECK(grad.shape() == g.output_shape(), Status::ShapeMismatch,
              "{}: grad has shape {}, but conv2d of input_size {} with weight shape {} gives {}",
              kInputGrad, dims_str(grad.shape()), dims_str(input_size), dims_str(w.shape()),
              dims_str(g.output_shape()));
  return g;
}

ConvGeometry weight_grad_geometry(const Tensor& grad, const Tensor& x, const Attrs& a) {
  check_conv_dtypes(kWeightGrad, grad, "grad", x, "x", Tensor());
  const auto& ws = a.ints("weight_size");
  const Dims weight_size(ws.begin(), ws.end());
  ConvGeometry g = conv_geometry(kWeightGrad, x.shape(), weight_size, conv_params(a, kWeightGrad));
  SAMBA_CHECK(grad.shape() == g.output_shape(), Status::ShapeMismatch,
              "{}: grad has shape {}, but conv2d of x shape {} with weight_size {} gives {}",
              kWeightGrad, dims_str(grad.shape()), dims_str(x.shape()), dims_str(weight_size),
              dims_str(g.output_shape()));
  return g;
}

ConvGeometry transpose_geometry(std::span<const Tensor> in, const Attrs& a) {
  const Tensor& x = in[0];
  const Tensor& w = in[1];
  const Tensor& bias = optional_at(in, 2);
  check_conv_dtypes(kTranspose, x, "x", w, "weight", bias);
  ConvGeometry g =
      conv_transpose_geometry(kTranspose, x.shape(), w.shape(), conv_params(a, kTranspose),
                              int_pair(a, kTranspose, "output_padding"));
  check_bias(kTranspose, bias, g.in_channels, w.shape());
  return g;
}

// Multiply-adds of the implicit GEMM, counted as 2 FLOP each: every output
// pixel of every output channel sums in_channels / groups x kH x kW products.
// conv2d, both of its gradients and the transposed convolution do the same
// arithmetic for the same geometry.
double conv_flops(const ConvGeometry& g) {
  return 2.0 * static_cast<double>(g.batch) * static_cast<double>(g.out_channels) *
         static_cast<double>(g.out_pixels()) * static_cast<double>(g.col_rows());
}

Tensor bias_grad(const Tensor& grad) {
  return call1("sum", {grad}, {{"dim", bias_grad_dims(grad.shape())}});
}

// The gradients of conv2d's inputs (x, weight, bias) for output gradient g.
std::vector<Tensor> conv2d_grads(const GradContext& c, const Tensor& g, const char* op) {
  const Tensor& x = c.inputs[0];
  const Tensor& w = c.inputs[1];
  const Attrs conv = conv_attrs(conv_params(c.attrs, op));
  std::vector<Tensor> grads(c.inputs.size());
  if (c.needs_grad(0)) grads[0] = call1(kInputGrad, {g, w}, with(conv, "input_size", x.shape()));
  if (c.needs_grad(1)) grads[1] = call1(kWeightGrad, {g, x}, with(conv, "weight_size", w.shape()));
  if (c.needs_grad(2)) grads[2] = bias_grad(g);
  return grads;
}

// conv2d_max_pool2d: whether it applies the relu, and the pooling's attributes.
bool pool_relu(const Attrs& a) {
  const std::string& act = a.s("activation");
  SAMBA_CHECK(act == "none" || act == "relu", Status::InvalidArgument,
              "{}: unknown activation '{}'; expected none or relu", kConvPool, act);
  return act == "relu";
}

const Attrs& pool_2x2() {
  static const Attrs kAttrs{{"kernel_size", std::vector<int64_t>{2, 2}}};
  return kAttrs;
}

ConvGeometry conv_pool_geometry(std::span<const Tensor> in, const Attrs& a) {
  ConvGeometry g = conv2d_geometry(in, a);
  SAMBA_CHECK(g.out_h >= 2 && g.out_w >= 2, Status::ShapeMismatch,
              "{}: the convolution's output is {}x{}, smaller than the 2x2 pooling window",
              kConvPool, g.out_h, g.out_w);
  return g;
}

Dims pooled_shape(const ConvGeometry& g) {
  Dims d = g.output_shape();
  d[d.size() - 2] /= 2;
  d[d.size() - 1] /= 2;
  return d;
}

// conv2d, then relu where asked, as the ops the fused one stands for.
Tensor conv_then_relu(std::span<const Tensor> in, const Attrs& a) {
  const Attrs conv = conv_attrs(conv_params(a, kConvPool));
  const Tensor& bias = optional_at(in, 2);
  Tensor y = bias.defined() ? call1(kConv, {in[0], in[1], bias}, conv)
                            : call1(kConv, {in[0], in[1]}, conv);
  return pool_relu(a) ? call1("relu", {y}) : y;
}

}  // namespace

void register_convolution(OpRegistry& r) {
  with_conv_attrs(
      r.def(kConv)
          .doc("2-D convolution (cross-correlation) of x (N, C, H, W) or (C, H, W) with weight "
               "(O, C/groups, kH, kW), plus bias (O) when given.")
          .input("x", "(N, C, H, W) or (C, H, W)")
          .input("weight", "(O, C/groups, kH, kW)")
          .optional_input("bias", "(O)"))
      .fusion(Fusion::Contraction)
      .infer([](const InferContext& c) -> std::vector<TensorMeta> {
        return {{c.inputs[0].dtype(), conv2d_geometry(c.inputs, c.attrs).output_shape()}};
      })
      .flops([](const InferContext& c, std::span<const TensorMeta>) {
        return conv_flops(conv2d_geometry(c.inputs, c.attrs));
      })
      .kernel([](KernelContext& c) {
        conv2d_forward(conv2d_geometry(c.inputs, c.attrs), c.inputs[0], c.inputs[1],
                       optional_at(c.inputs, 2), c.outputs[0], c.tail);
      })
      .grad([](const GradContext& c) -> std::vector<Tensor> {
        return conv2d_grads(c, c.grad_outputs[0], kConv);
      });

  with_conv_attrs(
      r.def(kConvPool)
          .doc("max_pool2d(act(conv2d(x, weight, bias)), kernel_size 2x2, stride 2) in one pass: "
               "act is relu or none. The compiler fuses a conv net's convolution, relu and 2x2 "
               "pooling into it where nothing else reads the unpooled values (inference).")
          .input("x", "(N, C, H, W) or (C, H, W)")
          .input("weight", "(O, C/groups, kH, kW)")
          .optional_input("bias", "(O)"))
      .attr("activation", AttrType::String, std::string("none"), "none or relu, before pooling")
      .fusion(Fusion::Contraction)
      .infer([](const InferContext& c) -> std::vector<TensorMeta> {
        pool_relu(c.attrs);
        return {{c.inputs[0].dtype(), pooled_shape(conv_pool_geometry(c.inputs, c.attrs))}};
      })
      .flops([](const InferContext& c, std::span<const TensorMeta>) {
        return conv_flops(conv_pool_geometry(c.inputs, c.attrs));
      })
      .kernel([](KernelContext& c) {
        const ConvGeometry g = conv_pool_geometry(c.inputs, c.attrs);
        const bool relu = pool_relu(c.attrs);
        const Tensor& x = c.inputs[0];
        const Tensor& w = c.inputs[1];
        const Tensor& bias = optional_at(c.inputs, 2);
        const Tensor& out = c.outputs[0];
        if (out.numel() == 0) return;
        const bool f32 = x.dtype() == DType::Float32 && w.dtype() == DType::Float32 &&
                         (!bias.defined() || bias.dtype() == DType::Float32) &&
                         out.dtype() == DType::Float32;
        if (f32 && conv2d_direct_pool_forward(g, x.data<float>(), w.data<float>(),
                                              bias.defined() ? bias.data<float>() : nullptr, relu,
                                              out.data<float>()))
          return;
        // Elsewhere (another dtype, or a geometry or CPU the direct kernel
        // does not take) the ops it stands for, one after another: the
        // unpooled values are then allocated here, as they would be unfused.
        out.copy_from(call1("max_pool2d", {conv_then_relu(c.inputs, c.attrs)}, pool_2x2()));
      })
      .grad([](const GradContext& c) -> std::vector<Tensor> {
        // The unpooled values are not kept: recomputed, then the gradient
        // goes back through the pooling, the relu and the convolution.
        const Tensor y = conv_then_relu(c.inputs, c.attrs);
        Tensor g = call1("max_pool2d_backward", {c.grad_outputs[0], y}, pool_2x2());
        if (pool_relu(c.attrs)) g = call1("relu_backward", {g, y});
        return conv2d_grads(c, g, kConvPool);
      });

  with_conv_attrs(
      r.def(kInputGrad)
          .doc("Gradient of conv2d with respect to its input: the transposed convolution of grad "
               "with weight, shaped input_size.")
          .input("grad", "gradient of conv2d's output")
          .input("weight", "(O, C/groups, kH, kW)")
          .required_attr("input_size", AttrType::Ints, "shape of conv2d's input"))
      .fusion(Fusion::Contraction)
      .infer([](const InferContext& c) -> std::vector<TensorMeta> {
        return {{c.inputs[0].dtype(),
                 input_grad_geometry(c.inputs[0], c.inputs[1], c.attrs).input_shape()}};
      })
      .flops([](const InferContext& c, std::span<const TensorMeta>) {
        return conv_flops(input_grad_geometry(c.inputs[0], c.inputs[1], c.attrs));
      })
      .kernel([](KernelContext& c) {
        conv2d_input_grad(input_grad_geometry(c.inputs[0], c.inputs[1], c.attrs), c.inputs[0],
                          c.inputs[1], c.outputs[0]);
      })
      .grad([](const GradContext& c) -> std::vector<Tensor> {
        // out = A_w^T grad, with A_w the conv2d by w: linear in grad and in w.
        const Tensor& gg = c.grad_outputs[0];
        const Tensor& grad = c.inputs[0];
        const Tensor& w = c.inputs[1];
        const Attrs conv = conv_attrs(conv_params(c.attrs, kInputGrad));
        std::vector<Tensor> grads(2);
        if (c.needs_grad(0)) grads[0] = call1(kConv, {gg, w}, conv);
        if (c.needs_grad(1))
          grads[1] = call1(kWeightGrad, {grad, gg}, with(conv, "weight_size", w.shape()));
        return grads;
      });

  with_conv_attrs(
      r.def(kWeightGrad)
          .doc("Gradient of conv2d with respect to its weight, for input x and output gradient "
               "grad.")
          .input("grad", "gradient of conv2d's output")
          .input("x", "conv2d's input")
          .required_attr("weight_size", AttrType::Ints, "shape of conv2d's weight"))
      .fusion(Fusion::Contraction)
      .infer([](const InferContext& c) -> std::vector<TensorMeta> {
        return {{c.inputs[0].dtype(),
                 weight_grad_geometry(c.inputs[0], c.inputs[1], c.attrs).weight_shape()}};
      })
      .flops([](const InferContext& c, std::span<const TensorMeta>) {
        return conv_flops(weight_grad_geometry(c.inputs[0], c.inputs[1], c.attrs));
      })
      .kernel([](KernelContext& c) {
        conv2d_weight_grad(weight_grad_geometry(c.inputs[0], c.inputs[1], c.attrs), c.inputs[0],
                           c.inputs[1], c.outputs[0]);
      })
      .grad([](const GradContext& c) -> std::vector<Tensor> {
        // <gg, dW(grad, x)> = <grad, conv2d(x, gg)> = <conv2d_backward_input(grad, gg), x>.
        const Tensor& gg = c.grad_outputs[0];
        const Tensor& grad = c.inputs[0];
        const Tensor& x = c.inputs[1];
        const Attrs conv = conv_attrs(conv_params(c.attrs, kWeightGrad));
        std::vector<Tensor> grads(2);
        if (c.needs_grad(0)) grads[0] = call1(kConv, {x, gg}, conv);
        if (c.needs_grad(1))
          grads[1] = call1(kInputGrad, {grad, gg}, with(conv, "input_size", x.shape()));
        return grads;
      });

  r.def(kTranspose)
      .doc(
          "2-D transposed convolution of x (N, C_in, H, W) or (C_in, H, W) with weight "
          "(C_in, C_out/groups, kH, kW), plus bias (C_out) when given: the gradient of conv2d "
          "with respect to its input.")
      .input("x", "(N, C_in, H, W) or (C_in, H, W)")
      .input("weight", "(C_in, C_out/groups, kH, kW)")
      .optional_input("bias", "(C_out)")
      .attr("stride", AttrType::Ints, std::vector<int64_t>{1, 1}, "step (h, w), or one for both")
      .attr("padding", AttrType::Ints, std::vector<int64_t>{0, 0},
            "rows/cols removed from each side of the full output (h, w)")
      .attr("output_padding", AttrType::Ints, std::vector<int64_t>{0, 0},
            "extra rows/cols on the bottom/right of the output; smaller than stride")
      .attr("groups", AttrType::Int, int64_t{1}, "channel groups convolved independently")
      .attr("dilation", AttrType::Ints, std::vector<int64_t>{1, 1}, "spacing of kernel taps (h, w)")
      .fusion(Fusion::Contraction)
      .infer([](const InferContext& c) -> std::vector<TensorMeta> {
        return {{c.inputs[0].dtype(), transpose_geometry(c.inputs, c.attrs).input_shape()}};
      })
      .flops([](const InferContext& c, std::span<const TensorMeta>) {
        return conv_flops(transpose_geometry(c.inputs, c.attrs));
      })
      .kernel([](KernelContext& c) {
        const ConvGeometry g = transpose_geometry(c.inputs, c.attrs);
        conv2d_input_grad(g, c.inputs[0], c.inputs[1], c.outputs[0]);
        if (const Tensor& bias = optional_at(c.inputs, 2); bias.defined())
          add_channel_bias(c.outputs[0], bias, g.batch);
      })
      .grad([](const GradContext& c) -> std::vector<Tensor> {
        // out = A_w^T x with A_w the conv2d by w, so d/dx = A_w gy and d/dw
        // is conv2d's weight gradient with the roles of input and output swapped.
        const Tensor& gy = c.grad_outputs[0];
        const Tensor& x = c.inputs[0];
        const Tensor& w = c.inputs[1];
        const Attrs conv = conv_attrs(conv_params(c.attrs, kTranspose));
        std::vector<Tensor> grads(c.inputs.size());
        if (c.needs_grad(0)) grads[0] = call1(kConv, {gy, w}, conv);
        if (c.needs_grad(1))
          grads[1] = call1(kWeightGrad, {x, gy}, with(conv, "weight_size", w.shape()));
        if (c.needs_grad(2)) grads[2] = bias_grad(gy);
        return grads;
      });
}

}  // namespace samba::ops
