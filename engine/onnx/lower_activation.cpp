// Lowerings of ONNX activations and elementwise ops the registry has no single
// op for, composed of registry ops (so their gradients come from the registry's).
#include <limits>

#include "engine/onnx/lowerings.h"
#include "engine/ops/registry.h"

namespace samba::onnx_import::lower {
namespace {

Tensor num(double v, const Tensor& like) { return Tensor::scalar(v, like.dtype(), true); }

// alpha * (exp(x) - 1): the negative branch of Elu, Selu and Celu.
Tensor exp_minus_one(const Tensor& x, double alpha) {
  return call1("mul", {call1("sub", {call1("exp", {x}), num(1, x)}), num(alpha, x)});
}

}  // namespace

Out activation(const NodeContext& c, std::string_view kind) {
  const Tensor& x = c.input(0);
  const Tensor positive = call1("gt", {x, num(0, x)});
  if (kind == "PRelu") {
    const Tensor negative = call1("mul", {x, c.input(1)});
    return {call1("where", {positive, x, negative})};
  }
  if (kind == "Elu")
    return {call1("where", {positive, x, exp_minus_one(x, c.attr_float("alpha", 1.0))})};
  if (kind == "Selu") {
    const double alpha = c.attr_float("alpha", 1.67326319217681884765625);
    const double gamma = c.attr_float("gamma", 1.05070102214813232421875);
    return {call1("mul", {call1("where", {positive, x, exp_minus_one(x, alpha)}), num(gamma, x)})};
  }
  if (kind == "Celu") {
    const double alpha = c.attr_float("alpha", 1.0);
    const Tensor scaled = exp_minus_one(call1("div", {x, num(alpha, x)}), alpha);
    return {call1("where", {positive, x, scaled})};
  }
  if (kind == "HardSigmoid" || kind == "HardSwish") {
    const double alpha = kind == "HardSwish" ? 1.0 / 6 : c.attr_float("alpha", 0.2);
    const double beta = kind == "HardSwish" ? 0.5 : c.attr_float("beta", 0.5);
    const Tensor h =
        call1("clamp", {call1("add", {call1("mul", {x, num(alpha, x)}), num(beta, x)})},
              {{"min", 0.0}, {"max", 1.0}});
    return {kind == "HardSwish" ? call1("mul", {x, h}) : h};
  }
  if (kind == "Softplus") return {call1("log", {call1("add", {call1("exp", {x}), num(1, x)})})};
  if (kind == "Softsign") return {call1("div", {x, call1("add", {call1("abs", {x}), num(1, x)})})};
  if (kind == "ThresholdedRelu") {
    const Tensor above = call1("gt", {x, num(c.attr_float("alpha", 1.0), x)});
    return {call1("where", {above, x, call1("zeros_like", {x})})};
  }
  if (kind == "Tan") return {call1("div", {call1("sin", {x}), call1("cos", {x})})};
  if (kind == "Sign") {
    const Tensor negative = call1("lt", {x, num(0, x)});
    return {call1("sub", {call1("cast", {positive}, {{"dtype", x.dtype()}}),
                          call1("cast", {negative}, {{"dtype", x.dtype()}})})};
  }
  if (kind == "Floor" || kind == "Ceil") {
    // Division by one rounding down is floor; ceil is floor's mirror.
    if (kind == "Floor")
      return {call1("div", {x, num(1, x)}, {{"rounding_mode", std::string("floor")}})};
    const Tensor down =
        call1("div", {call1("neg", {x}), num(1, x)}, {{"rounding_mode", std::string("floor")}});
    return {call1("neg", {down})};
  }
  if (kind == "Sinh" || kind == "Cosh") {
    const Tensor up = call1("exp", {x}), down = call1("exp", {call1("neg", {x})});
    return {call1("mul", {call1(kind == "Sinh" ? "sub" : "add", {up, down}), num(0.5, x)})};
  }
  if (kind == "IsNaN") return {call1("ne", {x, x})};
  if (kind == "IsInf") {
    const double inf = std::numeric_limits<double>::infinity();
    const Tensor pos = call1("eq", {x, num(inf, x)}), neg = call1("eq", {x, num(-inf, x)});
    const bool want_pos = c.attr_int("detect_positive", 1) != 0;
    const bool want_neg = c.attr_int("detect_negative", 1) != 0;
    if (want_pos && want_neg) return {call1("logical_or", {pos, neg})};
    if (want_pos) return {pos};
    if (want_neg) return {neg};
    return {call1("zeros_like", {x}, {{"dtype", DType::Bool}})};
  }
  if (kind == "Shrink") {
    const double lambd = c.attr_float("lambd", 0.5), bias = c.attr_float("bias", 0.0);
    const Tensor low = call1("lt", {x, num(-lambd, x)}), high = call1("gt", {x, num(lambd, x)});
    const Tensor zero = call1("zeros_like", {x});
    return {call1("where", {low, call1("add", {x, num(bias, x)}),
                            call1("where", {high, call1("sub", {x, num(bias, x)}), zero})})};
  }
  c.unsupported("activation '{}' has no lowering", kind);
}

}  // namespace samba::onnx_import::lower
