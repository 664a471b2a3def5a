// Geometry shared by the convolution and pooling ops (NCHW, PyTorch
// semantics): int-or-pair attributes, output sizes, and the validation whose
// errors name the op, the attribute and the shapes involved.
#pragma once

#include <string>
#include <string_view>

#include "engine/core/attrs.h"
#include "engine/core/tensor.h"

namespace samba::ops {

// A spatial (height, width) pair.
struct HW {
  int64_t h = 0;
  int64_t w = 0;
};
std::string hw_str(HW p);  // "[h, w]"

// An `ints` attribute holding one value (used for both dims) or two.
HW int_pair(const Attrs& a, std::string_view op, std::string_view name);

struct ConvParams {
  HW stride{1, 1};
  HW padding{0, 0};
  HW dilation{1, 1};
  int64_t groups = 1;
};

// Reads and validates stride/padding/dilation/groups.
ConvParams conv_params(const Attrs& a, std::string_view op);
// The same four attributes as an Attrs, for calling another convolution op.
Attrs conv_attrs(const ConvParams& p);

// A 2-D convolution seen from conv2d: `input` is what the kernel slides over,
// `output` what it produces. conv_transpose2d uses the same geometry with the
// roles of its input and output swapped.
struct ConvGeometry {
  bool batched = true;  // false: (C, H, W) tensors, batch is 1
  int64_t batch = 1;
  int64_t groups = 1;
  int64_t in_channels = 0, in_h = 0, in_w = 0;
  int64_t out_channels = 0, out_h = 0, out_w = 0;
  int64_t kernel_h = 0, kernel_w = 0;
  ConvParams p;

  int64_t in_per_group() const { return in_channels / groups; }
  int64_t out_per_group() const { return out_channels / groups; }
  int64_t in_pixels() const { return in_h * in_w; }
  int64_t out_pixels() const { return out_h * out_w; }
  // Rows of the im2col matrix of one group: (channel, kernel row, kernel col).
  int64_t col_rows() const { return in_per_group() * kernel_h * kernel_w; }
  // A 1x1 kernel with unit stride and no padding reads the input as it is.
  bool pointwise() const {
    return kernel_h == 1 && kernel_w == 1 && p.stride.h == 1 && p.stride.w == 1 &&
           p.padding.h == 0 && p.padding.w == 0;
  }
  Dims input_shape() const;
  Dims output_shape() const;
  Dims weight_shape() const;
};

// conv2d of an input of `input_shape` ((N, C, H, W) or (C, H, W)) with a
// weight of `weight_shape` (O, C/groups, kH, kW). `input_name` names the input
// in errors ("x", "input_size").
ConvGeometry conv_geometry(std::string_view op, const Dims& input_shape, const Dims& weight_shape,
                           const ConvParams& p, std::string_view input_name = "x");

// conv_transpose2d of x ((N, C_in, H, W) or (C_in, H, W)) with a weight
// (C_in, C_out/groups, kH, kW): the geometry of the conv2d whose input
// gradient it is (its input is the transposed conv's output).
ConvGeometry conv_transpose_geometry(std::string_view op, const Dims& x_shape,
                                     const Dims& weight_shape, const ConvParams& p,
                                     HW output_padding);

// Checks that x, weight and bias (when defined) share one floating dtype.
void check_conv_dtypes(std::string_view op, const Tensor& x, std::string_view x_name,
                       const Tensor& weight, std::string_view weight_name, const Tensor& bias);

// Checks that bias is undefined or of shape (channels).
void check_bias(std::string_view op, const Tensor& bias, int64_t channels,
                const Dims& weight_shape);

// Dims of a gradient of shape `shape` summed to a per-channel bias gradient.
std::vector<int64_t> bias_grad_dims(const Dims& shape);

// ---- pooling ----------------------------------------------------------------------

struct PoolParams {
  HW kernel;
  HW stride;
  HW padding{0, 0};
  HW dilation{1, 1};
  bool ceil_mode = false;
};

// Reads kernel_size, stride (empty: kernel_size), padding, ceil_mode and,
// when `with_dilation`, dilation.
PoolParams pool_params(const Attrs& a, std::string_view op, bool with_dilation);

struct PoolGeometry {
  bool batched = true;
  int64_t batch = 1, channels = 0;
  int64_t in_h = 0, in_w = 0, out_h = 0, out_w = 0;
  PoolParams p;

  int64_t planes() const { return batch * channels; }
  Dims input_shape() const;
  Dims output_shape() const;
};

// Output size of a sliding window along one dim, PyTorch's rule (a window
// must start inside the input or its left padding when ceil_mode rounds up).
int64_t pooled_size(int64_t in, int64_t kernel, int64_t stride, int64_t pad, int64_t dilation,
                    bool ceil_mode);

PoolGeometry pool_geometry(std::string_view op, const Dims& x_shape, const PoolParams& p,
                           std::string_view input_name = "x");

// Geometry of adaptive pooling (kernel and stride fields unused).
PoolGeometry adaptive_pool_geometry(std::string_view op, const Dims& x_shape, HW output_size,
                                    std::string_view input_name = "x");

// Checks a pooling input's rank and non-empty spatial/channel dims.
void check_pool_input(std::string_view op, const Dims& x_shape, std::string_view input_name);

// The `input_size` attribute of a backward op: the forward input's shape.
Dims input_size_attr(const Attrs& a, std::string_view op);

}  // namespace samba::ops
