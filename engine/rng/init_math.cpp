#include "engine/rng/init_math.h"

#include <cmath>

#include "engine/core/error.h"

namespace samba::rng {

double calculate_gain(std::string_view nonlinearity, std::optional<double> param) {
  const std::string_view unit[] = {"linear",           "conv1d",           "conv2d",
                                   "conv3d",           "conv_transpose1d", "conv_transpose2d",
                                   "conv_transpose3d", "sigmoid"};
  for (std::string_view u : unit)
    if (nonlinearity == u) return 1.0;
  if (nonlinearity == "tanh") return 5.0 / 3.0;
  if (nonlinearity == "relu") return std::sqrt(2.0);
  if (nonlinearity == "selu") return 3.0 / 4.0;
  if (nonlinearity == "leaky_relu") {
    const double slope = param.value_or(0.01);
    SAMBA_CHECK(std::isfinite(slope), Status::InvalidArgument,
                "calculate_gain: negative slope of leaky_relu must be finite, got {}", slope);
    return std::sqrt(2.0 / (1.0 + slope * slope));
  }
  fail(Status::InvalidArgument,
       "calculate_gain: unsupported nonlinearity '{}'; expected linear, conv1d, conv2d, conv3d, "
       "conv_transpose1d, conv_transpose2d, conv_transpose3d, sigmoid, tanh, relu, leaky_relu or "
       "selu",
       nonlinearity);
}

Fans calculate_fans(const Dims& shape, std::string_view what) {
  SAMBA_CHECK(shape.size() >= 2, Status::InvalidArgument,
              "{}: fan in and fan out cannot be computed for a tensor of shape {} (fewer than 2 "
              "dimensions)",
              what, dims_str(shape));
  int64_t receptive = 1;
  for (size_t d = 2; d < shape.size(); ++d) receptive *= shape[d];
  return {shape[1] * receptive, shape[0] * receptive};
}

}  // namespace samba::rng
