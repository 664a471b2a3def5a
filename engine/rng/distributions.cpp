// Built with -ffp-contract=off (CMakeLists.txt): the scalar and AVX2 paths
// must round every product and sum the same way.
#include "engine/rng/distributions.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <tuple>
#include <utility>

#include "engine/rng/philox_lanes.h"
#include "engine/rng/unit_math.h"

namespace samba::rng {

std::string_view normal_method_name(NormalMethod m) {
  return m == NormalMethod::BoxMuller ? "box_muller" : "inverse_transform";
}

namespace {

std::atomic<bool> g_force_scalar{false};

bool use_vector() { return SAMBA_RNG_HAVE_AVX2 && !g_force_scalar.load(std::memory_order_relaxed); }

// Groups generated together on the vector path: two in flight hide most of
// Philox's multiply latency.
constexpr int kInFlight = 2;

// Calls make(group, count, dst) so that dst receives the count * G elements
// of groups group .. group + count - 1 (count is 1 or kInFlight), for every
// group overlapping elements [first, first + n); the groups cut by the ends
// of the range go through a buffer.
template <int G, class T, class Make>
void by_groups(uint64_t first, int64_t n, T* out, Make&& make) {
  if (n <= 0) return;
  uint64_t e = first;
  const uint64_t end = first + static_cast<uint64_t>(n);
  T buf[G];
  if (e % G != 0) {
    const uint64_t g = e / G, stop = std::min(end, (g + 1) * G);
    make(g, 1, buf);
    out = std::copy(buf + (e - g * G), buf + (stop - g * G), out);
    e = stop;
  }
  for (; e + kInFlight * G <= end; e += kInFlight * G, out += kInFlight * G)
    make(e / G, kInFlight, out);
  for (; e + G <= end; e += G, out += G) make(e / G, 1, out);
  if (e < end) {
    make(e / G, 1, buf);
    std::copy(buf, buf + (end - e), out);
  }
}

// ---- float32: 32 elements per group, four rows of eight lanes ----------------------

#if SAMBA_RNG_HAVE_AVX2
template <int N, class Body>
void float_groups_vector(const Philox& p, uint64_t g, float* dst, Body& body) {
  lanes::U8 w[N][4];
  philox_groups<N>(p, g, w);
  for (int j = 0; j < N; ++j) {
    lanes::F8 v[4];
    body(lanes::Avx2{}, w[j], v);
    for (int r = 0; r < 4; ++r) _mm256_storeu_ps(dst + 32 * j + 8 * r, v[r].v);
  }
}
#endif

// Runs body(lanes, words[4], values[4]) on `count` groups from g, once per
// group with eight-lane values (vector path) or once per lane with scalars,
// and stores the rows of values to dst.
template <class Body>
void float_groups(const Philox& p, uint64_t g, int count, float* dst, bool vector, Body& body) {
#if SAMBA_RNG_HAVE_AVX2
  if (vector) {
    if (count == 2)
      float_groups_vector<2>(p, g, dst, body);
    else
      float_groups_vector<1>(p, g, dst, body);
    return;
  }
#endif
  for (int j = 0; j < count; ++j, dst += 32) {
    uint32_t rows[4][8];
    philox_group(p, g + static_cast<uint64_t>(j), rows);
    for (int l = 0; l < 8; ++l) {
      const uint32_t w[4] = {rows[0][l], rows[1][l], rows[2][l], rows[3][l]};
      float v[4];
      body(lanes::Scalar{}, w, v);
      for (int r = 0; r < 4; ++r) dst[8 * r + l] = v[r];
    }
  }
}

template <class Body>
void float_samples(const Philox& p, uint64_t first, int64_t n, float* out, Body&& body) {
  const bool vector = use_vector();
  by_groups<32>(first, n, out, [&](uint64_t g, int count, float* dst) {
    float_groups(p, g, count, dst, vector, body);
  });
}

// The raw words of `count` groups from g: rows[j][r][l] = word r of block
// 8 (g + j) + l.
void word_rows(const Philox& p, uint64_t g, int count, bool vector, uint32_t (*rows)[4][8]) {
#if SAMBA_RNG_HAVE_AVX2
  if (vector) {
    auto store = [&](auto& w, int n) {
      for (int j = 0; j < n; ++j)
        for (int r = 0; r < 4; ++r)
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(rows[j][r]), w[j][r].v);
    };
    if (count == 2) {
      lanes::U8 w[2][4];
      philox_groups<2>(p, g, w);
      store(w, 2);
    } else {
      lanes::U8 w[1][4];
      philox_groups<1>(p, g, w);
      store(w, 1);
    }
    return;
  }
#endif
  for (int j = 0; j < count; ++j) philox_group(p, g + static_cast<uint64_t>(j), rows[j]);
}

// The top 24 bits of a word as a float in [0, 1).
template <class L>
inline typename L::F unit24(typename L::U w) {
  return lanes::signed_to_float(w >> 8) * typename L::F(0x1.0p-24f);
}

// ---- float64 and integers: 16 elements per group, two words each -------------------

inline uint64_t word_pair(const uint32_t rows[4][8], int h, int l) {
  return (uint64_t{rows[2 * h][l]} << 32) | rows[2 * h + 1][l];
}
inline double unit53(uint64_t x) { return static_cast<double>(x >> 11) * 0x1.0p-53; }
inline double open_unit53(uint64_t x) { return (static_cast<double>(x >> 11) + 0.5) * 0x1.0p-53; }

// Calls value(x) -> T for each element's 64-bit word pair.
template <class T, class Value>
void pair_samples(const Philox& p, uint64_t first, int64_t n, T* out, Value&& value) {
  const bool vector = use_vector();
  by_groups<16>(first, n, out, [&](uint64_t g, int count, T* dst) {
    uint32_t rows[kInFlight][4][8];
    word_rows(p, g, count, vector, rows);
    for (int j = 0; j < count; ++j)
      for (int h = 0; h < 2; ++h)
        for (int l = 0; l < 8; ++l) dst[16 * j + 8 * h + l] = value(word_pair(rows[j], h, l));
  });
}

// AS241's PPND7 in double, all three regions; the start of normal_quantile.
double ppnd7(double p) {
  const double q = p - 0.5;
  if (std::abs(q) <= 0.425) {
    const double r = 0.180625 - q * q;
    return q *
           (((5.9109374720e+01 * r + 1.5929113202e+02) * r + 5.0434271938e+01) * r +
            3.3871327179e+00) /
           (((6.7187563600e+01 * r + 7.8757757664e+01) * r + 1.7895169469e+01) * r + 1.0);
  }
  double r = std::sqrt(-std::log(std::min(p, 1.0 - p)));
  double x;
  if (r <= 5.0) {
    r -= 1.6;
    x = (((1.7023821103e-01 * r + 1.3067284816e+00) * r + 2.7568153900e+00) * r +
         1.4234372777e+00) /
        ((1.2021132975e-01 * r + 7.3700164250e-01) * r + 1.0);
  } else {
    r -= 5.0;
    x = (((1.7337203997e-02 * r + 4.2868294337e-01) * r + 3.0812263860e+00) * r +
         6.6579051150e+00) /
        ((1.2258202635e-02 * r + 2.4197894225e-01) * r + 1.0);
  }
  return q < 0 ? -x : x;
}

}  // namespace

