// Lazy parameters, materializers and the session's random streams.
#include <atomic>
#include <cmath>

#include "bindings/c/capi.h"
#include "engine/rng/lazy_param.h"

using namespace samba;
using namespace samba::capi;

struct samba_lazy_param_options {
  rng::LazySettings impl;
};

struct samba_materializer {
  std::shared_ptr<const rng::Materializer> impl;
  std::atomic<int64_t> refs{1};
};

namespace {

const rng::MultithreadedRng& stream_of(const samba_rng_stream* s) {
  require(s, "rng");
  return *reinterpret_cast<const rng::MultithreadedRng*>(s);
}

Tensor floating_out(samba_tensor* t, const char* fn) {
  Tensor out = tensor_arg(t, "out");
  SAMBA_CHECK(is_floating(out.dtype()), Status::DTypeMismatch, "{}: out has dtype {}; expected a floating dtype", fn,
              dtype_name(out.dtype()));
  return out;
}

// A C callback as a materializer function; `destroy` runs with the last copy.
rng::MaterializerFn custom_fn(samba_materialize_fn fn, void* user_data, void (*destroy)(void*)) {
  struct Callback {
    samba_materialize_fn fn;
    void* user_data;
    void (*destroy)(void*);
    ~Callback() {
      if (destroy) destroy(user_data);
    }
  };
  auto cb = std::make_shared<Callback>(Callback{fn, user_data, nullptr});
  cb->destroy = destroy;  // set last: a throw above must not run it
  return [cb](const Tensor& out, const rng::MultithreadedRng& r) {
    clear_error();
    const samba_status st =
        cb->fn(cb->user_data, borrowed_handle(out), reinterpret_cast<const samba_rng_stream*>(&r));
    if (st != SAMBA_OK) fail_from_callback(st, fmt::format("the custom materializer of '{}'", out.name()));
  };
}

}  // namespace

