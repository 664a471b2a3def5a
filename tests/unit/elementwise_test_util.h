// Helpers for the elementwise op tests: naive broadcasting references,
// and per-dtype tolerances.
#pragma once

#include <functional>
#include <string>

#include "engine/ops/op_util.h"
#include "error_test_util.h"
#include "op_test_util.h"

namespace samba::testing {

using ops::wrap_int;
using ops::wrap_scalar;

inline const DType kFloatDTypes[] = {DType::Float32, DType::Float64, DType::BFloat16,
                                     DType::Float16};

// Relative tolerance of a result computed in `dt` against a double reference
// on the same (rounded) inputs.
inline double tol_for(DType dt) {
  switch (dt) {
    case DType::Float64:
      return 1e-12;
    case DType::Float32:
      return 2e-6;
    case DType::BFloat16:
      return 1e-2;
    case DType::Float16:
      return 2e-3;
    default:
      return 0;
  }
}

// The values of `t` as if broadcast to `shape`, by direct index arithmetic.
inline std::vector<double> broadcast_values(const Tensor& t, const Dims& shape) {
  const std::vector<double> v = values(t);
  const int64_t n = numel_of(shape), rank = static_cast<int64_t>(shape.size());
  const int64_t lead = rank - t.dim();
  std::vector<double> out(n);
  for (int64_t i = 0; i < n; ++i) {
    int64_t rem = i, src = 0, scale = 1;
    for (int64_t d = rank - 1; d >= 0; --d) {
      const int64_t c = rem % shape[d];
      rem /= shape[d];
      if (d < lead) continue;
      const int64_t size = t.shape()[d - lead];
      src += (size == 1 ? 0 : c) * scale;
      scale *= size;
    }
    out[i] = v[src];
  }
  return out;
}

// f(a, b) elementwise over the broadcast of a and b.
inline std::vector<double> reference2(const Tensor& a, const Tensor& b,
                                      const std::function<double(double, double)>& f) {
  const Dims shape = broadcast_shapes(a.shape(), b.shape(), "test");
  auto x = broadcast_values(a, shape), y = broadcast_values(b, shape);
  std::vector<double> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) out[i] = f(x[i], y[i]);
  return out;
}

inline std::vector<double> reference1(const Tensor& a, const std::function<double(double)>& f) {
  auto x = values(a);
  for (auto& v : x) v = f(v);
  return x;
}

// The gradient of sum(op(inputs) * w) for the given weights w, per input.
inline std::vector<Tensor> grads_of(const std::string& op, std::vector<Tensor> inputs,
                                    const Tensor& w, const Attrs& attrs = {}) {
  for (auto& t : inputs) {
    t = t.clone();
    if (is_floating(t.dtype())) t.impl()->requires_grad = true;
  }
  Tensor out = call(op, inputs, attrs)[0];
  autograd::backward({out}, {w}, false);
  std::vector<Tensor> g;
  for (auto& t : inputs) g.push_back(t.grad());
  return g;
}

}  // namespace samba::testing
