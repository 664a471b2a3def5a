// Lowerings of ONNX convolution and pooling (windowed ops) to the registry's
// 2-D ops.
#include <limits>

#include "engine/onnx/lowerings.h"
#include "engine/ops/registry.h"

namespace samba::onnx_import::lower {
namespace {

std::vector<int64_t> ints_or(const NodeContext& c, std::string_view name, size_t n, int64_t def) {
  std::vector<int64_t> v = c.attr_ints(name).value_or(std::vector<int64_t>(n, def));
  if (v.size() != n) c.invalid("attribute '{}' has {} values, expected {}", name, v.size(), n);
  return v;
}

// The registry's convolutions and poolings are 2-D. A 1-D input (N, C, L)
// runs as (N, C, L, 1) with a unit window on the added dim, which computes
// the same values.
struct Spatial {
  size_t rank;  // 1 or 2: the node's spatial dims
  bool one_d() const { return rank == 1; }
  Tensor in(const Tensor& x) const {
    return one_d() ? call1("unsqueeze", {x}, {{"dim", int64_t{-1}}}) : x;
  }
  Tensor out(const Tensor& y) const {
    return one_d() ? call1("squeeze", {y}, {{"dim", std::vector<int64_t>{-1}}}) : y;
  }
  // A per-dim attribute given for the node's dims, extended with `unit`.
  std::vector<int64_t> widen(std::vector<int64_t> v, int64_t unit) const {
    if (one_d()) v.push_back(unit);
    return v;
  }
};

Spatial spatial_of(const NodeContext& c, const Tensor& x) {
  if (x.dim() != 3 && x.dim() != 4)
    c.unsupported(
        "input of rank {} (shape {}); supported: 1-D (N, C, L) and 2-D (N, C, H, W) spatial "
        "inputs (3-D has no registry op)",
        x.dim(), dims_str(x.shape()));
  return {static_cast<size_t>(x.dim() - 2)};
}

// The window of a node: kernel, strides, dilations and the pads before and
// after each spatial dim, from `pads` or from auto_pad (SAME_UPPER puts the
// odd pad at the end, SAME_LOWER at the begin).
struct Window {
  std::vector<int64_t> kernel, stride, dilation, begin, end;
};

Window window_of(const NodeContext& c, const Tensor& x, size_t rank, std::vector<int64_t> kernel) {
  Window w{std::move(kernel), ints_or(c, "strides", rank, 1), ints_or(c, "dilations", rank, 1),
           std::vector<int64_t>(rank, 0), std::vector<int64_t>(rank, 0)};
  const std::string auto_pad = c.attr_string("auto_pad", "NOTSET");
  if (auto_pad == "NOTSET") {
    const std::vector<int64_t> pads = ints_or(c, "pads", 2 * rank, 0);
    for (size_t i = 0; i < rank; ++i) {
      w.begin[i] = pads[i];
      w.end[i] = pads[i + rank];
      if (w.begin[i] < 0 || w.end[i] < 0) c.invalid("pads must not be negative");
    }
  } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    for (size_t i = 0; i < rank; ++i) {
      const int64_t in = x.size(static_cast<int64_t>(i) + 2);
      const int64_t span = (w.kernel[i] - 1) * w.dilation[i] + 1;
      const int64_t out = (in + w.stride[i] - 1) / w.stride[i];
      const int64_t total = std::max<int64_t>((out - 1) * w.stride[i] + span - in, 0);
      w.begin[i] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      w.end[i] = total - w.begin[i];
    }
  } else if (auto_pad != "VALID") {
    c.invalid("auto_pad '{}'; expected NOTSET, SAME_UPPER, SAME_LOWER or VALID", auto_pad);
  }
  return w;
}

// Whether the registry's own padding (equal on both sides, at most half the
// window for pooling) expresses the window's pads.
bool registry_pads(const Window& w, bool pooling) {
  for (size_t i = 0; i < w.begin.size(); ++i)
    if (w.begin[i] != w.end[i] || (pooling && 2 * w.begin[i] > w.kernel[i])) return false;
  return true;
}

// x (as 2-D) padded explicitly with `value`: the pad op takes (before, after)
// pairs, last dim first. A pad as wide as the window only adds windows of
// padding alone; such pads (which no exporter writes) are refused rather than
// allocated.
Tensor pad_explicitly(const NodeContext& c, const Spatial& sp, const Tensor& x2, const Window& w,
                      double value) {
  for (size_t i = 0; i < sp.rank; ++i)
    if (std::max(w.begin[i], w.end[i]) >= (w.kernel[i] - 1) * w.dilation[i] + 1)
      c.unsupported(
          "pads {} and {} of spatial dim {} reach past the window of {}; supported: "
          "pads smaller than the window",
          w.begin[i], w.end[i], i, (w.kernel[i] - 1) * w.dilation[i] + 1);
  std::vector<int64_t> pairs;
  if (sp.one_d()) pairs = {0, 0};
  for (size_t i = sp.rank; i-- > 0;) {
    pairs.push_back(w.begin[i]);
    pairs.push_back(w.end[i]);
  }
  return call1("pad", {x2}, {{"pad", pairs}, {"mode", std::string("constant")}, {"value", value}});
}

// A convolution's kernel: the weight's spatial dims, which `kernel_shape`
// must repeat when given.
std::vector<int64_t> kernel_of_weight(const NodeContext& c, const Tensor& x, const Tensor& w) {
  if (w.dim() != x.dim())
    c.invalid("the weight's shape {} has not the rank of the input's {}", dims_str(w.shape()),
              dims_str(x.shape()));
  std::vector<int64_t> kernel(w.shape().begin() + 2, w.shape().end());
  for (int64_t k : kernel)
    if (k < 1) c.invalid("the weight's kernel dims must be positive, got {}", dims_str(w.shape()));
  if (auto ks = c.attr_ints("kernel_shape"); ks && *ks != kernel)
    c.invalid("kernel_shape {} does not match the weight's shape {}", fmt::join(*ks, ","),
              dims_str(w.shape()));
  return kernel;
}

}  // namespace