extern "C" {

samba_status samba_lazy_param_options_create(samba_lazy_param_options** out) {
  return SAMBA_GUARDED({
    out_param(out, "out");
    *out = new samba_lazy_param_options();
  });
}

samba_status samba_lazy_param_options_set_seed(samba_lazy_param_options* o, uint64_t seed) {
  return SAMBA_GUARDED({
    require(o, "opts");
    o->impl.seed = seed;
  });
}

samba_status samba_lazy_param_options_set_init_threads(samba_lazy_param_options* o, int32_t threads) {
  return SAMBA_GUARDED({
    require(o, "opts");
    SAMBA_CHECK(threads >= 1 && threads <= 1024, Status::InvalidArgument,
                "init_threads must be 1..1024, got {}", threads);
    o->impl.init_threads = threads;
  });
}

samba_status samba_lazy_param_options_set_inverse_transform_sampling(samba_lazy_param_options* o, int32_t enable) {
  return SAMBA_GUARDED({
    require(o, "opts");
    o->impl.inverse_transform_sampling = enable != 0;
  });
}

samba_status samba_lazy_param_options_set_bf16_rounding(samba_lazy_param_options* o, int32_t rounding) {
  return SAMBA_GUARDED({
    require(o, "opts");
    SAMBA_CHECK(rounding == SAMBA_BF16_NEAREST_EVEN || rounding == SAMBA_BF16_TRUNCATION, Status::InvalidArgument,
                "fp32_to_bf16_rounding {} is unknown; expected SAMBA_BF16_NEAREST_EVEN (0) or "
                "SAMBA_BF16_TRUNCATION (1)",
                rounding);
    o->impl.fp32_to_bf16_rounding =
        rounding == SAMBA_BF16_TRUNCATION ? rng::Bf16Rounding::Truncation : rng::Bf16Rounding::NearestEven;
  });
}

void samba_lazy_param_options_release(samba_lazy_param_options* o) { delete o; }

samba_status samba_session_enable_lazy_param(samba_session* s, const samba_lazy_param_options* o) {
  return SAMBA_GUARDED({
    require(s, "session");
    s->impl.set_lazy_settings(o ? o->impl : rng::LazySettings{});
  });
}

samba_status samba_session_disable_lazy_param(samba_session* s) {
  return SAMBA_GUARDED({
    require(s, "session");
    s->impl.set_lazy_settings(std::nullopt);
  });
}

samba_status samba_session_use_lazy_param(const samba_session* s, int32_t* out) {
  return SAMBA_GUARDED({
    require(s, "session");
    require(out, "out");
    *out = s->impl.lazy_settings().has_value() ? 1 : 0;
  });
}

samba_status samba_session_reset_random_generator(samba_session* s) {
  return SAMBA_GUARDED({
    require(s, "session");
    s->impl.reset_random_generator();
  });
}

samba_status samba_session_random_stream(samba_session* s, uint64_t* seed, uint64_t* stream) {
  return SAMBA_GUARDED({
    require(s, "session");
    require(seed, "seed");
    require(stream, "stream");
    *seed = s->impl.seed();
    *stream = s->impl.next_random_stream();
  });
}

samba_status samba_materializer_create(const char* kind, const samba_attrs* params, samba_materializer** out) {
  return SAMBA_GUARDED({
    out_param(out, "out");
    require(kind, "kind");
    pef::MaterializerDesc d{kind, params ? params->impl : Attrs{}};
    auto m = std::make_unique<samba_materializer>();
    m->impl = std::make_shared<const rng::Materializer>(std::move(d));
    *out = m.release();
  });
}

samba_status samba_materializer_create_custom(samba_materialize_fn fn, void* user_data, void (*destroy)(void*),
                                              samba_materializer** out) {
  return SAMBA_GUARDED({
    out_param(out, "out");
    require(reinterpret_cast<const void*>(fn), "fn");
    auto m = std::make_unique<samba_materializer>();
    m->impl = std::make_shared<const rng::Materializer>(custom_fn(fn, user_data, destroy));
    *out = m.release();
  });
}

samba_status samba_materializer_retain(samba_materializer* m) {
  return SAMBA_GUARDED({
    require(m, "m");
    m->refs.fetch_add(1, std::memory_order_relaxed);
  });
}

void samba_materializer_release(samba_materializer* m) {
  if (m && m->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete m;
}

samba_status samba_materializer_kind(const samba_materializer* m, const char** out) {
  return SAMBA_GUARDED({
    out_param(out, "out");
    require(m, "m");
    *out = m->impl->kind().c_str();
  });
}

samba_status samba_rng_stream_uniform(const samba_rng_stream* r, samba_tensor* t, double low, double high) {
  return SAMBA_GUARDED({
    const auto& rng = stream_of(r);
    Tensor out = floating_out(t, "uniform");
    SAMBA_CHECK(std::isfinite(low) && std::isfinite(high) && low <= high, Status::InvalidArgument,
                "uniform: the range [{}, {}) must be finite with low <= high", low, high);
    rng.uniform(out, low, high);
  });
}

samba_status samba_rng_stream_normal(const samba_rng_stream* r, samba_tensor* t, double mean, double std) {
  return SAMBA_GUARDED({
    const auto& rng = stream_of(r);
    Tensor out = floating_out(t, "normal");
    SAMBA_CHECK(std::isfinite(mean) && std::isfinite(std) && std >= 0, Status::InvalidArgument,
                "normal: mean {} and std {} must be finite with std >= 0", mean, std);
    rng.normal(out, mean, std);
  });
}

samba_status samba_rng_stream_integers(const samba_rng_stream* r, samba_tensor* t, int64_t low, int64_t high) {
  return SAMBA_GUARDED({
    const auto& rng = stream_of(r);
    Tensor out = tensor_arg(t, "out");
    SAMBA_CHECK(low < high, Status::InvalidArgument, "integers: the range [{}, {}) is empty", low, high);
    SAMBA_CHECK(out.dtype() != DType::Bool, Status::DTypeMismatch, "integers: out must not be bool");
    if (!is_floating(out.dtype())) {
      check_representable(static_cast<double>(low), out.dtype(), "integers: low");
      check_representable(static_cast<double>(high - 1), out.dtype(), "integers: high - 1");
    }
    rng.integers(out, low, high);
  });
}

samba_status samba_session_create_parameter(samba_session* s, const char* name, samba_dtype dtype,
                                            const int64_t* shape, size_t ndim, samba_materializer* m,
                                            samba_tensor** out) {
  return SAMBA_GUARDED({
    out_param(out, "out");
    require(s, "session");
    require(name, "name");
    require(m, "m");
    const DType dt = checked_dtype(dtype, "dtype");
    const Dims dims = checked_dims(shape, ndim, "shape");
    const bool lazy = s->impl.lazy_settings().has_value();
    ThreadPool::Scope scope(&s->impl.pool());
    Tensor t = rng::make_parameter(name, dt, dims, m->impl, s->impl.materialize_options(), lazy);
    *out = to_handle(std::move(t));
  });
}

samba_status samba_tensor_set_materializer(samba_tensor* t, samba_materializer* m) {
  return SAMBA_GUARDED({
    Tensor x = tensor_arg(t, "t");
    rng::MaterializeOptions defaults;
    defaults.init_threads = 0;
    rng::set_materializer(x, m ? m->impl : nullptr, defaults);
  });
}

samba_status samba_tensor_materializer(const samba_tensor* t, samba_materializer** out) {
  return SAMBA_GUARDED({
    out_param(out, "out");
    Tensor x = tensor_arg(t, "t");
    if (const auto* init = rng::lazy_initializer(x)) {
      auto m = std::make_unique<samba_materializer>();
      m->impl = init->materializer();
      *out = m.release();
    }
  });
}

samba_status samba_tensor_materialize_(samba_tensor* t) {
  return SAMBA_GUARDED({
    Tensor x = tensor_arg(t, "t");
    SAMBA_CHECK(!x.is_symbolic(), Status::InvalidState,
                "materialize_: tensor '{}' is symbolic (it exists only while tracing)", x.name());
    x.materialize();
  });
}

samba_status samba_tensor_has_data(const samba_tensor* t, int32_t* out) {
  return SAMBA_GUARDED({
    Tensor x = tensor_arg(t, "t");
    require(out, "out");
    *out = x.has_data() ? 1 : 0;
  });
}

}  // extern "C"
