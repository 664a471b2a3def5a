// Samplers over one Philox stream: each fills elements [first, first + n) of
// the stream into out[0..n). Element e's value depends only on (seed, stream,
// e) — see philox.h for which words it uses — so any split of a range into
// pieces, on any threads, gives the same bits as one call over the range.
//
// float32 samplers run eight lanes at a time with AVX2 when the build has it
// and fall back to scalar code giving the same bits. They use no libm and no
// fused multiply-add, so float32 values are also the same on other x86-64
// machines. float64 samplers use libm (log, sin, cos, erfc) in double.
#pragma once

#include <cstdint>
#include <string_view>

#include "engine/rng/philox.h"

namespace samba::rng {

enum class NormalMethod : uint8_t {
  BoxMuller = 0,         // two uniforms -> two normals (the default)
  InverseTransform = 1,  // one uniform -> one normal through the quantile function
};
std::string_view normal_method_name(NormalMethod m);  // "box_muller", "inverse_transform"

// The raw 32-bit words of single-word elements.
void generate_words(const Philox& g, uint64_t first, int64_t n, uint32_t* out);

// low + (high - low) u, u uniform on {0, 2^-24, ..., 1 - 2^-24} (float) or
// on the multiples of 2^-53 in [0, 1) (double). Values lie in [low, high]
// (high only through rounding).
void generate_uniform(const Philox& g, uint64_t first, int64_t n, float low, float high,
                      float* out);
void generate_uniform(const Philox& g, uint64_t first, int64_t n, double low, double high,
                      double* out);

// mean + std z, z standard normal.
//  Box-Muller (float): u1 = (k1 + 1) 2^-24 in (0, 1], k2 the next word's top
//  24 bits; z = sqrt(-2 log u1) (cos, sin)(2 pi k2 2^-24).
//  Inverse transform (float): z = quantile((k + 1/2) 2^-24), |z| <= 5.42.
//  float64: the same with 53-bit uniforms and libm; the quantile is refined
//  to double precision.
void generate_normal(const Philox& g, uint64_t first, int64_t n, float mean, float std,
                     NormalMethod method, float* out);
void generate_normal(const Philox& g, uint64_t first, int64_t n, double mean, double std,
                     NormalMethod method, double* out);

// The normal of (mean, std) conditioned on [a, b] (absolute bounds; either
// may be infinite), by inverse transform: z = quantile(Phi(alpha) + u
// (Phi(beta) - Phi(alpha))), computed on the side of the mean where the
// tail probabilities are small, clamped to [a, b]. std = 0 gives mean
// clamped to [a, b]. Requires finite mean, std >= 0, a <= b with a finite
// value between them (not checked here; MultithreadedRng checks).
struct TruncNormal {
  double mean = 0, std = 1, a = -2, b = 2;
};
void generate_trunc_normal(const Philox& g, uint64_t first, int64_t n, const TruncNormal& t,
                           double* out);

// Integers in [low, high) (low < high): the top 64 bits of the 128-bit
// product of a 64-bit word and the range, so each value has probability
// within 2^-64 of 1 / range.
void generate_integers(const Philox& g, uint64_t first, int64_t n, int64_t low, int64_t high,
                       int64_t* out);

// The standard normal quantile in double precision (AS241's PPND7 start,
// then two Halley steps on erfc); -inf at 0, +inf at 1, NaN outside [0, 1].
double normal_quantile(double p);
// The standard normal distribution function, 0.5 erfc(-x / sqrt 2).
double normal_cdf(double x);

namespace detail {

// Whether the float32 samplers run their AVX2 path (built with AVX2 and not
// forced to scalar).
bool vector_path_active();
// Tests: forces the scalar path (process-wide) so it can be compared with
// the vector one.
void force_scalar_path(bool on);

// The float math of the samplers (unit_math.h) over arrays, through the
// active path, for accuracy tests: log of positive floats, sin/cos of
// 2 pi k 2^-24 for 24-bit k, and the quantile at 1/2 + q.
void log_positive(const float* x, int64_t n, float* out);
void sincos_turns(const uint32_t* k, int64_t n, float* sin_out, float* cos_out);
void normal_quantile_centered(const float* q, int64_t n, float* out);

}  // namespace detail

}  // namespace samba::rng
