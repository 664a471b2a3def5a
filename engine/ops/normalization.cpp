// Normalizations over contiguous rows: layer_norm and rms_norm (the trailing
// normalized_shape), group_norm (a group of channels of one sample), each
// with a fused backward op. Statistics are recomputed by the backward ops
// rather than saved, so the forward ops keep their single output.
#include <cmath>
#include <type_traits>
#include <limits>

#include "engine/kernels/row_stats.h"
#include "engine/ops/operands.h"

namespace samba::ops {
namespace {

using nn::ArrayMap;
using nn::ConstArrayMap;

// x viewed as rows x len, where a row is one normalized group of values.
struct RowLayout {
  int64_t rows = 0;
  int64_t len = 0;
};

RowLayout trailing_layout(const Tensor& x, const std::vector<int64_t>& normalized, const char* op) {
  SAMBA_CHECK(!normalized.empty(), Status::InvalidArgument,
              "{}: normalized_shape must have at least one dim", op);
  const int64_t k = static_cast<int64_t>(normalized.size());
  bool ok = x.dim() >= k;
  for (int64_t i = 0; ok && i < k; ++i) ok = x.shape()[x.dim() - k + i] == normalized[i];
  SAMBA_CHECK(ok, Status::ShapeMismatch, "{}: x of shape {} does not end with normalized_shape {}",
              op, dims_str(x.shape()), dims_str(normalized));
  const int64_t len = numel_of(normalized);
  return {len == 0 ? 0 : x.numel() / len, len};
}

template <typename C>
const C* data_or_null(const Tensor& t) {
  return t.defined() ? t.data<C>() : nullptr;
}

// Column sums of a backward op written to per-feature gradient outputs.
template <typename C>
void write_sums(const double* sums, int64_t which, int64_t len,
                const nn::ComputeOutput& out) {
  C* p = out.data<C>();
  for (int64_t i = 0; i < len; ++i) p[i] = static_cast<C>(sums[which * len + i]);
  out.commit();
}

// ---- layer_norm ---------------------------------------------------------------------
// y = (x - mean) * rstd * w + b with the biased variance of each row.

// Values normalized, then handed to the tail, per piece of a row: a piece
// stays in L1 between being stored and the tail reading it back.
inline constexpr int64_t kTailPiece = 1024;

// y = ((x - mean) * rstd) * w + b over n values, as one pass (the affine
// parameters are optional).
template <typename C>
void normalize_affine(const C* x, const C* w, const C* b, C* y, int64_t n, C mean, C rstd) {
  ConstArrayMap<C> xv(x, n);
  ArrayMap<C> yv(y, n);
  if (w && b)
    yv = (xv - mean) * rstd * ConstArrayMap<C>(w, n) + ConstArrayMap<C>(b, n);
  else if (w)
    yv = (xv - mean) * rstd * ConstArrayMap<C>(w, n);
  else if (b)
    yv = (xv - mean) * rstd + ConstArrayMap<C>(b, n);
  else
    yv = (xv - mean) * rstd;
}

// Rows [r0, r1) of layer_norm; `tail` (float only) runs on each piece of a
// row right after it is stored.
template <typename C>
void layer_norm_rows(const C* x, const C* w, const C* b, C* y, int64_t len, double eps,
                     const OutputTail* tail, int64_t r0, int64_t r1) {
  for (int64_t r = r0; r < r1; ++r) {
    const C* xr = x + r * len;
    C* yr = y + r * len;
    const nn::Moments mo = nn::row_moments(xr, len);
    const C mean = static_cast<C>(mo.mean);
    const C rstd = static_cast<C>(1.0 / std::sqrt(mo.biased_var() + eps));
    for (int64_t c = 0; c < len; c += kTailPiece) {
      const int64_t n = std::min(kTailPiece, len - c);
      normalize_affine(xr + c, w ? w + c : nullptr, b ? b + c : nullptr, yr + c, n, mean, rstd);
      if constexpr (std::is_same_v<C, float>)
        if (tail) (*tail)(yr + c, 1, n, len);
    }
  }
}

template <typename C>
void layer_norm_forward(const C* x, const C* w, const C* b, C* y, RowLayout l, double eps,
                        const OutputTail* tail = nullptr) {
  parallel_for(l.rows, nn::rows_grain(l.len, 2), [&](int64_t r0, int64_t r1) {
    layer_norm_rows(x, w, b, y, l.len, eps, tail, r0, r1);
  });
}

// dx = rstd * (gw - mean(gw) - xhat * mean(gw * xhat)), gw = g * w,
// xhat = (x - mean) * rstd; dw = sum over rows of g * xhat; db = sum of g.
template <typename C>
void layer_norm_backward(const C* g, const C* x, const C* w, C* dx, RowLayout l, double eps,
                         double* sums) {
  ScratchFrame frame;
  C* means = frame.get<C>(0, static_cast<size_t>(l.rows));
  C* rstds = frame.get<C>(1, static_cast<size_t>(l.rows));
  parallel_for(l.rows, nn::rows_grain(l.len, 3), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const C* xr = x + r * l.len;
      const nn::Moments mo = nn::row_moments(xr, l.len);
      const C mean = static_cast<C>(mo.mean);
      const C rstd = static_cast<C>(1.0 / std::sqrt(mo.biased_var() + eps));
      means[r] = mean, rstds[r] = rstd;
      ConstArrayMap<C> xv(xr, l.len), gv(g + r * l.len, l.len);
      const C inv_len = C(1) / static_cast<C>(l.len);
      // Reductions read only tensor memory, whose alignment is fixed, so
      // their rounding does not vary from call to call.
      auto finish = [&](const auto& gw) {
        const C a = gw.sum() * inv_len;
        const C bq = (gw * (xv - mean)).sum() * rstd * inv_len;
        ArrayMap<C>(dx + r * l.len, l.len) = rstd * (gw - a - (xv - mean) * (rstd * bq));
      };
      if (w)
        finish(gv * ConstArrayMap<C>(w, l.len));
      else
        finish(gv);
    }
  });
  nn::column_sums(
      l.rows, l.len, 2,
      [&](int64_t r, int64_t c0, int64_t c1, double* acc) {
        const C* gr = g + r * l.len;
        const C* xr = x + r * l.len;
        const C mean = means[r], rstd = rstds[r];
        double* dw = acc;
        double* db = acc + l.len;
        for (int64_t c = c0; c < c1; ++c) {
          dw[c] += static_cast<double>(gr[c] * ((xr[c] - mean) * rstd));
          db[c] += static_cast<double>(gr[c]);
        }
      },
      sums);
}

