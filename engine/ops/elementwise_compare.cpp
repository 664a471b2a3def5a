// Elementwise predicates and selections: comparisons (eq, ne, lt, le, gt, ge),
// logical and bitwise ops, where and masked_fill. All broadcast their
// operands as NumPy does.
#include "engine/kernels/elementwise_loops.h"
#include "engine/ops/elementwise_schema.h"

namespace samba::ops {
namespace {

using ew::Tag;

// ---- comparisons ---------------------------------------------------------------------

// Operands are compared in their promoted dtype (so an integer tensor against
// 2.5 compares as float), through its compute type.
template <typename Cmp>
void compare_kernel(KernelContext& c, std::string_view op, Cmp cmp) {
  const DType common = result_type(c.inputs);
  ew::dispatch_all(common, op, [&](auto tag) {
    using A = typename decltype(tag)::type;
    ew::for_each_block<bool, A, A>(c.outputs[0], {c.inputs[0], c.inputs[1]}, kMinGrain,
                                   [cmp](int64_t n, bool* __restrict o, const A* x, const A* y) {
                                     for (int64_t i = 0; i < n; ++i) o[i] = cmp(x[i], y[i]);
                                   });
  });
}

void def_compare(OpRegistry& r, const char* name, const char* doc, auto cmp) {
  r.def(name)
      .doc(doc)
      .input("a")
      .input("b")
      .fusion(Fusion::Elementwise)
      .strided_inputs()
      .infer(ew::infer_bool)
      .kernel([name, cmp](KernelContext& c) { compare_kernel(c, name, cmp); });
}

// ---- logical and bitwise ---------------------------------------------------------------

// Any dtype in, bool out: operands count as true when nonzero.
void def_logical(OpRegistry& r, const char* name, const char* doc, auto f) {
  r.def(name)
      .doc(doc)
      .input("a")
      .input("b")
      .fusion(Fusion::Elementwise)
      .strided_inputs()
      .infer(ew::infer_bool)
      .kernel([f](KernelContext& c) {
        ew::for_each_block<bool, bool, bool>(
            c.outputs[0], {c.inputs[0], c.inputs[1]}, kMinGrain,
            [f](int64_t n, bool* __restrict o, const bool* x, const bool* y) {
              for (int64_t i = 0; i < n; ++i) o[i] = f(x[i], y[i]);
            });
      });
}

void def_bitwise(OpRegistry& r, const char* name, const char* doc, auto f) {
  r.def(name)
      .doc(doc)
      .input("a")
      .input("b")
      .fusion(Fusion::Elementwise)
      .strided_inputs()
      .infer([name](const InferContext& c) {
        for (size_t k = 0; k < c.inputs.size(); ++k)
          SAMBA_CHECK(is_integral(c.inputs[k].dtype(), true), Status::DTypeMismatch,
                      "{}: argument '{}' has dtype {}; bitwise ops take integer or bool tensors",
                      name, k == 0 ? "a" : "b", dtype_name(c.inputs[k].dtype()));
        return ew::infer_promoted(c);
      })
      .kernel([name, f](KernelContext& c) {
        ew::dispatch_integral(c.outputs[0].dtype(), name, [&](auto tag) {
          using A = typename decltype(tag)::type;
          ew::for_each_block<A, A, A>(c.outputs[0], {c.inputs[0], c.inputs[1]}, kMinGrain,
                                      [f](int64_t n, A* __restrict o, const A* x, const A* y) {
                                        for (int64_t i = 0; i < n; ++i)
                                          o[i] = static_cast<A>(f(x[i], y[i]));
                                      });
        });
      });
}

// ---- where / masked_fill --------------------------------------------------------------------

void where_kernel(KernelContext& c) {
  const Tensor& out = c.outputs[0];
  // A pure selection: values move in the output's storage type, unconverted.
  SAMBA_DISPATCH_ALL(out.dtype(), "where", [&] {
    using T = scalar_t;
    ew::for_each_block<T, bool, T, T>(
        out, {c.inputs[0], c.inputs[1], c.inputs[2]}, kMinGrain,
        [](int64_t n, T* __restrict o, const bool* m, const T* x, const T* y) {
          for (int64_t i = 0; i < n; ++i) o[i] = m[i] ? x[i] : y[i];
        });
  });
}

void masked_fill_kernel(KernelContext& c) {
  const Tensor& out = c.outputs[0];
  const double value = c.attrs.f("value");
  SAMBA_DISPATCH_ALL(out.dtype(), "masked_fill", [&] {
    using T = scalar_t;
    T v;
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      SAMBA_CHECK(std::isfinite(value) &&
                      value >= static_cast<double>(std::numeric_limits<T>::min()) &&
                      value <= static_cast<double>(std::numeric_limits<T>::max()),
                  Status::InvalidArgument, "masked_fill: value {} does not fit in {}", value,
                  dtype_name(out.dtype()));
      v = static_cast<T>(value);
    } else {
      v = convert_value<T>(value);
    }
    ew::for_each_block<T, T, bool>(out, {c.inputs[0], c.inputs[1]}, kMinGrain,
                                   [v](int64_t n, T* __restrict o, const T* x, const bool* m) {
                                     for (int64_t i = 0; i < n; ++i) o[i] = m[i] ? v : x[i];
                                   });
  });
}

}  // namespace