Out conv(const NodeContext& c) {
  const Tensor& x = c.input(0);
  const Spatial sp = spatial_of(c, x);
  const Tensor& w = c.input(1);
  const std::vector<int64_t> kernel = kernel_of_weight(c, x, w);
  const Window win = window_of(c, x, sp.rank, kernel);
  Tensor x2 = sp.in(x);
  std::vector<int64_t> padding = win.begin;
  if (!registry_pads(win, false)) {
    x2 = pad_explicitly(c, sp, x2, win, 0.0);
    padding.assign(sp.rank, 0);
  }
  Attrs attrs{{"stride", sp.widen(win.stride, 1)},
              {"padding", sp.widen(padding, 0)},
              {"dilation", sp.widen(win.dilation, 1)},
              {"groups", c.attr_int("group", 1)}};
  const Tensor* bias = c.optional_input(2);
  const Tensor w2 = sp.in(w);
  return {
      sp.out(bias ? call1("conv2d", {x2, w2, *bias}, attrs) : call1("conv2d", {x2, w2}, attrs))};
}

// MaxPool's Indices from the registry's, which count h * W + w within each
// (n, c) plane of the input the registry op saw (x padded explicitly when
// `padded`): ONNX counts over the whole unpadded tensor,
// ((n * C + c) * H + h) * W + w, or with storage_order 1 column-major within
// the plane, (n * C + c) * H * W + w * H + h. A 1-D input's plane is (L, 1),
// where both orders give l.
Tensor onnx_max_indices(const Tensor& x, const Tensor& plane_index, const Window& win,
                        bool padded, bool column_major) {
  const bool one_d = x.dim() == 3;
  const int64_t n = x.size(0), channels = x.size(1), h = x.size(2), w = one_d ? 1 : x.size(3);
  const int64_t top = padded ? win.begin[0] : 0, left = padded && !one_d ? win.begin[1] : 0;
  const int64_t padded_w = padded && !one_d ? w + win.begin[1] + win.end[1] : w;
  auto scalar = [](int64_t v) {
    return Tensor::scalar(static_cast<double>(v), DType::Int64, true);
  };
  Tensor row = call1("div", {plane_index, scalar(padded_w)},
                     {{"rounding_mode", std::string("floor")}});
  Tensor col = call1("sub", {plane_index, call1("mul", {row, scalar(padded_w)})});
  if (top != 0) row = call1("sub", {row, scalar(top)});
  if (left != 0) col = call1("sub", {col, scalar(left)});
  const Tensor in_plane = column_major ? call1("add", {call1("mul", {col, scalar(h)}), row})
                                       : call1("add", {call1("mul", {row, scalar(w)}), col});
  const Tensor plane_start =
      call1("reshape",
            {call1("arange", {}, {{"end", static_cast<double>(n * channels * h * w)},
                                  {"step", static_cast<double>(h * w)},
                                  {"dtype", DType::Int64}})},
            {{"shape", std::vector<int64_t>{n, channels, 1, 1}}});
  return call1("add", {in_plane, plane_start});
}

