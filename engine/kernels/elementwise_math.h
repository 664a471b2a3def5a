// Block functions for the floating-point elementwise ops: f(n, out, in...)
// over at most ew::kBlock elements of float or double. Transcendentals use
// Eigen's array functions, which are SIMD for float (and for double where
// Eigen has packet versions). Two things are done by hand with AVX2: sqrt,
// which Eigen only offers approximately under EIGEN_FAST_MATH, and the float
// exponential behind exp/sigmoid/silu, where Eigen's version is 1.5x slower
// (its generic ldexp) and that speed decides whether those ops keep up with
// memory bandwidth.
#pragma once

#include <unsupported/Eigen/SpecialFunctions>

#include "engine/kernels/elementwise_loops.h"
#include "engine/kernels/wide_float_math.h"

namespace samba::ops::ew {

// Fixed-capacity Eigen array for temporaries: lives on the stack.
template <typename A>
using BlockArray = Eigen::Array<A, Eigen::Dynamic, 1, Eigen::ColMajor, kBlock, 1>;

inline constexpr double kSqrt1_2 = 0.70710678118654752440;     // 1 / sqrt(2)
inline constexpr double kSqrt2_Pi = 0.79788456080286535588;    // sqrt(2 / pi)
inline constexpr double kInvSqrt2Pi = 0.39894228040143267794;  // 1 / sqrt(2 pi)
inline constexpr double kTwo_SqrtPi = 1.12837916709551257390;  // 2 / sqrt(pi)
inline constexpr double kGeluCubic = 0.044715;

// Correctly rounded square root, 8 (float) or 4 (double) lanes at a time.
template <typename A>
void sqrt_block(int64_t n, A* __restrict o, const A* x) {
  int64_t i = 0;
#if defined(__AVX__)
  if constexpr (std::is_same_v<A, float>) {
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(o + i, _mm256_sqrt_ps(_mm256_loadu_ps(x + i)));
  } else {
    for (; i + 4 <= n; i += 4) _mm256_storeu_pd(o + i, _mm256_sqrt_pd(_mm256_loadu_pd(x + i)));
  }
#endif
  for (; i < n; ++i) o[i] = std::sqrt(x[i]);
}

// Rounds toward zero, SIMD (std::trunc loops are not vectorized by GCC).
template <typename A>
void trunc_block(int64_t n, A* __restrict o, const A* x) {
  int64_t i = 0;
#if defined(__AVX__)
  constexpr int kMode = _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC;
  if constexpr (std::is_same_v<A, float>) {
    for (; i + 8 <= n; i += 8)
      _mm256_storeu_ps(o + i, _mm256_round_ps(_mm256_loadu_ps(x + i), kMode));
  } else {
    for (; i + 4 <= n; i += 4)
      _mm256_storeu_pd(o + i, _mm256_round_pd(_mm256_loadu_pd(x + i), kMode));
  }
#endif
  for (; i < n; ++i) o[i] = std::trunc(x[i]);
}

// Recomputes with the scalar function `f` the elements where bad(x) holds:
// inputs outside the range where Eigen's polynomial approximations are exact.
// The scan vectorizes; the repair runs only for blocks that need it.
template <typename A, typename Bad, typename F>
void repair_block(int64_t n, A* __restrict o, const A* x, Bad bad, F f) {
  int any = 0;  // an int, not a bool: GCC vectorizes this reduction only then
  for (int64_t i = 0; i < n; ++i) any |= bad(x[i]) ? 1 : 0;
  if (!any) return;
  for (int64_t i = 0; i < n; ++i)
    if (bad(x[i])) o[i] = f(x[i]);
}

#if defined(__AVX2__) && defined(__FMA__)
#define SAMBA_EW_EXP8 1

// e^x for 8 floats, within one ulp over the whole float range (subnormal
// results and overflow to inf included; NaN stays NaN). x = k ln2 + r with
// |r| <= ln2 / 2 (Cody-Waite: ln2 split in a short head, exact in k * head,
// and a tail), e^r by its degree-7 Taylor polynomial (truncation error below
// 6e-9 relative), and 2^k built in the exponent field in two halves so that
// k from -150 to 128 needs no special case.
inline __m256 exp8(__m256 x) {
  // Clamped to where the result is 0 or inf anyway; min/max return their
  // second operand when one is NaN, so NaN passes through.
  const __m256 xc = _mm256_max_ps(_mm256_set1_ps(-104.0f), _mm256_min_ps(_mm256_set1_ps(88.8f), x));
  const __m256 k = _mm256_round_ps(_mm256_mul_ps(xc, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fmadd_ps(k, _mm256_set1_ps(-0.693359375f), xc);
  r = _mm256_fmadd_ps(k, _mm256_set1_ps(2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.0f / 5040);
  for (float c : {1.0f / 720, 1.0f / 120, 1.0f / 24, 1.0f / 6, 0.5f, 1.0f, 1.0f})
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(c));
  const __m256i ki = _mm256_cvtps_epi32(k);
  const __m256i k1 = _mm256_srai_epi32(ki, 1), k2 = _mm256_sub_epi32(ki, k1);
  const __m256i bias = _mm256_set1_epi32(127);
  const __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k1, bias), 23));
  const __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k2, bias), 23));
  return _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
}

// o = f(x) 8 lanes at a time; the ragged tail goes through a padded copy.
template <typename F>
void map8(int64_t n, float* o, const float* x, F f) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(o + i, f(_mm256_loadu_ps(x + i)));
  if (i < n) {
    alignas(32) float t[8] = {};
    std::copy(x + i, x + n, t);
    _mm256_store_ps(t, f(_mm256_load_ps(t)));
    std::copy(t, t + (n - i), o + i);
  }
}

