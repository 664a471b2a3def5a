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

// The ops below define their compute once, f(n, out, in...), generic over
// the compute type: it is both the kernel for every dtype and the float32
// block function the runtime fuses chains of.
template <typename F>
OpBuilder def_float_fn(OpRegistry& r, const char* name, const char* doc, int64_t cost, F f) {
  return def_float(r, name, doc)
      .kernel([name, cost, f](KernelContext& c) { run_float_unary(c, name, cost, f); })
      .float32_block(ew::float32_block_fn<1>(f));
}

template <typename F>
OpBuilder def_numeric_fn(OpRegistry& r, const char* name, const char* doc, F f) {
  return def_numeric(r, name, doc)
      .kernel([name, f](KernelContext& c) { run_numeric_unary(c, name, f); })
      .float32_block(ew::float32_block_fn<1>(f));
}

template <typename F>
OpBuilder def_backward_fn(OpRegistry& r, const char* name, const char* doc, const char* saved,
                          int64_t cost, F f) {
  return def_backward(r, name, doc, saved)
      .kernel([name, cost, f](KernelContext& c) { run_float_binary(c, name, cost, f); })
      .float32_block(ew::float32_block_fn<2>(f));
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

constexpr auto kGeluTanh = [](int64_t n, auto* o, const auto* x) { ew::gelu_tanh_block(n, o, x); };
constexpr auto kGeluErf = [](int64_t n, auto* o, const auto* x) { ew::gelu_erf_block(n, o, x); };
constexpr auto kGeluTanhBackward = [](int64_t n, auto* o, const auto* g, const auto* x) {
  ew::gelu_tanh_backward_block(n, o, g, x);
};
constexpr auto kGeluErfBackward = [](int64_t n, auto* o, const auto* g, const auto* x) {
  ew::gelu_erf_backward_block(n, o, g, x);
};

// run(f) with the compute of the form `approximate` selects.
template <typename Tanh, typename Erf, typename Run>
decltype(auto) with_gelu_form(const Attrs& a, const char* op, Tanh tanh_form, Erf erf_form,
                              Run run) {
  return gelu_uses_tanh(a, op) ? run(tanh_form) : run(erf_form);
}

auto leaky_relu_fn(const Attrs& a) {
  return [slope = a.f("negative_slope")](int64_t n, auto* __restrict o, const auto* x) {
    using A = std::remove_cvref_t<decltype(*o)>;
    const A k = static_cast<A>(slope);
    for (int64_t i = 0; i < n; ++i) o[i] = x[i] > A(0) ? x[i] : x[i] * k;
  };
}

auto leaky_relu_backward_fn(const Attrs& a) {
  return
      [slope = a.f("negative_slope")](int64_t n, auto* __restrict o, const auto* g, const auto* x) {
        using A = std::remove_cvref_t<decltype(*o)>;
        const A k = static_cast<A>(slope);
        for (int64_t i = 0; i < n; ++i) o[i] = x[i] > A(0) ? g[i] : g[i] * k;
      };
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
  def_numeric_fn(r, "neg", "-x.", [](int64_t n, auto* __restrict o, const auto* x) {
    for (int64_t i = 0; i < n; ++i) o[i] = ew::wrap_neg(x[i]);
  }).grad([](const GradContext& c) -> std::vector<Tensor> { return {call1("neg", {grad_of(c)})}; });

  def_numeric_fn(r, "abs", "|x|.", [](int64_t n, auto* __restrict o, const auto* x) {
    using A = std::remove_cvref_t<decltype(*o)>;
    for (int64_t i = 0; i < n; ++i) {
      if constexpr (std::is_floating_point_v<A>)
        o[i] = std::abs(x[i]);
      else
        o[i] = x[i] < 0 ? ew::wrap_neg(x[i]) : x[i];
    }
  }).grad([](const GradContext& c) -> std::vector<Tensor> {  // g * sign(x); 0 at 0
    const Tensor& x = c.inputs[0];
    Tensor signed_g =
        call1("where", {call1("lt", {x, wrap_int(0)}), call1("neg", {grad_of(c)}), grad_of(c)});
    return {ew::masked_grad(call1("ne", {x, wrap_int(0)}), signed_g)};
  });

  def_float_fn(r, "reciprocal", "1 / x.", 2, [](int64_t n, auto* __restrict o, const auto* x) {
    ew::vec(o, n) = ew::vec(x, n).inverse();
  }).grad([](const GradContext& c) -> std::vector<Tensor> {
    const Tensor& y = c.outputs[0];
    return {mul(grad_of(c), call1("neg", {mul(y, y)}))};
  });

  def_float_fn(r, "sqrt", "Square root of x (NaN for x < 0).", 2,
               [](int64_t n, auto* o, const auto* x) { ew::sqrt_block(n, o, x); })
      .grad([](const GradContext& c) -> std::vector<Tensor> {
        return {call1("div", {grad_of(c), scaled(c.outputs[0], 2.0)})};
      });

  def_float_fn(r, "rsqrt", "1 / sqrt(x).", 3, [](int64_t n, auto* o, const auto* x) {
    using A = std::remove_cvref_t<decltype(*o)>;
    alignas(64) A root[ew::kBlock];
    ew::sqrt_block(n, root, x);
    ew::vec(o, n) = ew::vec(static_cast<const A*>(root), n).inverse();
  }).grad([](const GradContext& c) -> std::vector<Tensor> {  // -0.5 y^3
    const Tensor& y = c.outputs[0];
    return {mul(grad_of(c), scaled(mul(y, mul(y, y)), -0.5))};
  });
}

void register_transcendental(OpRegistry& r) {
  def_float_fn(r, "exp", "e^x.", 4, [](int64_t n, auto* o, const auto* x) {
    ew::exp_block(n, o, x);
  }).grad([](const GradContext& c) -> std::vector<Tensor> {
    return {mul(grad_of(c), c.outputs[0])};
  });

  def_float_fn(r, "log", "Natural logarithm of x (-inf at 0, NaN below).", 4,
               [](int64_t n, auto* o, const auto* x) { ew::log_block(n, o, x); })
      .grad([](const GradContext& c) -> std::vector<Tensor> {
        return {call1("div", {grad_of(c), c.inputs[0]})};
      });

  def_float_fn(
      r, "sin", "Sine of x (radians).", 8,
      [](int64_t n, auto* __restrict o, const auto* x) { ew::vec(o, n) = ew::vec(x, n).sin(); })
      .grad([](const GradContext& c) -> std::vector<Tensor> {
        return {mul(grad_of(c), call1("cos", {c.inputs[0]}))};
      });

  def_float_fn(
      r, "cos", "Cosine of x (radians).", 8,
      [](int64_t n, auto* __restrict o, const auto* x) { ew::vec(o, n) = ew::vec(x, n).cos(); })
      .grad([](const GradContext& c) -> std::vector<Tensor> {
        return {mul(grad_of(c), call1("neg", {call1("sin", {c.inputs[0]})}))};
      });

  def_float_fn(
      r, "erf", "The error function 2/sqrt(pi) * integral_0^x e^(-t^2) dt.", 4,
      [](int64_t n, auto* __restrict o, const auto* x) { ew::vec(o, n) = ew::vec(x, n).erf(); })
      .grad([](const GradContext& c) -> std::vector<Tensor> {  // 2/sqrt(pi) e^(-x^2)
        const Tensor& x = c.inputs[0];
        Tensor d = scaled(call1("exp", {call1("neg", {mul(x, x)})}), ew::kTwo_SqrtPi);
        return {mul(grad_of(c), d)};
      });
}

void register_activations(OpRegistry& r) {
  def_float_fn(
      r, "tanh", "Hyperbolic tangent of x.", 4,
      [](int64_t n, auto* o, const auto* x) { ew::tanh_block(n, o, x); })
      .grad([](const GradContext& c) -> std::vector<Tensor> {
        return {call1("tanh_backward", {grad_of(c), c.outputs[0]})};
      });

  def_float_fn(r, "sigmoid", "1 / (1 + e^-x).", 4, [](int64_t n, auto* o, const auto* x) {
    ew::sigmoid_block(n, o, x);
  }).grad([](const GradContext& c) -> std::vector<Tensor> {
    return {call1("sigmoid_backward", {grad_of(c), c.outputs[0]})};
  });

  def_numeric_fn(r, "relu", "max(x, 0); NaN stays NaN.",
                 [](int64_t n, auto* __restrict o, const auto* x) {
                   using A = std::remove_cvref_t<decltype(*o)>;
                   for (int64_t i = 0; i < n; ++i) o[i] = x[i] < A(0) ? A(0) : x[i];
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
        with_gelu_form(c.attrs, "gelu", kGeluTanh, kGeluErf,
                       [&](auto f) { run_float_unary(c, "gelu", 6, f); });
      })
      .float32_block([](const Attrs& a) {
        return with_gelu_form(a, "gelu", kGeluTanh, kGeluErf,
                              [](auto f) { return ew::float32_block_of<1>(f); });
      })
      .grad([](const GradContext& c) -> std::vector<Tensor> {
        return {call1("gelu_backward", {grad_of(c), c.inputs[0]},
                      {{"approximate", c.attrs.s("approximate")}})};
      });

  def_float_fn(r, "silu", "x * sigmoid(x).", 4, [](int64_t n, auto* o, const auto* x) {
    ew::silu_block(n, o, x);
  }).grad([](const GradContext& c) -> std::vector<Tensor> {
    return {call1("silu_backward", {grad_of(c), c.inputs[0]})};
  });

  def_float(r, "leaky_relu", "x for x > 0, negative_slope * x otherwise.")
      .attr("negative_slope", AttrType::Float, 0.01, "slope for x <= 0")
      .kernel([](KernelContext& c) { run_float_unary(c, "leaky_relu", 1, leaky_relu_fn(c.attrs)); })
      .float32_block([](const Attrs& a) { return ew::float32_block_of<1>(leaky_relu_fn(a)); })
      .grad([](const GradContext& c) -> std::vector<Tensor> {
        return {call1("leaky_relu_backward", {grad_of(c), c.inputs[0]},
                      {{"negative_slope", c.attrs.f("negative_slope")}})};
      });
}

void register_activation_backward(OpRegistry& r) {
  def_backward_fn(r, "tanh_backward", "grad * (1 - out^2), out = tanh(x).", "out", 2,
                  [](int64_t n, auto* o, const auto* g, const auto* y) {
                    ew::tanh_backward_block(n, o, g, y);
                  });

  def_backward_fn(r, "sigmoid_backward", "grad * out * (1 - out), out = sigmoid(x).", "out", 2,
                  [](int64_t n, auto* o, const auto* g, const auto* y) {
                    ew::sigmoid_backward_block(n, o, g, y);
                  });

  def_backward_fn(r, "relu_backward", "grad where out > 0, else 0 (out = relu(x)).", "out", 1,
                  [](int64_t n, auto* __restrict o, const auto* g, const auto* y) {
                    using A = std::remove_cvref_t<decltype(*o)>;
                    for (int64_t i = 0; i < n; ++i) o[i] = y[i] > A(0) ? g[i] : A(0);
                  });

  def_backward(r, "gelu_backward", "grad * d gelu(x) / dx.", "x")
      .attr("approximate", AttrType::String, std::string("none"), "'none' or 'tanh', as in gelu")
      .infer([](const InferContext& c) {
        gelu_uses_tanh(c.attrs, "gelu_backward");
        return ew::infer_promoted(c);
      })
      .kernel([](KernelContext& c) {
        with_gelu_form(c.attrs, "gelu_backward", kGeluTanhBackward, kGeluErfBackward,
                       [&](auto f) { run_float_binary(c, "gelu_backward", 8, f); });
      })
      .float32_block([](const Attrs& a) {
        return with_gelu_form(a, "gelu_backward", kGeluTanhBackward, kGeluErfBackward,
                              [](auto f) { return ew::float32_block_of<2>(f); });
      });

  def_backward_fn(r, "silu_backward", "grad * d silu(x) / dx.", "x", 6,
                  [](int64_t n, auto* o, const auto* g, const auto* x) {
                    ew::silu_backward_block(n, o, g, x);
                  });

  def_backward(r, "leaky_relu_backward", "grad for x > 0, grad * negative_slope otherwise.", "x")
      .attr("negative_slope", AttrType::Float, 0.01)
      .kernel([](KernelContext& c) {
        run_float_binary(c, "leaky_relu_backward", 1, leaky_relu_backward_fn(c.attrs));
      })
      .float32_block(
          [](const Attrs& a) { return ew::float32_block_of<2>(leaky_relu_backward_fn(a)); });
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
