// softmax and log_softmax along one dim, with their fused backward ops.
//
// Each row is read from memory once for its max and sum: blocks that fit in
// L1 get their max first, the running sum is rescaled when the max grows
// (online softmax), and softmax stores exp(x - running max) as it goes with
// the reference max of each block, so the second pass only scales what it
// wrote (one exp per element; a log for log_softmax).
//
// A max of -inf (a row or lane that so far holds only -inf) is replaced by 0
// as the reference, so exp() sees -inf - 0 rather than -inf - -inf; factors
// exp(old_ref - new_ref) are capped at 1 since only such stand-in references
// can exceed a later one, and the values they scale are exact zeros.
#include <cmath>
#include <limits>
#include <type_traits>

#include "engine/kernels/row_stats.h"
#include "engine/ops/operands.h"

namespace samba::ops {
namespace {

using nn::ArrayMap;
using nn::ConstArrayMap;

template <typename C>
using Lanes = Eigen::Array<C, Eigen::Dynamic, 1>;

constexpr int64_t kRowBlock = 512;  // elements per block along a contiguous row
constexpr int64_t kTileCols = 128;  // columns per tile when the dim is not innermost
constexpr int64_t kTileRows = 32;   // rows of a tile block (kTileRows x kTileCols in L1)
constexpr int64_t kExpCost = 4;     // rough cycles per element of an exp-bound loop

template <typename C>
C reference_of(C m) {
  return m == -std::numeric_limits<C>::infinity() ? C(0) : m;
}

// ---- forward: the dim is innermost (contiguous rows) -------------------------------

// `refs` is scratch of at least ceil(n / kRowBlock) entries.
template <typename C>
void softmax_row(const C* x, C* y, int64_t n, bool log, C* refs) {
  C m = -std::numeric_limits<C>::infinity(), ref = 0, s = 0;
  for (int64_t b = 0, k = 0; b < n; b += kRowBlock, ++k) {
    const int64_t len = std::min(kRowBlock, n - b);
    ConstArrayMap<C> xb(x + b, len);
    const C bm = xb.maxCoeff();
    if (bm > m) {
      m = bm;
      const C next = reference_of(m);
      if (s != 0) s *= std::exp(std::min<C>(ref - next, 0));
      ref = next;
    }
    if (log) {
      s += (xb - ref).exp().sum();
    } else {
      ArrayMap<C> yb(y + b, len);
      yb = (xb - ref).exp();
      s += yb.sum();
      refs[k] = ref;
    }
  }
  // A row of only -inf is NaN, as in PyTorch (0 / 0). The sum is not left to
  // give that: a vectorized exp may return a tiny number rather than 0 for
  // -inf (Eigen's SSE exp for double does), which would make the row uniform.
  if (m == -std::numeric_limits<C>::infinity()) s = std::numeric_limits<C>::quiet_NaN();
  if (log) {
    ArrayMap<C>(y, n) = ConstArrayMap<C>(x, n) - (ref + std::log(s));
    return;
  }
  const C inv = C(1) / s;
  for (int64_t b = 0, k = 0; b < n; b += kRowBlock, ++k) {
    const C f = refs[k] == ref ? inv : std::exp(std::min<C>(refs[k] - ref, 0)) * inv;
    ArrayMap<C>(y + b, std::min(kRowBlock, n - b)) *= f;
  }
}

// ---- forward: the dim has stride `inner` (a tile of columns at a time) -----------

// Softmax over `len` rows of a tile of `w` columns starting at x (row stride
// `inner`). `refs` is scratch of ceil(len / kTileRows) * kTileCols entries.
template <typename C>
void softmax_tile(const C* x, C* y, int64_t len, int64_t inner, int64_t w, bool log, C* refs) {
  Lanes<C> m = Lanes<C>::Constant(w, -std::numeric_limits<C>::infinity());
  Lanes<C> ref = Lanes<C>::Zero(w), s = Lanes<C>::Zero(w), bm(w), next(w);
  for (int64_t j0 = 0, k = 0; j0 < len; j0 += kTileRows, ++k) {
    const int64_t j1 = std::min(len, j0 + kTileRows);
    bm = m;
    for (int64_t j = j0; j < j1; ++j) bm = bm.max(ConstArrayMap<C>(x + j * inner, w));
    m = bm;
    next = m.unaryExpr([](C v) { return reference_of(v); });
    s = (s != C(0)).select(s * (ref - next).min(C(0)).exp(), s);
    ref = next;
    for (int64_t j = j0; j < j1; ++j) {
      ConstArrayMap<C> xr(x + j * inner, w);
      if (log) {
        s += (xr - ref).exp();
      } else {
        ArrayMap<C> yr(y + j * inner, w);
        yr = (xr - ref).exp();
        s += yr;
      }
    }
    if (!log) ArrayMap<C>(refs + k * kTileCols, w) = ref;
  }
  // Lanes of only -inf are NaN, as in softmax_row.
  s = (m == -std::numeric_limits<C>::infinity()).select(std::numeric_limits<C>::quiet_NaN(), s);
  if (log) {
    const Lanes<C> shift = ref + s.log();
    for (int64_t j = 0; j < len; ++j)
      ArrayMap<C>(y + j * inner, w) = ConstArrayMap<C>(x + j * inner, w) - shift;
    return;
  }
  const Lanes<C> inv = s.inverse();
  Lanes<C> f(w);
  for (int64_t j0 = 0, k = 0; j0 < len; j0 += kTileRows, ++k) {
    f = (ArrayMap<C>(refs + k * kTileCols, w) - ref).min(C(0)).exp() * inv;
    for (int64_t j = j0; j < std::min(len, j0 + kTileRows); ++j) ArrayMap<C>(y + j * inner, w) *= f;
  }
}

// `tail` (float, contiguous rows only) runs on each row right after it is
// stored.
template <typename C>
void softmax_forward(const C* x, C* y, int64_t outer, int64_t len, int64_t inner, bool log,
                     const OutputTail* tail) {
  if (len == 0) return;
  if (inner == 1) {
    parallel_for(outer, nn::rows_grain(len, kExpCost), [&](int64_t r0, int64_t r1) {
      std::vector<C> refs((len + kRowBlock - 1) / kRowBlock);
      for (int64_t r = r0; r < r1; ++r) {
        softmax_row(x + r * len, y + r * len, len, log, refs.data());
        if constexpr (std::is_same_v<C, float>)
          if (tail) (*tail)(y + r * len, 1, len, len);
      }
    });
    return;
  }
  const int64_t tiles = (inner + kTileCols - 1) / kTileCols;
  const int64_t grain = nn::rows_grain(len * std::min(inner, kTileCols), kExpCost);
  parallel_for(outer * tiles, grain, [&](int64_t t0, int64_t t1) {
    std::vector<C> refs(((len + kTileRows - 1) / kTileRows) * kTileCols);
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t o = t / tiles, c0 = (t % tiles) * kTileCols;
      const int64_t base = o * len * inner + c0;
      softmax_tile(x + base, y + base, len, inner, std::min(kTileCols, inner - c0), log,
                   refs.data());
    }
  });
}

// ---- backward ---------------------------------------------------------------------
// softmax:     dx = y * (g - sum(g * y))
// log_softmax: dx = g - exp(y) * sum(g)

template <typename C>
void softmax_backward_kernel(const C* g, const C* y, C* dx, int64_t outer, int64_t len,
                             int64_t inner, bool log) {
  if (len == 0) return;
  if (inner == 1) {
    parallel_for(outer, nn::rows_grain(len, log ? kExpCost : 1), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        ConstArrayMap<C> gr(g + r * len, len), yr(y + r * len, len);
        ArrayMap<C> dr(dx + r * len, len);
        if (log) {
          dr = gr - yr.exp() * gr.sum();
        } else {
          const C dot = (gr * yr).sum();
          dr = yr * (gr - dot);
        }
      }
    });
    return;
  }
  const int64_t tiles = (inner + kTileCols - 1) / kTileCols;
  const int64_t grain = nn::rows_grain(len * std::min(inner, kTileCols), log ? kExpCost : 1);
  parallel_for(outer * tiles, grain, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t o = t / tiles, c0 = (t % tiles) * kTileCols,
                    w = std::min(kTileCols, inner - c0);
      const int64_t base = o * len * inner + c0;
      Lanes<C> acc = Lanes<C>::Zero(w);
      for (int64_t j = 0; j < len; ++j) {
        ConstArrayMap<C> gr(g + base + j * inner, w);
        if (log)
          acc += gr;
        else
          acc += gr * ConstArrayMap<C>(y + base + j * inner, w);
      }
      for (int64_t j = 0; j < len; ++j) {
        ConstArrayMap<C> gr(g + base + j * inner, w), yr(y + base + j * inner, w);
        ArrayMap<C> dr(dx + base + j * inner, w);
        if (log)
          dr = gr - yr.exp() * acc;
        else
          dr = yr * (gr - acc);
      }
    }
  });
}

