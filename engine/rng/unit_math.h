// The float math the samplers need (log, sine and cosine of a fraction of a
// turn, the standard normal quantile), written once over lanes (lanes.h) so
// the AVX2 and scalar paths give the same bits. Only +, -, *, /, sqrt and
// exact bit manipulation are used; no libm, no fused multiply-add.
//
// Accuracy (checked in tests/unit/rng_math_test.cpp against double-precision
// references): log and sin/cos within 2 ulp (1.7 measured), the quantile
// within 5e-7 relative (3.7e-7 measured: Wichura's AS241 PPND7 form is itself
// within 1.2e-7, float evaluation adds a few roundings).
#pragma once

#include "engine/rng/lanes.h"

namespace samba::rng::unit_math {

using namespace lanes;

namespace detail {

// (2 pi)^n / n!, sign (-1)^(n/2): the Taylor coefficients of sin(2 pi f)
// (odd n) and cos(2 pi f) (even n) in powers of f.
constexpr double turn_coefficient(int n) {
  double c = 1.0;
  for (int i = 1; i <= n; ++i) c *= 6.283185307179586476925 / i;
  return (n / 2) % 2 == 0 ? c : -c;
}

// ln 2 split so that e * kLn2Hi is exact for any float exponent e.
inline constexpr float kLn2Hi = 0.693359375f;
inline constexpr float kLn2Lo = -2.12194440e-4f;

}  // namespace detail

// Natural log of a positive normal float. x = 2^e m with m in [sqrt(1/2),
// sqrt(2)), then log m = 2 atanh(s), s = (m - 1) / (m + 1), whose series in
// z = s^2 <= 0.0295 is cut after z^5 / 11 (the rest is below 2^-33).
template <class L>
inline typename L::F log_positive(typename L::F x) {
  using F = typename L::F;
  using U = typename L::U;
  const U ix = as_bits(x) - U(0x3f3504f3u);  // the bits of sqrt(1/2)
  const U e = shift_right_arith(ix, 23);
  const F m = as_float((ix & U(0x007fffffu)) + U(0x3f3504f3u));
  const F s = (m - F(1.0f)) / (m + F(1.0f));
  const F z = s * s;
  F p = F(1.0f / 11.0f);
  p = p * z + F(1.0f / 9.0f);
  p = p * z + F(1.0f / 7.0f);
  p = p * z + F(1.0f / 5.0f);
  p = p * z + F(1.0f / 3.0f);
  const F s2 = s + s;
  const F log_m = s2 + (s2 * z) * p;
  const F ef = signed_to_float(e);
  return ef * F(detail::kLn2Hi) + (ef * F(detail::kLn2Lo) + log_m);
}

// sin and cos of 2 pi k / 2^24 for a 24-bit integer k. The reduction to the
// nearest quarter turn is exact integer arithmetic, leaving |f| <= 1/8 turn
// where Taylor series to f^9 (sin) and f^10 (cos) are accurate to 2^-28.
template <class L>
inline void sincos_turns(typename L::U k, typename L::F& sin_out, typename L::F& cos_out) {
  using F = typename L::F;
  using U = typename L::U;
  using detail::turn_coefficient;
  const U n = (k + U(1u << 21)) >> 22;                         // quarter turns, 0..4
  const F f = signed_to_float(k - (n << 22)) * F(0x1.0p-24f);  // |f| <= 1/8
  const F z = f * f;
  F sp = F(static_cast<float>(turn_coefficient(9)));
  sp = sp * z + F(static_cast<float>(turn_coefficient(7)));
  sp = sp * z + F(static_cast<float>(turn_coefficient(5)));
  sp = sp * z + F(static_cast<float>(turn_coefficient(3)));
  sp = sp * z + F(static_cast<float>(turn_coefficient(1)));
  const F sin_f = f * sp;
  F cp = F(static_cast<float>(turn_coefficient(10)));
  cp = cp * z + F(static_cast<float>(turn_coefficient(8)));
  cp = cp * z + F(static_cast<float>(turn_coefficient(6)));
  cp = cp * z + F(static_cast<float>(turn_coefficient(4)));
  cp = cp * z + F(static_cast<float>(turn_coefficient(2)));
  const F cos_f = cp * z + F(1.0f);
  // Quarter turn n: (sin, cos) = (s, c), (c, -s), (-s, -c), (-c, s).
  const auto odd = nonzero(n & U(1u));
  sin_out = as_float(as_bits(select(odd, cos_f, sin_f)) ^ ((n & U(2u)) << 30));
  cos_out = as_float(as_bits(select(odd, sin_f, cos_f)) ^ (((n + U(1u)) & U(2u)) << 30));
}

// The standard normal quantile at p = 1/2 + q, for 1/2 - |q| >= 2^-25 (all
// that 24-bit uniforms produce), by AS241's PPND7 rational approximations:
// one for |q| <= 0.425, one for the tails with r = sqrt(-log(1/2 - |q|)) <= 5.
// q is passed instead of p because 1/2 - |q| is then exact.
template <class L>
inline typename L::F normal_quantile(typename L::F q) {
  using F = typename L::F;
  using U = typename L::U;
  const U sign = as_bits(q) & U(0x80000000u);
  const F aq = as_float(as_bits(q) ^ sign);

  const F r = F(0.180625f) - q * q;
  F num = F(5.9109374720e+01f);
  num = num * r + F(1.5929113202e+02f);
  num = num * r + F(5.0434271938e+01f);
  num = num * r + F(3.3871327179e+00f);
  F den = F(6.7187563600e+01f);
  den = den * r + F(7.8757757664e+01f);
  den = den * r + F(1.7895169469e+01f);
  den = den * r + F(1.0f);
  const F central = (q * num) / den;

  const F t = square_root(-log_positive<L>(F(0.5f) - aq)) - F(1.6f);
  F tnum = F(1.7023821103e-01f);
  tnum = tnum * t + F(1.3067284816e+00f);
  tnum = tnum * t + F(2.7568153900e+00f);
  tnum = tnum * t + F(1.4234372777e+00f);
  F tden = F(1.2021132975e-01f);
  tden = tden * t + F(7.3700164250e-01f);
  tden = tden * t + F(1.0f);
  const F tail = as_float(as_bits(tnum / tden) ^ sign);

  return select(less_equal(aq, F(0.425f)), central, tail);
}

}  // namespace samba::rng::unit_math