double normal_cdf(double x) { return 0.5 * std::erfc(-x * 0.70710678118654752440); }

double normal_quantile(double p) {
  if (!(p >= 0.0 && p <= 1.0)) return std::numeric_limits<double>::quiet_NaN();
  if (p == 0.0) return -std::numeric_limits<double>::infinity();
  if (p == 1.0) return std::numeric_limits<double>::infinity();
  // Work in the lower half, where Phi(x) is accurate relative to p; 1 - p is
  // exact for p >= 1/2.
  if (p > 0.5) return -normal_quantile(1.0 - p);
  double x = ppnd7(p);
  // Halley's method on Phi(x) - p: PPND7's 1e-7 becomes double precision in
  // two steps. Below 1e-300 exp(x^2 / 2) would overflow; PPND7 stands alone.
  if (p > 1e-300) {
    for (int i = 0; i < 2; ++i) {
      const double u = (normal_cdf(x) - p) * 2.50662827463100050242 * std::exp(0.5 * x * x);
      x -= u / (1.0 + 0.5 * x * u);
    }
  }
  return x;
}

void generate_words(const Philox& p, uint64_t first, int64_t n, uint32_t* out) {
  const bool vector = use_vector();
  by_groups<32>(first, n, out, [&](uint64_t g, int count, uint32_t* dst) {
    // rows[j] of word_rows is exactly elements 32 (g + j) .. 32 (g + j) + 31.
    word_rows(p, g, count, vector, reinterpret_cast<uint32_t(*)[4][8]>(dst));
  });
}