Out max_pool(const NodeContext& c) {
  const Tensor& x = c.input(0);
  const Spatial sp = spatial_of(c, x);
  if (c.output_count() > 2)
    c.invalid("{} outputs are named; MaxPool has 2 (Y, Indices)", c.output_count());
  const int64_t storage_order = c.attr_int("storage_order", 0);
  if (storage_order != 0 && storage_order != 1)
    c.invalid("storage_order {}; expected 0 (row-major) or 1 (column-major)", storage_order);
  const Window win = window_of(c, x, sp.rank, ints_or(c, "kernel_shape", sp.rank, 0));
  Tensor x2 = sp.in(x);
  std::vector<int64_t> padding = win.begin;
  const bool padded = !registry_pads(win, true);
  if (padded) {
    // Padding never wins a maximum.
    x2 = pad_explicitly(c, sp, x2, win, -std::numeric_limits<double>::infinity());
    padding.assign(sp.rank, 0);
  }
  Attrs attrs{{"kernel_size", sp.widen(win.kernel, 1)},
              {"stride", sp.widen(win.stride, 1)},
              {"padding", sp.widen(padding, 0)},
              {"dilation", sp.widen(win.dilation, 1)},
              {"ceil_mode", c.attr_int("ceil_mode", 0) != 0}};
  if (c.output_count() < 2) return {sp.out(call1("max_pool2d", {x2}, attrs))};
  const std::vector<Tensor> pooled = call("max_pool2d_with_indices", {x2}, attrs);
  const Tensor indices = onnx_max_indices(x, pooled[1], win, padded, storage_order == 1);
  return {sp.out(pooled[0]), sp.out(indices)};
}

Out average_pool(const NodeContext& c) {
  const Tensor& x = c.input(0);
  const Spatial sp = spatial_of(c, x);
  const Window win = window_of(c, x, sp.rank, ints_or(c, "kernel_shape", sp.rank, 0));
  const bool count_pad = c.attr_int("count_include_pad", 0) != 0;
  Attrs attrs{{"kernel_size", sp.widen(win.kernel, 1)},
              {"stride", sp.widen(win.stride, 1)},
              {"padding", sp.widen(win.begin, 0)},
              {"ceil_mode", c.attr_int("ceil_mode", 0) != 0},
              {"count_include_pad", count_pad}};
  if (registry_pads(win, true)) return {sp.out(call1("avg_pool2d", {sp.in(x)}, attrs))};
  // Pads the registry cannot take: average the zero-padded input, and
  // without count_include_pad divide by the share of each window that is
  // input (the average of a zero-padded tensor of ones).
  attrs.set("padding", sp.widen(std::vector<int64_t>(sp.rank, 0), 0));
  attrs.set("count_include_pad", true);
  const Tensor x2 = pad_explicitly(c, sp, sp.in(x), win, 0.0);
  Tensor y = call1("avg_pool2d", {x2}, attrs);
  if (!count_pad) {
    const Tensor ones = pad_explicitly(c, sp, sp.in(call1("ones_like", {x})), win, 0.0);
    y = call1("div", {y, call1("avg_pool2d", {ones}, attrs)});
  }
  return {sp.out(y)};
}

