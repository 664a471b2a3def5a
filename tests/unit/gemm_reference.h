// The GEMM epilogue's activations in double precision, for the reference
// products of the GEMM tests (gemm_test, bf16_gemm_test).
#pragma once

#include <cmath>

#include "engine/kernels/gemm_args.h"

namespace samba::ops {

inline double reference_activation(double x, Activation act) {
  switch (act) {
    case Activation::None:
      return x;
    case Activation::Relu:
      return x > 0 ? x : 0;
    case Activation::Tanh:
      return std::tanh(x);
    case Activation::Sigmoid:
      return 1 / (1 + std::exp(-x));
    case Activation::GeluTanh:
      return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
    case Activation::GeluErf:
      return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
  }
  return x;
}

}  // namespace samba::ops
