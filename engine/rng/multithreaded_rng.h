// MultithreadedRng: a Philox stream that fills whole tensors, in parallel
// over a thread pool, with values that depend only on (seed, stream, element
// index) — the same bits for 1 or 8 threads. This is the handle a
// materializer receives (the seed's MultithreadedRNG), built-in or custom.
//
// Element e of a tensor is its e-th element in row-major order, whatever the
// tensor's strides. float32, bfloat16 and float16 tensors get float32 draws
// rounded to their type (bfloat16 with the chosen rounding, float16 to
// nearest even); float64 tensors get float64 draws.
#pragma once

#include <cstdint>
#include <string_view>

#include "engine/core/tensor.h"
#include "engine/rng/bf16.h"
#include "engine/rng/distributions.h"
#include "engine/rng/philox.h"

namespace samba {
class ThreadPool;
}

namespace samba::rng {

struct RngOptions {
  // 0: the calling thread's current pool (samba::current_pool()); n >= 1: a
  // pool of n threads (enable_lazy_param's init_threads).
  int threads = 0;
  NormalMethod normal = NormalMethod::BoxMuller;  // inverse_transform_sampling
  Bf16Rounding bf16_rounding = Bf16Rounding::NearestEven;
};

class MultithreadedRng {
 public:
  // The stream of tensor `stream_name` under `seed`.
  MultithreadedRng(uint64_t seed, std::string_view stream_name, RngOptions options = {});
  explicit MultithreadedRng(Philox stream, RngOptions options = {});

  const Philox& stream() const { return stream_; }
  const RngOptions& options() const { return options_; }

  // Each fill starts at element 0 of the stream, so two fills of one stream
  // give the same values; a materializer that needs independent draws takes
  // them from derived streams (same seed and options, another stream id).
  MultithreadedRng derive(std::string_view tag) const;

  // Uniform in [low, high] (high only through rounding). Floating dtypes.
  void uniform(const Tensor& out, double low, double high) const;
  // Normal of (mean, std >= 0), by options().normal. Floating dtypes.
  void normal(const Tensor& out, double mean, double std) const;
  // Truncated normal with absolute bounds [a, b]. Floating dtypes.
  void trunc_normal(const Tensor& out, const TruncNormal& t) const;
  // Integers in [low, high), converted to out's dtype (any but bool, and the
  // range must fit in it exactly: checked by the caller, e.g. randint).
  void integers(const Tensor& out, int64_t low, int64_t high) const;

 private:
  Philox stream_;
  RngOptions options_;
};

// A pool of exactly n >= 1 threads, created on first use and kept for the
// life of the process (so init_threads = 8 costs one arena, once).
ThreadPool& pool_with_threads(int n);

}  // namespace samba::rng
