#include "engine/rng/multithreaded_rng.h"

#include <oneapi/tbb/info.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <mutex>

#include "engine/core/dispatch.h"
#include "engine/core/error.h"
#include "engine/core/parallel.h"

namespace samba::rng {
namespace {

// Elements per task: about 30 us of normal sampling, 10 us of uniform.
constexpr int64_t kGrain = 16384;
// float32 draws staged on the stack before rounding to a 16-bit float.
constexpr int64_t kStage = 1024;

template <class F>
void on_threads(int threads, F&& body) {
  if (threads == 0) {
    body();
    return;
  }
  ThreadPool::Scope scope(&pool_with_threads(threads));
  body();
}

// Fills `out` (a floating tensor) in parallel: gen32(first, n, float*) for
// float32 and the 16-bit types, gen64(first, n, double*) for float64. A
// non-contiguous out is filled through a contiguous copy, so element e is
// always the e-th in row-major order.
template <class Gen32, class Gen64>
void fill_floating(const Tensor& out, const RngOptions& o, const char* what, Gen32&& gen32,
                   Gen64&& gen64) {
  SAMBA_CHECK(is_floating(out.dtype()), Status::DTypeMismatch,
              "{}: tensor '{}' has dtype {}; expected a floating dtype", what, out.name(),
              dtype_name(out.dtype()));
  const Tensor dst = out.is_contiguous() ? out : Tensor::empty(out.shape(), out.dtype());
  void* base = dst.raw_data();
  const DType dt = dst.dtype();
  on_threads(o.threads, [&] {
    parallel_for(dst.numel(), kGrain, [&](int64_t b, int64_t e) {
      const auto first = static_cast<uint64_t>(b);
      switch (dt) {
        case DType::Float32:
          gen32(first, e - b, static_cast<float*>(base) + b);
          return;
        case DType::Float64:
          gen64(first, e - b, static_cast<double*>(base) + b);
          return;
        default:
          break;
      }
      float stage[kStage];
      for (int64_t i = b; i < e; i += kStage) {
        const int64_t m = std::min(kStage, e - i);
        gen32(static_cast<uint64_t>(i), m, stage);
        if (dt == DType::BFloat16) {
          to_bf16(stage, m, o.bf16_rounding, static_cast<bf16*>(base) + i);
        } else {
          f16* p = static_cast<f16*>(base) + i;
          for (int64_t j = 0; j < m; ++j) p[j] = f16(stage[j]);
        }
      }
    });
  });
  if (dst.impl() != out.impl()) out.copy_from(dst);
}

template <class T>
void integers_into(const Philox& g, int64_t b, int64_t e, int64_t low, int64_t high, T* base) {
  if constexpr (std::is_same_v<T, int64_t>) {
    generate_integers(g, static_cast<uint64_t>(b), e - b, low, high, base + b);
  } else {
    int64_t stage[kStage];
    for (int64_t i = b; i < e; i += kStage) {
      const int64_t m = std::min(kStage, e - i);
      generate_integers(g, static_cast<uint64_t>(i), m, low, high, stage);
      for (int64_t j = 0; j < m; ++j) base[i + j] = convert_value<T>(stage[j]);
    }
  }
}

void check_finite(double v, const char* what, const char* name) {
  SAMBA_CHECK(std::isfinite(v), Status::InvalidArgument, "{}: {} must be finite, got {}", what,
              name, v);
}

}  // namespace

ThreadPool& pool_with_threads(int n) {
  SAMBA_CHECK(n >= 1 && n <= 4096, Status::InvalidArgument,
              "init_threads must be between 1 and 4096, got {}", n);
  // Never destroyed: tensors may be materialized from other static destructors.
  static auto* mutex = new std::mutex;
  static auto* pools = new std::map<int, std::unique_ptr<ThreadPool>>;
  std::lock_guard<std::mutex> lock(*mutex);
  // Values do not depend on the thread count, so asking for more threads
  // than the machine runs at once just gets all of them.
  n = std::min(n, tbb::info::default_concurrency());
  auto& pool = (*pools)[n];
  if (!pool) pool = std::make_unique<ThreadPool>(n);
  return *pool;
}

MultithreadedRng::MultithreadedRng(uint64_t seed, std::string_view stream_name, RngOptions options)
    : MultithreadedRng(Philox{seed, stream_of(stream_name)}, options) {}

MultithreadedRng::MultithreadedRng(Philox stream, RngOptions options)
    : stream_(stream), options_(options) {
  SAMBA_CHECK(options_.threads >= 0, Status::InvalidArgument,
              "init_threads must be >= 0 (0: the current pool), got {}", options_.threads);
}

MultithreadedRng MultithreadedRng::derive(std::string_view tag) const {
  return MultithreadedRng(Philox{stream_.seed, derive_stream(stream_.stream, tag)}, options_);
}

void MultithreadedRng::uniform(const Tensor& out, double low, double high) const {
  check_finite(low, "uniform", "low");
  check_finite(high, "uniform", "high");
  SAMBA_CHECK(low <= high, Status::InvalidArgument, "uniform: low {} must be <= high {}", low,
              high);
  const auto lo32 = static_cast<float>(low), hi32 = static_cast<float>(high);
  fill_floating(
      out, options_, "uniform",
      [&](uint64_t f, int64_t n, float* p) { generate_uniform(stream_, f, n, lo32, hi32, p); },
      [&](uint64_t f, int64_t n, double* p) { generate_uniform(stream_, f, n, low, high, p); });
}

void MultithreadedRng::normal(const Tensor& out, double mean, double std) const {
  check_finite(mean, "normal", "mean");
  check_finite(std, "normal", "std");
  SAMBA_CHECK(std >= 0.0, Status::InvalidArgument, "normal: std must be >= 0, got {}", std);
  const auto m32 = static_cast<float>(mean), s32 = static_cast<float>(std);
  const NormalMethod method = options_.normal;
  fill_floating(
      out, options_, "normal",
      [&](uint64_t f, int64_t n, float* p) { generate_normal(stream_, f, n, m32, s32, method, p); },
      [&](uint64_t f, int64_t n, double* p) {
        generate_normal(stream_, f, n, mean, std, method, p);
      });
}

void MultithreadedRng::trunc_normal(const Tensor& out, const TruncNormal& t) const {
  check_finite(t.mean, "trunc_normal", "mean");
  check_finite(t.std, "trunc_normal", "std");
  SAMBA_CHECK(t.std >= 0.0, Status::InvalidArgument, "trunc_normal: std must be >= 0, got {}",
              t.std);
  SAMBA_CHECK(
      !std::isnan(t.a) && !std::isnan(t.b) && t.a <= t.b && t.a < INFINITY && t.b > -INFINITY,
      Status::InvalidArgument,
      "trunc_normal: bounds a {} and b {} must satisfy a <= b and hold a finite value", t.a, t.b);
  // float draws come from the double sampler: the tails need its precision.
  auto gen64 = [&](uint64_t f, int64_t n, double* p) {
    generate_trunc_normal(stream_, f, n, t, p);
  };
  fill_floating(
      out, options_, "trunc_normal",
      [&](uint64_t f, int64_t n, float* p) {
        double stage[kStage];
        for (int64_t i = 0; i < n; i += kStage) {
          const int64_t m = std::min(kStage, n - i);
          gen64(f + static_cast<uint64_t>(i), m, stage);
          for (int64_t j = 0; j < m; ++j) p[i + j] = static_cast<float>(stage[j]);
        }
      },
      gen64);
}

void MultithreadedRng::integers(const Tensor& out, int64_t low, int64_t high) const {
  SAMBA_CHECK(low < high, Status::InvalidArgument, "integers: low {} must be below high {}", low,
              high);
  SAMBA_CHECK(out.dtype() != DType::Bool, Status::DTypeMismatch,
              "integers: tensor '{}' has dtype bool; expected a numeric dtype", out.name());
  const Tensor dst = out.is_contiguous() ? out : Tensor::empty(out.shape(), out.dtype());
  on_threads(options_.threads, [&] {
    SAMBA_DISPATCH_NUMERIC(dst.dtype(), "integers", [&] {
      scalar_t* base = dst.data<scalar_t>();
      parallel_for(dst.numel(), kGrain,
                   [&](int64_t b, int64_t e) { integers_into(stream_, b, e, low, high, base); });
    });
  });
  if (dst.impl() != out.impl()) out.copy_from(dst);
}

}  // namespace samba::rng
