// batch_norm over (N, C, ...) with per-channel statistics, the in-place
// update of the running statistics (and of the batch counter) in training
// mode, and its fused backward.
//
// Channel c's values are N runs of S contiguous values (S = the product of
// the spatial dims) at a stride of C * S. With long runs each (n, c) run is
// reduced on its own and runs are merged in n order; with short runs (S of
// 1 in BatchNorm1d) the reduction goes down the N rows of C * S columns so it
// vectorizes across channels. Either way the summation order depends only on
// the shape, so the results do not depend on the thread count.
#include <cmath>

#include "engine/kernels/row_stats.h"
#include "engine/ops/operands.h"

namespace samba::ops {
namespace {

using nn::ArrayMap;
using nn::ConstArrayMap;

constexpr int64_t kLongRun = 32;  // runs at least this long are reduced one by one

struct ChannelLayout {
  int64_t n = 0, channels = 0, spatial = 1;
  int64_t per_channel() const { return n * spatial; }
  int64_t rows() const { return n * channels; }  // (n, c) runs
};

ChannelLayout channel_layout(const Tensor& x, const char* op) {
  SAMBA_CHECK(x.dim() >= 2, Status::ShapeMismatch, "{}: x must be (N, C, ...), got shape {}", op,
              dims_str(x.shape()));
  ChannelLayout l{x.shape()[0], x.shape()[1], 1};
  for (int64_t d = 2; d < x.dim(); ++d) l.spatial *= x.shape()[d];
  return l;
}

// Per-channel mean and biased variance of x.
template <typename C>
std::vector<nn::Moments> channel_moments(const C* x, ChannelLayout l) {
  std::vector<nn::Moments> out(l.channels);
  const int64_t s = l.spatial;
  if (s >= kLongRun) {
    std::vector<nn::Moments> runs(l.rows());
    parallel_for(l.rows(), nn::rows_grain(s, 2), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) runs[r] = nn::row_moments(x + r * s, s);
    });
    for (int64_t n = 0; n < l.n; ++n)
      for (int64_t c = 0; c < l.channels; ++c) out[c].merge(runs[n * l.channels + c]);
    return out;
  }
  // Two sweeps down the rows (column sums, then squared deviations from the
  // column means), then the S columns of each channel are merged.
  const int64_t cols = l.channels * s;
  std::vector<double> sum(cols), m2(cols);
  nn::column_sums(
      l.n, cols, 1,
      [&](int64_t r, int64_t c0, int64_t c1, double* acc) {
        const C* xr = x + r * cols;
        for (int64_t c = c0; c < c1; ++c) acc[c] += static_cast<double>(xr[c]);
      },
      sum.data());
  const double inv_n = 1.0 / static_cast<double>(l.n);
  std::vector<C> col_mean(cols);
  for (int64_t c = 0; c < cols; ++c) col_mean[c] = static_cast<C>(sum[c] * inv_n);
  nn::column_sums(
      l.n, cols, 1,
      [&](int64_t r, int64_t c0, int64_t c1, double* acc) {
        const C* xr = x + r * cols;
        for (int64_t c = c0; c < c1; ++c) {
          const C d = xr[c] - col_mean[c];
          acc[c] += static_cast<double>(d * d);
        }
      },
      m2.data());
  for (int64_t c = 0; c < cols; ++c)
    out[c / s].merge({static_cast<double>(l.n), static_cast<double>(col_mean[c]), m2[c]});
  return out;
}

