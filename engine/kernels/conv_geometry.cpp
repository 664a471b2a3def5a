#include "engine/kernels/conv_geometry.h"

#include <fmt/format.h>

#include <cstdint>
#include <limits>

#include "engine/core/error.h"

namespace samba::ops {
namespace {

// Window sizes, strides, paddings, dilations, groups and the channel and
// spatial sizes they combine with are held within int32 range: every sum and
// product the geometry below forms then fits in int64, whatever values a PEF
// or a caller brings.
constexpr int64_t kMaxGeometry = std::numeric_limits<int32_t>::max();

void check_extents(std::string_view op, std::string_view name, const Dims& shape,
                   std::initializer_list<int64_t> sizes) {
  for (int64_t v : sizes)
    SAMBA_CHECK(v <= kMaxGeometry, Status::OutOfRange,
                "{}: {} of shape {} has a channel or spatial size over {}", op, name,
                dims_str(shape), kMaxGeometry);
}

// Splits (N, C, H, W) or (C, H, W) into its parts; false for other ranks.
bool split_nchw(const Dims& s, bool* batched, int64_t* n, int64_t* c, int64_t* h, int64_t* w) {
  if (s.size() != 3 && s.size() != 4) return false;
  *batched = s.size() == 4;
  const size_t o = *batched ? 1 : 0;
  *n = *batched ? s[0] : 1;
  *c = s[o];
  *h = s[o + 1];
  *w = s[o + 2];
  return true;
}

Dims nchw(bool batched, int64_t n, int64_t c, int64_t h, int64_t w) {
  return batched ? Dims{n, c, h, w} : Dims{c, h, w};
}

void check_positive(std::string_view op, std::string_view name, HW v) {
  SAMBA_CHECK(v.h > 0 && v.w > 0, Status::InvalidArgument,
              "{}: attribute '{}' must be positive, got {}", op, name, hw_str(v));
}

void check_non_negative(std::string_view op, std::string_view name, HW v) {
  SAMBA_CHECK(v.h >= 0 && v.w >= 0, Status::InvalidArgument,
              "{}: attribute '{}' must not be negative, got {}", op, name, hw_str(v));
}

void check_weight(std::string_view op, const Dims& w) {
  SAMBA_CHECK(w.size() == 4, Status::ShapeMismatch,
              "{}: weight must have 4 dims (out, in/groups, kH, kW), got shape {}", op,
              dims_str(w));
  for (int64_t d : w)
    SAMBA_CHECK(d > 0, Status::ShapeMismatch, "{}: weight shape {} has an empty dimension", op,
                dims_str(w));
  check_extents(op, "weight", w, {w[0], w[1], w[2], w[3]});
}

}  // namespace

std::string hw_str(HW p) { return fmt::format("[{}, {}]", p.h, p.w); }

HW int_pair(const Attrs& a, std::string_view op, std::string_view name) {
  const auto& v = a.ints(name);
  SAMBA_CHECK(v.size() == 1 || v.size() == 2, Status::InvalidArgument,
              "{}: attribute '{}' must hold 1 or 2 values (height, width), got {}", op, name,
              dims_str(Dims(v.begin(), v.end())));
  for (int64_t x : v)
    SAMBA_CHECK(x >= -kMaxGeometry && x <= kMaxGeometry, Status::OutOfRange,
                "{}: attribute '{}' {} is out of range: each value must be within [-{}, {}]", op,
                name, dims_str(Dims(v.begin(), v.end())), kMaxGeometry, kMaxGeometry);
  return v.size() == 1 ? HW{v[0], v[0]} : HW{v[0], v[1]};
}

ConvParams conv_params(const Attrs& a, std::string_view op) {
  ConvParams p;
  p.stride = int_pair(a, op, "stride");
  p.padding = int_pair(a, op, "padding");
  p.dilation = int_pair(a, op, "dilation");
  p.groups = a.i("groups");
  check_positive(op, "stride", p.stride);
  check_non_negative(op, "padding", p.padding);
  check_positive(op, "dilation", p.dilation);
  SAMBA_CHECK(p.groups >= 1 && p.groups <= kMaxGeometry, Status::InvalidArgument,
              "{}: attribute 'groups' must be within [1, {}], got {}", op, kMaxGeometry, p.groups);
  return p;
}

Attrs conv_attrs(const ConvParams& p) {
  return {{"stride", std::vector<int64_t>{p.stride.h, p.stride.w}},
          {"padding", std::vector<int64_t>{p.padding.h, p.padding.w}},
          {"dilation", std::vector<int64_t>{p.dilation.h, p.dilation.w}},
          {"groups", p.groups}};
}

Dims ConvGeometry::input_shape() const { return nchw(batched, batch, in_channels, in_h, in_w); }
Dims ConvGeometry::output_shape() const { return nchw(batched, batch, out_channels, out_h, out_w); }
Dims ConvGeometry::weight_shape() const {
  return {out_channels, in_per_group(), kernel_h, kernel_w};
}

ConvGeometry conv_geometry(std::string_view op, const Dims& input_shape, const Dims& weight_shape,
                           const ConvParams& p, std::string_view input_name) {
  ConvGeometry g;
  g.p = p;
  g.groups = p.groups;
  SAMBA_CHECK(split_nchw(input_shape, &g.batched, &g.batch, &g.in_channels, &g.in_h, &g.in_w),
              Status::ShapeMismatch, "{}: {} must be (N, C, H, W) or (C, H, W), got shape {}", op,
              input_name, dims_str(input_shape));
  check_extents(op, input_name, input_shape, {g.in_channels, g.in_h, g.in_w});
  check_weight(op, weight_shape);
  g.out_channels = weight_shape[0];
  g.kernel_h = weight_shape[2];
  g.kernel_w = weight_shape[3];
  SAMBA_CHECK(g.out_channels % p.groups == 0, Status::ShapeMismatch,
              "{}: weight shape {} has {} output channels, not divisible by groups {}", op,
              dims_str(weight_shape), g.out_channels, p.groups);
  SAMBA_CHECK(g.in_channels == weight_shape[1] * p.groups, Status::ShapeMismatch,
              "{}: {} of shape {} has {} channels, but weight shape {} with groups {} expects {}",
              op, input_name, dims_str(input_shape), g.in_channels, dims_str(weight_shape),
              p.groups, weight_shape[1] * p.groups);
  const HW extent{p.dilation.h * (g.kernel_h - 1) + 1, p.dilation.w * (g.kernel_w - 1) + 1};
  const HW padded{g.in_h + 2 * p.padding.h, g.in_w + 2 * p.padding.w};
  SAMBA_CHECK(extent.h <= padded.h && extent.w <= padded.w, Status::ShapeMismatch,
              "{}: kernel {} with dilation {} spans {}, larger than the padded input {} ({} shape "
              "{}, padding {})",
              op, hw_str({g.kernel_h, g.kernel_w}), hw_str(p.dilation), hw_str(extent),
              hw_str(padded), input_name, dims_str(input_shape), hw_str(p.padding));
  g.out_h = (padded.h - extent.h) / p.stride.h + 1;
  g.out_w = (padded.w - extent.w) / p.stride.w + 1;
  return g;
}

ConvGeometry conv_transpose_geometry(std::string_view op, const Dims& x_shape,
                                     const Dims& weight_shape, const ConvParams& p,
                                     HW output_padding) {
  ConvGeometry g;
  g.p = p;
  g.groups = p.groups;
  SAMBA_CHECK(split_nchw(x_shape, &g.batched, &g.batch, &g.out_channels, &g.out_h, &g.out_w),
              Status::ShapeMismatch, "{}: x must be (N, C, H, W) or (C, H, W), got shape {}", op,
              dims_str(x_shape));
  check_extents(op, "x", x_shape, {g.out_channels, g.out_h, g.out_w});
  check_weight(op, weight_shape);
  SAMBA_CHECK(g.out_channels == weight_shape[0], Status::ShapeMismatch,
              "{}: x of shape {} has {} channels, but weight shape {} expects {} (weight.shape[0])",
              op, dims_str(x_shape), g.out_channels, dims_str(weight_shape), weight_shape[0]);
  SAMBA_CHECK(g.out_channels % p.groups == 0, Status::ShapeMismatch,
              "{}: x of shape {} has {} channels, not divisible by groups {}", op,
              dims_str(x_shape), g.out_channels, p.groups);
  check_non_negative(op, "output_padding", output_padding);
  // PyTorch also accepts output_padding < dilation; the rows that adds would
  // need a cropped convolution in the gradient, so it is refused here.
  SAMBA_CHECK(output_padding.h < p.stride.h && output_padding.w < p.stride.w,
              Status::InvalidArgument,
              "{}: attribute 'output_padding' {} must be smaller than stride {}", op,
              hw_str(output_padding), hw_str(p.stride));
  g.in_channels = weight_shape[1] * p.groups;
  g.kernel_h = weight_shape[2];
  g.kernel_w = weight_shape[3];
  g.in_h = (g.out_h - 1) * p.stride.h - 2 * p.padding.h + p.dilation.h * (g.kernel_h - 1) +
           output_padding.h + 1;
  g.in_w = (g.out_w - 1) * p.stride.w - 2 * p.padding.w + p.dilation.w * (g.kernel_w - 1) +
           output_padding.w + 1;
  SAMBA_CHECK(g.in_h > 0 && g.in_w > 0 && g.out_h > 0 && g.out_w > 0, Status::ShapeMismatch,
              "{}: output size {} is not positive (x shape {}, weight shape {}, stride {}, padding "
              "{}, dilation {}, output_padding {})",
              op, hw_str({g.in_h, g.in_w}), dims_str(x_shape), dims_str(weight_shape),
              hw_str(p.stride), hw_str(p.padding), hw_str(p.dilation), hw_str(output_padding));
  return g;
}

void check_conv_dtypes(std::string_view op, const Tensor& x, std::string_view x_name,
                       const Tensor& weight, std::string_view weight_name, const Tensor& bias) {
  SAMBA_CHECK(is_floating(x.dtype()), Status::DTypeMismatch,
              "{}: {} must have a floating dtype, got {}", op, x_name, dtype_name(x.dtype()));
  SAMBA_CHECK(weight.dtype() == x.dtype(), Status::DTypeMismatch,
              "{}: {} has dtype {} but {} has dtype {}; they must match", op, weight_name,
              dtype_name(weight.dtype()), x_name, dtype_name(x.dtype()));
  SAMBA_CHECK(!bias.defined() || bias.dtype() == x.dtype(), Status::DTypeMismatch,
              "{}: bias has dtype {} but {} has dtype {}; they must match", op,
              dtype_name(bias.dtype()), x_name, dtype_name(x.dtype()));
}

void check_bias(std::string_view op, const Tensor& bias, int64_t channels,
                const Dims& weight_shape) {
  SAMBA_CHECK(!bias.defined() || bias.shape() == Dims{channels}, Status::ShapeMismatch,
              "{}: bias must have shape [{}] (output channels of weight shape {}), got {}", op,
              channels, dims_str(weight_shape), dims_str(bias.shape()));
}

std::vector<int64_t> bias_grad_dims(const Dims& shape) {
  return shape.size() == 4 ? std::vector<int64_t>{0, 2, 3} : std::vector<int64_t>{1, 2};
}

// ---- pooling ----------------------------------------------------------------------

PoolParams pool_params(const Attrs& a, std::string_view op, bool with_dilation) {
  PoolParams p;
  p.kernel = int_pair(a, op, "kernel_size");
  p.stride = a.ints("stride").empty() ? p.kernel : int_pair(a, op, "stride");
  p.padding = int_pair(a, op, "padding");
  if (with_dilation) p.dilation = int_pair(a, op, "dilation");
  p.ceil_mode = a.b("ceil_mode");
  check_positive(op, "kernel_size", p.kernel);
  check_positive(op, "stride", p.stride);
  check_non_negative(op, "padding", p.padding);
  check_positive(op, "dilation", p.dilation);
  SAMBA_CHECK(p.padding.h <= p.kernel.h / 2 && p.padding.w <= p.kernel.w / 2,
              Status::InvalidArgument,
              "{}: attribute 'padding' {} must be at most half of kernel_size {}", op,
              hw_str(p.padding), hw_str(p.kernel));
  return p;
}

Dims PoolGeometry::input_shape() const { return nchw(batched, batch, channels, in_h, in_w); }
Dims PoolGeometry::output_shape() const { return nchw(batched, batch, channels, out_h, out_w); }

int64_t pooled_size(int64_t in, int64_t kernel, int64_t stride, int64_t pad, int64_t dilation,
                    bool ceil_mode) {
  const int64_t span = in + 2 * pad - dilation * (kernel - 1) - 1 + (ceil_mode ? stride - 1 : 0);
  // Floor division: span may be negative when the window exceeds the input.
  int64_t out = (span >= 0 ? span / stride : -((-span + stride - 1) / stride)) + 1;
  if (ceil_mode && out > 0 && (out - 1) * stride >= in + pad) --out;
  return out;
}

void check_pool_input(std::string_view op, const Dims& s, std::string_view input_name) {
  bool batched;
  int64_t n, c, h, w;
  SAMBA_CHECK(split_nchw(s, &batched, &n, &c, &h, &w) && c > 0 && h > 0 && w > 0,
              Status::ShapeMismatch,
              "{}: {} must be (N, C, H, W) or (C, H, W) with non-empty C, H and W, got shape {}",
              op, input_name, dims_str(s));
  check_extents(op, input_name, s, {c, h, w});
}

PoolGeometry pool_geometry(std::string_view op, const Dims& x_shape, const PoolParams& p,
                           std::string_view input_name) {
  check_pool_input(op, x_shape, input_name);
  PoolGeometry g;
  g.p = p;
  split_nchw(x_shape, &g.batched, &g.batch, &g.channels, &g.in_h, &g.in_w);
  g.out_h = pooled_size(g.in_h, p.kernel.h, p.stride.h, p.padding.h, p.dilation.h, p.ceil_mode);
  g.out_w = pooled_size(g.in_w, p.kernel.w, p.stride.w, p.padding.w, p.dilation.w, p.ceil_mode);
  SAMBA_CHECK(g.out_h > 0 && g.out_w > 0, Status::ShapeMismatch,
              "{}: output size {} is not positive: kernel_size {} with dilation {} does not fit "
              "{} of shape {} with padding {}",
              op, hw_str({g.out_h, g.out_w}), hw_str(p.kernel), hw_str(p.dilation), input_name,
              dims_str(x_shape), hw_str(p.padding));
  return g;
}

PoolGeometry adaptive_pool_geometry(std::string_view op, const Dims& x_shape, HW output_size,
                                    std::string_view input_name) {
  check_pool_input(op, x_shape, input_name);
  SAMBA_CHECK(output_size.h > 0 && output_size.w > 0 && output_size.h <= kMaxGeometry &&
                  output_size.w <= kMaxGeometry,
              Status::InvalidArgument,
              "{}: attribute 'output_size' must be within [1, {}], got {} ({} shape {})", op,
              kMaxGeometry, hw_str(output_size), input_name, dims_str(x_shape));
  PoolGeometry g;
  split_nchw(x_shape, &g.batched, &g.batch, &g.channels, &g.in_h, &g.in_w);
  g.out_h = output_size.h;
  g.out_w = output_size.w;
  return g;
}

Dims input_size_attr(const Attrs& a, std::string_view op) {
  const auto& v = a.ints("input_size");
  Dims d(v.begin(), v.end());
  SAMBA_CHECK((d.size() == 3 || d.size() == 4), Status::InvalidArgument,
              "{}: attribute 'input_size' must be (N, C, H, W) or (C, H, W), got {}", op,
              dims_str(d));
  for (int64_t x : d)
    SAMBA_CHECK(x >= 0, Status::InvalidArgument,
                "{}: attribute 'input_size' {} has a negative size", op, dims_str(d));
  return d;
}

}  // namespace samba::ops