// 1 / (1 + e^-x) for 8 floats.
inline __m256 sigmoid8(__m256 x) {
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 e = exp8(_mm256_sub_ps(_mm256_setzero_ps(), x));
  return _mm256_div_ps(one, _mm256_add_ps(one, e));
}
#endif

// e^x. Eigen clamps the argument, so its results that underflow into
// subnormals or to zero (e^-inf) are recomputed.
template <typename A>
void exp_block(int64_t n, A* __restrict o, const A* x) {
#ifdef SAMBA_EW_EXP8
  if constexpr (std::is_same_v<A, float>) return map8(n, o, x, exp8);
#endif
  vec(o, n) = vec(x, n).exp();
  const A lowest = std::log(std::numeric_limits<A>::min());
  repair_block(
      n, o, x, [lowest](A v) { return v < lowest; }, [](A v) { return std::exp(v); });
}

// ln x. Eigen treats subnormal inputs as the smallest normal number; those
// are recomputed.
template <typename A>
void log_block(int64_t n, A* __restrict o, const A* x) {
  vec(o, n) = vec(x, n).log();
  repair_block(
      n, o, x, [](A v) { return (v > A(0)) & (v < std::numeric_limits<A>::min()); },
      [](A v) { return std::log(v); });
}

// Eigen's tanh; float at AVX-512 through the 16-lane copy of it.
template <typename A>
void tanh_block(int64_t n, A* __restrict o, const A* x) {
  if constexpr (std::is_same_v<A, float>)
    if (const auto wide = wide_float_math().tanh) return wide(n, o, x);
  vec(o, n) = vec(x, n).tanh();
}

// 1 / (1 + e^-x): e^-x overflows to inf for very negative x, giving 0 as it should.
template <typename A>
void sigmoid_block(int64_t n, A* __restrict o, const A* x) {
  if constexpr (std::is_same_v<A, float>)
    if (const auto wide = wide_float_math().sigmoid) return wide(n, o, x);
#ifdef SAMBA_EW_EXP8
  if constexpr (std::is_same_v<A, float>) return map8(n, o, x, sigmoid8);
#endif
  vec(o, n) = A(1) / (A(1) + (-vec(x, n)).exp());
}

template <typename A>
void silu_block(int64_t n, A* __restrict o, const A* x) {
#ifdef SAMBA_EW_EXP8
  if constexpr (std::is_same_v<A, float>)
    return map8(n, o, x, [](__m256 v) { return _mm256_mul_ps(v, sigmoid8(v)); });
#endif
  vec(o, n) = vec(x, n) / (A(1) + (-vec(x, n)).exp());
}

// x * Phi(x) with the normal CDF through erf.
template <typename A>
void gelu_erf_block(int64_t n, A* __restrict o, const A* x) {
  auto v = vec(x, n);
  vec(o, n) = A(0.5) * v * (A(1) + (v * A(kSqrt1_2)).erf());
}

// The tanh approximation 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
template <typename A>
void gelu_tanh_block(int64_t n, A* __restrict o, const A* x) {
  auto v = vec(x, n);
  vec(o, n) = A(0.5) * v * (A(1) + (A(kSqrt2_Pi) * (v + A(kGeluCubic) * v.cube())).tanh());
}

// ---- gradients (g = incoming gradient) ------------------------------------------------

// d sigmoid = y (1 - y), from the forward output y.
template <typename A>
void sigmoid_backward_block(int64_t n, A* __restrict o, const A* g, const A* y) {
  auto yv = vec(y, n);
  vec(o, n) = vec(g, n) * yv * (A(1) - yv);
}

// d tanh = 1 - y^2, from the forward output y.
template <typename A>
void tanh_backward_block(int64_t n, A* __restrict o, const A* g, const A* y) {
  auto yv = vec(y, n);
  vec(o, n) = vec(g, n) * (A(1) - yv * yv);
}

// d silu = s (1 + x (1 - s)) with s = sigmoid(x).
template <typename A>
void silu_backward_block(int64_t n, A* __restrict o, const A* g, const A* x) {
  auto xv = vec(x, n);
  BlockArray<A> s = A(1) / (A(1) + (-xv).exp());
  vec(o, n) = vec(g, n) * s * (A(1) + xv * (A(1) - s));
}

// d gelu = Phi(x) + x phi(x).
template <typename A>
void gelu_erf_backward_block(int64_t n, A* __restrict o, const A* g, const A* x) {
  auto xv = vec(x, n);
  BlockArray<A> cdf = A(0.5) * (A(1) + (xv * A(kSqrt1_2)).erf());
  BlockArray<A> pdf = A(kInvSqrt2Pi) * (A(-0.5) * xv.square()).exp();
  vec(o, n) = vec(g, n) * (cdf + xv * pdf);
}

// d/dx of the tanh form: 0.5 (1 + t) + 0.5 x (1 - t^2) k (1 + 3 c x^2),
// t = tanh(k (x + c x^3)), k = sqrt(2/pi), c = 0.044715.
template <typename A>
void gelu_tanh_backward_block(int64_t n, A* __restrict o, const A* g, const A* x) {
  auto xv = vec(x, n);
  BlockArray<A> t = (A(kSqrt2_Pi) * (xv + A(kGeluCubic) * xv.cube())).tanh();
  BlockArray<A> dinner = A(kSqrt2_Pi) * (A(1) + A(3 * kGeluCubic) * xv.square());
  vec(o, n) = vec(g, n) * (A(0.5) * (A(1) + t) + A(0.5) * xv * (A(1) - t.square()) * dinner);
}

}  // namespace samba::ops::ew
