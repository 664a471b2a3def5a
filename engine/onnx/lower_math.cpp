// Lowerings of ONNX math and neural-network ops to registry ops.
#include <xxhash.h>

#include <cmath>

#include "engine/onnx/lowerings.h"
#include "engine/ops/registry.h"

namespace samba::onnx_import::lower {
namespace {

void require_one_output(const NodeContext& c) {
  if (c.output_count() > 1)
    c.unsupported("{} outputs are requested; supported: the first output only", c.output_count());
}

// BatchNormalization with training_mode 1: normalized by the batch's own
// statistics (population variance), with the running statistics updated as
// the second and third outputs.
Out batch_normalization_training(const NodeContext& c, double eps, double momentum) {
  const Tensor& x = c.input(0);
  if (x.dim() < 2) c.invalid("the input must be (N, C, ...), got {}", dims_str(x.shape()));
  std::vector<int64_t> dims{0};
  for (int64_t d = 2; d < x.dim(); ++d) dims.push_back(d);
  const Tensor mean = call1("mean", {x}, {{"dim", dims}, {"keepdim", true}});
  const Tensor var =
      call1("var", {x}, {{"dim", dims}, {"keepdim", true}, {"correction", int64_t{0}}});
  Dims per_channel(static_cast<size_t>(x.dim()), 1);
  per_channel[1] = -1;
  auto channel = [&](const Tensor& t) { return call1("reshape", {t}, {{"shape", per_channel}}); };
  const Tensor inv = call1("rsqrt", {call1("add", {var, Tensor::scalar(eps, var.dtype(), true)})});
  const Tensor y = call1(
      "add", {call1("mul", {call1("mul", {call1("sub", {x, mean}), inv}), channel(c.input(1))}),
              channel(c.input(2))});
  Out out{y};
  if (c.output_count() > 1) {
    const Dims flat{x.size(1)};
    auto blend = [&](const Tensor& running, const Tensor& batch) {
      const Tensor kept = call1("mul", {running, Tensor::scalar(momentum, running.dtype(), true)});
      const Tensor fresh = call1("mul", {call1("reshape", {batch}, {{"shape", flat}}),
                                         Tensor::scalar(1 - momentum, batch.dtype(), true)});
      return call1("add", {kept, fresh});
    };
    out.push_back(blend(c.input(3), mean));
    out.push_back(blend(c.input(4), var));
  }
  return out;
}

}  // namespace

Out unary(const NodeContext& c, std::string_view op) { return {call1(op, {c.input(0)})}; }

namespace {

// A one-element constant operand (ONNX exports Python numbers so) becomes a
// wrapped scalar, as the torch front end passes numbers: it takes the other
// operand's dtype, and a compiled graph keeps it as an operand, not a 0-d
// tensor promoted on its own.
Tensor scalar_operand(const Tensor& t, const Tensor& other) {
  if (t.dim() != 0 || other.dim() == 0 || !t.has_data() || t.is_symbolic() || t.requires_grad())
    return t;
  if (is_floating(t.dtype()) != is_floating(other.dtype())) return t;
  return Tensor::scalar(t.item_double(), is_floating(t.dtype()) ? DType::Float64 : DType::Int64,
                        true);
}

}  // namespace

Out binary(const NodeContext& c, std::string_view op) {
  const Tensor &a = c.input(0), &b = c.input(1);
  return {call1(op, {scalar_operand(a, b), scalar_operand(b, a)})};
}

Out variadic(const NodeContext& c, std::string_view op) {
  Tensor acc = c.input(0);
  for (size_t i = 1; i < c.input_count(); ++i) acc = call1(op, {acc, c.input(i)});
  return {acc};
}

Out div(const NodeContext& c) {
  const Tensor &a = c.input(0), &b = c.input(1);
  // ONNX divides integers with truncation, as C does.
  Attrs attrs;
  if (!is_floating(a.dtype()) && !is_floating(b.dtype()))
    attrs.set("rounding_mode", std::string("trunc"));
  return {call1("div", {a, b}, attrs)};
}

Out pow(const NodeContext& c) {
  // ONNX's result has the base's type (an integer base with a float
  // exponent stays integer); the registry promotes as torch does.
  const Tensor y = binary(c, "pow").at(0);
  const DType base = c.input(0).dtype();
  return {y.dtype() == base ? y : call1("cast", {y}, {{"dtype", base}})};
}

Out mod(const NodeContext& c) {
  const Tensor &a = c.input(0), &b = c.input(1);
  // a - round(a / b) * b: rounding down gives the divisor's sign (Python's
  // %, fmod 0), toward zero the dividend's (C's fmod, fmod 1).
  const bool fmod = c.attr_int("fmod", 0) != 0;
  if (!fmod && is_floating(a.dtype()))
    c.invalid("fmod 0 is for integers; floating inputs need fmod 1");
  const Tensor q = call1("div", {a, b}, {{"rounding_mode", std::string(fmod ? "trunc" : "floor")}});
  return {call1("sub", {a, call1("mul", {q, b})})};
}

Out instance_normalization(const NodeContext& c) {
  const Tensor& x = c.input(0);
  if (x.dim() < 3) c.invalid("the input must be (N, C, spatial...), got {}", dims_str(x.shape()));
  // Instance norm is group norm with a group per channel.
  return {call1("group_norm", {x, c.input(1), c.input(2)},
                {{"num_groups", x.size(1)}, {"eps", c.attr_float("epsilon", 1e-5)}})};
}

Out matmul(const NodeContext& c) { return {call1("matmul", {c.input(0), c.input(1)})}; }

Out gemm(const NodeContext& c) {
  Tensor a = c.input(0), b = c.input(1);
  const Tensor* bias = c.optional_input(2);
  const double alpha = c.attr_float("alpha", 1.0), beta = c.attr_float("beta", 1.0);
  const int64_t trans_a = c.attr_int("transA", 0), trans_b = c.attr_int("transB", 0);
  if (a.dim() != 2 || b.dim() != 2)
    c.invalid("A and B must be matrices, got shapes {} and {}", dims_str(a.shape()),
              dims_str(b.shape()));
  if (trans_a) a = call1("permute", {a}, {{"dims", std::vector<int64_t>{1, 0}}});
  // The layout torch.nn.Linear exports: one fused linear (with its GEMM epilogue).
  if (trans_b && alpha == 1.0 && beta == 1.0 && (!bias || bias->dim() <= 1)) {
    if (bias && bias->dim() == 0) return {call1("add", {call1("linear", {a, b}), *bias})};
    return {bias ? call1("linear", {a, b, *bias}) : call1("linear", {a, b})};
  }
  if (trans_b) b = call1("permute", {b}, {{"dims", std::vector<int64_t>{1, 0}}});
  Tensor y = call1("matmul", {a, b});
  if (alpha != 1.0) y = call1("mul", {y, Tensor::scalar(alpha, y.dtype(), true)});
  if (bias && beta != 0.0) {
    Tensor cterm = *bias;
    if (beta != 1.0) cterm = call1("mul", {cterm, Tensor::scalar(beta, cterm.dtype(), true)});
    y = call1("add", {y, cterm});
  }
  return {y};
}

Out batch_normalization(const NodeContext& c) {
  const Tensor& x = c.input(0);
  const double eps = c.attr_float("epsilon", 1e-5), momentum = c.attr_float("momentum", 0.9);
  if (c.attr_int("training_mode", 0) != 0) return batch_normalization_training(c, eps, momentum);
  require_one_output(c);
  // The registry's op counts updates in a buffer; inference never touches it.
  Tensor batches = Tensor::zeros({}, DType::Int64);
  Attrs attrs{{"training", false}, {"eps", eps}, {"momentum", 1.0 - momentum}};
  return {call1("batch_norm", {x, c.input(1), c.input(2), c.input(3), c.input(4), batches}, attrs)};
}

Out layer_normalization(const NodeContext& c) {
  const Tensor& x = c.input(0);
  const int64_t axis = axis_in(c, c.attr_int("axis", -1), x.dim(), "axis");
  const Dims normalized(x.shape().begin() + axis, x.shape().end());
  const double eps = c.attr_float("epsilon", 1e-5);
  Attrs attrs{{"normalized_shape", normalized}, {"eps", eps}};
  const Tensor* bias = c.optional_input(2);
  Out out{bias ? call1("layer_norm", {x, c.input(1), *bias}, attrs)
               : call1("layer_norm", {x, c.input(1)}, attrs)};
  if (c.output_count() > 1) {
    // Mean and InvStdDev: the statistics over the normalized dims, kept as
    // dims of size 1.
    std::vector<int64_t> dims;
    for (int64_t d = axis; d < x.dim(); ++d) dims.push_back(d);
    const Attrs over{{"dim", dims}, {"keepdim", true}};
    out.push_back(call1("mean", {x}, over));
    const Tensor var =
        call1("var", {x}, {{"dim", dims}, {"keepdim", true}, {"correction", int64_t{0}}});
    out.push_back(call1("rsqrt", {call1("add", {var, Tensor::scalar(eps, var.dtype(), true)})}));
  }
  return out;
}

Out softmax(const NodeContext& c, std::string_view op) {
  const Tensor& x = c.input(0);
  return {call1(op, {x}, {{"dim", axis_in(c, c.attr_int("axis", -1), x.dim(), "axis")}})};
}

Out reduce(const NodeContext& c, std::string_view op) { return reduce(c, op, c.input(0)); }

Out reduce(const NodeContext& c, std::string_view op, const Tensor& x) {
  // ReduceSum takes its axes as an input from opset 13, the others from 18.
  std::optional<std::vector<int64_t>> axes = c.attr_ints("axes");
  if (c.optional_input(1)) axes = c.constant_ints(1, "axes");
  const bool keepdims = c.attr_int("keepdims", 1) != 0;
  if (!axes || axes->empty()) {
    if (c.attr_int("noop_with_empty_axes", 0) != 0) return {x};
    axes = std::vector<int64_t>();
    for (int64_t d = 0; d < x.dim(); ++d) axes->push_back(d);
  }
  for (int64_t& a : *axes) a = axis_in(c, a, x.dim(), "axes");
  // A reduction of every dim to a scalar is the registry's dim-less form
  // (a loss), whose gradient scales by a wrapped number.
  if (!keepdims && static_cast<int64_t>(axes->size()) == x.dim()) return {call1(op, {x})};
  return {call1(op, {x}, {{"dim", *axes}, {"keepdim", keepdims}})};
}

Out leaky_relu(const NodeContext& c) {
  return {call1("leaky_relu", {c.input(0)}, {{"negative_slope", c.attr_float("alpha", 0.01)}})};
}

Out clip(const NodeContext& c) {
  Attrs attrs;
  const Tensor* lo = c.optional_input(1);
  const Tensor* hi = c.optional_input(2);
  // Bounds known at import become attributes; computed ones become ops.
  Tensor x = c.input(0);
  if (lo) {
    if (lo->has_data() && !lo->is_symbolic())
      attrs.set("min", lo->item_double());
    else
      x = call1("maximum", {x, *lo});
  }
  if (hi) {
    if (hi->has_data() && !hi->is_symbolic())
      attrs.set("max", hi->item_double());
    else
      x = call1("minimum", {x, *hi});
  }
  if (attrs.items().empty()) return {x};
  return {call1("clamp", {x}, attrs)};
}

// Dropout in training mode is the registry's dropout (its gradient applies
// the same mask). Its Philox key is the node's `seed`, or else one derived
// from the node's name, so that the graph's dropouts draw different masks.
Out dropout(const NodeContext& c) {
  const Tensor& x = c.input(0);
  const Tensor* ratio = c.optional_input(1);
  const Tensor* training = c.optional_input(2);
  auto known = [](const Tensor* t) { return t && t->has_data() && !t->is_symbolic(); };
  if (training && !known(training))
    c.unsupported("training_mode computed at run time; supported: a constant (initializer or "
                  "Constant)");
  const bool train = training && training->item_int() != 0;
  if (train && ratio && !known(ratio))
    c.unsupported("ratio computed at run time in training mode; supported: a constant "
                  "(initializer or Constant)");
  const double p = train && ratio ? ratio->item_double() : 0.5;
  if (!train || p == 0.0) {
    // Every element is kept: the mask is all true.
    if (c.output_count() > 1) return {x, call1("ones_like", {x}, {{"dtype", DType::Bool}})};
    return {x};
  }
  if (p < 0.0 || p > 1.0) c.invalid("ratio {} must be in [0, 1]", p);
  const std::string& name = c.node().name;
  const int64_t seed = c.attr_int(
      "seed", static_cast<int64_t>(XXH64(name.data(), name.size(), 0) & 0x7FFFFFFFFFFFFFFF));
  const Attrs attrs{{"p", p}, {"training", true}, {"seed", seed}};
  if (c.output_count() < 2) return {call1("dropout", {x}, attrs)};
  // With the mask: one random draw, the dropout of ones (each kept element
  // 1 / (1 - ratio)), makes both outputs, so they agree whatever run-time
  // seed is given.
  const Tensor kept = call1("dropout", {call1("ones_like", {x})}, attrs);
  return {call1("mul", {x, kept}), call1("ne", {kept, Tensor::scalar(0.0, kept.dtype(), true)})};
}

}  // namespace samba::onnx_import::lower