// ---- rms_norm -------------------------------------------------------------------------
// y = x * rstd * w with rstd = 1 / sqrt(mean(x^2) + eps).

template <typename C>
C rms_rstd(const C* xr, int64_t len, double eps) {
  const double ms =
      static_cast<double>(ConstArrayMap<C>(xr, len).square().sum()) / static_cast<double>(len);
  return static_cast<C>(1.0 / std::sqrt(ms + eps));
}

template <typename C>
void rms_norm_forward(const C* x, const C* w, C* y, RowLayout l, double eps) {
  parallel_for(l.rows, nn::rows_grain(l.len, 2), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const C* xr = x + r * l.len;
      const C rstd = rms_rstd(xr, l.len, eps);
      ArrayMap<C> yr(y + r * l.len, l.len);
      yr = ConstArrayMap<C>(xr, l.len) * rstd;
      if (w) yr *= ConstArrayMap<C>(w, l.len);
    }
  });
}

// dx = rstd * (gw - xhat * mean(gw * xhat)), xhat = x * rstd; dw = sum of g * xhat.
template <typename C>
void rms_norm_backward(const C* g, const C* x, const C* w, C* dx, RowLayout l, double eps,
                       double* sums) {
  ScratchFrame frame;
  C* rstds = frame.get<C>(0, static_cast<size_t>(l.rows));
  parallel_for(l.rows, nn::rows_grain(l.len, 3), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const C* xr = x + r * l.len;
      const C rstd = rms_rstd(xr, l.len, eps);
      rstds[r] = rstd;
      ConstArrayMap<C> xv(xr, l.len), gv(g + r * l.len, l.len);
      auto finish = [&](const auto& gw) {
        const C bq = (gw * xv).sum() * rstd / static_cast<C>(l.len);
        ArrayMap<C>(dx + r * l.len, l.len) = rstd * (gw - xv * (rstd * bq));
      };
      if (w)
        finish(gv * ConstArrayMap<C>(w, l.len));
      else
        finish(gv);
    }
  });
  nn::column_sums(
      l.rows, l.len, 1,
      [&](int64_t r, int64_t c0, int64_t c1, double* dw) {
        const C* gr = g + r * l.len;
        const C* xr = x + r * l.len;
        const C rstd = rstds[r];
        for (int64_t c = c0; c < c1; ++c) dw[c] += static_cast<double>(gr[c] * (xr[c] * rstd));
      },
      sums);
}