// Per-channel sums of g and of g * (x - mean_c): what every gradient needs.
template <typename C>
void channel_grad_sums(const C* g, const C* x, const std::vector<double>& mean, ChannelLayout l,
                       std::vector<double>& sum_g, std::vector<double>& sum_gx) {
  sum_g.assign(l.channels, 0.0);
  sum_gx.assign(l.channels, 0.0);
  const int64_t s = l.spatial;
  if (s >= kLongRun) {
    std::vector<double> runs(2 * l.rows());
    parallel_for(l.rows(), nn::rows_grain(s, 2), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        ConstArrayMap<C> gv(g + r * s, s), xv(x + r * s, s);
        runs[2 * r] = static_cast<double>(gv.sum());
        runs[2 * r + 1] =
            static_cast<double>((gv * (xv - static_cast<C>(mean[r % l.channels]))).sum());
      }
    });
    for (int64_t r = 0; r < l.rows(); ++r) {
      sum_g[r % l.channels] += runs[2 * r];
      sum_gx[r % l.channels] += runs[2 * r + 1];
    }
    return;
  }
  const int64_t cols = l.channels * s;
  std::vector<C> col_mean(cols);
  for (int64_t c = 0; c < cols; ++c) col_mean[c] = static_cast<C>(mean[c / s]);
  std::vector<double> sums(static_cast<size_t>(2 * cols));
  nn::column_sums(
      l.n, cols, 2,
      [&](int64_t r, int64_t c0, int64_t c1, double* acc) {
        const C* gr = g + r * cols;
        const C* xr = x + r * cols;
        for (int64_t c = c0; c < c1; ++c) {
          acc[c] += static_cast<double>(gr[c]);
          acc[cols + c] += static_cast<double>(gr[c] * (xr[c] - col_mean[c]));
        }
      },
      sums.data());
  for (int64_t c = 0; c < cols; ++c) {
    sum_g[c / s] += sums[c];
    sum_gx[c / s] += sums[cols + c];
  }
}

// out[(n, c) run] = in * a[c] + b[c] (+ g * ga[c] when g is given).
template <typename C>
void channel_affine(const C* in, const C* g, C* out, const std::vector<double>& a,
                    const std::vector<double>& ga, const std::vector<double>& b, ChannelLayout l) {
  const int64_t s = l.spatial;
  if (s < kLongRun) {
    // Short runs: per-column factors over rows of C * S values.
    const int64_t cols = l.channels * s;
    std::vector<C> ac(cols), bc(cols), gc(g ? cols : 0);
    for (int64_t k = 0; k < cols; ++k) {
      ac[k] = static_cast<C>(a[k / s]);
      bc[k] = static_cast<C>(b[k / s]);
      if (g) gc[k] = static_cast<C>(ga[k / s]);
    }
    parallel_for(l.n, nn::rows_grain(cols, 2), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const C* xr = in + r * cols;
        C* o = out + r * cols;
        if (g) {
          const C* gr = g + r * cols;
          for (int64_t k = 0; k < cols; ++k) o[k] = xr[k] * ac[k] + bc[k] + gr[k] * gc[k];
        } else {
          for (int64_t k = 0; k < cols; ++k) o[k] = xr[k] * ac[k] + bc[k];
        }
      }
    });
    return;
  }
  parallel_for(l.rows(), nn::rows_grain(s, 2), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t c = r % l.channels;
      ArrayMap<C> o(out + r * s, s);
      o = ConstArrayMap<C>(in + r * s, s) * static_cast<C>(a[c]) + static_cast<C>(b[c]);
      if (g) o += ConstArrayMap<C>(g + r * s, s) * static_cast<C>(ga[c]);
    }
  });
}

// The per-channel statistics a forward or backward step normalizes with:
// the batch's in training, the running ones in evaluation.
struct ChannelStats {
  std::vector<double> mean, rstd;
};

std::vector<double> as_doubles(const Tensor& t) {
  Tensor d = t.to(DType::Float64);
  return std::vector<double>(d.data<double>(), d.data<double>() + d.numel());
}

ChannelStats running_stats(const Tensor& running_mean, const Tensor& running_var, double eps) {
  ChannelStats st{as_doubles(running_mean), as_doubles(running_var)};
  for (double& v : st.rstd) v = 1.0 / std::sqrt(v + eps);
  return st;
}

template <typename C>
ChannelStats batch_stats(const C* x, ChannelLayout l, double eps, std::vector<double>* var) {
  std::vector<nn::Moments> mo = channel_moments(x, l);
  ChannelStats st;
  for (const auto& m : mo) {
    st.mean.push_back(m.mean);
    st.rstd.push_back(1.0 / std::sqrt(m.biased_var() + eps));
    if (var) var->push_back(m.biased_var());
  }
  return st;
}

