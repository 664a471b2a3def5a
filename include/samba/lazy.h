/* samba/lazy.h: lazy parameters, materializers and the random streams they draw from.
 * Part of the C interface; include <samba.h>, which includes every part and
 * states the conventions (ownership, errors, thread safety) they all follow. */
#ifndef SAMBA_LAZY_H
#define SAMBA_LAZY_H

#include "run.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ==== Lazy parameters and materializers ================================== */

/* How random values are rounded from float32 to bfloat16. */
typedef int32_t samba_bf16_rounding; /* one of SAMBA_BF16_* */
#define SAMBA_BF16_NEAREST_EVEN 0 /* round to nearest, ties to even; NaN stays NaN */
#define SAMBA_BF16_TRUNCATION 1   /* drop the low 16 bits */

/* enable_lazy_param's arguments. Not thread-safe; use from one thread. */
typedef struct samba_lazy_param_options samba_lazy_param_options;

/* Creates options with the defaults: no seed (the session's seed is used),
 * 8 init threads, Box-Muller normals, nearest-even bf16 rounding. OWNED:
 * release with samba_lazy_param_options_release. Errors: NULL_POINTER. */
SAMBA_API samba_status samba_lazy_param_options_create(samba_lazy_param_options** out);
/* The seed lazy values are drawn with; values depend only on (seed,
 * tensor sn_name, element index). Errors: NULL_POINTER. */
SAMBA_API samba_status samba_lazy_param_options_set_seed(samba_lazy_param_options* opts, uint64_t seed);
/* Threads materializing one tensor (1..1024); the values do not depend on
 * it. Errors: NULL_POINTER, INVALID_ARGUMENT. */
SAMBA_API samba_status samba_lazy_param_options_set_init_threads(samba_lazy_param_options* opts,
                                                                 int32_t threads);
/* Normal samples by inverse transform sampling (1) instead of Box-Muller (0).
 * Errors: NULL_POINTER. */
SAMBA_API samba_status samba_lazy_param_options_set_inverse_transform_sampling(
    samba_lazy_param_options* opts, int32_t enable);
/* SAMBA_BF16_NEAREST_EVEN or SAMBA_BF16_TRUNCATION. Errors: NULL_POINTER,
 * INVALID_ARGUMENT. */
SAMBA_API samba_status samba_lazy_param_options_set_bf16_rounding(samba_lazy_param_options* opts,
                                                                  samba_bf16_rounding rounding);
/* Releases options. Accepts NULL. */
SAMBA_API void samba_lazy_param_options_release(samba_lazy_param_options* opts);

/* enable_lazy_param: from now on samba_session_create_parameter makes
 * placeholders (shape, dtype, name, materializer; no data). Compiling never
 * materializes them; loading (trace_graph with transfer, to_rdu)
 * materializes them straight into device memory; reading their data on the
 * host (samba_tensor_data, copies, ops, samba_tensor_materialize_)
 * materializes them on the host. `opts` may be NULL for the defaults and is
 * copied. Errors: NULL_POINTER, INVALID_ARGUMENT. */
SAMBA_API samba_status samba_session_enable_lazy_param(samba_session* session,
                                                       const samba_lazy_param_options* opts);
/* disable_lazy_param: parameters created from now on are materialized at
 * once. Placeholders already made stay lazy. Errors: NULL_POINTER. */
SAMBA_API samba_status samba_session_disable_lazy_param(samba_session* session);
/* use_lazy_param: *out = 1 in lazy parameter mode. Errors: NULL_POINTER. */
SAMBA_API samba_status samba_session_use_lazy_param(const samba_session* session, int32_t* out);

/* reset_random_generator: the session's random draws (samba_session_random_stream)
 * start again from the first stream of its seed. Errors: NULL_POINTER. */
SAMBA_API samba_status samba_session_reset_random_generator(samba_session* session);
/* The (seed, stream) pair of the session's next random draw: pass them as
 * the `seed` and `offset` attributes of rand, randn, randint or normal to
 * draw values that are new at each call and repeat after
 * samba_session_reset_random_generator or samba_session_set_seed.
 * Errors: NULL_POINTER. Thread-safe. */
SAMBA_API samba_status samba_session_random_stream(samba_session* session, uint64_t* seed,
                                                   uint64_t* stream);

/* A materializer: what fills a parameter with its initial values
 * (SambaTensor.materializer). Refcounted and immutable; thread-safe. */
typedef struct samba_materializer samba_materializer;
/* The random stream a materializer draws from (the seeds' MultithreadedRNG):
 * keyed by (seed, the tensor's sn_name); every fill starts at element 0. */
typedef struct samba_rng_stream samba_rng_stream;