// torch.finfo(dtype).eps, the default eps of rms_norm.
double machine_epsilon(DType t) {
  switch (t) {
    case DType::Float64:
      return std::numeric_limits<double>::epsilon();
    case DType::BFloat16:
      return 0x1.0p-7;
    case DType::Float16:
      return 0x1.0p-10;
    default:
      return std::numeric_limits<float>::epsilon();
  }
}

double rms_eps(const Tensor& x, const Attrs& a) {
  return a.has("eps") ? a.f("eps") : machine_epsilon(x.dtype());
}

// ---- group_norm -------------------------------------------------------------------------
// x is (N, C, S...): group (n, g) holds channels [g*C/G, (g+1)*C/G) of sample
// n, one contiguous run of C/G * S values.

struct GroupLayout {
  int64_t n = 0, channels = 0, groups = 0, spatial = 1;
  int64_t per_group() const { return channels / groups; }
  int64_t group_len() const { return per_group() * spatial; }
};

GroupLayout group_layout(const Tensor& x, int64_t groups, const char* op) {
  SAMBA_CHECK(x.dim() >= 2, Status::ShapeMismatch, "{}: x must be (N, C, ...), got shape {}", op,
              dims_str(x.shape()));
  GroupLayout l{x.shape()[0], x.shape()[1], groups, 1};
  for (int64_t d = 2; d < x.dim(); ++d) l.spatial *= x.shape()[d];
  SAMBA_CHECK(groups > 0 && l.channels % groups == 0, Status::InvalidArgument,
              "{}: num_groups {} must be positive and divide the {} channels of x (shape {})", op,
              groups, l.channels, dims_str(x.shape()));
  return l;
}

template <typename C>
void group_norm_forward(const C* x, const C* w, const C* b, C* y, GroupLayout l, double eps) {
  const int64_t glen = l.group_len(), cg = l.per_group(), s = l.spatial;
  parallel_for(l.n * l.groups, nn::rows_grain(glen, 2), [&](int64_t g0, int64_t g1) {
    for (int64_t grp = g0; grp < g1; ++grp) {
      const C* xg = x + grp * glen;
      const nn::Moments mo = nn::row_moments(xg, glen);
      const double rstd = 1.0 / std::sqrt(mo.biased_var() + eps);
      const int64_t c_first = (grp % l.groups) * cg;
      for (int64_t k = 0; k < cg; ++k) {
        const int64_t c = c_first + k;
        const double scale = rstd * (w ? static_cast<double>(w[c]) : 1.0);
        const double shift = (b ? static_cast<double>(b[c]) : 0.0) - mo.mean * scale;
        ArrayMap<C>(y + grp * glen + k * s, s) =
            ConstArrayMap<C>(xg + k * s, s) * static_cast<C>(scale) + static_cast<C>(shift);
      }
    }
  });
}