// running = (1 - momentum) * running + momentum * batch, in the stored dtype
// and layout of `running` (it may be strided or of another float dtype).
void update_running(const Tensor& running, const std::vector<double>& batch, double momentum) {
  std::vector<double> cur = as_doubles(running);
  Tensor next = Tensor::empty(running.shape(), DType::Float64);
  for (size_t c = 0; c < cur.size(); ++c)
    next.data<double>()[c] = (1 - momentum) * cur[c] + momentum * batch[c];
  running.copy_from(next);
}

// Counts one more batch in `counter` (when given) and returns the weight of
// this batch's statistics in the running ones: `momentum`, or 1 / batches
// for a cumulative average (torch's momentum=None).
double batch_weight(const Tensor& counter, double momentum, bool cumulative) {
  if (!counter.defined()) return momentum;
  const double batches = as_doubles(counter)[0] + 1;
  counter.copy_from(Tensor::scalar(batches, DType::Float64));
  return cumulative ? 1.0 / batches : momentum;
}

void check_inputs(std::span<const Tensor> in, bool training, const char* op, size_t first_param) {
  const Tensor& x = in[first_param - 1];
  nn::require_floating(x, op, "x");
  const ChannelLayout l = channel_layout(x, op);
  const Dims ps{l.channels};
  static const char* kNames[] = {"weight", "bias", "running_mean", "running_var"};
  const bool backward = first_param == 2;  // backward ops have no bias input
  constexpr size_t kCounter = 5;  // num_batches_tracked, batch_norm's last input
  for (size_t i = first_param, k = 0; i < std::min(in.size(), kCounter); ++i, ++k) {
    const char* name = kNames[backward && k >= 1 ? k + 1 : k];
    nn::check_param(in[i], ps, op, name);
  }
  const size_t rm = first_param + (backward ? 1 : 2);
  const bool have_running = in.size() > rm + 1 && in[rm].defined() && in[rm + 1].defined();
  const bool any_running =
      (in.size() > rm && in[rm].defined()) || (in.size() > rm + 1 && in[rm + 1].defined());
  SAMBA_CHECK(have_running || !any_running, Status::InvalidArgument,
              "{}: running_mean and running_var must be given together", op);
  SAMBA_CHECK(training || have_running, Status::InvalidArgument,
              "{}: evaluation mode (training=false) needs running_mean and running_var", op);
  SAMBA_CHECK(!training || backward || l.per_channel() > 1 || x.numel() == 0,
              Status::InvalidArgument,
              "{}: training needs more than one value per channel, got x of shape {}", op,
              dims_str(x.shape()));
  if (backward) return;
  const Tensor counter = in.size() > kCounter ? in[kCounter] : Tensor();
  SAMBA_CHECK(!counter.defined() || (!is_floating(counter.dtype()) &&
                                     counter.dtype() != DType::Bool && counter.numel() == 1),
              Status::InvalidArgument,
              "{}: num_batches_tracked must be one integer (an int64 scalar), got {} of shape {}",
              op, dtype_name(counter.dtype()), dims_str(counter.shape()));
  SAMBA_CHECK(!counter.defined() || have_running, Status::InvalidArgument,
              "{}: num_batches_tracked counts updates of the running statistics; give "
              "running_mean and running_var with it",
              op);
}

Tensor input_or_none(std::span<const Tensor> in, size_t i) {
  return in.size() > i ? in[i] : Tensor();
}