void register_elementwise_compare(OpRegistry& r) {
  def_compare(r, "eq", "a == b (bool), broadcasting; compared in the promoted dtype.",
              [](auto x, auto y) { return x == y; });
  def_compare(r, "ne", "a != b (bool), broadcasting; compared in the promoted dtype.",
              [](auto x, auto y) { return x != y; });
  def_compare(r, "lt", "a < b (bool), broadcasting; compared in the promoted dtype.",
              [](auto x, auto y) { return x < y; });
  def_compare(r, "le", "a <= b (bool), broadcasting; compared in the promoted dtype.",
              [](auto x, auto y) { return x <= y; });
  def_compare(r, "gt", "a > b (bool), broadcasting; compared in the promoted dtype.",
              [](auto x, auto y) { return x > y; });
  def_compare(r, "ge", "a >= b (bool), broadcasting; compared in the promoted dtype.",
              [](auto x, auto y) { return x >= y; });

  def_logical(r, "logical_and", "a and b (bool) for operands of any dtype; nonzero is true.",
              [](bool x, bool y) { return x && y; });
  def_logical(r, "logical_or", "a or b (bool) for operands of any dtype; nonzero is true.",
              [](bool x, bool y) { return x || y; });
  def_logical(r, "logical_xor", "a xor b (bool) for operands of any dtype; nonzero is true.",
              [](bool x, bool y) { return x != y; });

  def_bitwise(r, "bitwise_and", "a & b for integer or bool tensors, in the promoted dtype.",
              [](auto x, auto y) { return x & y; });
  def_bitwise(r, "bitwise_or", "a | b for integer or bool tensors, in the promoted dtype.",
              [](auto x, auto y) { return x | y; });
  def_bitwise(r, "bitwise_xor", "a ^ b for integer or bool tensors, in the promoted dtype.",
              [](auto x, auto y) { return x ^ y; });

  r.def("where")
      .doc("a where cond is true, else b; cond is bool, a and b are promoted; all three broadcast.")
      .input("cond")
      .input("a")
      .input("b")
      .fusion(Fusion::Elementwise)
      .strided_inputs()
      .infer([](const InferContext& c) -> std::vector<TensorMeta> {
        ew::require_bool(c.inputs[0], "where", "cond");
        return {{result_type(c.inputs.subspan(1)), broadcast_all(c.inputs, "where")}};
      })
      .kernel(where_kernel)
      .grad([](const GradContext& c) -> std::vector<Tensor> {
        const Tensor& cond = c.inputs[0];
        const Tensor& g = c.grad_outputs[0];
        Tensor ga, gb;
        if (c.needs_grad(1)) ga = sum_to(ew::masked_grad(cond, g), c.inputs[1].shape());
        if (c.needs_grad(2))
          gb = sum_to(call1("where", {cond, wrap_scalar(0.0), g}), c.inputs[2].shape());
        return {Tensor(), ga, gb};
      });

  r.def("masked_fill")
      .doc(
          "x with `value` where mask is true; mask is bool and broadcasts with x. The result "
          "has x's dtype.")
      .input("x")
      .input("mask")
      .required_attr("value", AttrType::Float, "the fill value, converted to x's dtype")
      .fusion(Fusion::Elementwise)
      .strided_inputs()
      .infer([](const InferContext& c) -> std::vector<TensorMeta> {
        ew::require_bool(c.inputs[1], "masked_fill", "mask");
        return {{c.inputs[0].dtype(), broadcast_all(c.inputs, "masked_fill")}};
      })
      .kernel(masked_fill_kernel)
      .grad([](const GradContext& c) -> std::vector<Tensor> {
        Tensor g = call1("masked_fill", {c.grad_outputs[0], c.inputs[1]}, {{"value", 0.0}});
        return {sum_to(g, c.inputs[0].shape()), Tensor()};
      });
}

}  // namespace samba::ops
