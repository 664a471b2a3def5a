// Elementwise arithmetic on two operands with NumPy broadcasting and PyTorch
// type promotion: add, sub, mul, div, pow, maximum, minimum.
#include <atomic>
#include <cmath>

#include "engine/kernels/elementwise_loops.h"
#include "engine/kernels/elementwise_math.h"
#include "engine/ops/elementwise_schema.h"

namespace samba::ops {
namespace {

using ew::Tag;

// ---- add / sub ---------------------------------------------------------------------

void check_alpha(double alpha, DType out, const std::string& op) {
  SAMBA_CHECK(is_floating(out) || (alpha == std::trunc(alpha) && std::abs(alpha) < 0x1p63),
              Status::InvalidArgument, "{}: alpha {} must be an integer for {} tensors", op, alpha,
              dtype_name(out));
}

// run(f) with the compute of a + alpha * b in type A (sub passes -alpha).
template <typename A, typename Run>
decltype(auto) with_add_compute(double alpha, Run run) {
  if (alpha == 1.0)
    return run([](int64_t n, A* __restrict o, const A* x, const A* y) {
      for (int64_t i = 0; i < n; ++i) o[i] = ew::wrap_add(x[i], y[i]);
    });
  if (alpha == -1.0)
    return run([](int64_t n, A* __restrict o, const A* x, const A* y) {
      for (int64_t i = 0; i < n; ++i) o[i] = ew::wrap_sub(x[i], y[i]);
    });
  A k;
  if constexpr (std::is_floating_point_v<A>)
    k = static_cast<A>(alpha);
  else
    k = static_cast<A>(static_cast<int64_t>(alpha));
  return run([k](int64_t n, A* __restrict o, const A* x, const A* y) {
    for (int64_t i = 0; i < n; ++i) o[i] = ew::wrap_add(x[i], ew::wrap_mul(k, y[i]));
  });
}

// out = a + alpha * b (sub passes -alpha).
void add_scaled(const Tensor& out, const Tensor& a, const Tensor& b, double alpha, const char* op) {
  if (out.dtype() == DType::Bool) {  // boolean add is "or"; alpha acts as a bool
    const bool use_b = alpha != 0.0;
    ew::for_each_block<bool, bool, bool>(
        out, {a, b}, kMinGrain,
        [use_b](int64_t n, bool* __restrict o, const bool* x, const bool* y) {
          for (int64_t i = 0; i < n; ++i) o[i] = x[i] || (use_b && y[i]);
        });
    return;
  }
  ew::dispatch_numeric(out.dtype(), op, [&](auto tag) {
    using A = typename decltype(tag)::type;
    with_add_compute<A>(alpha,
                        [&](auto f) { ew::for_each_block<A, A, A>(out, {a, b}, kMinGrain, f); });
  });
}

// The float32 block of a + sign * alpha * b.
Float32BlockFn add_block(double sign) {
  return [sign](const Attrs& attrs) {
    return with_add_compute<float>(sign * attrs.f("alpha"),
                                   [](auto f) { return ew::float32_block_of<2>(f); });
  };
}

// Gradient of a + alpha * b.
std::vector<Tensor> add_grad(const GradContext& c, double alpha) {
  const Tensor& g = c.grad_outputs[0];
  Tensor ga, gb;
  if (c.needs_grad(0)) ga = sum_to(g, c.inputs[0].shape());
  if (c.needs_grad(1)) {
    Tensor scaled = alpha == 1.0    ? g
                    : alpha == -1.0 ? call1("neg", {g})
                                    : call1("mul", {g, wrap_scalar(alpha)});
    gb = sum_to(scaled, c.inputs[1].shape());
  }
  return {ga, gb};
}

// ---- mul ----------------------------------------------------------------------------

constexpr auto kMultiply = [](int64_t n, auto* __restrict o, const auto* x, const auto* y) {
  using A = std::remove_cvref_t<decltype(*o)>;
  for (int64_t i = 0; i < n; ++i) {
    if constexpr (std::is_same_v<A, bool>)
      o[i] = x[i] && y[i];
    else
      o[i] = ew::wrap_mul(x[i], y[i]);
  }
};

// ---- div ----------------------------------------------------------------------------

enum class Rounding { None, Trunc, Floor };

Rounding rounding_of(const Attrs& a) {
  if (!a.has("rounding_mode")) return Rounding::None;
  const std::string& m = a.s("rounding_mode");
  if (m == "trunc") return Rounding::Trunc;
  if (m == "floor") return Rounding::Floor;
  if (m == "none" || m.empty()) return Rounding::None;
  fail(Status::InvalidArgument, "div: rounding_mode must be 'trunc', 'floor' or absent, got '{}'",
       m);
}

// Python's floor division of floats: the exact quotient rounded down, with
// the remainder computed by fmod so that large quotients are not misrounded
// by the inexact a / b.
template <typename A>
A floor_divide(A a, A b) {
  if (b == 0) return a / b;
  const A rem = std::fmod(a, b);
  A q = (a - rem) / b;
  if (rem != 0 && ((b < 0) != (rem < 0))) q -= 1;
  if (q == 0) return std::copysign(A(0), a / b);
  A fq = std::floor(q);
  if (q - fq > A(0.5)) fq += 1;
  return fq;
}

// Integer division (b != 0) rounding toward zero or down. b == -1 is done as a
// wrapping negation: the most negative value divided by -1 traps on x86.
template <bool kFloor, typename T>
T int_divide(T a, T b) {
  if constexpr (std::is_signed_v<T>) {
    if (b == -1) return ew::wrap_neg(a);
    T q = static_cast<T>(a / b);
    if constexpr (kFloor)
      if (a % b != 0 && ((a < 0) != (b < 0))) --q;
    return q;
  } else {
    return static_cast<T>(a / b);
  }
}

template <bool kFloor, typename A>
void int_div_kernel(const Tensor& out, const Tensor& a, const Tensor& b) {
  std::atomic<bool> by_zero{false};
  ew::for_each_block<A, A, A>(out, {a, b}, ew::grain_for(4),
                              [&](int64_t n, A* __restrict o, const A* x, const A* y) {
                                bool zero = false;
                                for (int64_t i = 0; i < n; ++i) {
                                  if (y[i] == 0) {
                                    zero = true;
                                    o[i] = 0;
                                  } else {
                                    o[i] = int_divide<kFloor>(x[i], y[i]);
                                  }
                                }
                                if (zero) by_zero.store(true, std::memory_order_relaxed);
                              });
  SAMBA_CHECK(!by_zero.load(), Status::InvalidArgument,
              "div: integer division by zero (rounding_mode '{}', dtype {})",
              kFloor ? "floor" : "trunc", dtype_name(out.dtype()));
}

// True division's compute.
constexpr auto kDivide = [](int64_t n, auto* __restrict o, const auto* x, const auto* y) {
  for (int64_t i = 0; i < n; ++i) o[i] = x[i] / y[i];
};

void div_kernel(KernelContext& c) {
  const Tensor& out = c.outputs[0];
  const Tensor &a = c.inputs[0], &b = c.inputs[1];
  const Rounding mode = rounding_of(c.attrs);
  if (mode == Rounding::None) {
    ew::dispatch_float(out.dtype(), "div", [&](auto tag) {
      using A = typename decltype(tag)::type;
      ew::for_each_block<A, A, A>(out, {a, b}, ew::grain_for(2), kDivide);
    });
    return;
  }
  ew::dispatch_numeric(out.dtype(), "div", [&](auto tag) {
    using A = typename decltype(tag)::type;
    if constexpr (std::is_floating_point_v<A>) {
      if (mode == Rounding::Trunc)
        ew::for_each_block<A, A, A>(out, {a, b}, ew::grain_for(2),
                                    [](int64_t n, A* __restrict o, const A* x, const A* y) {
                                      alignas(64) A q[ew::kBlock];
                                      for (int64_t i = 0; i < n; ++i) q[i] = x[i] / y[i];
                                      ew::trunc_block(n, o, q);
                                    });
      else
        ew::for_each_block<A, A, A>(out, {a, b}, ew::grain_for(16),
                                    [](int64_t n, A* __restrict o, const A* x, const A* y) {
                                      for (int64_t i = 0; i < n; ++i)
                                        o[i] = floor_divide(x[i], y[i]);
                                    });
    } else if (mode == Rounding::Trunc) {
      int_div_kernel<false, A>(out, a, b);
    } else {
      int_div_kernel<true, A>(out, a, b);
    }
  });
}

// ---- pow -----------------------------------------------------------------------------

// Integer power by squaring, wrapping on overflow. Negative exponents give
// the integer part of 1 / a^-e, as PyTorch does for integer tensors.
template <typename T>
T int_power(T base, T e) {
  if constexpr (std::is_signed_v<T>) {
    if (e < 0) {
      if (base == 1) return 1;
      if (base == -1) return (e & 1) ? T(-1) : T(1);
      return 0;
    }
  }
  T result = 1;
  while (e != 0) {
    if (e & 1) result = ew::wrap_mul(result, base);
    e = static_cast<T>(e >> 1);
    base = ew::wrap_mul(base, base);
  }
  return result;
}

// x^e for a single float exponent, with the common exponents done without pow.
template <typename A>
void pow_scalar_exponent(const Tensor& out, const Tensor& a, double exponent) {
  const A e = static_cast<A>(exponent);
  auto run = [&](auto f) {
    ew::for_each_block<A, A>(out, {a}, ew::grain_for(2),
                             [f](int64_t n, A* __restrict o, const A* x) {
                               for (int64_t i = 0; i < n; ++i) o[i] = f(x[i]);
                             });
  };
  if (e == A(2)) return run([](A x) { return x * x; });
  if (e == A(3)) return run([](A x) { return x * x * x; });
  if (e == A(1)) return run([](A x) { return x; });
  if (e == A(0)) return run([](A) { return A(1); });  // also for NaN bases, as pow does
  if (e == A(-1)) return run([](A x) { return A(1) / x; });
  if (e == A(-2)) return run([](A x) { return A(1) / (x * x); });
  if (e == A(0.5)) return run([](A x) { return std::sqrt(x); });
  if (e == A(-0.5)) return run([](A x) { return A(1) / std::sqrt(x); });
  ew::for_each_block<A, A>(out, {a}, ew::grain_for(32),
                           [e](int64_t n, A* __restrict o, const A* x) {
                             for (int64_t i = 0; i < n; ++i) o[i] = std::pow(x[i], e);
                           });
}

void pow_kernel(KernelContext& c) {
  const Tensor& out = c.outputs[0];
  const Tensor &a = c.inputs[0], &b = c.inputs[1];
  ew::dispatch_numeric(out.dtype(), "pow", [&](auto tag) {
    using A = typename decltype(tag)::type;
    if constexpr (std::is_floating_point_v<A>) {
      if (b.numel() == 1 && a.numel() != 1) return pow_scalar_exponent<A>(out, a, b.item_double());
      ew::for_each_block<A, A, A>(out, {a, b}, ew::grain_for(32),
                                  [](int64_t n, A* __restrict o, const A* x, const A* y) {
                                    for (int64_t i = 0; i < n; ++i) o[i] = std::pow(x[i], y[i]);
                                  });
    } else {
      ew::for_each_block<A, A, A>(out, {a, b}, ew::grain_for(8),
                                  [](int64_t n, A* __restrict o, const A* x, const A* y) {
                                    for (int64_t i = 0; i < n; ++i) o[i] = int_power(x[i], y[i]);
                                  });
    }
  });
}

// d(a^b)/da = b a^(b-1) (0 where b == 0); d(a^b)/db = a^b log(a) (0 where
// a == 0 and b >= 0, where the limit is 0 rather than NaN).
std::vector<Tensor> pow_grad(const GradContext& c) {
  const Tensor& g = c.grad_outputs[0];
  const Tensor &a = c.inputs[0], &b = c.inputs[1];
  Tensor ga, gb;
  if (c.needs_grad(0)) {
    if (b.impl()->wrapped_scalar && b.has_data()) {
      const double e = b.item_double();
      ga = e == 0.0
               ? ew::zeros_grad(a.shape(), a.dtype())
               : call1("mul",
                       {g, call1("mul", {call1("pow", {a, wrap_scalar(e - 1)}), wrap_scalar(e)})});
    } else {
      Tensor d = call1("mul", {b, call1("pow", {a, call1("sub", {b, wrap_int(1)})})});
      ga = ew::masked_grad(call1("ne", {b, wrap_int(0)}), call1("mul", {g, d}));
    }
    ga = sum_to(ga, a.shape());
  }
  if (c.needs_grad(1)) {
    Tensor limit =
        call1("logical_and", {call1("eq", {a, wrap_int(0)}), call1("ge", {b, wrap_int(0)})});
    Tensor safe_a = call1("where", {limit, wrap_scalar(1.0), a});
    Tensor d = call1("mul", {c.outputs[0], call1("log", {safe_a})});
    gb = sum_to(ew::masked_grad(call1("logical_not", {limit}), call1("mul", {g, d})), b.shape());
  }
  return {ga, gb};
}

// ---- maximum / minimum -----------------------------------------------------------------

// Both propagate NaN. kMax selects maximum.
template <bool kMax>
void extremum_kernel(KernelContext& c) {
  const Tensor& out = c.outputs[0];
  const char* op = kMax ? "maximum" : "minimum";
  ew::dispatch_all(out.dtype(), op, [&](auto tag) {
    using A = typename decltype(tag)::type;
    ew::for_each_block<A, A, A>(
        out, {c.inputs[0], c.inputs[1]}, kMinGrain,
        [](int64_t n, A* __restrict o, const A* x, const A* y) {
          for (int64_t i = 0; i < n; ++i) {
            if constexpr (std::is_same_v<A, bool>) {
              o[i] = kMax ? (x[i] || y[i]) : (x[i] && y[i]);
            } else if constexpr (std::is_floating_point_v<A>) {
              const A pick = (kMax ? x[i] > y[i] : x[i] < y[i]) ? x[i] : y[i];
              o[i] = x[i] != x[i] ? x[i] : pick;  // y's NaN comes through `pick`
            } else {
              o[i] = (kMax ? x[i] > y[i] : x[i] < y[i]) ? x[i] : y[i];
            }
          }
        });
  });
}

// The winner gets the gradient, ties split it evenly (as in PyTorch).
template <bool kMax>
std::vector<Tensor> extremum_grad(const GradContext& c) {
  const Tensor& g = c.grad_outputs[0];
  const Tensor &a = c.inputs[0], &b = c.inputs[1];
  Tensor tie = call1("eq", {a, b});
  Tensor half = call1("mul", {g, wrap_scalar(0.5)});
  auto share = [&](const char* loses) {
    Tensor lost = call1(loses, {a, b});
    return call1("where", {tie, half, call1("where", {lost, wrap_scalar(0.0), g})});
  };
  Tensor ga, gb;
  if (c.needs_grad(0)) ga = sum_to(share(kMax ? "lt" : "gt"), a.shape());
  if (c.needs_grad(1)) gb = sum_to(share(kMax ? "gt" : "lt"), b.shape());
  return {ga, gb};
}

}  // namespace

void register_elementwise_binary(OpRegistry& r) {
  r.def("add")
      .doc("a + alpha * b, broadcasting a and b.")
      .input("a")
      .input("b")
      .attr("alpha", AttrType::Float, 1.0, "multiplier of b")
      .fusion(Fusion::Elementwise)
      .strided_inputs()
      .infer([](const InferContext& c) {
        auto m = ew::infer_promoted(c);
        if (m[0].dtype != DType::Bool) check_alpha(c.attrs.f("alpha"), m[0].dtype, "add");
        return m;
      })
      .kernel([](KernelContext& c) {
        add_scaled(c.outputs[0], c.inputs[0], c.inputs[1], c.attrs.f("alpha"), "add");
      })
      .float32_block(add_block(1.0))
      .grad([](const GradContext& c) { return add_grad(c, c.attrs.f("alpha")); });

  r.def("sub")
      .doc("a - alpha * b, broadcasting a and b.")
      .input("a")
      .input("b")
      .attr("alpha", AttrType::Float, 1.0, "multiplier of b")
      .fusion(Fusion::Elementwise)
      .strided_inputs()
      .infer([](const InferContext& c) {
        auto m = ew::infer_promoted(c);
        ew::require_not_bool(m[0].dtype, "sub", "; use logical_xor");
        check_alpha(c.attrs.f("alpha"), m[0].dtype, "sub");
        return m;
      })
      .kernel([](KernelContext& c) {
        add_scaled(c.outputs[0], c.inputs[0], c.inputs[1], -c.attrs.f("alpha"), "sub");
      })
      .float32_block(add_block(-1.0))
      .grad([](const GradContext& c) { return add_grad(c, -c.attrs.f("alpha")); });

  r.def("mul")
      .doc("a * b, broadcasting a and b.")
      .input("a")
      .input("b")
      .fusion(Fusion::Elementwise)
      .strided_inputs()
      .infer(ew::infer_promoted)
      .kernel([](KernelContext& c) {
        const Tensor& out = c.outputs[0];
        ew::dispatch_all(out.dtype(), "mul", [&](auto tag) {
          using A = typename decltype(tag)::type;
          ew::for_each_block<A, A, A>(out, {c.inputs[0], c.inputs[1]}, kMinGrain, kMultiply);
        });
      })
      .float32_block(ew::float32_block_fn<2>(kMultiply))
      .grad([](const GradContext& c) -> std::vector<Tensor> {
        const Tensor& g = c.grad_outputs[0];
        Tensor ga, gb;
        if (c.needs_grad(0)) ga = sum_to(call1("mul", {g, c.inputs[1]}), c.inputs[0].shape());
        if (c.needs_grad(1)) gb = sum_to(call1("mul", {g, c.inputs[0]}), c.inputs[1].shape());
        return {ga, gb};
      });

  r.def("div")
      .doc(
          "a / b, broadcasting a and b. Without rounding_mode it is true division (integer "
          "operands give float32); 'trunc' rounds the quotient toward zero and 'floor' down, "
          "keeping the promoted dtype. Integer division by zero is an error.")
      .input("a")
      .input("b")
      .optional_attr("rounding_mode", AttrType::String, "'trunc', 'floor', or absent")
      .fusion(Fusion::Elementwise)
      .strided_inputs()
      .infer([](const InferContext& c) {
        auto m = ew::infer_promoted(c);
        const Rounding mode = rounding_of(c.attrs);
        if (mode == Rounding::None)
          m[0].dtype = ew::float_result(m[0].dtype);
        else
          ew::require_not_bool(m[0].dtype, "div", " with a rounding_mode");
        return m;
      })
      .kernel(div_kernel)
      .float32_block([](const Attrs& attrs) -> Float32Block {
        if (rounding_of(attrs) != Rounding::None) return {};
        return ew::float32_block_of<2>(kDivide);
      })
      .grad([](const GradContext& c) -> std::vector<Tensor> {
        const Tensor &a = c.inputs[0], &b = c.inputs[1];
        Tensor ga, gb;
        if (rounding_of(c.attrs) != Rounding::None) {  // piecewise constant
          if (c.needs_grad(0)) ga = ew::zeros_grad(a.shape(), a.dtype());
          if (c.needs_grad(1)) gb = ew::zeros_grad(b.shape(), b.dtype());
          return {ga, gb};
        }
        Tensor g_over_b = call1("div", {c.grad_outputs[0], b});
        if (c.needs_grad(0)) ga = sum_to(g_over_b, a.shape());
        if (c.needs_grad(1))  // -g a / b^2 = -(g / b) * out
          gb = sum_to(call1("neg", {call1("mul", {g_over_b, c.outputs[0]})}), b.shape());
        return {ga, gb};
      });

  r.def("pow")
      .doc(
          "a ** b, broadcasting a and b; either may be a wrapped scalar. Integer tensors raised "
          "to negative integer powers give the integer part of the reciprocal.")
      .input("a")
      .input("b")
      .fusion(Fusion::Elementwise)
      .strided_inputs()
      .infer([](const InferContext& c) {
        auto m = ew::infer_promoted(c);
        ew::require_not_bool(m[0].dtype, "pow", "");
        return m;
      })
      .kernel(pow_kernel)
      .grad(pow_grad);

  r.def("maximum")
      .doc("Elementwise maximum of a and b, broadcasting; NaN if either is NaN.")
      .input("a")
      .input("b")
      .fusion(Fusion::Elementwise)
      .strided_inputs()
      .infer(ew::infer_promoted)
      .kernel(extremum_kernel<true>)
      .grad(extremum_grad<true>);

  r.def("minimum")
      .doc("Elementwise minimum of a and b, broadcasting; NaN if either is NaN.")
      .input("a")
      .input("b")
      .fusion(Fusion::Elementwise)
      .strided_inputs()
      .infer(ew::infer_promoted)
      .kernel(extremum_kernel<false>)
      .grad(extremum_grad<false>);
}

}  // namespace samba::ops