void batch_norm_kernel(KernelContext& c) {
  const Tensor& x0 = c.inputs[0];
  const ChannelLayout l = channel_layout(x0, "batch_norm");
  const double eps = c.attrs.f("eps"), momentum = c.attrs.f("momentum");
  const Tensor running_mean = input_or_none(c.inputs, 3), running_var = input_or_none(c.inputs, 4);
  // Without running statistics evaluation normalizes with the batch's, as torch's
  // eval() of BatchNorm(track_running_stats=False) does.
  const bool training = c.attrs.b("training") || !running_mean.defined();
  const Tensor counter = input_or_none(c.inputs, 5);
  const DType cdt = nn::compute_dtype(x0.dtype());
  Tensor x = nn::compute_input(x0, cdt);
  std::vector<double> w = c.inputs.size() > 1 && c.inputs[1].defined()
                              ? as_doubles(c.inputs[1])
                              : std::vector<double>(l.channels, 1.0);
  std::vector<double> b = c.inputs.size() > 2 && c.inputs[2].defined()
                              ? as_doubles(c.inputs[2])
                              : std::vector<double>(l.channels, 0.0);
  nn::ComputeOutput y(c.outputs[0], cdt);
  nn::with_compute_type(cdt, [&]<typename C>() {
    std::vector<double> var;
    ChannelStats st = training ? batch_stats(x.data<C>(), l, eps, &var)
                               : running_stats(running_mean, running_var, eps);
    std::vector<double> a(l.channels), shift(l.channels);
    for (int64_t ch = 0; ch < l.channels; ++ch) {
      a[ch] = w[ch] * st.rstd[ch];
      shift[ch] = b[ch] - st.mean[ch] * a[ch];
    }
    channel_affine<C>(x.data<C>(), nullptr, y.data<C>(), a, {}, shift, l);
    if (training && running_mean.defined() && l.per_channel() > 1) {
      const double unbias =
          static_cast<double>(l.per_channel()) / static_cast<double>(l.per_channel() - 1);
      for (double& v : var) v *= unbias;
      const double weight = batch_weight(counter, momentum, c.attrs.b("cumulative_average"));
      update_running(running_mean, st.mean, weight);
      update_running(running_var, var, weight);
    }
  });
  y.commit();
}

// Training: dx = w * rstd * (g - mean(g) - xhat * mean(g * xhat)).
// Evaluation: the statistics are constants, dx = g * w * rstd.
// Both: dweight = sum(g * xhat), dbias = sum(g).
void batch_norm_backward_kernel(KernelContext& c) {
  const Tensor& x0 = c.inputs[1];
  const ChannelLayout l = channel_layout(x0, "batch_norm_backward");
  const bool training = c.attrs.b("training");
  const double eps = c.attrs.f("eps");
  const DType cdt = nn::compute_dtype(x0.dtype());
  Tensor g = nn::compute_input(c.inputs[0], cdt), x = nn::compute_input(x0, cdt);
  std::vector<double> w = c.inputs.size() > 2 && c.inputs[2].defined()
                              ? as_doubles(c.inputs[2])
                              : std::vector<double>(l.channels, 1.0);
  nn::ComputeOutput dx(c.outputs[0], cdt), dw(c.outputs[1], cdt), db(c.outputs[2], cdt);
  nn::with_compute_type(cdt, [&]<typename C>() {
    ChannelStats st =
        training ? batch_stats(x.data<C>(), l, eps, nullptr)
                 : running_stats(input_or_none(c.inputs, 3), input_or_none(c.inputs, 4), eps);
    std::vector<double> sum_g, sum_gx;
    channel_grad_sums(g.data<C>(), x.data<C>(), st.mean, l, sum_g, sum_gx);
    std::vector<double> alpha(l.channels), beta(l.channels, 0.0), gamma(l.channels, 0.0);
    const double inv_m = 1.0 / static_cast<double>(std::max<int64_t>(l.per_channel(), 1));
    for (int64_t ch = 0; ch < l.channels; ++ch) {
      const double rstd = st.rstd[ch];
      alpha[ch] = w[ch] * rstd;
      if (training) {
        const double a = sum_g[ch] * inv_m, bq = sum_gx[ch] * rstd * inv_m;
        beta[ch] = -alpha[ch] * rstd * bq;
        gamma[ch] = -alpha[ch] * a + st.mean[ch] * alpha[ch] * rstd * bq;
      }
      dw.data<C>()[ch] = static_cast<C>(sum_gx[ch] * rstd);
      db.data<C>()[ch] = static_cast<C>(sum_g[ch]);
    }
    channel_affine<C>(x.data<C>(), g.data<C>(), dx.data<C>(), beta, alpha, gamma, l);
  });
  dx.commit();
  dw.commit();
  db.commit();
}

}  // namespace

