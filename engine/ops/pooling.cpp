// 2-D pooling (NCHW, PyTorch semantics): max_pool2d, avg_pool2d,
// adaptive_avg_pool2d and their backward ops. Every (image, channel) plane is
// independent, so planes are the unit of parallel work.
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <vector>

#include "engine/core/dispatch.h"
#include "engine/core/parallel.h"
#include "engine/kernels/conv_dtype.h"
#include "engine/kernels/conv_geometry.h"
#include "engine/kernels/max_pool_2x2.h"
#include "engine/ops/operands.h"

namespace samba::ops {
namespace {

constexpr const char* kMaxPool = "max_pool2d";
constexpr const char* kMaxPoolIndices = "max_pool2d_with_indices";
constexpr const char* kMaxPoolGrad = "max_pool2d_backward";
constexpr const char* kAvgPool = "avg_pool2d";
constexpr const char* kAvgPoolGrad = "avg_pool2d_backward";
constexpr const char* kAdaptive = "adaptive_avg_pool2d";
constexpr const char* kAdaptiveGrad = "adaptive_avg_pool2d_backward";

// Runs fn(plane_begin, plane_end) over the planes, each costing `work` steps.
template <typename F>
void for_planes(int64_t planes, int64_t work, F&& fn) {
  parallel_for(planes, std::max<int64_t>(1, kMinGrain / std::max<int64_t>(work, 1)), fn);
}

// Window taps [lo, hi) of a window starting at `start` (negative inside the
// padding) whose positions start + t * dilation lie in [0, in).
struct Taps {
  int64_t lo, hi;
};
Taps taps_inside(int64_t start, int64_t dilation, int64_t kernel, int64_t in) {
  const int64_t lo = start >= 0 ? 0 : (-start + dilation - 1) / dilation;
  const int64_t hi = start >= in ? 0 : std::min(kernel, (in - 1 - start) / dilation + 1);
  return {lo, std::max(lo, hi)};
}

// ---- max ---------------------------------------------------------------------------

// Window taps inside the input for every output row and column; the same
// for every plane, so computed once.
struct WindowTaps {
  std::vector<Taps> rows, cols;
};
WindowTaps window_taps(const PoolGeometry& g) {
  const PoolParams& p = g.p;
  WindowTaps t;
  for (int64_t oh = 0; oh < g.out_h; ++oh)
    t.rows.push_back(taps_inside(oh * p.stride.h - p.padding.h, p.dilation.h, p.kernel.h, g.in_h));
  for (int64_t ow = 0; ow < g.out_w; ++ow)
    t.cols.push_back(taps_inside(ow * p.stride.w - p.padding.w, p.dilation.w, p.kernel.w, g.in_w));
  return t;
}

// Index in the plane of the first maximum of the window at output (oh, ow)
// (a NaN wins, as in PyTorch), or -1 when the window holds no input element.
template <typename T>
int64_t window_argmax(const PoolGeometry& g, const WindowTaps& t, const T* plane, int64_t oh,
                      int64_t ow) {
  const PoolParams& p = g.p;
  const int64_t hs = oh * p.stride.h - p.padding.h, ws = ow * p.stride.w - p.padding.w;
  const Taps ti = t.rows[oh], tj = t.cols[ow];
  int64_t best = -1;
  T best_value{};
  for (int64_t i = ti.lo; i < ti.hi; ++i) {
    const int64_t row = (hs + i * p.dilation.h) * g.in_w + ws;
    for (int64_t j = tj.lo; j < tj.hi; ++j) {
      const int64_t at = row + j * p.dilation.w;
      const T v = plane[at];
      bool take = best < 0 || v > best_value;
      if constexpr (std::is_floating_point_v<T>) take = take || std::isnan(v);
      if (take) best = at, best_value = v;
    }
  }
  return best;
}

// The output columns whose tap j (of every window) lands inside the input.
std::vector<Taps> column_taps(const PoolGeometry& g) {
  const PoolParams& p = g.p;
  std::vector<Taps> cols;
  for (int64_t j = 0; j < p.kernel.w; ++j) {
    const int64_t first = j * p.dilation.w - p.padding.w, sw = p.stride.w;
    const int64_t lo = std::min(g.out_w, first >= 0 ? 0 : (-first + sw - 1) / sw);
    const int64_t hi = first >= g.in_w ? 0 : (g.in_w - 1 - first) / sw + 1;
    cols.push_back({lo, std::clamp(hi, lo, g.out_w)});
  }
  return cols;
}

// Each kernel tap is swept across a whole output row, which vectorizes, and
// taps are visited in window order, so a strict compare keeps the window's
// first maximum (a NaN replaces it, as in PyTorch's CPU kernel). With
// kIndices, `indices` gets the position in the plane (h * W + w) of each
// maximum; it starts at the window's first tap inside the input, which
// PyTorch reports when no element beats the empty window's -inf.
template <typename T, bool kIndices = false>
void max_pool_forward(const PoolGeometry& g, const T* x, T* out, int64_t* indices = nullptr) {
  const PoolParams& p = g.p;
  const int64_t in_plane = g.in_h * g.in_w, out_plane = g.out_h * g.out_w, sw = p.stride.w;
  const T empty = std::numeric_limits<T>::has_infinity ? -std::numeric_limits<T>::infinity()
                                                       : std::numeric_limits<T>::lowest();
  const WindowTaps t = window_taps(g);
  const std::vector<Taps> cols = column_taps(g);
  for_planes(g.planes(), out_plane * p.kernel.h * p.kernel.w, [&](int64_t b, int64_t e) {
    for (int64_t pl = b; pl < e; ++pl) {
      const T* xp = x + pl * in_plane;
      for (int64_t oh = 0; oh < g.out_h; ++oh) {
        T* orow = out + pl * out_plane + oh * g.out_w;
        int64_t* irow = kIndices ? indices + pl * out_plane + oh * g.out_w : nullptr;
        std::fill_n(orow, g.out_w, empty);
        const int64_t hs = oh * p.stride.h - p.padding.h;
        if constexpr (kIndices) {
          const int64_t first_row = hs + t.rows[oh].lo * p.dilation.h;
          for (int64_t ow = 0; ow < g.out_w; ++ow)
            irow[ow] = first_row * g.in_w + ow * sw - p.padding.w + t.cols[ow].lo * p.dilation.w;
        }
        for (int64_t i = t.rows[oh].lo; i < t.rows[oh].hi; ++i) {
          const int64_t row_at = (hs + i * p.dilation.h) * g.in_w;
          for (int64_t j = 0; j < p.kernel.w; ++j) {
            const Taps c = cols[j];
            if (c.lo >= c.hi) continue;
            const int64_t first_at = row_at + j * p.dilation.w - p.padding.w + c.lo * sw;
            T* __restrict dst = orow + c.lo;
            const T* __restrict src = xp + first_at;
            for (int64_t k = 0; k < c.hi - c.lo; ++k) {
              const T v = src[k * sw];
              bool take = v > dst[k];
              if constexpr (std::is_floating_point_v<T>) take = take || std::isnan(v);
              dst[k] = take ? v : dst[k];
              if constexpr (kIndices) irow[c.lo + k] = take ? first_at + k * sw : irow[c.lo + k];
            }
          }
        }
      }
    }
  });
}

template <typename T>
void max_pool_backward(const PoolGeometry& g, const T* grad, const T* x, T* dx) {
  const int64_t in_plane = g.in_h * g.in_w, out_plane = g.out_h * g.out_w;
  const WindowTaps t = window_taps(g);
  for_planes(g.planes(), out_plane * g.p.kernel.h * g.p.kernel.w, [&](int64_t b, int64_t e) {
    for (int64_t pl = b; pl < e; ++pl) {
      const T* xp = x + pl * in_plane;
      const T* gp = grad + pl * out_plane;
      T* dp = dx + pl * in_plane;
      std::fill_n(dp, in_plane, T(0));
      for (int64_t oh = 0; oh < g.out_h; ++oh)
        for (int64_t ow = 0; ow < g.out_w; ++ow)
          if (const int64_t at = window_argmax(g, t, xp, oh, ow); at >= 0)
            dp[at] += gp[oh * g.out_w + ow];
    }
  });
}

// ---- average --------------------------------------------------------------------------

struct AvgOptions {
  bool count_include_pad = true;
  int64_t divisor_override = 0;  // 0: none
};

AvgOptions avg_options(const Attrs& a, std::string_view op) {
  AvgOptions o;
  o.count_include_pad = a.b("count_include_pad");
  if (a.has("divisor_override")) {
    o.divisor_override = a.i("divisor_override");
    SAMBA_CHECK(o.divisor_override != 0, Status::InvalidArgument,
                "{}: attribute 'divisor_override' must not be 0", op);
  }
  return o;
}

// The input rectangle of the window at (oh, ow) and what its sum is divided by.
struct AvgWindow {
  int64_t h0, h1, w0, w1;
  double divisor;
};
AvgWindow avg_window(const PoolGeometry& g, const AvgOptions& o, int64_t oh, int64_t ow) {
  const PoolParams& p = g.p;
  int64_t h0 = oh * p.stride.h - p.padding.h, w0 = ow * p.stride.w - p.padding.w;
  int64_t h1 = std::min(h0 + p.kernel.h, g.in_h + p.padding.h);
  int64_t w1 = std::min(w0 + p.kernel.w, g.in_w + p.padding.w);
  const int64_t with_pad = (h1 - h0) * (w1 - w0);
  h0 = std::max<int64_t>(h0, 0), w0 = std::max<int64_t>(w0, 0);
  h1 = std::min(h1, g.in_h), w1 = std::min(w1, g.in_w);
  const int64_t inside = std::max<int64_t>(h1 - h0, 0) * std::max<int64_t>(w1 - w0, 0);
  const int64_t divisor = o.divisor_override != 0 ? o.divisor_override
                          : o.count_include_pad   ? with_pad
                                                  : inside;
  return {h0, h1, w0, w1, static_cast<double>(divisor)};
}

// The window of output `o` of `out` along an input of `in`: PyTorch's
// [floor(o * in / out), ceil((o + 1) * in / out)).
std::pair<int64_t, int64_t> adaptive_range(int64_t o, int64_t in, int64_t out) {
  return {o * in / out, ((o + 1) * in + out - 1) / out};
}

AvgWindow adaptive_window(const PoolGeometry& g, int64_t oh, int64_t ow) {
  const auto [h0, h1] = adaptive_range(oh, g.in_h, g.out_h);
  const auto [w0, w1] = adaptive_range(ow, g.in_w, g.out_w);
  return {h0, h1, w0, w1, static_cast<double>((h1 - h0) * (w1 - w0))};
}

// Averages every window given by window(oh, ow).
template <typename T, typename Window>
void avg_forward(const PoolGeometry& g, int64_t window_size, const T* x, T* out, Window window) {
  const int64_t in_plane = g.in_h * g.in_w, out_plane = g.out_h * g.out_w;
  for_planes(g.planes(), out_plane * window_size, [&](int64_t b, int64_t e) {
    for (int64_t pl = b; pl < e; ++pl) {
      const T* xp = x + pl * in_plane;
      T* op = out + pl * out_plane;
      for (int64_t oh = 0; oh < g.out_h; ++oh)
        for (int64_t ow = 0; ow < g.out_w; ++ow) {
          const AvgWindow wnd = window(oh, ow);
          T sum = 0;
          for (int64_t h = wnd.h0; h < wnd.h1; ++h)
            for (int64_t w = wnd.w0; w < wnd.w1; ++w) sum += xp[h * g.in_w + w];
          op[oh * g.out_w + ow] =
              wnd.h0 < wnd.h1 && wnd.w0 < wnd.w1 ? sum / static_cast<T>(wnd.divisor) : T(0);
        }
    }
  });
}

// avg_pool2d's forward: like max_pool_forward, each kernel tap is swept
// across a whole output row (summing in window order), then every sum is
// divided by its window's divisor.
template <typename T>
void avg_pool_forward(const PoolGeometry& g, const AvgOptions& o, const T* x, T* out) {
  const PoolParams& p = g.p;
  const int64_t in_plane = g.in_h * g.in_w, out_plane = g.out_h * g.out_w, sw = p.stride.w;
  const WindowTaps t = window_taps(g);
  const std::vector<Taps> cols = column_taps(g);
  std::vector<T> divisors(out_plane);  // 0: a window with no input element averages to 0
  for (int64_t oh = 0; oh < g.out_h; ++oh)
    for (int64_t ow = 0; ow < g.out_w; ++ow) {
      const AvgWindow w = avg_window(g, o, oh, ow);
      divisors[oh * g.out_w + ow] = w.h0 < w.h1 && w.w0 < w.w1 ? static_cast<T>(w.divisor) : T(0);
    }
  for_planes(g.planes(), out_plane * p.kernel.h * p.kernel.w, [&](int64_t b, int64_t e) {
    for (int64_t pl = b; pl < e; ++pl) {
      const T* xp = x + pl * in_plane;
      for (int64_t oh = 0; oh < g.out_h; ++oh) {
        T* orow = out + pl * out_plane + oh * g.out_w;
        std::fill_n(orow, g.out_w, T(0));
        const int64_t hs = oh * p.stride.h - p.padding.h;
        for (int64_t i = t.rows[oh].lo; i < t.rows[oh].hi; ++i) {
          const T* xrow = xp + (hs + i) * g.in_w;
          for (int64_t j = 0; j < p.kernel.w; ++j) {
            const Taps c = cols[j];
            if (c.lo >= c.hi) continue;
            T* __restrict dst = orow + c.lo;
            const T* __restrict src = xrow + (j - p.padding.w + c.lo * sw);
            for (int64_t k = 0; k < c.hi - c.lo; ++k) dst[k] += src[k * sw];
          }
        }
        const T* d = divisors.data() + oh * g.out_w;
        for (int64_t ow = 0; ow < g.out_w; ++ow) orow[ow] = d[ow] != T(0) ? orow[ow] / d[ow] : T(0);
      }
    }
  });
}

// Spreads each output gradient evenly over its window.
template <typename T, typename Window>
void avg_backward(const PoolGeometry& g, int64_t window_size, const T* grad, T* dx, Window window) {
  const int64_t in_plane = g.in_h * g.in_w, out_plane = g.out_h * g.out_w;
  for_planes(g.planes(), out_plane * window_size, [&](int64_t b, int64_t e) {
    for (int64_t pl = b; pl < e; ++pl) {
      const T* gp = grad + pl * out_plane;
      T* dp = dx + pl * in_plane;
      std::fill_n(dp, in_plane, T(0));
      for (int64_t oh = 0; oh < g.out_h; ++oh)
        for (int64_t ow = 0; ow < g.out_w; ++ow) {
          const AvgWindow wnd = window(oh, ow);
          if (wnd.h0 >= wnd.h1 || wnd.w0 >= wnd.w1) continue;
          const T share = gp[oh * g.out_w + ow] / static_cast<T>(wnd.divisor);
          for (int64_t h = wnd.h0; h < wnd.h1; ++h)
            for (int64_t w = wnd.w0; w < wnd.w1; ++w) dp[h * g.in_w + w] += share;
        }
    }
  });
}

// Largest adaptive window along a dim, for cost estimates.
int64_t adaptive_extent(int64_t in, int64_t out) { return (in + out - 1) / out + 1; }

// ---- schema helpers ---------------------------------------------------------------

void check_floating(std::string_view op, const Tensor& t, std::string_view name) {
  SAMBA_CHECK(is_floating(t.dtype()), Status::DTypeMismatch,
              "{}: {} must have a floating dtype, got {}", op, name, dtype_name(t.dtype()));
}

// Checks that `grad` matches the forward output's shape and x's dtype.
void check_grad(std::string_view op, const Tensor& grad, const Dims& want, DType dtype) {
  check_floating(op, grad, "grad");
  SAMBA_CHECK(grad.dtype() == dtype, Status::DTypeMismatch,
              "{}: grad has dtype {} but the input has dtype {}", op, dtype_name(grad.dtype()),
              dtype_name(dtype));
  SAMBA_CHECK(grad.shape() == want, Status::ShapeMismatch,
              "{}: grad has shape {}, but the forward output has shape {}", op,
              dims_str(grad.shape()), dims_str(want));
}

OpBuilder& with_window_attrs(OpBuilder& b) {
  return b.required_attr("kernel_size", AttrType::Ints, "window (h, w), or one for both")
      .attr("stride", AttrType::Ints, std::vector<int64_t>{}, "step (h, w); empty: kernel_size")
      .attr("padding", AttrType::Ints, std::vector<int64_t>{0, 0},
            "implicit padding on each side, at most half the kernel");
}

OpBuilder& with_max_attrs(OpBuilder& b) {
  return with_window_attrs(b)
      .attr("dilation", AttrType::Ints, std::vector<int64_t>{1, 1}, "spacing of window taps")
      .attr("ceil_mode", AttrType::Bool, false, "round the output size up");
}

OpBuilder& with_avg_attrs(OpBuilder& b) {
  return with_window_attrs(b)
      .attr("ceil_mode", AttrType::Bool, false, "round the output size up")
      .attr("count_include_pad", AttrType::Bool, true, "padding counts in the divisor")
      .optional_attr("divisor_override", AttrType::Int, "divide every window sum by this");
}

Attrs without(const Attrs& a, std::string_view name) {
  Attrs out;
  for (const auto& [n, v] : a.items())
    if (n != name) out.set(n, v);
  return out;
}

PoolGeometry max_geometry(const Dims& x_shape, const Attrs& a, std::string_view op) {
  return pool_geometry(op, x_shape, pool_params(a, op, true));
}

PoolGeometry avg_geometry(const Dims& x_shape, const Attrs& a, std::string_view op,
                          std::string_view input_name = "x") {
  return pool_geometry(op, x_shape, pool_params(a, op, false), input_name);
}

HW output_size_attr(const Attrs& a) {
  const auto& v = a.ints("output_size");
  SAMBA_CHECK(v.size() == 1 || v.size() == 2, Status::InvalidArgument,
              "{}: attribute 'output_size' must hold 1 or 2 values (height, width), got {}",
              kAdaptive, dims_str(Dims(v.begin(), v.end())));
  return v.size() == 1 ? HW{v[0], v[0]} : HW{v[0], v[1]};
}

Dims pooled_grad_shape(const Tensor& grad) {
  return {grad.shape()[grad.dim() - 2], grad.shape()[grad.dim() - 1]};
}

// The geometry of the 2x2, stride 2 kernel when it applies to g on float32
// data, or nothing.
std::optional<Pool2x2Shape> pool_2x2(const PoolGeometry& g, DType dtype) {
  const PoolParams& p = g.p;
  const bool fits = dtype == DType::Float32 && p.kernel.h == 2 && p.kernel.w == 2 &&
                    p.stride.h == 2 && p.stride.w == 2 && p.padding.h == 0 && p.padding.w == 0 &&
                    p.dilation.h == 1 && p.dilation.w == 1 && 2 * g.out_h <= g.in_h &&
                    2 * g.out_w <= g.in_w;
  if (!fits) return std::nullopt;
  return Pool2x2Shape{g.planes(), g.in_h, g.in_w, g.out_h, g.out_w};
}

// max_pool2d and max_pool2d_with_indices share their checks and kernel; the
// latter also writes int64 indices (output 1).
std::vector<TensorMeta> max_pool_meta(const InferContext& c, std::string_view op,
                                      bool with_indices) {
  const Tensor& x = c.inputs[0];
  SAMBA_CHECK(x.dtype() != DType::Bool, Status::DTypeMismatch,
              "{}: x has dtype bool; a numeric dtype is needed", op);
  const Dims out = max_geometry(x.shape(), c.attrs, op).output_shape();
  if (with_indices) return {{x.dtype(), out}, {DType::Int64, out}};
  return {{x.dtype(), out}};
}

void max_pool_kernel(KernelContext& c, std::string_view op, bool with_indices) {
  const PoolGeometry g = max_geometry(c.inputs[0].shape(), c.attrs, op);
  if (c.outputs[0].numel() == 0) return;
  if (const auto s = with_indices ? std::nullopt : pool_2x2(g, c.inputs[0].dtype()))
    return max_pool_2x2_forward(*s, c.inputs[0].data<float>(), c.outputs[0].data<float>());
  int64_t* indices = with_indices ? c.outputs[1].data<int64_t>() : nullptr;
  auto run = [&]<typename T>(const T* x, T* out) {
    if (with_indices)
      max_pool_forward<T, true>(g, x, out, indices);
    else
      max_pool_forward<T>(g, x, out);
  };
  if (is_floating(c.inputs[0].dtype())) {
    in_compute_type(op, {c.inputs[0]}, c.outputs[0],
                    [&](auto tag, const std::vector<Tensor>& in, const Tensor& out) {
                      using T = decltype(tag);
                      run(in[0].data<T>(), out.data<T>());
                    });
    return;
  }
  SAMBA_DISPATCH_INTEGRAL(c.inputs[0].dtype(), op, [&] {
    run(c.inputs[0].data<scalar_t>(), c.outputs[0].data<scalar_t>());
  });
}

void register_max(OpRegistry& r) {
  with_max_attrs(r.def(kMaxPool)
                     .doc("2-D max pooling of x (N, C, H, W) or (C, H, W); padding never wins.")
                     .input("x"))
      .fusion(Fusion::Opaque)
      .infer([](const InferContext& c) { return max_pool_meta(c, kMaxPool, false); })
      .kernel([](KernelContext& c) { max_pool_kernel(c, kMaxPool, false); })
      .grad([](const GradContext& c) -> std::vector<Tensor> {
        return {call1(kMaxPoolGrad, {c.grad_outputs[0], c.inputs[0]}, c.attrs)};
      });

  with_max_attrs(
      r.def(kMaxPoolIndices)
          .doc("max_pool2d that also returns where each maximum is: the int64 index h * W + w of "
               "the window's first maximum (the last NaN when the window holds NaN) in its "
               "(n, c) plane of x, as torch's max_pool2d(..., return_indices=True).")
          .input("x")
          .output("values")
          .output("indices", "int64, position of each maximum within its (n, c) plane"))
      .fusion(Fusion::Opaque)
      .infer([](const InferContext& c) { return max_pool_meta(c, kMaxPoolIndices, true); })
      .kernel([](KernelContext& c) { max_pool_kernel(c, kMaxPoolIndices, true); })
      .grad([](const GradContext& c) -> std::vector<Tensor> {
        // The indices have no gradient; the values' goes where max_pool2d's does.
        const Tensor& g = c.grad_outputs[0];
        if (!g.defined() || !c.needs_grad(0)) return {Tensor()};
        return {call1(kMaxPoolGrad, {g, c.inputs[0]}, c.attrs)};
      });

  with_max_attrs(r.def(kMaxPoolGrad)
                     .doc("Gradient of max_pool2d: each output gradient goes to the first maximum "
                          "of its window in x.")
                     .input("grad", "gradient of max_pool2d's output")
                     .input("x", "max_pool2d's input"))
      .fusion(Fusion::Opaque)
      .infer([](const InferContext& c) -> std::vector<TensorMeta> {
        const Tensor& x = c.inputs[1];
        const PoolGeometry g = max_geometry(x.shape(), c.attrs, kMaxPoolGrad);
        check_grad(kMaxPoolGrad, c.inputs[0], g.output_shape(), x.dtype());
        return {meta_of(x)};
      })
      .kernel([](KernelContext& c) {
        const PoolGeometry g = max_geometry(c.inputs[1].shape(), c.attrs, kMaxPoolGrad);
        if (c.outputs[0].numel() == 0) return;
        if (const auto s = pool_2x2(g, c.inputs[1].dtype()); s && c.inputs[0].dtype() == DType::Float32)
          return max_pool_2x2_backward(*s, c.inputs[0].data<float>(), c.inputs[1].data<float>(),
                                       c.outputs[0].data<float>());
        in_compute_type(kMaxPoolGrad, {c.inputs[0], c.inputs[1]}, c.outputs[0],
                        [&](auto tag, const std::vector<Tensor>& in, const Tensor& out) {
                          using T = decltype(tag);
                          max_pool_backward<T>(g, in[0].data<T>(), in[1].data<T>(), out.data<T>());
                        });
      });
}

void register_avg(OpRegistry& r) {
  with_avg_attrs(
      r.def(kAvgPool).doc("2-D average pooling of x (N, C, H, W) or (C, H, W).").input("x"))
      .fusion(Fusion::Opaque)
      .infer([](const InferContext& c) -> std::vector<TensorMeta> {
        const Tensor& x = c.inputs[0];
        check_floating(kAvgPool, x, "x");
        avg_options(c.attrs, kAvgPool);
        return {{x.dtype(), avg_geometry(x.shape(), c.attrs, kAvgPool).output_shape()}};
      })
      .kernel([](KernelContext& c) {
        const PoolGeometry g = avg_geometry(c.inputs[0].shape(), c.attrs, kAvgPool);
        const AvgOptions o = avg_options(c.attrs, kAvgPool);
        if (c.outputs[0].numel() == 0) return;
        in_compute_type(kAvgPool, {c.inputs[0]}, c.outputs[0],
                        [&](auto tag, const std::vector<Tensor>& in, const Tensor& out) {
                          using T = decltype(tag);
                          avg_pool_forward<T>(g, o, in[0].data<T>(), out.data<T>());
                        });
      })
      .grad([](const GradContext& c) -> std::vector<Tensor> {
        Attrs a = c.attrs;
        a.set("input_size", c.inputs[0].shape());
        return {call1(kAvgPoolGrad, {c.grad_outputs[0]}, a)};
      });

  with_avg_attrs(r.def(kAvgPoolGrad)
                     .doc("Gradient of avg_pool2d: each output gradient spread over its window.")
                     .input("grad", "gradient of avg_pool2d's output")
                     .required_attr("input_size", AttrType::Ints, "shape of avg_pool2d's input"))
      .fusion(Fusion::Opaque)
      .infer([](const InferContext& c) -> std::vector<TensorMeta> {
        const Tensor& grad = c.inputs[0];
        avg_options(c.attrs, kAvgPoolGrad);
        const PoolGeometry g = avg_geometry(input_size_attr(c.attrs, kAvgPoolGrad), c.attrs,
                                            kAvgPoolGrad, "input_size");
        check_grad(kAvgPoolGrad, grad, g.output_shape(), grad.dtype());
        return {{grad.dtype(), g.input_shape()}};
      })
      .kernel([](KernelContext& c) {
        const PoolGeometry g = avg_geometry(input_size_attr(c.attrs, kAvgPoolGrad), c.attrs,
                                            kAvgPoolGrad, "input_size");
        const AvgOptions o = avg_options(c.attrs, kAvgPoolGrad);
        if (c.outputs[0].numel() == 0) return;
        in_compute_type(kAvgPoolGrad, {c.inputs[0]}, c.outputs[0],
                        [&](auto tag, const std::vector<Tensor>& in, const Tensor& out) {
                          using T = decltype(tag);
                          avg_backward<T>(
                              g, g.p.kernel.h * g.p.kernel.w, in[0].data<T>(), out.data<T>(),
                              [&](int64_t oh, int64_t ow) { return avg_window(g, o, oh, ow); });
                        });
      })
      .grad([](const GradContext& c) -> std::vector<Tensor> {
        return {call1(kAvgPool, {c.grad_outputs[0]}, without(c.attrs, "input_size"))};
      });
}

void register_adaptive(OpRegistry& r) {
  r.def(kAdaptive)
      .doc(
          "2-D adaptive average pooling of x (N, C, H, W) or (C, H, W) to output_size; output "
          "cell o along a dim averages [floor(o * in / out), ceil((o + 1) * in / out)).")
      .input("x")
      .required_attr("output_size", AttrType::Ints, "output (h, w), or one for both")
      .fusion(Fusion::Opaque)
      .infer([](const InferContext& c) -> std::vector<TensorMeta> {
        const Tensor& x = c.inputs[0];
        check_floating(kAdaptive, x, "x");
        return {{x.dtype(), adaptive_pool_geometry(kAdaptive, x.shape(), output_size_attr(c.attrs))
                                .output_shape()}};
      })
      .kernel([](KernelContext& c) {
        const PoolGeometry g =
            adaptive_pool_geometry(kAdaptive, c.inputs[0].shape(), output_size_attr(c.attrs));
        if (c.outputs[0].numel() == 0) return;
        const int64_t window = adaptive_extent(g.in_h, g.out_h) * adaptive_extent(g.in_w, g.out_w);
        in_compute_type(kAdaptive, {c.inputs[0]}, c.outputs[0],
                        [&](auto tag, const std::vector<Tensor>& in, const Tensor& out) {
                          using T = decltype(tag);
                          avg_forward<T>(
                              g, window, in[0].data<T>(), out.data<T>(),
                              [&](int64_t oh, int64_t ow) { return adaptive_window(g, oh, ow); });
                        });
      })
      .grad([](const GradContext& c) -> std::vector<Tensor> {
        return {call1(kAdaptiveGrad, {c.grad_outputs[0]}, {{"input_size", c.inputs[0].shape()}})};
      });

  r.def(kAdaptiveGrad)
      .doc("Gradient of adaptive_avg_pool2d: each output gradient spread over its window.")
      .input("grad", "gradient of adaptive_avg_pool2d's output")
      .required_attr("input_size", AttrType::Ints, "shape of adaptive_avg_pool2d's input")
      .fusion(Fusion::Opaque)
      .infer([](const InferContext& c) -> std::vector<TensorMeta> {
        const Tensor& grad = c.inputs[0];
        const Dims input_size = input_size_attr(c.attrs, kAdaptiveGrad);
        SAMBA_CHECK(grad.dim() == static_cast<int64_t>(input_size.size()), Status::ShapeMismatch,
                    "{}: grad of shape {} and input_size {} differ in rank", kAdaptiveGrad,
                    dims_str(grad.shape()), dims_str(input_size));
        const Dims out = pooled_grad_shape(grad);
        const PoolGeometry g =
            adaptive_pool_geometry(kAdaptiveGrad, input_size, {out[0], out[1]}, "input_size");
        check_grad(kAdaptiveGrad, grad, g.output_shape(), grad.dtype());
        return {{grad.dtype(), input_size}};
      })
      .kernel([](KernelContext& c) {
        const Dims out = pooled_grad_shape(c.inputs[0]);
        const PoolGeometry g = adaptive_pool_geometry(
            kAdaptiveGrad, input_size_attr(c.attrs, kAdaptiveGrad), {out[0], out[1]}, "input_size");
        if (c.outputs[0].numel() == 0) return;
        const int64_t window = adaptive_extent(g.in_h, g.out_h) * adaptive_extent(g.in_w, g.out_w);
        in_compute_type(kAdaptiveGrad, {c.inputs[0]}, c.outputs[0],
                        [&](auto tag, const std::vector<Tensor>& in, const Tensor& o) {
                          using T = decltype(tag);
                          avg_backward<T>(
                              g, window, in[0].data<T>(), o.data<T>(),
                              [&](int64_t oh, int64_t ow) { return adaptive_window(g, oh, ow); });
                        });
      })
      .grad([](const GradContext& c) -> std::vector<Tensor> {
        const Dims out = pooled_grad_shape(c.inputs[0]);
        return {call1(kAdaptive, {c.grad_outputs[0]}, {{"output_size", out}})};
      });
}

}  // namespace

void register_pooling(OpRegistry& r) {
  register_max(r);
  register_avg(r);
  register_adaptive(r);
}

}  // namespace samba::ops