// ---- schema glue -------------------------------------------------------------------

int64_t softmax_dim(const Tensor& x, const Attrs& a, const char* op) {
  return x.dim() == 0 ? (wrap_dim(a.i("dim"), 0, op), 0) : wrap_dim(a.i("dim"), x.dim(), op);
}

DType softmax_out_dtype(const Tensor& x, const Attrs& a, const char* op) {
  if (a.has("dtype")) {
    const DType d = a.dtype("dtype");
    SAMBA_CHECK(is_floating(d), Status::DTypeMismatch, "{}: dtype must be a floating dtype, got {}",
                op, dtype_name(d));
    return d;
  }
  SAMBA_CHECK(is_floating(x.dtype()), Status::DTypeMismatch,
              "{}: x must have a floating dtype, got {} (pass dtype to convert it)", op,
              dtype_name(x.dtype()));
  return x.dtype();
}

void run_forward(KernelContext& c, bool log) {
  const Tensor& out = c.outputs[0];
  const char* op = log ? "log_softmax" : "softmax";
  int64_t outer, len, inner;
  nn::split_at_dim(out.shape(), softmax_dim(out, c.attrs, op), &outer, &len, &inner);
  const DType cdt = nn::compute_dtype(out.dtype());
  Tensor x = nn::compute_input(c.inputs[0], cdt);
  nn::ComputeOutput y(out, cdt);
  nn::with_compute_type(cdt, [&]<typename C>() {
    // A fused chain runs on each row of the output itself, not of a wider
    // copy, and only where rows are contiguous.
    OutputTail* tail = c.tail && inner == 1 && static_cast<void*>(y.data<C>()) == out.raw_data()
                           ? c.tail
                           : nullptr;
    if constexpr (!std::is_same_v<C, float>) tail = nullptr;
    if (tail) tail->applied = true;
    softmax_forward<C>(x.data<C>(), y.data<C>(), outer, len, inner, log, tail);
  });
  y.commit();
}