Out conv_transpose(const NodeContext& c) {
  const Tensor& x = c.input(0);
  const Spatial sp = spatial_of(c, x);
  const Tensor& w = c.input(1);
  const size_t rank = sp.rank;
  const std::vector<int64_t> kernel = kernel_of_weight(c, x, w);
  const std::vector<int64_t> stride = ints_or(c, "strides", rank, 1);
  const std::vector<int64_t> dilation = ints_or(c, "dilations", rank, 1);
  const std::vector<int64_t> out_pad = ints_or(c, "output_padding", rank, 0);
  // The full output of each dim (no pads), then the pads that crop it to the
  // requested size: from `pads`, or from output_shape / SAME auto_pad.
  std::vector<int64_t> full(rank), begin(rank), end(rank);
  const std::string auto_pad = c.attr_string("auto_pad", "NOTSET");
  const auto output_shape = c.attr_ints("output_shape");
  const std::vector<int64_t> pads = ints_or(c, "pads", 2 * rank, 0);
  for (size_t i = 0; i < rank; ++i) {
    const int64_t in = x.size(static_cast<int64_t>(i) + 2);
    if (out_pad[i] < 0 || out_pad[i] >= std::max(stride[i], dilation[i]))
      c.invalid("output_padding {} must be in [0, max(stride, dilation)) = [0, {})", out_pad[i],
                std::max(stride[i], dilation[i]));
    if (stride[i] > kMaxDim / std::max<int64_t>(in, 1) || dilation[i] > kMaxDim / kernel[i])
      c.unsupported("strides {} and dilations {} make an output dim above 2^32", stride[i],
                    dilation[i]);
    full[i] = stride[i] * (in - 1) + out_pad[i] + (kernel[i] - 1) * dilation[i] + 1;
    const bool same = auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER";
    if (output_shape || same) {
      const size_t n = output_shape ? output_shape->size() : rank;
      const int64_t want = output_shape ? (*output_shape)[n - rank + i] : in * stride[i];
      // A negative total (an output larger than the full one) grows the
      // output with zeros.
      const int64_t total = full[i] - want;
      if (total <= -stride[i])
        c.invalid("output_shape {} exceeds the full output {} by a stride or more", want, full[i]);
      const bool upper = auto_pad != "SAME_LOWER";
      begin[i] = upper ? total / 2 : total - total / 2;
      end[i] = total - begin[i];
    } else {
      begin[i] = pads[i];
      end[i] = pads[i + rank];
    }
  }
  Tensor x2 = sp.in(x);
  const Tensor w2 = sp.in(w);
  const Tensor* bias = c.optional_input(2);
  const int64_t groups = c.attr_int("group", 1);
  bool direct = true;
  for (size_t i = 0; i < rank; ++i)
    direct = direct && begin[i] == end[i] && begin[i] >= 0 &&
             out_pad[i] < std::max(stride[i], dilation[i]);
  if (direct) {
    Attrs attrs{{"stride", sp.widen(stride, 1)},
                {"padding", sp.widen(begin, 0)},
                {"output_padding", sp.widen(out_pad, 0)},
                {"dilation", sp.widen(dilation, 1)},
                {"groups", groups}};
    return {sp.out(bias ? call1("conv_transpose2d", {x2, w2, *bias}, attrs)
                        : call1("conv_transpose2d", {x2, w2}, attrs))};
  }
  // Pads the registry cannot take: the full output without output_padding,
  // grown with zeros by output_padding (rows no input reaches) and by
  // negative pads, then cropped by the positive ones.
  Attrs attrs{
      {"stride", sp.widen(stride, 1)}, {"dilation", sp.widen(dilation, 1)}, {"groups", groups}};
  Tensor y = call1("conv_transpose2d", {x2, w2}, attrs);
  for (size_t i = 0; i < rank; ++i) {
    const int64_t dim = static_cast<int64_t>(i) + 2;
    const int64_t grow_begin = std::max<int64_t>(-begin[i], 0);
    const int64_t grow_end = out_pad[i] + std::max<int64_t>(-end[i], 0);
    if (grow_begin > 0 || grow_end > 0) {
      std::vector<int64_t> pairs(2 * (static_cast<size_t>(y.dim()) - 2), 0);
      const size_t pair = static_cast<size_t>(y.dim() - 1 - dim);
      pairs[2 * pair] = grow_begin;
      pairs[2 * pair + 1] = grow_end;
      y = call1("pad", {y}, {{"pad", pairs}, {"mode", std::string("constant")}, {"value", 0.0}});
    }
    const int64_t size = y.size(dim);
    const int64_t start = std::max<int64_t>(begin[i], 0),
                  stop = size - std::max<int64_t>(end[i], 0);
    if (start > 0 || stop < size)
      y = call1("slice", {y}, {{"dim", dim}, {"start", start}, {"end", stop}});
  }
  if (bias) {
    Dims per_channel(static_cast<size_t>(y.dim()), 1);
    per_channel[1] = -1;
    y = call1("add", {y, call1("reshape", {*bias}, {{"shape", per_channel}})});
  }
  return {sp.out(y)};
}

Out global_max_pool(const NodeContext& c) {
  const Tensor& x = c.input(0);
  if (x.dim() < 3) c.invalid("the input must be (N, C, spatial...), got {}", dims_str(x.shape()));
  std::vector<int64_t> dims;
  for (int64_t d = 2; d < x.dim(); ++d) dims.push_back(d);
  return {call1("max", {x}, {{"dim", dims}, {"keepdim", true}})};
}

Out global_average_pool(const NodeContext& c) {
  const Tensor& x = c.input(0);
  const Spatial sp = spatial_of(c, x);
  return {sp.out(
      call1("adaptive_avg_pool2d", {sp.in(x)}, {{"output_size", std::vector<int64_t>{1, 1}}}))};
}

}  // namespace samba::onnx_import::lower