void generate_uniform(const Philox& p, uint64_t first, int64_t n, float low, float high,
                      float* out) {
  const float range = high - low;
  float_samples(p, first, n, out, [&](auto lanes_tag, const auto* w, auto* v) {
    using L = decltype(lanes_tag);
    using F = typename L::F;
    for (int r = 0; r < 4; ++r) v[r] = F(low) + F(range) * unit24<L>(w[r]);
  });
}

void generate_uniform(const Philox& p, uint64_t first, int64_t n, double low, double high,
                      double* out) {
  const double range = high - low;
  pair_samples(p, first, n, out, [&](uint64_t x) { return low + range * unit53(x); });
}

void generate_normal(const Philox& p, uint64_t first, int64_t n, float mean, float std,
                     NormalMethod method, float* out) {
  if (method == NormalMethod::BoxMuller) {
    float_samples(p, first, n, out, [&](auto lanes_tag, const auto* w, auto* v) {
      using L = decltype(lanes_tag);
      using F = typename L::F;
      using U = typename L::U;
      for (int h = 0; h < 2; ++h) {
        const F u1 = lanes::signed_to_float((w[2 * h] >> 8) + U(1u)) * F(0x1.0p-24f);  // (0, 1]
        const F radius = lanes::square_root(F(-2.0f) * unit_math::log_positive<L>(u1));
        F s, c;
        unit_math::sincos_turns<L>(w[2 * h + 1] >> 8, s, c);
        v[2 * h] = F(mean) + F(std) * (radius * c);
        v[2 * h + 1] = F(mean) + F(std) * (radius * s);
      }
    });
    return;
  }
  float_samples(p, first, n, out, [&](auto lanes_tag, const auto* w, auto* v) {
    using L = decltype(lanes_tag);
    using F = typename L::F;
    using U = typename L::U;
    for (int r = 0; r < 4; ++r) {
      // q = (k + 1/2) 2^-24 - 1/2 = (2k + 1 - 2^24) 2^-25, exact.
      const U k2 = ((w[r] >> 8) << 1) + U(1u) - U(1u << 24);
      const F q = lanes::signed_to_float(k2) * F(0x1.0p-25f);
      v[r] = F(mean) + F(std) * unit_math::normal_quantile<L>(q);
    }
  });
}

void generate_normal(const Philox& p, uint64_t first, int64_t n, double mean, double std,
                     NormalMethod method, double* out) {
  if (method == NormalMethod::InverseTransform) {
    pair_samples(p, first, n, out,
                 [&](uint64_t x) { return mean + std * normal_quantile(open_unit53(x)); });
    return;
  }
  const bool vector = use_vector();
  by_groups<16>(first, n, out, [&](uint64_t g, int count, double* dst) {
    uint32_t rows[kInFlight][4][8];
    word_rows(p, g, count, vector, rows);
    for (int j = 0; j < count; ++j, dst += 16) {
      for (int l = 0; l < 8; ++l) {
        const double u1 = 1.0 - unit53(word_pair(rows[j], 0, l));  // (0, 1]
        const double turn = unit53(word_pair(rows[j], 1, l));
        const double radius = std::sqrt(-2.0 * std::log(u1));
        const double angle = 6.283185307179586476925 * turn;
        dst[l] = mean + std * (radius * std::cos(angle));
        dst[8 + l] = mean + std * (radius * std::sin(angle));
      }
    }
  });
}

