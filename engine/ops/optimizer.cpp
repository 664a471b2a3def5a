// Optimizer updates, each one fused pass over a parameter and its state:
// sgd_update (torch.optim.SGD), adamw_update (torch.optim.AdamW) and
// clip_grad_norm (torch.nn.utils.clip_grad_norm_). They update their
// mutated inputs in place and are not differentiable. Reduced-precision
// parameters are updated in fp32 and rounded once; state tensors share the
// parameter's dtype; the step counter is a float32 scalar.
#include <Eigen/Core>
#include <algorithm>
#include <cmath>

#include "engine/ops/operands.h"

namespace samba::ops {
namespace {

// Elements per task: each element costs a handful of flops and touches a
// few streams of memory.
constexpr int64_t kGrain = 16384;

void check_like(const char* op, const char* what, const Tensor& t, const Tensor& param) {
  if (!t.defined()) return;
  SAMBA_CHECK(t.shape() == param.shape(), Status::ShapeMismatch, "{}: {} has shape {}; the parameter has shape {}",
              op, what, dims_str(t.shape()), dims_str(param.shape()));
  SAMBA_CHECK(t.dtype() == param.dtype(), Status::DTypeMismatch, "{}: {} has dtype {}; the parameter has dtype {}",
              op, what, dtype_name(t.dtype()), dtype_name(param.dtype()));
}

void check_step(const char* op, const Tensor& step) {
  if (!step.defined()) return;
  SAMBA_CHECK(step.numel() == 1 && step.dtype() == DType::Float32, Status::InvalidArgument,
              "{}: step must be a float32 tensor with one element, got {}{}", op, dtype_name(step.dtype()),
              dims_str(step.shape()));
}

// ---- SGD -----------------------------------------------------------------------

// The flags are hoisted out of the element loop (first step, maximize and
// dampening fold into coefficients; momentum and nesterov select one of three
// loops) so each loop is branch-free and vectorizes.
template <typename T, bool kMomentum, bool kNesterov>
void sgd_range(T* __restrict p, const T* __restrict g, T* __restrict b, int64_t s, int64_t e, acc_t<T> lr,
               acc_t<T> sign, acc_t<T> wd, acc_t<T> keep, acc_t<T> take, acc_t<T> momentum) {
  using A = acc_t<T>;
  for (int64_t i = s; i < e; ++i) {
    const A pi = static_cast<A>(p[i]);
    A d = sign * static_cast<A>(g[i]) + wd * pi;
    if constexpr (kMomentum) {
      const A m = keep * static_cast<A>(b[i]) + take * d;
      b[i] = convert_value<T>(m);
      d = kNesterov ? d + momentum * m : m;
    }
    p[i] = convert_value<T>(pi - lr * d);
  }
}

template <typename T, bool kMomentum, bool kNesterov>
void sgd_loop(T* p, const T* g, T* b, int64_t n, acc_t<T> lr, acc_t<T> sign, acc_t<T> wd, acc_t<T> keep,
              acc_t<T> take, acc_t<T> momentum) {
  parallel_for(n, kGrain, [=](int64_t s, int64_t e) {
    sgd_range<T, kMomentum, kNesterov>(p, g, b, s, e, lr, sign, wd, keep, take, momentum);
  });
}

template <typename T>
void sgd_kernel(const Tensor& param, const Tensor& grad, const Tensor& buf, bool first, const Attrs& a) {
  using A = acc_t<T>;
  const A lr = static_cast<A>(a.f("lr")), momentum = static_cast<A>(a.f("momentum"));
  const A wd = static_cast<A>(a.f("weight_decay"));
  const A sign = a.b("maximize") ? A(-1) : A(1);
  // buf = keep * buf + take * d: d itself on the first step.
  const A keep = first ? A(0) : momentum;
  const A take = first ? A(1) : static_cast<A>(1.0 - a.f("dampening"));
  T* p = param.data<T>();
  const T* g = grad.data<T>();
  const int64_t n = param.numel();
  if (!buf.defined())
    sgd_loop<T, false, false>(p, g, nullptr, n, lr, sign, wd, keep, take, momentum);
  else if (a.b("nesterov"))
    sgd_loop<T, true, true>(p, g, buf.data<T>(), n, lr, sign, wd, keep, take, momentum);
  else
    sgd_loop<T, true, false>(p, g, buf.data<T>(), n, lr, sign, wd, keep, take, momentum);
}

// ---- AdamW ------------------------------------------------------------------------

// The betas and their complements, each rounded once from double: 1 - 0.999
// computed in float32 is 1.3e-5 off, which moved every AdamW step by that much
// relative to torch.optim.AdamW (it computes 1 - beta2 in Python floats).
template <typename A>
struct AdamBetas {
  A b1, b2, one_minus_b1, one_minus_b2;
};

template <typename T, bool kAmsgrad>
void adamw_range(T* __restrict p, const T* __restrict g, T* __restrict m, T* __restrict v, T* __restrict vmax,
                 int64_t s, int64_t e, acc_t<T> sign, acc_t<T> decay, AdamBetas<acc_t<T>> betas,
                 acc_t<T> step_size, acc_t<T> bc2_sqrt, acc_t<T> eps) {
  using A = acc_t<T>;
  const auto [b1, b2, one_minus_b1, one_minus_b2] = betas;
  for (int64_t i = s; i < e; ++i) {
    const A gi = sign * static_cast<A>(g[i]);
    const A pi = static_cast<A>(p[i]) * decay;
    const A mi = b1 * static_cast<A>(m[i]) + one_minus_b1 * gi;
    const A vi = b2 * static_cast<A>(v[i]) + one_minus_b2 * gi * gi;
    m[i] = convert_value<T>(mi);
    v[i] = convert_value<T>(vi);
    A second = vi;
    if constexpr (kAmsgrad) {
      second = std::max(static_cast<A>(vmax[i]), vi);
      vmax[i] = convert_value<T>(second);
    }
    const A denom = std::sqrt(second) / bc2_sqrt + eps;
    p[i] = convert_value<T>(pi - step_size * mi / denom);
  }
}

// adamw_range's arithmetic, operation for operation, in Eigen's vector
// packets, for parameters stored in their accumulation type without amsgrad
// (the common case: GPT-2's 124M parameters take this path every step). GCC
// keeps the loop above scalar because std::sqrt must set errno on a negative
// input; scalar square roots and divisions made the update compute-bound.
// Chunks small enough for L1 keep the three statements one pass over memory.
template <typename A>
void adamw_range_packets(A* p, const A* g, A* m, A* v, int64_t s, int64_t e, A sign, A decay,
                         AdamBetas<A> betas, A step_size, A bc2_sqrt, A eps) {
  using Array = Eigen::Array<A, Eigen::Dynamic, 1>;
  constexpr int64_t kChunk = 512;
  const auto [b1, b2, one_minus_b1, one_minus_b2] = betas;
  for (int64_t c = s; c < e; c += kChunk) {
    const int64_t len = std::min(kChunk, e - c);
    Eigen::Map<Array> pc(p + c, len), mc(m + c, len), vc(v + c, len);
    const auto gc = sign * Eigen::Map<const Array>(g + c, len);
    mc = b1 * mc + one_minus_b1 * gc;
    vc = b2 * vc + one_minus_b2 * gc * gc;
    pc = pc * decay - step_size * mc / (vc.sqrt() / bc2_sqrt + eps);
  }
}

template <typename T, bool kAmsgrad>
void adamw_loop(T* p, const T* g, T* m, T* v, T* vmax, int64_t n, acc_t<T> sign, acc_t<T> decay,
                AdamBetas<acc_t<T>> betas, acc_t<T> step_size, acc_t<T> bc2_sqrt, acc_t<T> eps) {
  parallel_for(n, kGrain, [=](int64_t s, int64_t e) {
    if constexpr (!kAmsgrad && std::is_same_v<T, acc_t<T>>)
      adamw_range_packets<T>(p, g, m, v, s, e, sign, decay, betas, step_size, bc2_sqrt, eps);
    else
      adamw_range<T, kAmsgrad>(p, g, m, v, vmax, s, e, sign, decay, betas, step_size, bc2_sqrt, eps);
  });
}

template <typename T>
void adamw_kernel(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                  const Tensor& max_sq, double step, const Attrs& a) {
  using A = acc_t<T>;
  const double lr = a.f("lr"), beta1 = a.f("beta1"), beta2 = a.f("beta2");
  const A eps = static_cast<A>(a.f("eps")), decay = static_cast<A>(1.0 - lr * a.f("weight_decay"));
  const A sign = a.b("maximize") ? A(-1) : A(1);
  const A step_size = static_cast<A>(lr / (1.0 - std::pow(beta1, step)));
  const A bc2_sqrt = static_cast<A>(std::sqrt(1.0 - std::pow(beta2, step)));
  T* p = param.data<T>();
  const T* g = grad.data<T>();
  T* m = exp_avg.data<T>();
  T* v = exp_avg_sq.data<T>();
  const int64_t n = param.numel();
  const AdamBetas<A> betas{static_cast<A>(beta1), static_cast<A>(beta2), static_cast<A>(1.0 - beta1),
                           static_cast<A>(1.0 - beta2)};
  if (max_sq.defined())
    adamw_loop<T, true>(p, g, m, v, max_sq.data<T>(), n, sign, decay, betas, step_size, bc2_sqrt, eps);
  else
    adamw_loop<T, false>(p, g, m, v, nullptr, n, sign, decay, betas, step_size, bc2_sqrt, eps);
}

// ---- gradient norm ----------------------------------------------------------------

// sum |g|^p (or max |g| for p = inf) of one tensor, in double.
template <typename T>
double norm_part(const Tensor& g, double p) {
  const T* x = g.data<T>();
  const int64_t n = g.numel();
  const bool inf = std::isinf(p);
  const int64_t chunks = std::max<int64_t>(1, (n + kGrain - 1) / kGrain);
  std::vector<double> parts(static_cast<size_t>(chunks), 0.0);
  parallel_for(chunks, 1, [&](int64_t cb, int64_t ce) {
    for (int64_t c = cb; c < ce; ++c) {
      double acc = 0;
      const int64_t e = std::min(n, (c + 1) * kGrain);
      for (int64_t i = c * kGrain; i < e; ++i) {
        const double a = std::abs(static_cast<double>(static_cast<acc_t<T>>(x[i])));
        acc = inf ? std::max(acc, a) : acc + (p == 2 ? a * a : std::pow(a, p));
      }
      parts[static_cast<size_t>(c)] = acc;
    }
  });
  double total = 0;
  for (double v : parts) total = inf ? std::max(total, v) : total + v;
  return total;
}

template <typename T>
void scale_in_place(const Tensor& g, double coef) {
  using A = acc_t<T>;
  T* x = g.data<T>();
  const A c = static_cast<A>(coef);
  parallel_for(g.numel(), kGrain * 4, [&](int64_t s, int64_t e) {
    for (int64_t i = s; i < e; ++i) x[i] = convert_value<T>(static_cast<A>(x[i]) * c);
  });
}

}  // namespace

void register_optimizer(OpRegistry& r) {
  r.def("sgd_update")
      .doc(
          "One torch.optim.SGD step for one parameter, in place: d = grad (negated when maximize) + "
          "weight_decay * param; with momentum, buf = d on the first step (step == 0) and momentum * buf + "
          "(1 - dampening) * d after, and d = d + momentum * buf (nesterov) or buf; param -= lr * d. "
          "momentum_buffer and step are needed when momentum is not 0; step is incremented.")
      .mutated_input("param")
      .input("grad")
      .mutated_input("momentum_buffer")
      .mutated_input("step")
      .attr("lr", AttrType::Float, 1e-3, "learning rate")
      .attr("momentum", AttrType::Float, 0.0, "momentum factor (0: no momentum buffer)")
      .attr("dampening", AttrType::Float, 0.0, "dampening of the momentum")
      .attr("weight_decay", AttrType::Float, 0.0, "L2 penalty added to the gradient")
      .attr("nesterov", AttrType::Bool, false, "Nesterov momentum")
      .attr("maximize", AttrType::Bool, false, "maximize the objective instead of minimizing it")
      .argin("lr", AttrRange::at_least(0))
      .argin("momentum", AttrRange::at_least(0))
      .argin("dampening", AttrRange::at_least(0))
      .argin("weight_decay", AttrRange::at_least(0))
      .no_outputs()
      .fusion(Fusion::Opaque)
      .flops([](const InferContext& c, std::span<const TensorMeta>) { return 6.0 * c.inputs[0].numel(); })
      .infer([](const InferContext& c) -> std::vector<TensorMeta> {
        const Tensor& p = c.inputs[0];
        SAMBA_CHECK(p.defined(), Status::NullPointer, "sgd_update: param is missing");
        SAMBA_CHECK(is_floating(p.dtype()), Status::DTypeMismatch, "sgd_update: param must be floating, got {}",
                    dtype_name(p.dtype()));
        check_like("sgd_update", "grad", c.inputs[1], p);
        const Tensor buf = c.inputs.size() > 2 ? c.inputs[2] : Tensor();
        const Tensor step = c.inputs.size() > 3 ? c.inputs[3] : Tensor();
        check_like("sgd_update", "momentum_buffer", buf, p);
        check_step("sgd_update", step);
        const double momentum = c.attrs.f("momentum");
        SAMBA_CHECK(momentum == 0 || (buf.defined() && step.defined()), Status::InvalidArgument,
                    "sgd_update: momentum {} needs a momentum_buffer and a step tensor", momentum);
        SAMBA_CHECK(!c.attrs.b("nesterov") || (momentum > 0 && c.attrs.f("dampening") == 0),
                    Status::InvalidArgument, "sgd_update: nesterov needs momentum > 0 and dampening 0");
        return {};
      })
      .kernel([](KernelContext& c) {
        const Tensor& p = c.inputs[0];
        const double momentum = c.attrs.f("momentum");
        const Tensor buf = momentum != 0 ? c.inputs[2] : Tensor();
        const Tensor step = c.inputs.size() > 3 ? c.inputs[3] : Tensor();
        const bool first = step.defined() && *step.data<float>() == 0.0f;
        SAMBA_DISPATCH_FLOAT(p.dtype(), "sgd_update", [&] { sgd_kernel<scalar_t>(p, c.inputs[1], buf, first, c.attrs); });
        if (step.defined()) *step.data<float>() += 1.0f;
      });

  r.def("adamw_update")
      .doc(
          "One torch.optim.AdamW step for one parameter, in place: step += 1; param *= 1 - lr * "
          "weight_decay; exp_avg = beta1 * exp_avg + (1 - beta1) * g; exp_avg_sq = beta2 * exp_avg_sq + "
          "(1 - beta2) * g^2; with amsgrad the running maximum of exp_avg_sq is used; param -= lr / (1 - "
          "beta1^step) * exp_avg / (sqrt(v) / sqrt(1 - beta2^step) + eps).")
      .mutated_input("param")
      .input("grad")
      .mutated_input("exp_avg")
      .mutated_input("exp_avg_sq")
      .mutated_input("max_exp_avg_sq")
      .mutated_input("step")
      .attr("lr", AttrType::Float, 1e-3, "learning rate")
      .attr("beta1", AttrType::Float, 0.9, "decay of the running average of the gradient")
      .attr("beta2", AttrType::Float, 0.997, "decay of the running average of its square (SambaFlow's default)")
      .attr("eps", AttrType::Float, 1e-8, "added to the denominator")
      .attr("weight_decay", AttrType::Float, 1e-2, "decoupled weight decay")
      .attr("amsgrad", AttrType::Bool, false, "use the running maximum of exp_avg_sq (AMSGrad)")
      .attr("maximize", AttrType::Bool, false, "maximize the objective instead of minimizing it")
      .argin("lr", AttrRange::at_least(0))
      .argin("beta1", AttrRange{0, 1, false, true})
      .argin("beta2", AttrRange{0, 1, false, true})
      .argin("eps", AttrRange::above(0))
      .argin("weight_decay", AttrRange::at_least(0))
      .no_outputs()
      .fusion(Fusion::Opaque)
      .flops([](const InferContext& c, std::span<const TensorMeta>) { return 14.0 * c.inputs[0].numel(); })
      .infer([](const InferContext& c) -> std::vector<TensorMeta> {
        const Tensor& p = c.inputs[0];
        SAMBA_CHECK(p.defined(), Status::NullPointer, "adamw_update: param is missing");
        SAMBA_CHECK(is_floating(p.dtype()), Status::DTypeMismatch, "adamw_update: param must be floating, got {}",
                    dtype_name(p.dtype()));
        SAMBA_CHECK(c.inputs.size() == 6 && c.inputs[2].defined() && c.inputs[3].defined() && c.inputs[5].defined(),
                    Status::InvalidArgument,
                    "adamw_update: takes param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq (may be absent) and step");
        check_like("adamw_update", "grad", c.inputs[1], p);
        check_like("adamw_update", "exp_avg", c.inputs[2], p);
        check_like("adamw_update", "exp_avg_sq", c.inputs[3], p);
        check_like("adamw_update", "max_exp_avg_sq", c.inputs[4], p);
        check_step("adamw_update", c.inputs[5]);
        SAMBA_CHECK(!c.attrs.b("amsgrad") || c.inputs[4].defined(), Status::InvalidArgument,
                    "adamw_update: amsgrad needs a max_exp_avg_sq tensor");
        return {};
      })
      .kernel([](KernelContext& c) {
        const Tensor& p = c.inputs[0];
        float* step = c.inputs[5].data<float>();
        *step += 1.0f;
        const Tensor vmax = c.attrs.b("amsgrad") ? c.inputs[4] : Tensor();
        SAMBA_DISPATCH_FLOAT(p.dtype(), "adamw_update", [&] {
          adamw_kernel<scalar_t>(p, c.inputs[1], c.inputs[2], c.inputs[3], vmax, *step, c.attrs);
        });
      });

  r.def("clip_grad_norm")
      .doc(
          "torch.nn.utils.clip_grad_norm_: the norm of all the gradients together (norm_type 2, any p >= 1, "
          "or inf), accumulated in double; when it exceeds max_norm every gradient is multiplied, in "
          "place, by max_norm / (total_norm + 1e-6). Returns the total norm (float32, before clipping).")
      .variadic_mutated_input("grads")
      .attr("max_norm", AttrType::Float, 1.0, "the largest total norm the gradients keep")
      .attr("norm_type", AttrType::Float, 2.0)
      .argin("max_norm", AttrRange::above(0))
      .output("total_norm")
      .fusion(Fusion::Opaque)
      .infer([](const InferContext& c) -> std::vector<TensorMeta> {
        const double p = c.attrs.f("norm_type");
        SAMBA_CHECK(std::isinf(p) ? p > 0 : p >= 1, Status::InvalidArgument,
                    "clip_grad_norm: norm_type must be >= 1 or inf, got {}", p);
        for (size_t i = 0; i < c.inputs.size(); ++i)
          SAMBA_CHECK(c.inputs[i].defined() && is_floating(c.inputs[i].dtype()), Status::DTypeMismatch,
                      "clip_grad_norm: gradient {} must be a floating tensor", i);
        return {{DType::Float32, {}}};
      })
      .kernel([](KernelContext& c) {
        const double p = c.attrs.f("norm_type");
        double total = 0;
        for (const Tensor& g : c.inputs) {
          const double part = SAMBA_DISPATCH_FLOAT(g.dtype(), "clip_grad_norm", [&] { return norm_part<scalar_t>(g, p); });
          total = std::isinf(p) ? std::max(total, part) : total + part;
        }
        const double norm = std::isinf(p) ? total : std::pow(total, 1.0 / p);
        const double coef = c.attrs.f("max_norm") / (norm + 1e-6);
        if (coef < 1)
          for (const Tensor& g : c.inputs)
            SAMBA_DISPATCH_FLOAT(g.dtype(), "clip_grad_norm", [&] { scale_in_place<scalar_t>(g, coef); });
        *c.outputs[0].data<float>() = static_cast<float>(norm);
      });
}

}  // namespace samba::ops