void run_backward(KernelContext& c, bool log) {
  const Tensor& dx = c.outputs[0];
  int64_t outer, len, inner;
  nn::split_at_dim(dx.shape(), softmax_dim(dx, c.attrs, c.op.name.c_str()), &outer, &len, &inner);
  const DType cdt = nn::compute_dtype(dx.dtype());
  Tensor g = nn::compute_input(c.inputs[0], cdt), y = nn::compute_input(c.inputs[1], cdt);
  nn::ComputeOutput d(dx, cdt);
  nn::with_compute_type(cdt, [&]<typename C>() {
    softmax_backward_kernel<C>(g.data<C>(), y.data<C>(), d.data<C>(), outer, len, inner, log);
  });
  d.commit();
}

void define_forward(OpRegistry& r, const char* name, bool log) {
  const std::string backward = std::string(name) + "_backward";
  r.def(name)
      .doc(log ? "log(softmax(x)) along `dim`, computed as x - max - log(sum(exp(x - max)))."
               : "exp(x) / sum(exp(x)) along `dim`, numerically stable (shifted by the max).")
      .input("x")
      .attr("dim", AttrType::Int, int64_t{-1}, "the dim the probabilities are normalized along")
      .optional_attr("dtype", AttrType::DType, "convert x to this dtype before the op")
      .fusion(Fusion::Reduction)
      .infer([name](const InferContext& c) -> std::vector<TensorMeta> {
        const Tensor& x = c.inputs[0];
        softmax_dim(x, c.attrs, name);
        return {{softmax_out_dtype(x, c.attrs, name), x.shape()}};
      })
      .kernel([log](KernelContext& c) { run_forward(c, log); })
      .grad([backward](const GradContext& c) -> std::vector<Tensor> {
        return {call1(backward, {c.grad_outputs[0], c.outputs[0]}, {{"dim", c.attrs.i("dim")}})};
      });
}

void define_backward(OpRegistry& r, const char* name, bool log) {
  r.def(name)
      .doc(log ? "Gradient of log_softmax from its output: grad - exp(out) * sum(grad)."
               : "Gradient of softmax from its output: out * (grad - sum(grad * out)).")
      .input("grad")
      .input("out", "the forward op's output")
      .attr("dim", AttrType::Int, int64_t{-1})
      .fusion(Fusion::Reduction)
      .infer([name](const InferContext& c) -> std::vector<TensorMeta> {
        const Tensor &g = c.inputs[0], &y = c.inputs[1];
        nn::require_floating(y, name, "out");
        nn::require_floating(g, name, "grad");
        SAMBA_CHECK(g.shape() == y.shape(), Status::ShapeMismatch,
                    "{}: grad has shape {} but out has shape {}", name, dims_str(g.shape()),
                    dims_str(y.shape()));
        softmax_dim(y, c.attrs, name);
        return {{y.dtype(), y.shape()}};
      })
      .kernel([log](KernelContext& c) { run_backward(c, log); });
}

}  // namespace

void register_softmax(OpRegistry& r) {
  define_forward(r, "softmax", false);
  define_forward(r, "log_softmax", true);
  define_backward(r, "softmax_backward", false);
  define_backward(r, "log_softmax_backward", true);
}

}  // namespace samba::ops