// Per channel c of a group: sg = sum g, sgx = sum g * (x - mean). With
// A = sum(gw) / M and B = sum(gw * xhat) / M over the group's M values,
// dx = rstd * (g * w_c - A - xhat * B), linear in g and x per channel.
// dw_c = sum over samples of rstd * sgx, db_c = sum of sg.
template <typename C>
void group_norm_backward(const C* g, const C* x, const C* w, C* dx, GroupLayout l, double eps,
                         double* sums) {
  const int64_t glen = l.group_len(), cg = l.per_group(), s = l.spatial, nc = l.n * l.channels;
  std::vector<double> dw_nc(nc), db_nc(nc);  // per (sample, channel), summed over samples after
  parallel_for(l.n * l.groups, nn::rows_grain(glen, 4), [&](int64_t g0, int64_t g1) {
    std::vector<double> sg(cg), sgx(cg);
    for (int64_t grp = g0; grp < g1; ++grp) {
      const C* xg = x + grp * glen;
      const C* gg = g + grp * glen;
      const nn::Moments mo = nn::row_moments(xg, glen);
      const double mean = mo.mean, rstd = 1.0 / std::sqrt(mo.biased_var() + eps);
      const int64_t c_first = (grp % l.groups) * cg;
      double sum_gw = 0, sum_gwx = 0;
      for (int64_t k = 0; k < cg; ++k) {
        ConstArrayMap<C> gv(gg + k * s, s), xv(xg + k * s, s);
        sg[k] = static_cast<double>(gv.sum());
        sgx[k] = static_cast<double>((gv * (xv - static_cast<C>(mean))).sum());
        const double wc = w ? static_cast<double>(w[c_first + k]) : 1.0;
        sum_gw += wc * sg[k];
        sum_gwx += wc * sgx[k];
        const int64_t at = (grp / l.groups) * l.channels + c_first + k;
        dw_nc[at] = rstd * sgx[k];
        db_nc[at] = sg[k];
      }
      const double inv_m = 1.0 / static_cast<double>(glen);
      const double a = sum_gw * inv_m, bq = sum_gwx * rstd * inv_m;
      const double beta = -rstd * rstd * bq;
      const double gamma = -rstd * a + mean * rstd * rstd * bq;
      for (int64_t k = 0; k < cg; ++k) {
        const double alpha = rstd * (w ? static_cast<double>(w[c_first + k]) : 1.0);
        ArrayMap<C>(dx + grp * glen + k * s, s) =
            ConstArrayMap<C>(gg + k * s, s) * static_cast<C>(alpha) +
            ConstArrayMap<C>(xg + k * s, s) * static_cast<C>(beta) + static_cast<C>(gamma);
      }
    }
  });
  std::fill_n(sums, 2 * l.channels, 0.0);
  for (int64_t n = 0; n < l.n; ++n)
    for (int64_t c = 0; c < l.channels; ++c) {
      sums[c] += dw_nc[n * l.channels + c];
      sums[l.channels + c] += db_nc[n * l.channels + c];
    }
}

// ---- shared schema glue -------------------------------------------------------------------

// Checks x, weight, bias of a norm whose parameters have shape `param_shape`.
void check_norm_inputs(std::span<const Tensor> in, const Dims& param_shape, const char* op,
                       bool has_bias = true) {
  nn::require_floating(in[0], op, "x");
  nn::check_param(in.size() > 1 ? in[1] : Tensor(), param_shape, op, "weight");
  if (has_bias) nn::check_param(in.size() > 2 ? in[2] : Tensor(), param_shape, op, "bias");
}

void check_grad_input(const Tensor& g, const Tensor& x, const char* op) {
  nn::require_floating(g, op, "grad");
  SAMBA_CHECK(g.shape() == x.shape(), Status::ShapeMismatch,
              "{}: grad has shape {} but x has shape {}", op, dims_str(g.shape()),
              dims_str(x.shape()));
}

Tensor input_or_none(std::span<const Tensor> in, size_t i) {
  return in.size() > i ? in[i] : Tensor();
}

Dims group_param_shape(const Tensor& x) { return {x.dim() >= 2 ? x.shape()[1] : 0}; }

// Runs a norm kernel with x, weight, bias converted to the compute dtype.
template <typename F>
void run_norm(KernelContext& c, size_t n_params, F&& body) {
  const Tensor& x0 = c.inputs[0];
  const DType cdt = nn::compute_dtype(x0.dtype());
  Tensor x = nn::compute_input(x0, cdt);
  Tensor w = nn::compute_input(input_or_none(c.inputs, 1), cdt);
  Tensor b = n_params > 1 ? nn::compute_input(input_or_none(c.inputs, 2), cdt) : Tensor();
  nn::ComputeOutput y(c.outputs[0], cdt);
  nn::with_compute_type(cdt, [&]<typename C>() {
    body.template operator()<C>(x.data<C>(), data_or_null<C>(w), data_or_null<C>(b), y.data<C>());
  });
  y.commit();
}