void register_batch_norm(OpRegistry& r) {
  r.def("batch_norm")
      .doc(
          "Normalizes x (N, C, ...) per channel: with the batch's statistics in training (and then "
          "updates running_mean / running_var in place when given, running_var with the unbiased "
          "batch variance, and counts the batch in num_batches_tracked), with the running "
          "statistics in evaluation.")
      .input("x")
      .optional_input("weight", "shape (C)")
      .optional_input("bias", "shape (C)")
      .mutated_input("running_mean", "shape (C); updated in place in training")
      .mutated_input("running_var", "shape (C); updated in place in training")
      .mutated_input("num_batches_tracked",
                     "integer scalar counting the running updates; incremented in training")
      .attr("training", AttrType::Bool, true,
            "normalize with batch statistics and update the running ones")
      .attr("momentum", AttrType::Float, 0.1,
            "weight of the batch statistics in the running update")
      .attr("cumulative_average", AttrType::Bool, false,
            "torch's momentum=None: weight the batch statistics by 1 / num_batches_tracked "
            "(after its increment), so the running statistics average every batch")
      .attr("eps", AttrType::Float, 1e-5, "added to the variance")
      // run(train=False) normalizes with the running statistics, as torch's eval().
      .attr_role("training", AttrRole::Training)
      .fusion(Fusion::Opaque)
      .strided_inputs()  // the running statistics are updated where they are
      .infer([](const InferContext& c) -> std::vector<TensorMeta> {
        check_inputs(c.inputs, c.attrs.b("training"), "batch_norm", 1);
        return {meta_of(c.inputs[0])};
      })
      .kernel(batch_norm_kernel)
      .grad([](const GradContext& c) -> std::vector<Tensor> {
        const bool training = c.attrs.b("training");
        auto d = call("batch_norm_backward",
                      {c.grad_outputs[0], c.inputs[0], input_or_none(c.inputs, 1),
                       training ? Tensor() : input_or_none(c.inputs, 3),
                       training ? Tensor() : input_or_none(c.inputs, 4)},
                      {{"training", training}, {"eps", c.attrs.f("eps")}});
        return {nn::undefined_if_not(c.needs_grad(0), d[0]),
                nn::undefined_if_not(c.needs_grad(1), d[1]),
                nn::undefined_if_not(c.needs_grad(2), d[2]), Tensor(), Tensor(), Tensor()};
      });

  r.def("batch_norm_backward")
      .doc(
          "Gradients of batch_norm: (dx, dweight, dbias), dweight and dbias of shape (C). Training "
          "recomputes the batch statistics from x; evaluation uses running_mean / running_var.")
      .input("grad")
      .input("x")
      .optional_input("weight")
      .optional_input("running_mean", "needed when training is false")
      .optional_input("running_var", "needed when training is false")
      .output("dx")
      .output("dweight")
      .output("dbias")
      .attr("training", AttrType::Bool, true)
      .attr("eps", AttrType::Float, 1e-5)
      .fusion(Fusion::Opaque)
      .infer([](const InferContext& c) -> std::vector<TensorMeta> {
        const char* op = "batch_norm_backward";
        check_inputs(c.inputs, c.attrs.b("training"), op, 2);
        const Tensor &g = c.inputs[0], &x = c.inputs[1];
        nn::require_floating(g, op, "grad");
        SAMBA_CHECK(g.shape() == x.shape(), Status::ShapeMismatch,
                    "{}: grad has shape {} but x has shape {}", op, dims_str(g.shape()),
                    dims_str(x.shape()));
        const Dims ps{x.shape()[1]};
        return {meta_of(x), {x.dtype(), ps}, {x.dtype(), ps}};
      })
      .kernel(batch_norm_backward_kernel);
}

}  // namespace samba::ops
