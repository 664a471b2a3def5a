// How the convolution and pooling kernels meet dtypes: float32 and float64
// are computed natively; bfloat16/float16 through float32 copies (which is
// float32 accumulation), the result converted back.
#pragma once

#include <string_view>
#include <vector>

#include "engine/core/error.h"
#include "engine/core/tensor.h"

namespace samba::ops {

// Runs body(T{}, inputs, out) with T = float or double, inputs made
// contiguous (undefined ones stay undefined).
template <typename Body>
void in_compute_type(std::string_view op, std::vector<Tensor> inputs, const Tensor& out,
                     Body body) {
  for (auto& t : inputs)
    if (t.defined()) t = t.contiguous();
  switch (out.dtype()) {
    case DType::Float32:
      return body(float{}, inputs, out);
    case DType::Float64:
      return body(double{}, inputs, out);
    case DType::BFloat16:
    case DType::Float16: {
      for (auto& t : inputs)
        if (t.defined()) t = t.to(DType::Float32);
      Tensor tmp = Tensor::empty(out.shape(), DType::Float32);
      body(float{}, inputs, tmp);
      out.copy_from(tmp);
      return;
    }
    default:
      fail(Status::DTypeMismatch, "{}: dtype {} is not supported (floating dtypes only)", op,
           dtype_name(out.dtype()));
  }
}

}  // namespace samba::ops