/* A built-in materializer with torch.nn.init's formulas and parameter names:
 * "uniform" (a, b), "normal" (mean, std), "zeros", "ones", "constant" (val),
 * "xavier_uniform" (gain), "xavier_normal" (gain), "kaiming_uniform" and
 * "kaiming_normal" (a, mode "fan_in"/"fan_out", nonlinearity),
 * "trunc_normal" (mean, std, a, b: absolute bounds), and the layers'
 * defaults "linear_weight", "conv_weight" (kaiming_uniform, a = sqrt 5),
 * "linear_bias", "conv_bias" (fan_in: uniform in +-1/sqrt(fan_in)),
 * "embedding" (padding_idx), "norm_weight", "norm_bias". `params` may be
 * NULL (all defaults) and is copied. Built-ins are stored in PEF files.
 * OWNED: release with samba_materializer_release. Errors: NULL_POINTER,
 * NOT_FOUND (unknown kind). Parameters are checked against each tensor the
 * materializer is given to. */
SAMBA_API samba_status samba_materializer_create(const char* kind, const samba_attrs* params,
                                                 samba_materializer** out);

/* A custom materializer: fills `out` (BORROWED, contiguous, the tensor's
 * shape and dtype, with data) using `rng` (BORROWED, valid during the
 * call). Returns SAMBA_OK or a failing status (with a message set by
 * samba_set_error_message); then the tensor stays unmaterialized. Called on
 * the thread that materializes. */
typedef samba_status (*samba_materialize_fn)(void* user_data, samba_tensor* out,
                                             const samba_rng_stream* rng);
/* Wraps a callback; `destroy` (may be NULL) is called with user_data once,
 * when the last reference (handle or tensor) goes. Custom materializers are
 * not stored in PEFs. OWNED. Errors: NULL_POINTER (out or fn). */
SAMBA_API samba_status samba_materializer_create_custom(samba_materialize_fn fn, void* user_data,
                                                        void (*destroy)(void* user_data),
                                                        samba_materializer** out);
/* Adds a reference. Errors: NULL_POINTER. */
SAMBA_API samba_status samba_materializer_retain(samba_materializer* m);
/* Drops a reference. Accepts NULL. */
SAMBA_API void samba_materializer_release(samba_materializer* m);
/* The kind ("kaiming_uniform", ..., "custom"). BORROWED while m lives.
 * Errors: NULL_POINTER. */
SAMBA_API samba_status samba_materializer_kind(const samba_materializer* m, const char** out);

/* Fills `out` (any floating dtype, with data) with uniform values in
 * [low, high) from the stream. Errors: NULL_POINTER, DTYPE_MISMATCH,
 * INVALID_ARGUMENT (low > high or not finite). */
SAMBA_API samba_status samba_rng_stream_uniform(const samba_rng_stream* rng, samba_tensor* out, double low,
                                                double high);
/* Fills `out` with normal values (mean, std >= 0) from the stream, by the
 * session's normal method. Errors: as samba_rng_stream_uniform. */
SAMBA_API samba_status samba_rng_stream_normal(const samba_rng_stream* rng, samba_tensor* out, double mean,
                                               double std);
/* Fills `out` (an integer or floating dtype) with integers in [low, high).
 * Errors: NULL_POINTER, INVALID_ARGUMENT (empty range), DTYPE_MISMATCH. */
SAMBA_API samba_status samba_rng_stream_integers(const samba_rng_stream* rng, samba_tensor* out,
                                                 int64_t low, int64_t high);

/* A parameter named `name` (requires_grad for floating dtypes) whose values
 * come from `m` (RETAINED): a placeholder without data in lazy mode,
 * materialized now otherwise; both with the session's lazy settings, so the
 * values are the same either way. OWNED. Errors: NULL_POINTER,
 * INVALID_ARGUMENT (bad shape, or parameters the materializer refuses for
 * this shape), DTYPE_MISMATCH, NOT_FOUND, OUT_OF_MEMORY, the custom
 * materializer's status. */
SAMBA_API samba_status samba_session_create_parameter(samba_session* session, const char* name,
                                                      samba_dtype dtype, const int64_t* shape, size_t ndim,
                                                      samba_materializer* m, samba_tensor** out);
/* Sets the tensor's materializer (RETAINED; NULL removes it, refused while
 * the tensor has no data). A built-in one is recorded in the PEF when the
 * tensor is compiled as a parameter or buffer. Errors: NULL_POINTER,
 * INVALID_ARGUMENT / DTYPE_MISMATCH (the materializer cannot fill this
 * tensor), INVALID_STATE. */
SAMBA_API samba_status samba_tensor_set_materializer(samba_tensor* t, samba_materializer* m);
/* The tensor's materializer into *out: OWNED, or NULL when it has none.
 * Errors: NULL_POINTER. */
SAMBA_API samba_status samba_tensor_materializer(const samba_tensor* t, samba_materializer** out);
/* materialize_: gives a placeholder its data; does nothing for a tensor that
 * has data. Thread-safe. Errors: NULL_POINTER, INVALID_STATE (a symbolic
 * tensor), the materializer's errors (the tensor then stays a placeholder). */
SAMBA_API samba_status samba_tensor_materialize_(samba_tensor* t);
/* *out = 1 when the tensor has data (0 for a placeholder or a symbolic
 * tensor). Errors: NULL_POINTER. */
SAMBA_API samba_status samba_tensor_has_data(const samba_tensor* t, int32_t* out);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* SAMBA_LAZY_H */
