// What op definitions share about their operands: metadata, promotion of
// tensors and wrapped scalars, broadcasting gradients, and a binary loop.
#pragma once

#include <span>

#include "engine/core/dispatch.h"
#include "engine/core/strided.h"
#include "engine/ops/registry.h"

namespace samba::ops {

inline TensorMeta meta_of(const Tensor& t) { return {t.dtype(), t.shape()}; }

// torch.result_type over the defined tensors of `ts` (wrapped scalars and
// zero-dim tensors take part by PyTorch's category rules).
DType result_type(std::span<const Tensor> ts);
DType result_type(std::initializer_list<Tensor> ts);

// A number used as an operand, promoted like a Python scalar.
Tensor wrap_scalar(double v);
Tensor wrap_int(int64_t v);

// Sums a broadcast gradient back down to `shape`.
Tensor sum_to(const Tensor& g, const Dims& shape);

// Shape every input broadcasts to (undefined inputs are skipped).
Dims broadcast_all(std::span<const Tensor> ts, const char* what);

// An elementwise loop over two inputs of dtype T (any strides, broadcastable
// to out's shape); out is contiguous with dtype O. f receives acc_t<T>
// values and returns a value convertible to O.
template <typename T, typename O, typename F>
void binary_loop(const Tensor& out, const Tensor& a, const Tensor& b, F f) {
  using A = acc_t<T>;
  O* po = out.data<O>();
  const int64_t n = out.numel();
  const bool ca = a.is_contiguous() && a.shape() == out.shape();
  const bool cb = b.is_contiguous() && b.shape() == out.shape();
  const T* pa = a.data<T>();
  const T* pb = b.data<T>();
  if (ca && cb) {
    parallel_for(n, kMinGrain, [&](int64_t s, int64_t e) {
      for (int64_t i = s; i < e; ++i) po[i] = convert_value<O>(f(static_cast<A>(pa[i]), static_cast<A>(pb[i])));
    });
    return;
  }
  if (ca && b.numel() == 1) {
    const A y = static_cast<A>(*pb);
    parallel_for(n, kMinGrain, [&](int64_t s, int64_t e) {
      for (int64_t i = s; i < e; ++i) po[i] = convert_value<O>(f(static_cast<A>(pa[i]), y));
    });
    return;
  }
  if (cb && a.numel() == 1) {
    const A x = static_cast<A>(*pa);
    parallel_for(n, kMinGrain, [&](int64_t s, int64_t e) {
      for (int64_t i = s; i < e; ++i) po[i] = convert_value<O>(f(x, static_cast<A>(pb[i])));
    });
    return;
  }
  StridedPlan plan({out.shape(),
                    {contiguous_strides(out.shape()), broadcast_strides(a.shape(), a.strides(), out.shape()),
                     broadcast_strides(b.shape(), b.strides(), out.shape())}});
  plan.run(n, {reinterpret_cast<char*>(po), const_cast<char*>(reinterpret_cast<const char*>(pa)),
               const_cast<char*>(reinterpret_cast<const char*>(pb))},
           {sizeof(O), sizeof(T), sizeof(T)}, [&](char** p, const int64_t* s, int64_t len) {
             O* o = reinterpret_cast<O*>(p[0]);
             const T* x = reinterpret_cast<const T*>(p[1]);
             const T* y = reinterpret_cast<const T*>(p[2]);
             if (s[0] == 1 && s[1] == 1 && s[2] == 0) {
               const A yv = static_cast<A>(*y);
               for (int64_t i = 0; i < len; ++i) o[i] = convert_value<O>(f(static_cast<A>(x[i]), yv));
             } else {
               for (int64_t i = 0; i < len; ++i)
                 o[i * s[0]] = convert_value<O>(f(static_cast<A>(x[i * s[1]]), static_cast<A>(y[i * s[2]])));
             }
           });
}

}  // namespace samba::ops
