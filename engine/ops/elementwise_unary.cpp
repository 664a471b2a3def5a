// Elementwise functions of one tensor: neg, abs, exp, log, sqrt, rsqrt,
// reciprocal, sin, cos, tanh, sigmoid, relu, gelu, silu, leaky_relu, erf,
// clamp, logical_not, bitwise_not and cast; plus fused backward ops for the
// activations, whose gradients would otherwise take several passes.
#include <cmath>
#include <limits>

#include "engine/kernels/elementwise_loops.h"
#include "engine/kernels/elementwise_math.h"
#include "engine/ops/elementwise_schema.h"

namespace samba::ops {
namespace {

// ---- building blocks ------------------------------------------------------------------

// out = f(x) in float (float32, bf16, fp16 and integer inputs) or double.
template <typename F>
void run_float_unary(KernelContext& c, std::string_view op, int64_t cost, F f) {
  ew::dispatch_float(c.outputs[0].dtype(), op, [&](auto tag) {
    using A = typename decltype(tag)::type;
    ew::for_each_block<A, A>(c.outputs[0], {c.inputs[0]}, ew::grain_for(cost), f);
  });
}

// out = f(a, b) in float or double (the backward ops: a is the gradient).
template <typename F>
void run_float_binary(KernelContext& c, std::string_view op, int64_t cost, F f) {
  ew::dispatch_float(c.outputs[0].dtype(), op, [&](auto tag) {
    using A = typename decltype(tag)::type;
    ew::for_each_block<A, A, A>(c.outputs[0], {c.inputs[0], c.inputs[1]}, ew::grain_for(cost), f);
  });
}

// out = f(x) in x's own compute type (integers stay integers).
template <typename F>
void run_numeric_unary(KernelContext& c, std::string_view op, F f) {
  ew::dispatch_numeric(c.outputs[0].dtype(), op, [&](auto tag) {
    using A = typename decltype(tag)::type;
    ew::for_each_block<A, A>(c.outputs[0], {c.inputs[0]}, kMinGrain, f);
  });
}

// A floating-point function: integer and bool inputs give float32.
OpBuilder def_float(OpRegistry& r, const char* name, const char* doc) {
  return r.def(name)
      .doc(doc)
      .input("x")
      .fusion(Fusion::Elementwise)
      .strided_inputs()
      .infer([](const InferContext& c) -> std::vector<TensorMeta> {
        return {{ew::float_result(c.inputs[0].dtype()), c.inputs[0].shape()}};
      });
}

// A function on numbers that keeps the dtype; bool is refused.
OpBuilder def_numeric(OpRegistry& r, const char* name, const char* doc) {
  return r.def(name)
      .doc(doc)
      .input("x")
      .fusion(Fusion::Elementwise)
      .strided_inputs()
      .infer([name](const InferContext& c) -> std::vector<TensorMeta> {
        ew::require_not_bool(c.inputs[0].dtype(), name, "");
        return {meta_of(c.inputs[0])};
      });
}

// A fused gradient op: (grad, saved) -> grad of the input. It has no gradient itself.
OpBuilder def_backward(OpRegistry& r, const char* name, const char* doc, const char* saved) {
  return r.def(name)
      .doc(doc)
      .input("grad")
      .input(saved)
      .fusion(Fusion::Elementwise)
      .strided_inputs()
      .infer(ew::infer_promoted);
}

const Tensor& grad_of(const GradContext& c) { return c.grad_outputs[0]; }
Tensor mul(const Tensor& a, const Tensor& b) { return call1("mul", {a, b}); }
Tensor scaled(const Tensor& a, double k) { return call1("mul", {a, wrap_scalar(k)}); }

// ---- gelu / leaky_relu / clamp attributes --------------------------------------------------

bool gelu_uses_tanh(const Attrs& a, const char* op) {
  const std::string& s = a.s("approximate");
  SAMBA_CHECK(s == "none" || s == "tanh", Status::InvalidArgument,
              "{}: approximate must be 'none' or 'tanh', got '{}'", op, s);
  return s == "tanh";
}

bool integral_value(double v) { return std::isfinite(v) && v == std::trunc(v); }

DType clamp_dtype(const Tensor& x, const Attrs& a) {
  SAMBA_CHECK(a.has("min") || a.has("max"), Status::InvalidArgument,
              "clamp: at least one of 'min' and 'max' is required");
  ew::require_not_bool(x.dtype(), "clamp", "");
  if (is_floating(x.dtype())) return x.dtype();
  // A fractional bound promotes an integer tensor to float32, as a Python
  // float bound does in PyTorch.
  const bool ints = (!a.has("min") || integral_value(a.f("min"))) &&
                    (!a.has("max") || integral_value(a.f("max")));
  return ints ? x.dtype() : DType::Float32;
}

// A bound converted to A, saturating for integer types.
template <typename A>
A clamp_bound(const Attrs& a, const char* name, A missing) {
  if (!a.has(name)) return missing;
  const double v = a.f(name);
  if constexpr (std::is_floating_point_v<A>) {
    return static_cast<A>(v);
  } else {
    if (v <= static_cast<double>(std::numeric_limits<A>::lowest()))
      return std::numeric_limits<A>::lowest();
    if (v >= static_cast<double>(std::numeric_limits<A>::max()))
      return std::numeric_limits<A>::max();
    return static_cast<A>(v);
  }
}

void clamp_kernel(KernelContext& c) {
  ew::dispatch_numeric(c.outputs[0].dtype(), "clamp", [&](auto tag) {
    using A = typename decltype(tag)::type;
    const A lo = clamp_bound<A>(c.attrs, "min", std::numeric_limits<A>::lowest());
    const A hi = clamp_bound<A>(c.attrs, "max", std::numeric_limits<A>::max());
    if constexpr (std::is_floating_point_v<A>) {
      if (std::isnan(lo) || std::isnan(hi)) {  // a NaN bound makes every element NaN
        return ew::for_each_block<A, A>(c.outputs[0], {c.inputs[0]}, kMinGrain,
                                        [](int64_t n, A* __restrict o, const A*) {
                                          std::fill_n(o, n, std::numeric_limits<A>::quiet_NaN());
                                        });
      }
    }
    // NaN inputs fail both tests and pass through.
    ew::for_each_block<A, A>(c.outputs[0], {c.inputs[0]}, kMinGrain,
                             [lo, hi](int64_t n, A* __restrict o, const A* x) {
                               for (int64_t i = 0; i < n; ++i) {
                                 const A v = x[i] < lo ? lo : x[i];
                                 o[i] = v > hi ? hi : v;
                               }
                             });
  });
}

// ---- op groups ----------------------------------------------------------------------------

void register_arithmetic(OpRegistry& r) {
  def_numeric(r, "neg", "-x.")
      .kernel([](KernelContext& c) {
        run_numeric_unary(c, "neg", [](int64_t n, auto* __restrict o, const auto* x) {
          for (int64_t i = 0; i < n; ++i) o[i] = ew::wrap_neg(x[i]);
        });
      })
      .grad(
          [](const GradContext& c) -> std::vector<Tensor> { return {call1("neg", {grad_of(c)})}; });

  def_numeric(r, "abs", "|x|.")
      .kernel([](KernelContext& c) {
        run_numeric_unary(c, "abs", [](int64_t n, auto* __restrict o, const auto* x) {
          using A = std::remove_cvref_t<decltype(*o)>;
          for (int64_t i = 0; i < n; ++i) {
            if constexpr (std::is_floating_point_v<A>)
              o[i] = std::abs(x[i]);
            else
              o[i] = x[i] < 0 ? ew::wrap_neg(x[i]) : x[i];
          }
        });
      })
      .grad([](const GradContext& c) -> std::vector<Tensor> {  // g * sign(x); 0 at 0
        const Tensor& x = c.inputs[0];
        Tensor signed_g =
            call1("where", {call1("lt", {x, wrap_int(0)}), call1("neg", {grad_of(c)}), grad_of(c)});
        return {ew::masked_grad(call1("ne", {x, wrap_int(0)}), signed_g)};
      });

  def_float(r, "reciprocal", "1 / x.")
      .kernel([](KernelContext& c) {
        run_float_unary(c, "reciprocal", 2, [](int64_t n, auto* __restrict o, const auto* x) {
          ew::vec(o, n) = ew::vec(x, n).inverse();
        });
      })
      .grad([](const GradContext& c) -> std::vector<Tensor> {
        const Tensor& y = c.outputs[0];
        return {mul(grad_of(c), call1("neg", {mul(y, y)}))};
      });

  def_float(r, "sqrt", "Square root of x (NaN for x < 0).")
      .kernel([](KernelContext& c) {
        run_float_unary(c, "sqrt", 2,
                        [](int64_t n, auto* o, const auto* x) { ew::sqrt_block(n, o, x); });
      })
      .grad([](const GradContext& c) -> std::vector<Tensor> {
        return {call1("div", {grad_of(c), scaled(c.outputs[0], 2.0)})};
      });

  def_float(r, "rsqrt", "1 / sqrt(x).")
      .kernel([](KernelContext& c) {
        run_float_unary(c, "rsqrt", 3, [](int64_t n, auto* o, const auto* x) {
          using A = std::remove_cvref_t<decltype(*o)>;
          alignas(64) A root[ew::kBlock];
          ew::sqrt_block(n, root, x);
          ew::vec(o, n) = ew::vec(static_cast<const A*>(root), n).inverse();
        });
      })
      .grad([](const GradContext& c) -> std::vector<Tensor> {  // -0.5 y^3
        const Tensor& y = c.outputs[0];
        return {mul(grad_of(c), scaled(mul(y, mul(y, y)), -0.5))};
      });
}

void register_transcendental(OpRegistry& r) {
  def_float(r, "exp", "e^x.")
      .kernel([](KernelContext& c) {
        run_float_unary(c, "exp", 4,
                        [](int64_t n, auto* o, const auto* x) { ew::exp_block(n, o, x); });
      })
      .grad([](const GradContext& c) -> std::vector<Tensor> {
        return {mul(grad_of(c), c.outputs[0])};
      });

  def_float(r, "log", "Natural logarithm of x (-inf at 0, NaN below).")
      .kernel([](KernelContext& c) {
        run_float_unary(c, "log", 4,
                        [](int64_t n, auto* o, const auto* x) { ew::log_block(n, o, x); });
      })
      .grad([](const GradContext& c) -> std::vector<Tensor> {
        return {call1("div", {grad_of(c), c.inputs[0]})};
      });

  def_float(r, "sin", "Sine of x (radians).")
      .kernel([](KernelContext& c) {
        run_float_unary(c, "sin", 8, [](int64_t n, auto* __restrict o, const auto* x) {
          ew::vec(o, n) = ew::vec(x, n).sin();
        });
      })
      .grad([](const GradContext& c) -> std::vector<Tensor> {
        return {mul(grad_of(c), call1("cos", {c.inputs[0]}))};
      });

  def_float(r, "cos", "Cosine of x (radians).")
      .kernel([](KernelContext& c) {
        run_float_unary(c, "cos", 8, [](int64_t n, auto* __restrict o, const auto* x) {
          ew::vec(o, n) = ew::vec(x, n).cos();
        });
      })
      .grad([](const GradContext& c) -> std::vector<Tensor> {
        return {mul(grad_of(c), call1("neg", {call1("sin", {c.inputs[0]})}))};
      });

  def_float(r, "erf", "The error function 2/sqrt(pi) * integral_0^x e^(-t^2) dt.")
      .kernel([](KernelContext& c) {
        run_float_unary(c, "erf", 4, [](int64_t n, auto* __restrict o, const auto* x) {
          ew::vec(o, n) = ew::vec(x, n).erf();
        });
      })
      .grad([](const GradContext& c) -> std::vector<Tensor> {  // 2/sqrt(pi) e^(-x^2)
        const Tensor& x = c.inputs[0];
        Tensor d = scaled(call1("exp", {call1("neg", {mul(x, x)})}), ew::kTwo_SqrtPi);
        return {mul(grad_of(c), d)};
      });
}

void register_activations(OpRegistry& r) {
  def_float(r, "tanh", "Hyperbolic tangent of x.")
      .kernel([](KernelContext& c) {
        run_float_unary(c, "tanh", 4, [](int64_t n, auto* __restrict o, const auto* x) {
          ew::vec(o, n) = ew::vec(x, n).tanh();
        });
      })
      .grad([](const GradContext& c) -> std::vector<Tensor> {
        return {call1("tanh_backward", {grad_of(c), c.outputs[0]})};
      });

  def_float(r, "sigmoid", "1 / (1 + e^-x).")
      .kernel([](KernelContext& c) {
        run_float_unary(c, "sigmoid", 4,
                        [](int64_t n, auto* o, const auto* x) { ew::sigmoid_block(n, o, x); });
      })
      .grad([](const GradContext& c) -> std::vector<Tensor> {
        return {call1("sigmoid_backward", {grad_of(c), c.outputs[0]})};
      });

  def_numeric(r, "relu", "max(x, 0); NaN stays NaN.")
      .kernel([](KernelContext& c) {
        run_numeric_unary(c, "relu", [](int64_t n, auto* __restrict o, const auto* x) {
          using A = std::remove_cvref_t<decltype(*o)>;
          for (int64_t i = 0; i < n; ++i) o[i] = x[i] < A(0) ? A(0) : x[i];
        });
      })
      .grad([](const GradContext& c) -> std::vector<Tensor> {
        return {call1("relu_backward", {grad_of(c), c.outputs[0]})};
      });

  def_float(r, "gelu",
            "x * Phi(x), Phi the standard normal CDF; approximate='tanh' uses "
            "0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).")
      .attr("approximate", AttrType::String, std::string("none"), "'none' (erf form) or 'tanh'")
      .infer([](const InferContext& c) -> std::vector<TensorMeta> {
        gelu_uses_tanh(c.attrs, "gelu");
        return {{ew::float_result(c.inputs[0].dtype()), c.inputs[0].shape()}};
      })
      .kernel([](KernelContext& c) {
        if (gelu_uses_tanh(c.attrs, "gelu"))
          run_float_unary(c, "gelu", 6,
                          [](int64_t n, auto* o, const auto* x) { ew::gelu_tanh_block(n, o, x); });
        else
          run_float_unary(c, "gelu", 6,
                          [](int64_t n, auto* o, const auto* x) { ew::gelu_erf_block(n, o, x); });
      })
      .grad([](const GradContext& c) -> std::vector<Tensor> {
        return {call1("gelu_backward", {grad_of(c), c.inputs[0]},
                      {{"approximate", c.attrs.s("approximate")}})};
      });

  def_float(r, "silu", "x * sigmoid(x).")
      .kernel([](KernelContext& c) {
        run_float_unary(c, "silu", 4,
                        [](int64_t n, auto* o, const auto* x) { ew::silu_block(n, o, x); });
      })
      .grad([](const GradContext& c) -> std::vector<Tensor> {
        return {call1("silu_backward", {grad_of(c), c.inputs[0]})};
      });

  def_float(r, "leaky_relu", "x for x > 0, negative_slope * x otherwise.")
      .attr("negative_slope", AttrType::Float, 0.01, "slope for x <= 0")
      .kernel([](KernelContext& c) {
        const double slope = c.attrs.f("negative_slope");
        run_float_unary(c, "leaky_relu", 1, [slope](int64_t n, auto* __restrict o, const auto* x) {
          using A = std::remove_cvref_t<decltype(*o)>;
          const A k = static_cast<A>(slope);
          for (int64_t i = 0; i < n; ++i) o[i] = x[i] > A(0) ? x[i] : x[i] * k;
        });
      })
      .grad([](const GradContext& c) -> std::vector<Tensor> {
        return {call1("leaky_relu_backward", {grad_of(c), c.inputs[0]},
                      {{"negative_slope", c.attrs.f("negative_slope")}})};
      });
}

void register_activation_backward(OpRegistry& r) {
  def_backward(r, "tanh_backward", "grad * (1 - out^2), out = tanh(x).", "out")
      .kernel([](KernelContext& c) {
        run_float_binary(c, "tanh_backward", 2,
                         [](int64_t n, auto* o, const auto* g, const auto* y) {
                           ew::tanh_backward_block(n, o, g, y);
                         });
      });

  def_backward(r, "sigmoid_backward", "grad * out * (1 - out), out = sigmoid(x).", "out")
      .kernel([](KernelContext& c) {
        run_float_binary(c, "sigmoid_backward", 2,
                         [](int64_t n, auto* o, const auto* g, const auto* y) {
                           ew::sigmoid_backward_block(n, o, g, y);
                         });
      });

  def_backward(r, "relu_backward", "grad where out > 0, else 0 (out = relu(x)).", "out")
      .kernel([](KernelContext& c) {
        run_float_binary(c, "relu_backward", 1,
                         [](int64_t n, auto* __restrict o, const auto* g, const auto* y) {
                           using A = std::remove_cvref_t<decltype(*o)>;
                           for (int64_t i = 0; i < n; ++i) o[i] = y[i] > A(0) ? g[i] : A(0);
                         });
      });

  def_backward(r, "gelu_backward", "grad * d gelu(x) / dx.", "x")
      .attr("approximate", AttrType::String, std::string("none"), "'none' or 'tanh', as in gelu")
      .infer([](const InferContext& c) {
        gelu_uses_tanh(c.attrs, "gelu_backward");
        return ew::infer_promoted(c);
      })
      .kernel([](KernelContext& c) {
        if (gelu_uses_tanh(c.attrs, "gelu_backward"))
          run_float_binary(c, "gelu_backward", 8,
                           [](int64_t n, auto* o, const auto* g, const auto* x) {
                             ew::gelu_tanh_backward_block(n, o, g, x);
                           });
        else
          run_float_binary(c, "gelu_backward", 8,
                           [](int64_t n, auto* o, const auto* g, const auto* x) {
                             ew::gelu_erf_backward_block(n, o, g, x);
                           });
      });

  def_backward(r, "silu_backward", "grad * d silu(x) / dx.", "x").kernel([](KernelContext& c) {
    run_float_binary(c, "silu_backward", 6, [](int64_t n, auto* o, const auto* g, const auto* x) {
      ew::silu_backward_block(n, o, g, x);
    });
  });

  def_backward(r, "leaky_relu_backward", "grad for x > 0, grad * negative_slope otherwise.", "x")
      .attr("negative_slope", AttrType::Float, 0.01)
      .kernel([](KernelContext& c) {
        const double slope = c.attrs.f("negative_slope");
        run_float_binary(c, "leaky_relu_backward", 1,
                         [slope](int64_t n, auto* __restrict o, const auto* g, const auto* x) {
                           using A = std::remove_cvref_t<decltype(*o)>;
                           const A k = static_cast<A>(slope);
                           for (int64_t i = 0; i < n; ++i) o[i] = x[i] > A(0) ? g[i] : g[i] * k;
                         });
      });
}

void register_clamp_and_casts(OpRegistry& r) {
  r.def("clamp")
      .doc(
          "x limited to [min, max] (either bound optional, at least one given); a NaN x stays "
          "NaN. An integer x with a fractional bound gives float32.")
      .input("x")
      .optional_attr("min", AttrType::Float, "lower bound")
      .optional_attr("max", AttrType::Float, "upper bound")
      .fusion(Fusion::Elementwise)
      .strided_inputs()
      .infer([](const InferContext& c) -> std::vector<TensorMeta> {
        return {{clamp_dtype(c.inputs[0], c.attrs), c.inputs[0].shape()}};
      })
      .kernel(clamp_kernel)
      .grad([](const GradContext& c) -> std::vector<Tensor> {  // passes where min <= x <= max
        const Tensor& x = c.inputs[0];
        Tensor inside;
        if (c.attrs.has("min")) inside = call1("ge", {x, wrap_scalar(c.attrs.f("min"))});
        if (c.attrs.has("max")) {
          Tensor below = call1("le", {x, wrap_scalar(c.attrs.f("max"))});
          inside = inside.defined() ? call1("logical_and", {inside, below}) : below;
        }
        return {ew::masked_grad(inside, grad_of(c))};
      });

  r.def("logical_not")
      .doc("not x (bool) for x of any dtype; nonzero is true.")
      .input("x")
      .fusion(Fusion::Elementwise)
      .strided_inputs()
      .infer([](const InferContext& c) -> std::vector<TensorMeta> {
        return {{DType::Bool, c.inputs[0].shape()}};
      })
      .kernel([](KernelContext& c) {
        ew::for_each_block<bool, bool>(c.outputs[0], {c.inputs[0]}, kMinGrain,
                                       [](int64_t n, bool* __restrict o, const bool* x) {
                                         for (int64_t i = 0; i < n; ++i) o[i] = !x[i];
                                       });
      });

  r.def("bitwise_not")
      .doc("~x for integer tensors, not x for bool.")
      .input("x")
      .fusion(Fusion::Elementwise)
      .strided_inputs()
      .infer([](const InferContext& c) -> std::vector<TensorMeta> {
        SAMBA_CHECK(is_integral(c.inputs[0].dtype(), true), Status::DTypeMismatch,
                    "bitwise_not: x has dtype {}; bitwise ops take integer or bool tensors",
                    dtype_name(c.inputs[0].dtype()));
        return {meta_of(c.inputs[0])};
      })
      .kernel([](KernelContext& c) {
        ew::dispatch_integral(c.outputs[0].dtype(), "bitwise_not", [&](auto tag) {
          using A = typename decltype(tag)::type;
          ew::for_each_block<A, A>(c.outputs[0], {c.inputs[0]}, kMinGrain,
                                   [](int64_t n, A* __restrict o, const A* x) {
                                     for (int64_t i = 0; i < n; ++i) {
                                       if constexpr (std::is_same_v<A, bool>)
                                         o[i] = !x[i];
                                       else
                                         o[i] = static_cast<A>(~x[i]);
                                     }
                                   });
        });
      });

  r.def("cast")
      .doc("x converted to `dtype` (floats to integers truncate toward zero; nonzero is true).")
      .input("x")
      .required_attr("dtype", AttrType::DType, "the target dtype")
      .fusion(Fusion::Elementwise)
      .strided_inputs()
      .infer([](const InferContext& c) -> std::vector<TensorMeta> {
        return {{c.attrs.dtype("dtype"), c.inputs[0].shape()}};
      })
      .kernel([](KernelContext& c) {
        SAMBA_DISPATCH_ALL(c.outputs[0].dtype(), "cast", [&] {
          using T = scalar_t;  // the loader converts; the block is then copied as is
          ew::for_each_block<T, T>(c.outputs[0], {c.inputs[0]}, kMinGrain,
                                   [](int64_t n, T* __restrict o, const T* x) {
                                     std::memcpy(o, x, static_cast<size_t>(n) * sizeof(T));
                                   });
        });
      })
      .grad([](const GradContext& c) -> std::vector<Tensor> {
        // A cast to the dtype it had (torch's .contiguous(), .float() on a
        // float) passes the gradient through, as add does, rather than
        // copying it (Hugging Face's LM loss: all the logits' gradient).
        const Tensor& g = grad_of(c);
        if (g.dtype() == c.inputs[0].dtype()) return {g};
        return {call1("cast", {g}, {{"dtype", c.inputs[0].dtype()}})};
      });
}

}  // namespace

void register_elementwise_unary(OpRegistry& r) {
  register_arithmetic(r);
  register_transcendental(r);
  register_activations(r);
  register_activation_backward(r);
  register_clamp_and_casts(r);
}

}  // namespace samba::ops
