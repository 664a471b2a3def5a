// Test helpers for ops: building tensors from values, comparing, a
// non-contiguous copy of a tensor, and gradient checking by central finite
// differences in float64.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "engine/core/dispatch.h"
#include "engine/ops/autograd.h"
#include "engine/ops/registry.h"

namespace samba::testing {

inline Tensor make(const std::vector<double>& values, const Dims& shape, DType dt = DType::Float64) {
  Tensor t = Tensor::empty(shape, dt);
  EXPECT_EQ(static_cast<int64_t>(values.size()), t.numel()) << "test bug: value count vs shape";
  SAMBA_DISPATCH_ALL(dt, "make", [&] {
    for (size_t i = 0; i < values.size(); ++i) t.data<scalar_t>()[i] = convert_value<scalar_t>(values[i]);
  });
  return t;
}

// Deterministic pseudo-random values in [lo, hi).
inline Tensor rand_tensor(const Dims& shape, DType dt = DType::Float64, uint32_t seed = 1, double lo = -1.0,
                          double hi = 1.0) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  std::vector<double> v(numel_of(shape));
  for (auto& x : v) x = u(gen);
  return make(v, shape, dt);
}

inline std::vector<double> values(const Tensor& t) {
  Tensor c = t.contiguous();
  std::vector<double> v(c.numel());
  SAMBA_DISPATCH_ALL(c.dtype(), "values", [&] {
    for (int64_t i = 0; i < c.numel(); ++i) v[i] = convert_value<double>(c.data<scalar_t>()[i]);
  });
  return v;
}

// The bytes of a contiguous tensor's elements, for bit-exact comparisons.
inline std::vector<unsigned char> bytes_of(const Tensor& t) {
  const auto* p = static_cast<const unsigned char*>(t.raw_data());
  return std::vector<unsigned char>(p, p + t.nbytes());
}

inline void expect_values(const Tensor& t, const std::vector<double>& want, double tol = 1e-6) {
  auto got = values(t);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << "element " << i;
      continue;
    }
    if (std::isinf(want[i])) {
      EXPECT_EQ(got[i], want[i]) << "element " << i;
      continue;
    }
    EXPECT_NEAR(got[i], want[i], tol * std::max(1.0, std::abs(want[i]))) << "element " << i;
  }
}

// The values 0, 1, 2, ... in row-major order.
inline Tensor iota(const Dims& shape, DType dt = DType::Float64) {
  std::vector<double> v(numel_of(shape));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(i);
  return make(v, shape, dt);
}

// Like expect_values, but equal infinities and NaN against NaN also match.
inline void expect_close(const Tensor& t, const std::vector<double>& want, double tol) {
  auto got = values(t);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isinf(want[i]) || std::isnan(want[i])) {
      EXPECT_TRUE(got[i] == want[i] || (std::isnan(got[i]) && std::isnan(want[i])))
          << "element " << i << ": got " << got[i] << ", want " << want[i];
      continue;
    }
    EXPECT_NEAR(got[i], want[i], tol * std::max(1.0, std::abs(want[i])))
        << "element " << i << " of " << got.size();
  }
}

// The same values in a non-contiguous layout: the last dim is spread with
// stride 2 inside a larger buffer (a 0-dim or 1-element tensor is returned as is).
inline Tensor noncontiguous(const Tensor& t) {
  if (t.dim() == 0) return t;
  Dims big = t.shape();
  big.back() *= 2;
  Tensor buf = Tensor::zeros(big, t.dtype());
  Dims st = contiguous_strides(big);
  st.back() = 2;
  Tensor view = buf.as_strided(t.shape(), st, 0);
  view.copy_from(t);
  EXPECT_TRUE(t.shape().back() <= 1 || !view.is_contiguous());
  return view;
}

// Checks the gradients of op `name` at float64 `inputs` against central
// finite differences of L = sum_k sum(out_k * w_k) with random weights w_k.
// Inputs that are not floating point are passed through without gradients;
// `skip` lists input indices not to differentiate.
inline void check_gradients(const std::string& name, std::vector<Tensor> inputs, const Attrs& attrs = {},
                            double eps = 1e-6, double tol = 1e-6, std::vector<size_t> skip = {}) {
  auto differentiable = [&](size_t i) {
    return inputs[i].defined() && is_floating(inputs[i].dtype()) &&
           std::find(skip.begin(), skip.end(), i) == skip.end();
  };
  // Fresh leaves that require grad.
  std::vector<Tensor> leaves;
  for (size_t i = 0; i < inputs.size(); ++i) {
    Tensor l = inputs[i].defined() ? inputs[i].clone() : Tensor();
    if (differentiable(i)) l.impl()->requires_grad = true;
    leaves.push_back(l);
  }
  std::vector<Tensor> outs = call(name, leaves, attrs);
  std::vector<Tensor> weights;
  for (size_t k = 0; k < outs.size(); ++k)
    weights.push_back(is_floating(outs[k].dtype()) ? rand_tensor(outs[k].shape(), outs[k].dtype(), 100 + k)
                                                   : Tensor());
  auto loss_of = [&](const std::vector<Tensor>& os) {
    double L = 0;
    for (size_t k = 0; k < os.size(); ++k) {
      if (!weights[k].defined()) continue;
      auto o = values(os[k]), w = values(weights[k]);
      for (size_t j = 0; j < o.size(); ++j) L += o[j] * w[j];
    }
    return L;
  };
  std::vector<Tensor> roots, grads;
  for (size_t k = 0; k < outs.size(); ++k)
    if (weights[k].defined() && outs[k].requires_grad()) roots.push_back(outs[k]), grads.push_back(weights[k]);
  ASSERT_FALSE(roots.empty()) << name << ": no output carries gradient history";
  autograd::backward(roots, grads, false);

  autograd::NoGradGuard ng;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!differentiable(i)) continue;
    Tensor g = leaves[i].grad();
    ASSERT_TRUE(g.defined()) << name << ": no gradient for input " << i;
    auto analytic = values(g);
    Tensor x = inputs[i].clone();
    double* px = x.data<double>();
    for (int64_t j = 0; j < x.numel(); ++j) {
      std::vector<Tensor> in = inputs;
      const double orig = px[j];
      px[j] = orig + eps;
      in[i] = x.clone();
      double lp = loss_of(call(name, in, attrs));
      px[j] = orig - eps;
      in[i] = x.clone();
      double lm = loss_of(call(name, in, attrs));
      px[j] = orig;
      double numeric = (lp - lm) / (2 * eps);
      EXPECT_NEAR(analytic[j], numeric, tol * std::max(1.0, std::abs(numeric)))
          << name << ": d/d input " << i << " element " << j;
    }
  }
}

}  // namespace samba::testing
