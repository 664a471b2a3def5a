/* samba/core.h: version, status codes and error messages, logging, element types, sessions.
 * Part of the C interface; include <samba.h>, which includes every part and
 * states the conventions (ownership, errors, thread safety) they all follow. */
#ifndef SAMBA_CORE_H
#define SAMBA_CORE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Marks the exported functions: default visibility when the library is
 * built (everything else is hidden), nothing for the library's users. */
#if defined(SAMBA_BUILDING_LIBRARY)
#define SAMBA_API __attribute__((visibility("default")))
#else
#define SAMBA_API
#endif

/* ==== Version ============================================================ */

/* The version of this header. */
#define SAMBA_VERSION_MAJOR 0
#define SAMBA_VERSION_MINOR 1
#define SAMBA_VERSION_PATCH 0

/* The library's version as "MAJOR.MINOR.PATCH". Never fails; the string is
 * static. Compare with the SAMBA_VERSION_* macros to detect a header/library
 * mismatch. */
SAMBA_API const char* samba_version(void);

/* The library's version as MAJOR * 10000 + MINOR * 100 + PATCH. */
SAMBA_API int32_t samba_version_number(void);

/* The vector ISA level the library's kernels run at in this process:
 * "generic", "avx2" (AVX2 + FMA), "avx512" (AVX-512 F/BW/VL/DQ) or
 * "avx512_bf16" (AVX-512 with AVX512_BF16). It is the best level the CPU has
 * among those the library was built with, chosen at the first call into the
 * kernels, unless SAMBA_ISA in the environment names a lower one (an unknown
 * or unsupported value is reported once through the log and the best level
 * is used). Never fails; the string is static. */
SAMBA_API const char* samba_isa_name(void);

/* ==== Status and errors =================================================== */

/* What every function that can fail returns: SAMBA_OK or one of the
 * SAMBA_ERR_* codes below; samba_last_error_message says what went wrong. */
typedef int32_t samba_status;

#define SAMBA_OK 0                    /* the call succeeded */
#define SAMBA_ERR_INVALID_ARGUMENT 1  /* a value is outside what the function accepts */
#define SAMBA_ERR_NULL_POINTER 2      /* a required pointer or handle is NULL */
#define SAMBA_ERR_OUT_OF_RANGE 3      /* an index, dim or size is out of range or overflows */
#define SAMBA_ERR_SHAPE_MISMATCH 4    /* shapes do not agree or broadcast */
#define SAMBA_ERR_DTYPE_MISMATCH 5    /* a dtype is not supported or does not match */
#define SAMBA_ERR_NOT_FOUND 6         /* unknown op, attribute, tensor or name */
#define SAMBA_ERR_OUT_OF_MEMORY 7     /* an allocation failed */
#define SAMBA_ERR_UNSUPPORTED 8       /* a feature that is not supported (yet) */
#define SAMBA_ERR_INVALID_STATE 9     /* the object is not in a state that allows the call */
#define SAMBA_ERR_IO 10               /* reading or writing a file failed */
#define SAMBA_ERR_CORRUPT_FILE 11     /* a file's contents are invalid */
#define SAMBA_ERR_VERSION_MISMATCH 12 /* a file needs a newer runtime */
#define SAMBA_ERR_TIMEOUT 13          /* a wait ran out of time */
#define SAMBA_ERR_CANCELLED 14        /* the operation was stopped */
#define SAMBA_ERR_INTERNAL 15         /* a bug in Samba; please report it */

/* The message of the last failed call on the calling thread ("" if none).
 * BORROWED: valid until the next failing samba call on this thread. */
SAMBA_API const char* samba_last_error_message(void);

/* The status of the last failed call on the calling thread (SAMBA_OK if none). */
SAMBA_API samba_status samba_last_error_code(void);

/* For callbacks (model, materializer, loader): records `code` and `message`
 * (copied; NULL means "") as the calling thread's last error, so the Samba
 * call that invoked the callback reports them when the callback returns
 * that failing status. Errors: OUT_OF_MEMORY. */
SAMBA_API samba_status samba_set_error_message(samba_status code, const char* message);

/* A static name for a status code ("SAMBA_ERR_SHAPE_MISMATCH"); "unknown
 * status" for codes this version does not define. Never fails. */
SAMBA_API const char* samba_status_name(samba_status status);

/* ==== Logging ============================================================= */

/* Log levels: messages at the level set or more severe are delivered. */
typedef int32_t samba_log_level; /* one of SAMBA_LOG_* */
#define SAMBA_LOG_ERROR 0
#define SAMBA_LOG_WARNING 1 /* the default (or SAMBA_LOG_LEVEL in the environment) */
#define SAMBA_LOG_INFO 2
#define SAMBA_LOG_DEBUG 3