void generate_trunc_normal(const Philox& p, uint64_t first, int64_t n, const TruncNormal& t,
                           double* out) {
  if (t.std == 0.0) {
    std::fill(out, out + n, std::clamp(t.mean, t.a, t.b));
    return;
  }
  double alpha = (t.a - t.mean) / t.std, beta = (t.b - t.mean) / t.std;
  // Sample the mirror image when both bounds are above the mean, so the
  // distribution function is evaluated where its values are small and exact.
  const bool mirror = alpha > 0.0;
  if (mirror) std::tie(alpha, beta) = std::pair(-beta, -alpha);
  const double low = normal_cdf(alpha), width = normal_cdf(beta) - low;
  pair_samples(p, first, n, out, [&](uint64_t x) {
    double z = std::clamp(normal_quantile(low + width * open_unit53(x)), alpha, beta);
    if (mirror) z = -z;
    return std::clamp(t.mean + t.std * z, t.a, t.b);
  });
}

void generate_integers(const Philox& p, uint64_t first, int64_t n, int64_t low, int64_t high,
                       int64_t* out) {
  const uint64_t range = static_cast<uint64_t>(high) - static_cast<uint64_t>(low);
  pair_samples(p, first, n, out, [&](uint64_t x) {
    const auto pick = static_cast<uint64_t>((static_cast<unsigned __int128>(x) * range) >> 64);
    return static_cast<int64_t>(static_cast<uint64_t>(low) + pick);
  });
}

namespace detail {

bool vector_path_active() { return use_vector(); }
void force_scalar_path(bool on) { g_force_scalar.store(on, std::memory_order_relaxed); }

namespace {
// Applies f(lanes, in...) -> out... eight at a time on the vector path, one
// at a time otherwise (and for the tail).
template <class In, class Out, class F>
void map_lanes(const In* in, int64_t n, Out* out, F&& f) {
  int64_t i = 0;
#if SAMBA_RNG_HAVE_AVX2
  if (use_vector())
    for (; i + 8 <= n; i += 8) f(lanes::Avx2{}, in + i, out + i);
#endif
  for (; i < n; ++i) f(lanes::Scalar{}, in + i, out + i);
}

#if SAMBA_RNG_HAVE_AVX2
inline lanes::F8 load(lanes::Avx2, const float* p) { return _mm256_loadu_ps(p); }
inline lanes::U8 load(lanes::Avx2, const uint32_t* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}
inline void store(float* p, lanes::F8 v) { _mm256_storeu_ps(p, v.v); }
#endif
inline float load(lanes::Scalar, const float* p) { return *p; }
inline uint32_t load(lanes::Scalar, const uint32_t* p) { return *p; }
inline void store(float* p, float v) { *p = v; }
}  // namespace

void log_positive(const float* x, int64_t n, float* out) {
  map_lanes(x, n, out, [](auto tag, const float* in, float* o) {
    store(o, unit_math::log_positive<decltype(tag)>(load(tag, in)));
  });
}

void sincos_turns(const uint32_t* k, int64_t n, float* sin_out, float* cos_out) {
  int64_t i = 0;
  auto one = [&](auto tag) {
    typename decltype(tag)::F s, c;
    unit_math::sincos_turns<decltype(tag)>(load(tag, k + i), s, c);
    store(sin_out + i, s);
    store(cos_out + i, c);
  };
#if SAMBA_RNG_HAVE_AVX2
  if (use_vector())
    for (; i + 8 <= n; i += 8) one(lanes::Avx2{});
#endif
  for (; i < n; ++i) one(lanes::Scalar{});
}

void normal_quantile_centered(const float* q, int64_t n, float* out) {
  map_lanes(q, n, out, [](auto tag, const float* in, float* o) {
    store(o, unit_math::normal_quantile<decltype(tag)>(load(tag, in)));
  });
}

}  // namespace detail

}  // namespace samba::rng
