// torch.nn.init's arithmetic: the recommended gain of a nonlinearity and the
// fans of a weight shape, used by the built-in materializers.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "engine/core/shape.h"

namespace samba::rng {

// calculate_gain: 1 for linear, conv*, conv_transpose* and sigmoid; 5/3 for
// tanh; sqrt(2) for relu; sqrt(2 / (1 + slope^2)) for leaky_relu (slope =
// param, 0.01 when absent); 3/4 for selu. Throws InvalidArgument for another
// name or a non-finite slope.
double calculate_gain(std::string_view nonlinearity, std::optional<double> param = {});

// fan_in = shape[1] * receptive field, fan_out = shape[0] * receptive field,
// the receptive field being the product of shape[2:]. Throws InvalidArgument
// for fewer than two dimensions (`what` names the materializer and tensor).
struct Fans {
  int64_t fan_in = 0;
  int64_t fan_out = 0;
};
Fans calculate_fans(const Dims& shape, std::string_view what = "fan computation");

}  // namespace samba::rng