/* Process-wide. Errors: INVALID_ARGUMENT (unknown level). */
SAMBA_API samba_status samba_set_log_level(samba_log_level level);

/* Receives every delivered message (BORROWED string, valid during the
 * call), from whichever thread logs; it must be thread-safe and must not
 * call back into Samba. NULL restores the default (stderr). Process-wide. */
typedef void (*samba_log_fn)(void* user_data, samba_log_level level, const char* message);
SAMBA_API samba_status samba_set_log_sink(samba_log_fn sink, void* user_data);

/* ==== Element types ======================================================= */

/* A tensor's element type: one of the SAMBA_<TYPE> codes below (torch's
 * dtype of the same name). */
typedef int32_t samba_dtype;

#define SAMBA_FLOAT32 0  /* IEEE binary32 (torch.float32) */
#define SAMBA_BFLOAT16 1 /* bfloat16: float32's exponent, 8-bit mantissa (torch.bfloat16) */
#define SAMBA_FLOAT16 2  /* IEEE binary16 (torch.float16) */
#define SAMBA_FLOAT64 3  /* IEEE binary64 (torch.float64) */
#define SAMBA_INT64 4    /* torch.int64; indices and labels */
#define SAMBA_INT32 5    /* torch.int32 */
#define SAMBA_INT16 6    /* torch.int16 */
#define SAMBA_INT8 7     /* torch.int8 */
#define SAMBA_UINT8 8    /* torch.uint8 */
#define SAMBA_BOOL 9     /* one byte, 0 or 1 (torch.bool) */

/* Static name of a dtype ("float32"), or NULL for an invalid code. */
SAMBA_API const char* samba_dtype_name(samba_dtype dtype);

/* Bytes per element of a dtype, or 0 for an invalid code. */
SAMBA_API size_t samba_dtype_size(samba_dtype dtype);

/* Parses a dtype name ("float32", "float", "bf16", "long", ...) into *out.
 * Errors: NULL_POINTER, INVALID_ARGUMENT for an unknown name. */
SAMBA_API samba_status samba_dtype_from_name(const char* name, samba_dtype* out);

/* torch.promote_types(a, b) into *out. Errors: NULL_POINTER, INVALID_ARGUMENT. */
SAMBA_API samba_status samba_promote_types(samba_dtype a, samba_dtype b, samba_dtype* out);

/* ==== Sessions ============================================================ */

/* Options for samba_session_create. Not thread-safe; use from one thread. */
typedef struct samba_session_options samba_session_options;

/* A session: the thread pool every op and run of the session uses, the
 * random seed, and (later) the loaded program. Thread-safe: ops may be called
 * on one session from many threads at once. */
typedef struct samba_session samba_session;

/* Creates options with defaults (threads = hardware threads, seed = 0).
 * OWNED: release with samba_session_options_release. Errors: NULL_POINTER,
 * OUT_OF_MEMORY. */
SAMBA_API samba_status samba_session_options_create(samba_session_options** out);

/* Number of threads of the session's pool; <= 0 means one per hardware
 * thread. Errors: NULL_POINTER, INVALID_ARGUMENT (more than 1024). */
SAMBA_API samba_status samba_session_options_set_num_threads(samba_session_options* opts,
                                                             int32_t threads);

/* Seed of the session's random generator (rand, randn, dropout, ...).
 * Errors: NULL_POINTER. */
SAMBA_API samba_status samba_session_options_set_seed(samba_session_options* opts, uint64_t seed);

/* Releases options. Accepts NULL. */
SAMBA_API void samba_session_options_release(samba_session_options* opts);

/* Creates a session; `opts` may be NULL for defaults and is not retained.
 * OWNED: release with samba_session_release. Errors: NULL_POINTER (out),
 * OUT_OF_MEMORY. */
SAMBA_API samba_status samba_session_create(const samba_session_options* opts, samba_session** out);

/* Releases a session. Tensors created through it stay valid. Accepts NULL.
 * Must not be called while another thread uses the session. */
SAMBA_API void samba_session_release(samba_session* session);

/* Number of threads in the session's pool. Errors: NULL_POINTER. */
SAMBA_API samba_status samba_session_num_threads(const samba_session* session, int32_t* out);

/* Sets the seed of the session's random generator (the seeds' set_seed).
 * Errors: NULL_POINTER. */
SAMBA_API samba_status samba_session_set_seed(samba_session* session, uint64_t seed);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* SAMBA_CORE_H */