// Runs a backward kernel (grad, x, weight?) -> (dx, per-feature sums...).
template <typename F>
void run_norm_backward(KernelContext& c, int64_t features, F&& body) {
  const DType cdt = nn::compute_dtype(c.outputs[0].dtype());
  Tensor g = nn::compute_input(c.inputs[0], cdt), x = nn::compute_input(c.inputs[1], cdt);
  Tensor w = nn::compute_input(input_or_none(c.inputs, 2), cdt);
  nn::ComputeOutput dx(c.outputs[0], cdt);
  // The bodies' per-feature sums: at most two (weight and bias) per feature.
  ScratchFrame frame;
  double* sums = frame.get<double>(0, static_cast<size_t>(2 * features));
  nn::with_compute_type(cdt, [&]<typename C>() {
    body.template operator()<C>(g.data<C>(), x.data<C>(), data_or_null<C>(w), dx.data<C>(), sums);
    dx.commit();
    for (size_t k = 1; k < c.outputs.size(); ++k)
      write_sums<C>(sums, static_cast<int64_t>(k - 1), features,
                    nn::ComputeOutput(c.outputs[k], cdt));
  });
}

const std::vector<int64_t>& normalized_shape(const Attrs& a) { return a.ints("normalized_shape"); }

// layer_norm_backward and rms_norm_backward: inputs (grad, x, weight), outputs
// dx and `n_param_grads` gradients shaped normalized_shape.
std::vector<TensorMeta> trailing_norm_backward_metas(const InferContext& c, size_t n_param_grads,
                                                     const char* op) {
  const auto& ns = normalized_shape(c.attrs);
  check_norm_inputs(c.inputs.subspan(1), Dims(ns), op, false);
  check_grad_input(c.inputs[0], c.inputs[1], op);
  trailing_layout(c.inputs[1], ns, op);
  std::vector<TensorMeta> metas{meta_of(c.inputs[1])};
  metas.resize(1 + n_param_grads, TensorMeta{c.inputs[1].dtype(), Dims(ns)});
  return metas;
}

// Their kernels: the same rows, layer_norm's or rms_norm's backward per row.
template <bool kRms>
void trailing_norm_backward_kernel(KernelContext& c, const char* op) {
  const RowLayout l = trailing_layout(c.inputs[1], normalized_shape(c.attrs), op);
  const double eps = c.attrs.f("eps");
  run_norm_backward(
      c, l.len,
      [&]<typename C>(const C* g, const C* x, const C* w, C* dx, double* sums) {
        if constexpr (kRms)
          rms_norm_backward(g, x, w, dx, l, eps, sums);
        else
          layer_norm_backward(g, x, w, dx, l, eps, sums);
      });
}

// layer_norm as ops::RowsWork, for float32 operands as they lie (a weight or
// bias of another dtype would need converting first: not taken). The rows
// and the order of their sums are those of the kernel above, so results are
// the same bit for bit.
bool layer_norm_rows_work(const KernelContext& c, RowsWork& w) {
  const Tensor& x = c.inputs[0];
  const Tensor& y = c.outputs[0];
  const auto& ns = normalized_shape(c.attrs);
  auto plain = [](const Tensor& t) {
    return !t.defined() || (t.dtype() == DType::Float32 && t.is_contiguous());
  };
  const Tensor& weight = input_or_none(c.inputs, 1);
  const Tensor& bias = input_or_none(c.inputs, 2);
  if (ns.size() != 1 || x.dim() < 1 || x.shape().back() != ns[0] || x.dtype() != DType::Float32 ||
      !x.is_contiguous() || y.dtype() != DType::Float32 || !y.is_contiguous() || !plain(weight) ||
      !plain(bias) || y.numel() != x.numel())
    return false;
  const RowLayout l = trailing_layout(x, ns, "layer_norm");
  w.fn = [](const RowsWork& rw, int64_t row0, int64_t rows) {
    layer_norm_rows(rw.x, rw.weight, rw.bias, rw.y, rw.len, rw.eps, rw.tail, row0, row0 + rows);
  };
  w.x = x.data<float>();
  w.y = y.data<float>();
  w.weight = weight.defined() ? weight.data<float>() : nullptr;
  w.bias = bias.defined() ? bias.data<float>() : nullptr;
  w.rows = l.rows;
  w.len = l.len;
  w.eps = c.attrs.f("eps");
  w.tail = c.tail;
  w.applied = false;
  return true;
}

}  // namespace

