// Materializers: what fills a lazily created parameter with its initial
// values when it is first needed (SambaTensor's `materializer`, used in
// enable_lazy_param mode). A built-in one is a descriptor, kind plus
// parameters (MaterializerDesc, stored in PEF files, so a PEF can
// materialize its own parameters); a custom one is a callable.
//
// Built-in kinds, with torch.nn.init's formulas and parameter names (fans
// from the shape: fan_in = shape[1] * prod(shape[2:]), fan_out = shape[0] *
// prod(shape[2:]); gain = calculate_gain(nonlinearity, a), init_math.h):
//   uniform(a = 0, b = 1)                  U(a, b)
//   normal(mean = 0, std = 1)              N(mean, std^2)
//   zeros, ones, constant(val)             any dtype (val must fit an integer one)
//   xavier_uniform(gain = 1)               U(-x, x), x = gain sqrt(6 / (fan_in + fan_out))
//   xavier_normal(gain = 1)                N(0, std^2), std = gain sqrt(2 / (fan_in + fan_out))
//   kaiming_uniform(a = 0, mode = "fan_in", nonlinearity = "leaky_relu")
//                                          U(-x, x), x = gain sqrt(3 / fan)
//   kaiming_normal(a = 0, mode = "fan_in", nonlinearity = "leaky_relu")
//                                          N(0, std^2), std = gain / sqrt(fan)
//   trunc_normal(mean = 0, std = 1, a = -2, b = 2)
//                                          N(mean, std^2) conditioned on [a, b] (absolute bounds)
// and the default initializers of layers:
//   linear_weight, conv_weight             kaiming_uniform(a = sqrt 5): U(-x, x), x = 1 /
//   sqrt(fan_in) linear_bias(fan_in), conv_bias(fan_in) U(-x, x), x = 1 / sqrt(fan_in) (0 when
//   fan_in is 0);
//                                          fan_in is the weight's, which the bias shape lacks
//   embedding(padding_idx = none)          N(0, 1), row padding_idx zeroed
//   norm_weight, norm_bias                 ones, zeros
// Random kinds need a floating dtype. Numbers may be given as int or float
// attributes; mode and nonlinearity are strings; fan_in and padding_idx ints.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/core/tensor.h"
#include "engine/rng/bf16.h"
#include "engine/rng/materializer_desc.h"
#include "engine/rng/multithreaded_rng.h"

namespace samba::rng {

// enable_lazy_param's settings plus the tensor being materialized.
struct MaterializeOptions {
  uint64_t seed = 0;
  std::string sn_name;   // the RNG stream; empty: the tensor's own name
  int init_threads = 8;  // 0: the calling thread's current pool
  bool inverse_transform_sampling = false;
  Bf16Rounding fp32_to_bf16_rounding = Bf16Rounding::NearestEven;
};

// The stream (seed, sn_name) with the options' threads, normal method and rounding.
MultithreadedRng materializer_rng(const MaterializeOptions& o);

// Checks a built-in descriptor against the tensor it would fill. Throws
// NotFound for an unknown kind; InvalidArgument for an unknown, missing,
// ill-typed or out-of-range parameter or a shape the kind cannot handle;
// DTypeMismatch for a dtype it cannot fill. `tensor_name`, when given, is
// named in messages. Safe on untrusted input (the PEF reader calls it).
void check_materializer(const MaterializerDesc& desc, DType dtype, const Dims& shape,
                        std::string_view tensor_name = {});

// Fills `out` (a tensor with data, any strides) as `desc` says. Checks first:
// on error nothing has been written.
void materialize(const MaterializerDesc& desc, const Tensor& out, const MaterializeOptions& o);

// A custom materializer: fills `out` (shape and dtype already set) using
// `rng`, the tensor's stream. Called on the thread that materializes; it may
// run parallel work on rng's pool through the rng's fills.
using MaterializerFn = std::function<void(const Tensor& out, const MultithreadedRng& rng)>;
void materialize(const MaterializerFn& fn, const Tensor& out, const MaterializeOptions& o);

// The built-in kinds, in the order documented above.
std::vector<std::string_view> materializer_kinds();

}  // namespace samba::rng