void register_normalization(OpRegistry& r) {
  r.def("layer_norm")
      .doc(
          "Normalizes over the trailing normalized_shape dims (biased variance), then scales by "
          "weight and shifts by bias when given.")
      .input("x")
      .optional_input("weight", "shape normalized_shape")
      .optional_input("bias", "shape normalized_shape")
      .required_attr("normalized_shape", AttrType::Ints, "the trailing dims normalized over")
      .attr("eps", AttrType::Float, 1e-5, "added to the variance")
      .fusion(Fusion::Opaque)
      .rows_work(layer_norm_rows_work)
      .infer([](const InferContext& c) -> std::vector<TensorMeta> {
        const auto& ns = normalized_shape(c.attrs);
        check_norm_inputs(c.inputs, Dims(ns), "layer_norm");
        trailing_layout(c.inputs[0], ns, "layer_norm");
        return {meta_of(c.inputs[0])};
      })
      .kernel([](KernelContext& c) {
        const RowLayout l = trailing_layout(c.inputs[0], normalized_shape(c.attrs), "layer_norm");
        run_norm(c, 2, [&]<typename C>(const C* x, const C* w, const C* b, C* y) {
          // A fused chain runs on each row of the output itself, not of a
          // wider copy.
          OutputTail* tail =
              c.tail && static_cast<void*>(y) == c.outputs[0].raw_data() ? c.tail : nullptr;
          if constexpr (!std::is_same_v<C, float>) tail = nullptr;
          if (tail) tail->applied = true;
          layer_norm_forward(x, w, b, y, l, c.attrs.f("eps"), tail);
        });
      })
      .grad([](const GradContext& c) -> std::vector<Tensor> {
        auto d = call("layer_norm_backward",
                      {c.grad_outputs[0], c.inputs[0], input_or_none(c.inputs, 1)},
                      {{"normalized_shape", normalized_shape(c.attrs)}, {"eps", c.attrs.f("eps")}});
        return {nn::undefined_if_not(c.needs_grad(0), d[0]),
                nn::undefined_if_not(c.needs_grad(1), d[1]),
                nn::undefined_if_not(c.needs_grad(2), d[2])};
      });

  r.def("layer_norm_backward")
      .doc(
          "Gradients of layer_norm: (dx, dweight, dbias); dweight and dbias have shape "
          "normalized_shape and are computed whether or not the forward op had them.")
      .input("grad")
      .input("x")
      .optional_input("weight")
      .output("dx")
      .output("dweight")
      .output("dbias")
      .required_attr("normalized_shape", AttrType::Ints)
      .attr("eps", AttrType::Float, 1e-5)
      .fusion(Fusion::Opaque)
      .infer([](const InferContext& c) {
        return trailing_norm_backward_metas(c, 2, "layer_norm_backward");
      })
      .kernel([](KernelContext& c) { trailing_norm_backward_kernel<false>(c, "layer_norm_backward"); });

  r.def("rms_norm")
      .doc(
          "x / sqrt(mean(x^2) + eps) over the trailing normalized_shape dims, times weight when "
          "given. eps defaults to the machine epsilon of x's dtype.")
      .input("x")
      .optional_input("weight", "shape normalized_shape")
      .required_attr("normalized_shape", AttrType::Ints, "the trailing dims normalized over")
      .optional_attr("eps", AttrType::Float, "added to the mean square; default finfo(x.dtype).eps")
      .fusion(Fusion::Opaque)
      .infer([](const InferContext& c) -> std::vector<TensorMeta> {
        const auto& ns = normalized_shape(c.attrs);
        check_norm_inputs(c.inputs, Dims(ns), "rms_norm", false);
        trailing_layout(c.inputs[0], ns, "rms_norm");
        return {meta_of(c.inputs[0])};
      })
      .kernel([](KernelContext& c) {
        const RowLayout l = trailing_layout(c.inputs[0], normalized_shape(c.attrs), "rms_norm");
        const double eps = rms_eps(c.inputs[0], c.attrs);
        run_norm(c, 1, [&]<typename C>(const C* x, const C* w, const C*, C* y) {
          rms_norm_forward(x, w, y, l, eps);
        });
      })
      .grad([](const GradContext& c) -> std::vector<Tensor> {
        auto d =
            call("rms_norm_backward", {c.grad_outputs[0], c.inputs[0], input_or_none(c.inputs, 1)},
                 {{"normalized_shape", normalized_shape(c.attrs)},
                  {"eps", rms_eps(c.inputs[0], c.attrs)}});
        return {nn::undefined_if_not(c.needs_grad(0), d[0]),
                nn::undefined_if_not(c.needs_grad(1), d[1])};
      });

  r.def("rms_norm_backward")
      .doc("Gradients of rms_norm: (dx, dweight); dweight has shape normalized_shape.")
      .input("grad")
      .input("x")
      .optional_input("weight")
      .output("dx")
      .output("dweight")
      .required_attr("normalized_shape", AttrType::Ints)
      .required_attr("eps", AttrType::Float, "the eps the forward op used")
      .fusion(Fusion::Opaque)
      .infer([](const InferContext& c) {
        return trailing_norm_backward_metas(c, 1, "rms_norm_backward");
      })
      .kernel([](KernelContext& c) { trailing_norm_backward_kernel<true>(c, "rms_norm_backward"); });

  r.def("group_norm")
      .doc(
          "Splits the C channels of x (N, C, ...) into num_groups groups, normalizes each group "
          "of each sample, then scales and shifts per channel by weight and bias (shape C).")
      .input("x")
      .optional_input("weight", "shape (C)")
      .optional_input("bias", "shape (C)")
      .required_attr("num_groups", AttrType::Int, "groups the C channels are split into")
      .attr("eps", AttrType::Float, 1e-5, "added to the variance")
      .fusion(Fusion::Opaque)
      .infer([](const InferContext& c) -> std::vector<TensorMeta> {
        group_layout(c.inputs[0], c.attrs.i("num_groups"), "group_norm");
        check_norm_inputs(c.inputs, group_param_shape(c.inputs[0]), "group_norm");
        return {meta_of(c.inputs[0])};
      })
      .kernel([](KernelContext& c) {
        const GroupLayout l = group_layout(c.inputs[0], c.attrs.i("num_groups"), "group_norm");
        run_norm(c, 2, [&]<typename C>(const C* x, const C* w, const C* b, C* y) {
          group_norm_forward(x, w, b, y, l, c.attrs.f("eps"));
        });
      })
      .grad([](const GradContext& c) -> std::vector<Tensor> {
        auto d = call("group_norm_backward",
                      {c.grad_outputs[0], c.inputs[0], input_or_none(c.inputs, 1)},
                      {{"num_groups", c.attrs.i("num_groups")}, {"eps", c.attrs.f("eps")}});
        return {nn::undefined_if_not(c.needs_grad(0), d[0]),
                nn::undefined_if_not(c.needs_grad(1), d[1]),
                nn::undefined_if_not(c.needs_grad(2), d[2])};
      });

  r.def("group_norm_backward")
      .doc("Gradients of group_norm: (dx, dweight, dbias); dweight and dbias have shape (C).")
      .input("grad")
      .input("x")
      .optional_input("weight")
      .output("dx")
      .output("dweight")
      .output("dbias")
      .required_attr("num_groups", AttrType::Int)
      .attr("eps", AttrType::Float, 1e-5)
      .fusion(Fusion::Opaque)
      .infer([](const InferContext& c) -> std::vector<TensorMeta> {
        const char* op = "group_norm_backward";
        group_layout(c.inputs[1], c.attrs.i("num_groups"), op);
        const Dims ps = group_param_shape(c.inputs[1]);
        check_norm_inputs(c.inputs.subspan(1), ps, op, false);
        check_grad_input(c.inputs[0], c.inputs[1], op);
        const DType dt = c.inputs[1].dtype();
        return {meta_of(c.inputs[1]), {dt, ps}, {dt, ps}};
      })
      .kernel([](KernelContext& c) {
        const GroupLayout l =
            group_layout(c.inputs[1], c.attrs.i("num_groups"), "group_norm_backward");
        run_norm_backward(
            c, l.channels,
            [&]<typename C>(const C* g, const C* x, const C* w, C* dx, double* sums) {
              group_norm_backward(g, x, w, dx, l, c.attrs.f("eps"), sums);
            });
      });
}

}  // namespace samba::ops
