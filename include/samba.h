/*
 * samba.h: the C interface of Samba, an engine for the SambaFlow programming
 * model (trace a model, compile it to a PEF, run the PEF section by section on
 * an emulated RDU).
 *
 * Conventions, which hold for every function below unless its comment says
 * otherwise:
 *
 *  - Handles are opaque. Functions named *_create, *_copy, or that return a
 *    tensor through an out-parameter give the caller an OWNED reference: the
 *    caller releases it (samba_tensor_release, samba_attrs_release, ...).
 *    Functions documented as returning a BORROWED pointer give no ownership;
 *    the comment says how long it stays valid. Every release function accepts
 *    NULL.
 *  - Fallible functions return samba_status: SAMBA_OK (0) on success, a code
 *    below otherwise. After a failure, samba_last_error_message() describes
 *    what was wrong and what was expected; out-parameters are set to NULL (or
 *    left unchanged for plain values), nothing leaks, and every object is
 *    left as it was before the call.
 *  - Shapes are int64_t arrays with a size_t rank; byte counts are size_t.
 *  - Thread safety: each handle type states it in one line. The library
 *    itself has no global mutable state beyond per-thread error messages.
 *  - Compatibility: functions are only ever added. A changed signature gets a
 *    new name (suffix _v2). Status and dtype codes are never renumbered.
 */
#ifndef SAMBA_H
#define SAMBA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(SAMBA_BUILDING_LIBRARY)
#define SAMBA_API __attribute__((visibility("default")))
#else
#define SAMBA_API
#endif

/* ==== Version ============================================================ */

#define SAMBA_VERSION_MAJOR 0
#define SAMBA_VERSION_MINOR 1
#define SAMBA_VERSION_PATCH 0

/* The library's version as "MAJOR.MINOR.PATCH". Never fails; the string is
 * static. Compare with the SAMBA_VERSION_* macros to detect a header/library
 * mismatch. */
SAMBA_API const char* samba_version(void);

/* The library's version as MAJOR * 10000 + MINOR * 100 + PATCH. */
SAMBA_API int32_t samba_version_number(void);

/* ==== Status and errors =================================================== */

typedef int32_t samba_status;

#define SAMBA_OK 0
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
#define SAMBA_LOG_ERROR 0
#define SAMBA_LOG_WARNING 1 /* the default (or SAMBA_LOG_LEVEL in the environment) */
#define SAMBA_LOG_INFO 2
#define SAMBA_LOG_DEBUG 3

/* Process-wide. Errors: INVALID_ARGUMENT (unknown level). */
SAMBA_API samba_status samba_set_log_level(int32_t level);

/* Receives every delivered message (BORROWED string, valid during the
 * call), from whichever thread logs; it must be thread-safe and must not
 * call back into Samba. NULL restores the default (stderr). Process-wide. */
typedef void (*samba_log_fn)(void* user_data, int32_t level, const char* message);
SAMBA_API samba_status samba_set_log_sink(samba_log_fn sink, void* user_data);

/* ==== Element types ======================================================= */

typedef int32_t samba_dtype;

#define SAMBA_FLOAT32 0
#define SAMBA_BFLOAT16 1
#define SAMBA_FLOAT16 2
#define SAMBA_FLOAT64 3
#define SAMBA_INT64 4
#define SAMBA_INT32 5
#define SAMBA_INT16 6
#define SAMBA_INT8 7
#define SAMBA_UINT8 8
#define SAMBA_BOOL 9

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

/* ==== Tensors ============================================================= */

/* A tensor: a dtype, a shape and strides viewing refcounted storage, plus
 * identity (sn_name, region name, requires_grad, grad). Thread safety:
 * reading one tensor from many threads is safe; writing its data or
 * metadata while another thread uses it is not. */
typedef struct samba_tensor samba_tensor;

/* Adds a reference. Errors: NULL_POINTER. */
SAMBA_API samba_status samba_tensor_retain(samba_tensor* t);

/* Drops a reference; the tensor is freed with its last one. Accepts NULL. */
SAMBA_API void samba_tensor_release(samba_tensor* t);

/* Creates a contiguous tensor of `dtype` and `shape` (ndim dims, shape may be
 * NULL when ndim is 0), filled with zeros. OWNED.
 * Errors: NULL_POINTER, INVALID_ARGUMENT (bad dtype, negative dim, rank over
 * 16), OUT_OF_RANGE (the byte count overflows), OUT_OF_MEMORY. */
SAMBA_API samba_status samba_tensor_create(samba_dtype dtype, const int64_t* shape, size_t ndim,
                                           samba_tensor** out);

/* Creates a tensor that BORROWS caller memory `data` (no copy): the caller
 * keeps it alive and unchanged in size until the tensor and every view of it
 * are released. `strides` (in elements) may be NULL for a contiguous layout.
 * OWNED tensor handle. Errors: NULL_POINTER, INVALID_ARGUMENT (negative
 * stride, bad dtype), OUT_OF_RANGE. */
SAMBA_API samba_status samba_tensor_wrap(void* data, samba_dtype dtype, const int64_t* shape,
                                         size_t ndim, const int64_t* strides, samba_tensor** out);

/* Called once when the engine no longer needs adopted memory. May be called
 * from any thread that releases the last reference. */
typedef void (*samba_deleter)(void* data, void* user_data);

/* Like samba_tensor_wrap, but ownership of `data` moves to the engine, which
 * calls deleter(data, user_data) when the last reference goes. On failure the
 * deleter is NOT called: the caller still owns `data`. `deleter` may be NULL
 * when nothing needs to be done. OWNED tensor handle. */
SAMBA_API samba_status samba_tensor_adopt(void* data, samba_dtype dtype, const int64_t* shape,
                                          size_t ndim, const int64_t* strides,
                                          samba_deleter deleter, void* user_data,
                                          samba_tensor** out);

/* Creates a 0-dim tensor holding a number that promotes like a Python scalar
 * (float64 for samba_scalar_float, int64 for samba_scalar_int, but an
 * int8 tensor + integer scalar stays int8). OWNED. Errors: NULL_POINTER. */
SAMBA_API samba_status samba_scalar_float(double value, samba_tensor** out);
SAMBA_API samba_status samba_scalar_int(int64_t value, samba_tensor** out);

/* Shape, strides (elements) and rank. BORROWED arrays, valid until the tensor
 * is released or reshaped in place. Errors: NULL_POINTER. */
SAMBA_API samba_status samba_tensor_ndim(const samba_tensor* t, size_t* out);
SAMBA_API samba_status samba_tensor_shape(const samba_tensor* t, const int64_t** dims,
                                          size_t* ndim);
SAMBA_API samba_status samba_tensor_strides(const samba_tensor* t, const int64_t** strides,
                                            size_t* ndim);

/* dtype, element count, bytes per element, and contiguity. Errors: NULL_POINTER. */
SAMBA_API samba_status samba_tensor_dtype(const samba_tensor* t, samba_dtype* out);
SAMBA_API samba_status samba_tensor_numel(const samba_tensor* t, int64_t* out);
SAMBA_API samba_status samba_tensor_element_size(const samba_tensor* t, size_t* out);
SAMBA_API samba_status samba_tensor_is_contiguous(const samba_tensor* t, int32_t* out);

/* Pointer to the first element. BORROWED: valid while the tensor lives and
 * its data is not cleared. Errors: NULL_POINTER, INVALID_STATE (a symbolic
 * tensor, or data cleared). */
SAMBA_API samba_status samba_tensor_data(const samba_tensor* t, void** out);

/* Copies nbytes = numel * element_size from `src` (C-contiguous layout) into
 * the tensor, honouring its strides. Errors: NULL_POINTER, INVALID_ARGUMENT
 * (nbytes differs), INVALID_STATE. */
SAMBA_API samba_status samba_tensor_copy_from(samba_tensor* t, const void* src, size_t nbytes);

/* Copies the tensor's elements in C-contiguous order into `dst` of nbytes.
 * Errors as samba_tensor_copy_from. */
SAMBA_API samba_status samba_tensor_copy_to(const samba_tensor* t, void* dst, size_t nbytes);

/* The single element of a one-element tensor, converted. Errors:
 * NULL_POINTER, INVALID_ARGUMENT (not one element), INVALID_STATE. */
SAMBA_API samba_status samba_tensor_item(const samba_tensor* t, double* out);
SAMBA_API samba_status samba_tensor_item_int(const samba_tensor* t, int64_t* out);

/* sn_name and region name. Getters return BORROWED strings valid until the
 * name is set again or the tensor is released ("" when unnamed; the region
 * name defaults to the sn_name). Setters copy the string. Errors:
 * NULL_POINTER. */
SAMBA_API samba_status samba_tensor_name(const samba_tensor* t, const char** out);
SAMBA_API samba_status samba_tensor_set_name(samba_tensor* t, const char* name);
SAMBA_API samba_status samba_tensor_region_name(const samba_tensor* t, const char** out);
SAMBA_API samba_status samba_tensor_set_region_name(samba_tensor* t, const char* name);

/* requires_grad: whether autograd records ops on this tensor. Setting it on
 * a non-floating tensor fails with DTYPE_MISMATCH; on a non-leaf tensor
 * (one produced by an op with history) with INVALID_STATE. */
SAMBA_API samba_status samba_tensor_requires_grad(const samba_tensor* t, int32_t* out);
SAMBA_API samba_status samba_tensor_set_requires_grad(samba_tensor* t, int32_t requires_grad);

/* The accumulated gradient, or NULL when none. BORROWED: valid until the
 * tensor is released or its grad is set again; backward accumulates into the
 * same tensor in place. Errors: NULL_POINTER. */
SAMBA_API samba_status samba_tensor_grad(const samba_tensor* t, samba_tensor** out);

/* Replaces the gradient (`grad` may be NULL to clear it; it is retained, not
 * copied). Errors: NULL_POINTER, SHAPE_MISMATCH, DTYPE_MISMATCH. */
SAMBA_API samba_status samba_tensor_set_grad(samba_tensor* t, samba_tensor* grad);

/* SambaTensor.backward: accumulates d(t)/d(leaf) * grad into the .grad of
 * every leaf that requires grad. `grad` may be NULL when t has one element
 * (a gradient of ones). With retain_graph = 0 the history is freed and a
 * second backward through it fails with INVALID_STATE.
 * Errors: NULL_POINTER, INVALID_STATE (t does not require grad),
 * SHAPE_MISMATCH, INVALID_ARGUMENT (grad missing for a non-scalar). */
SAMBA_API samba_status samba_tensor_backward(samba_tensor* t, samba_tensor* grad,
                                             int32_t retain_graph);

/* Marks t as a model parameter (SambaFlow's parameters are marked by
 * from_torch_model_): the compiler treats it as a weight even when it does
 * not require grad (a frozen weight). Errors: NULL_POINTER. */
SAMBA_API samba_status samba_tensor_set_parameter(samba_tensor* t, int32_t is_parameter);
SAMBA_API samba_status samba_tensor_is_parameter(const samba_tensor* t, int32_t* out);

/* Device memory a compiled tensor should live in (SambaTensor.mem_type):
 * SAMBA_MEM_AUTO lets the compiler decide (DDR, or HOST for inputs and
 * outputs with io_host_memory). Errors: NULL_POINTER, INVALID_ARGUMENT. */
#define SAMBA_MEM_AUTO (-1)
#define SAMBA_MEM_DDR 0
#define SAMBA_MEM_HBM 1
#define SAMBA_MEM_HOST 2
SAMBA_API samba_status samba_tensor_set_mem_type(samba_tensor* t, int32_t mem_type);
SAMBA_API samba_status samba_tensor_mem_type(const samba_tensor* t, int32_t* out);

/* ==== Tensor conversions and new tensors ================================== */

/* The dtype argument of samba_tensor_new_* that means "the dtype of t". */
#define SAMBA_DTYPE_SAME (-1)

/* Number of dimensions (SambaTensor.dim(), ndimension()). Errors: NULL_POINTER. */
SAMBA_API samba_status samba_tensor_dim(const samba_tensor* t, int64_t* out);

/* Bytes the tensor's elements occupy: numel * element_size (for a strided
 * view, what a contiguous copy would take). Errors: NULL_POINTER. */
SAMBA_API samba_status samba_tensor_nbytes(const samba_tensor* t, size_t* out);

/* *out = 1 when the dtype is float32, bfloat16, float16 or float64, else 0.
 * Errors: NULL_POINTER. */
SAMBA_API samba_status samba_tensor_is_floating_point(const samba_tensor* t, int32_t* out);

/* SambaTensor.to(dtype) / type(dtype): t converted to `dtype`. When t already
 * has that dtype, *out is a new reference to t itself (no copy), as in
 * PyTorch; otherwise a new contiguous tensor. Differentiable: gradients flow
 * back to t (converted to t's dtype). OWNED. Errors: NULL_POINTER,
 * INVALID_ARGUMENT (bad dtype code), INVALID_STATE (t has no data). */
SAMBA_API samba_status samba_tensor_to(samba_tensor* t, samba_dtype dtype, samba_tensor** out);

/* SambaTensor.type_as(other): samba_tensor_to(t, dtype of other). Errors as
 * samba_tensor_to. */
SAMBA_API samba_status samba_tensor_type_as(samba_tensor* t, const samba_tensor* other,
                                            samba_tensor** out);

/* Shorthands for samba_tensor_to: bfloat16(), float() (float32), int()
 * (int32), long() (int64), short() (int16), bool(). Errors as
 * samba_tensor_to. */
SAMBA_API samba_status samba_tensor_bfloat16(samba_tensor* t, samba_tensor** out);
SAMBA_API samba_status samba_tensor_float(samba_tensor* t, samba_tensor** out);
SAMBA_API samba_status samba_tensor_int(samba_tensor* t, samba_tensor** out);
SAMBA_API samba_status samba_tensor_long(samba_tensor* t, samba_tensor** out);
SAMBA_API samba_status samba_tensor_short(samba_tensor* t, samba_tensor** out);
SAMBA_API samba_status samba_tensor_bool(samba_tensor* t, samba_tensor** out);

/* SambaTensor.new_empty / new_zeros / new_ones / new_full: a new contiguous
 * tensor of `shape` (ndim dims; shape may be NULL when ndim is 0) with dtype
 * `dtype`, or t's dtype when dtype is SAMBA_DTYPE_SAME. Only t's dtype is
 * read. new_empty leaves the values unspecified; new_full fills with
 * fill_value converted to the dtype (for bool: nonzero is true). With
 * requires_grad != 0 the new tensor is a leaf that requires grad. OWNED.
 * Errors: NULL_POINTER, INVALID_ARGUMENT (bad dtype code, negative dim, rank
 * over 16), OUT_OF_RANGE (the byte count overflows; fill_value is not finite
 * or out of range for an integer dtype), DTYPE_MISMATCH (requires_grad on a
 * non-floating dtype), OUT_OF_MEMORY. */
SAMBA_API samba_status samba_tensor_new_empty(const samba_tensor* t, const int64_t* shape,
                                              size_t ndim, samba_dtype dtype, int32_t requires_grad,
                                              samba_tensor** out);
SAMBA_API samba_status samba_tensor_new_zeros(const samba_tensor* t, const int64_t* shape,
                                              size_t ndim, samba_dtype dtype, int32_t requires_grad,
                                              samba_tensor** out);
SAMBA_API samba_status samba_tensor_new_ones(const samba_tensor* t, const int64_t* shape,
                                             size_t ndim, samba_dtype dtype, int32_t requires_grad,
                                             samba_tensor** out);
SAMBA_API samba_status samba_tensor_new_full(const samba_tensor* t, const int64_t* shape,
                                             size_t ndim, double fill_value, samba_dtype dtype,
                                             int32_t requires_grad, samba_tensor** out);

/* SambaTensor.reshape: the same elements in `shape` (one entry may be -1,
 * inferred from the element count). A view sharing t's data when t's layout
 * allows it, else a copy. Differentiable. OWNED. Errors: NULL_POINTER,
 * INVALID_ARGUMENT (a negative size other than one -1, rank over 16),
 * SHAPE_MISMATCH (element counts differ), INVALID_STATE (no data). */
SAMBA_API samba_status samba_tensor_reshape(samba_tensor* t, const int64_t* shape, size_t ndim,
                                            samba_tensor** out);

/* SambaTensor.view_as(other): a view of t with other's shape. Unlike reshape
 * it never copies: it fails when t's strides do not allow the view (call
 * samba_tensor_contiguous first). Differentiable. OWNED. Errors:
 * NULL_POINTER, SHAPE_MISMATCH (element counts differ), INVALID_ARGUMENT
 * (the layout does not allow a view), INVALID_STATE (no data). */
SAMBA_API samba_status samba_tensor_view_as(samba_tensor* t, const samba_tensor* other,
                                            samba_tensor** out);

/* SambaTensor.permute: a view whose dim i is t's dim dims[i] (negative dims
 * count from the end); no copy. Differentiable. OWNED. Errors: NULL_POINTER,
 * INVALID_ARGUMENT (ndim differs from t's rank, or dims is not a
 * permutation), OUT_OF_RANGE (a dim out of range). */
SAMBA_API samba_status samba_tensor_permute(samba_tensor* t, const int64_t* dims, size_t ndim,
                                            samba_tensor** out);

/* The T property: a view with the dims in reverse order (for a matrix, its
 * transpose; a vector or scalar is returned as a new view of itself).
 * Differentiable. OWNED. Errors: NULL_POINTER, INVALID_STATE (no data). */
SAMBA_API samba_status samba_tensor_t(samba_tensor* t, samba_tensor** out);

/* A C-contiguous tensor with t's values: a new reference to t itself when t
 * is already contiguous, else a copy. Differentiable. OWNED. Errors:
 * NULL_POINTER, INVALID_STATE (a copy is needed and t has no data),
 * OUT_OF_MEMORY. */
SAMBA_API samba_status samba_tensor_contiguous(samba_tensor* t, samba_tensor** out);

/* A contiguous copy of t that shares no memory with it. Differentiable (the
 * copy is not a leaf when t requires grad). Name and region name are not
 * copied. OWNED. Errors: NULL_POINTER, INVALID_STATE (no data),
 * OUT_OF_MEMORY. */
SAMBA_API samba_status samba_tensor_clone(samba_tensor* t, samba_tensor** out);

/* A new tensor sharing t's data (writes through either are seen by both)
 * with no autograd history and requires_grad = 0. OWNED. Errors:
 * NULL_POINTER. */
SAMBA_API samba_status samba_tensor_detach(samba_tensor* t, samba_tensor** out);

/* SambaTensor.clear_data: drops t's reference to its host data, which is
 * freed (or, for adopted memory, its deleter called) once no other view
 * shares it. Shape, dtype, names and requires_grad stay; afterwards data
 * access (samba_tensor_data, copy_to, item, ops) fails with INVALID_STATE.
 * Clearing a tensor without data succeeds. Errors: NULL_POINTER. */
SAMBA_API samba_status samba_tensor_clear_data(samba_tensor* t);

/* ==== DLPack =============================================================== */

/* Declared by dlpack/dlpack.h (DLPack 0.6 and later); samba.h needs only the
 * name. */
struct DLManagedTensor;

/* Imports a DLPack tensor without copying. dtypes map both ways for the ten
 * samba dtypes: kDLFloat 16/32/64, kDLBfloat 16, kDLInt 8/16/32/64, kDLUInt 8
 * (uint8), and bool as code 6 (kDLBool of DLPack 0.8+) with 8 bits; kDLUInt
 * with 1 bit is also read as bool. lanes must be 1; strides NULL means
 * C-contiguous; byte_offset is honoured. On success the engine OWNS
 * `managed` and calls managed->deleter(managed) (if not NULL) exactly once,
 * when the last tensor viewing the memory is released, from whichever thread
 * releases it. On failure nothing is taken: the caller still owns `managed`
 * and must call its deleter. A managed tensor made by samba_tensor_to_dlpack
 * comes back sharing the original storage. OWNED tensor handle. Errors:
 * NULL_POINTER (managed, out, or data with elements), UNSUPPORTED (a device
 * other than kDLCPU, an unmapped dtype, lanes != 1, negative strides),
 * INVALID_ARGUMENT (negative ndim or dim, rank over 16, misaligned
 * byte_offset), OUT_OF_RANGE (sizes overflow). */
SAMBA_API samba_status samba_tensor_from_dlpack(struct DLManagedTensor* managed,
                                                samba_tensor** out);

/* Exports t as a DLPack tensor (kDLCPU, device_id 0) viewing t's data
 * without a copy: dl_tensor.data is samba_tensor_data(t), byte_offset 0,
 * shape and strides (in elements) always filled. The managed tensor holds a
 * reference to t's storage; calling (*out)->deleter(*out) releases it and
 * frees the struct; the consumer must call it exactly once. Autograd history
 * is not carried. OWNED by the caller until passed to a consumer. Errors:
 * NULL_POINTER, INVALID_STATE (t has no data), OUT_OF_MEMORY. */
SAMBA_API samba_status samba_tensor_to_dlpack(samba_tensor* t, struct DLManagedTensor** out);

/* ==== Indexing (SambaTensor.__getitem__ / __setitem__) ===================== */

/* An index expression such as x[None, 1:3, idx, ...], built item by item in
 * order. Not thread-safe while being built; a built index may be read by many
 * threads at once. */
typedef struct samba_index samba_index;

/* Flags of samba_index_add_slice: which bounds are absent (x[:3], x[1:]). */
#define SAMBA_SLICE_NO_START 1u
#define SAMBA_SLICE_NO_STOP 2u

/* Creates an empty index (x[()], which selects the whole tensor). OWNED:
 * release with samba_index_release. Errors: NULL_POINTER, OUT_OF_MEMORY. */
SAMBA_API samba_status samba_index_create(samba_index** out);

/* Releases an index and the index tensors it retains. Accepts NULL. */
SAMBA_API void samba_index_release(samba_index* idx);

/* Appends an integer: selects one element of the dim and removes the dim
 * (negative counts from the end; checked against the size when used).
 * Errors: NULL_POINTER. */
SAMBA_API samba_status samba_index_add_int(samba_index* idx, int64_t i);

/* Appends a slice start:stop:step with Python bounds (negative counts from
 * the end, out-of-range bounds are clamped). `flags` is a combination of
 * SAMBA_SLICE_NO_START and SAMBA_SLICE_NO_STOP; an absent bound's value is
 * ignored. Errors: NULL_POINTER, INVALID_ARGUMENT (step 0, unknown flag
 * bits), UNSUPPORTED (negative step, as in PyTorch). */
SAMBA_API samba_status samba_index_add_slice(samba_index* idx, int64_t start, int64_t stop,
                                             int64_t step, uint32_t flags);

/* Appends None: a new dim of size 1 at this position. Errors: NULL_POINTER. */
SAMBA_API samba_status samba_index_add_none(samba_index* idx);

/* Appends an ellipsis: as many full slices as the dims left unindexed.
 * Errors: NULL_POINTER, INVALID_ARGUMENT (a second ellipsis). */
SAMBA_API samba_status samba_index_add_ellipsis(samba_index* idx);

/* Appends an index tensor: picks the listed positions of the dim (a gather,
 * not a view). It must be 1-D (or 0-dim, which acts like an integer) with
 * integer values (an integer dtype, or a floating dtype holding whole
 * numbers as in SambaFlow), or a 1-D bool mask as long as the dim. The
 * index RETAINS `index` (its values are read when the index is used).
 * Only one tensor or list per expression is supported. Errors: NULL_POINTER,
 * UNSUPPORTED (a second tensor or list index, more than one dim). */
SAMBA_API samba_status samba_index_add_tensor(samba_index* idx, samba_tensor* index);

/* Appends a list of positions (copied), like a 1-D int64 index tensor.
 * Errors: NULL_POINTER (values with n > 0), UNSUPPORTED (a second tensor or
 * list index). */
SAMBA_API samba_status samba_index_add_list(samba_index* idx, const int64_t* values, size_t n);

/* t[idx]. Integers, slices, None and ellipsis give a view sharing t's data;
 * with a tensor or list index the result is a new tensor (a gather) whose
 * indexed dim stays where it was, as in PyTorch. Differentiable. OWNED.
 * Errors: NULL_POINTER, OUT_OF_RANGE (too many indices for t's rank, an
 * integer or listed position out of range), INVALID_ARGUMENT (an index
 * tensor with non-integer values), SHAPE_MISMATCH (a bool mask of the wrong
 * length), INVALID_STATE (no data). */
SAMBA_API samba_status samba_tensor_index(samba_tensor* t, const samba_index* idx,
                                          samba_tensor** out);

/* t[idx] = value, written into t's data. `value` is converted to t's dtype
 * and broadcast to the shape of t[idx] (leading size-1 dims of value beyond
 * that rank are ignored, as in PyTorch). Not recorded by autograd: t must
 * not require grad. Errors: those of samba_tensor_index, SHAPE_MISMATCH
 * (value does not broadcast), INVALID_STATE (t requires grad or has no
 * data). On failure t is unchanged. */
SAMBA_API samba_status samba_tensor_index_put(samba_tensor* t, const samba_index* idx,
                                              const samba_tensor* value);

/* t[idx] = value for a number. Errors as samba_tensor_index_put, plus
 * OUT_OF_RANGE (value not finite or out of range for t's integer dtype). */
SAMBA_API samba_status samba_tensor_index_put_scalar(samba_tensor* t, const samba_index* idx,
                                                     double value);

/* ==== Op attributes ======================================================= */

/* A set of named attribute values for samba_op_call. Not thread-safe. */
typedef struct samba_attrs samba_attrs;

/* Creates an empty attribute set. OWNED. Errors: NULL_POINTER. */
SAMBA_API samba_status samba_attrs_create(samba_attrs** out);

/* Releases an attribute set. Accepts NULL. */
SAMBA_API void samba_attrs_release(samba_attrs* attrs);

/* Sets one attribute (replacing a previous value of that name). Strings and
 * arrays are copied. The value is checked against the op's schema when the
 * op is called. Errors: NULL_POINTER (attrs, name, or values with n > 0). */
SAMBA_API samba_status samba_attrs_set_int(samba_attrs* attrs, const char* name, int64_t value);
SAMBA_API samba_status samba_attrs_set_float(samba_attrs* attrs, const char* name, double value);
SAMBA_API samba_status samba_attrs_set_bool(samba_attrs* attrs, const char* name, int32_t value);
SAMBA_API samba_status samba_attrs_set_string(samba_attrs* attrs, const char* name,
                                              const char* value);
SAMBA_API samba_status samba_attrs_set_ints(samba_attrs* attrs, const char* name,
                                            const int64_t* values, size_t n);
SAMBA_API samba_status samba_attrs_set_floats(samba_attrs* attrs, const char* name,
                                              const double* values, size_t n);
SAMBA_API samba_status samba_attrs_set_dtype(samba_attrs* attrs, const char* name,
                                             samba_dtype value);

/* ==== Ops ================================================================= */

/* Calls the op `name` on `inputs` with `attrs` (may be NULL). The session
 * gives the thread pool (NULL: the process-wide default pool). Outputs are
 * OWNED tensors written to outputs[0..*n_outputs); `capacity` is the length
 * of `outputs`. Inputs may be NULL where the schema marks them optional.
 * Outside tracing the op computes at once; with autograd on a tensor that
 * requires grad, history is recorded for samba_tensor_backward.
 * Errors: NULL_POINTER, NOT_FOUND (unknown op or attribute), INVALID_ARGUMENT
 * (wrong input count or attribute type), SHAPE_MISMATCH, DTYPE_MISMATCH,
 * OUT_OF_RANGE (capacity too small: *n_outputs says how many are needed). */
SAMBA_API samba_status samba_op_call(samba_session* session, const char* name,
                                     samba_tensor* const* inputs, size_t n_inputs,
                                     const samba_attrs* attrs, samba_tensor** outputs,
                                     size_t capacity, size_t* n_outputs);

/* ---- Typed shorthands for the most used ops ------------------------------
 * Each is samba_op_call of the named registry op with one output, on
 * `session`'s thread pool (NULL: the default pool), recording autograd
 * history like any op. OWNED result in *out (NULL after a failure). Errors:
 * NULL_POINTER (a required tensor or out), SHAPE_MISMATCH, DTYPE_MISMATCH,
 * OUT_OF_RANGE (a dim), INVALID_STATE (an input has no data), and the op's
 * own errors (see samba_op_schema_json for its documentation). */

/* a + b, a - b, a * b, a / b (true division) with broadcasting and PyTorch
 * type promotion. */
SAMBA_API samba_status samba_add(samba_session* session, samba_tensor* a, samba_tensor* b,
                                 samba_tensor** out);
SAMBA_API samba_status samba_sub(samba_session* session, samba_tensor* a, samba_tensor* b,
                                 samba_tensor** out);
SAMBA_API samba_status samba_mul(samba_session* session, samba_tensor* a, samba_tensor* b,
                                 samba_tensor** out);
SAMBA_API samba_status samba_div(samba_session* session, samba_tensor* a, samba_tensor* b,
                                 samba_tensor** out);

/* Matrix product with torch.matmul's rules (1-D operands, batch broadcast). */
SAMBA_API samba_status samba_matmul(samba_session* session, samba_tensor* a, samba_tensor* b,
                                    samba_tensor** out);

/* x @ weight^T + bias with weight [out_features, in_features]; bias may be
 * NULL. */
SAMBA_API samba_status samba_linear(samba_session* session, samba_tensor* x, samba_tensor* weight,
                                    samba_tensor* bias, samba_tensor** out);

/* Elementwise max(x, 0), 1 / (1 + exp(-x)), tanh(x). */
SAMBA_API samba_status samba_relu(samba_session* session, samba_tensor* x, samba_tensor** out);
SAMBA_API samba_status samba_sigmoid(samba_session* session, samba_tensor* x, samba_tensor** out);
SAMBA_API samba_status samba_tanh(samba_session* session, samba_tensor* x, samba_tensor** out);

/* Sum / mean over `dims` (ndims of them; ndims 0 reduces every dim and dims
 * may then be NULL), keeping reduced dims as size 1 when keepdim != 0. */
SAMBA_API samba_status samba_sum(samba_session* session, samba_tensor* x, const int64_t* dims,
                                 size_t ndims, int32_t keepdim, samba_tensor** out);
SAMBA_API samba_status samba_mean(samba_session* session, samba_tensor* x, const int64_t* dims,
                                  size_t ndims, int32_t keepdim, samba_tensor** out);

/* softmax along `dim` (negative counts from the end). */
SAMBA_API samba_status samba_softmax(samba_session* session, samba_tensor* x, int64_t dim,
                                     samba_tensor** out);

/* Mean cross-entropy of logits `input` [N, C] against class indices
 * `target` [N] (int64). */
SAMBA_API samba_status samba_cross_entropy(samba_session* session, samba_tensor* input,
                                           samba_tensor* target, samba_tensor** out);

/* Number of registered ops. Never fails. */
SAMBA_API size_t samba_op_count(void);

/* Name of op `index` (in sorted order). BORROWED static string.
 * Errors: NULL_POINTER, OUT_OF_RANGE. */
SAMBA_API samba_status samba_op_name(size_t index, const char** out);

/* The schema of op `name` as JSON: {"name", "doc", "fusion", "signature",
 * "inputs": [{"name","doc","optional","variadic","mutated"}],
 * "outputs": [{"name","doc","variadic"}],
 * "attrs": [{"name","type","doc","required","optional","default"}]}.
 * BORROWED static string, valid for the life of the process.
 * Errors: NULL_POINTER, NOT_FOUND. */
SAMBA_API samba_status samba_op_schema_json(const char* name, const char** out);

/* ==== Optimizers ========================================================== */

/* An optimizer: SGD or AdamW over parameter groups. The compiler turns it
 * into OPT (and, for AdamW with max_grad_norm, GRADNORM) sections whose
 * numeric hyperparameters are argins run() can change; it can also step
 * eagerly on host tensors (samba_optimizer_step). Not thread-safe: build it
 * on one thread; once built it may be read by compiles on any thread. */
typedef struct samba_optimizer samba_optimizer;

/* Creates an optimizer of `kind`, "sgd" or "adamw" (case-insensitive), with
 * the hyperparameters in `defaults` (may be NULL) applied to every group:
 *   sgd:   lr (1e-3), momentum (0), dampening (0), weight_decay (0),
 *          nesterov (false), maximize (false);
 *   adamw: lr (1e-3), betas (floats, (0.9, 0.997) as in SambaFlow) or
 *          beta1/beta2, eps (1e-8), weight_decay (1e-2), amsgrad (false),
 *          maximize (false), max_grad_norm (none: no clipping).
 * OWNED: release with samba_optimizer_release. Errors: NULL_POINTER,
 * NOT_FOUND (unknown kind or hyperparameter), INVALID_ARGUMENT (a value out
 * of range, such as a negative lr). */
SAMBA_API samba_status samba_optimizer_create(const char* kind, const samba_attrs* defaults,
                                              samba_optimizer** out);

/* Releases an optimizer and the parameter references it holds. Accepts NULL. */
SAMBA_API void samba_optimizer_release(samba_optimizer* opt);

/* Adds a parameter group: `params` (n tensors that require grad; RETAINED)
 * with hyperparameter overrides `hyper` (may be NULL). Errors: NULL_POINTER,
 * INVALID_ARGUMENT (a tensor that does not require grad, or already in a
 * group), NOT_FOUND / INVALID_ARGUMENT (bad hyperparameters). On failure the
 * optimizer is unchanged. */
SAMBA_API samba_status samba_optimizer_add_param_group(samba_optimizer* opt,
                                                       samba_tensor* const* params, size_t n,
                                                       const samba_attrs* hyper);

/* Sets the prefix of this optimizer's argin names ("enc." gives "enc.lr").
 * By default the first optimizer of a compile has none and the others
 * "opt1.", "opt2.", ... Argins of group k > 0 are named
 * "<prefix>group<k>.<name>". Errors: NULL_POINTER. */
SAMBA_API samba_status samba_optimizer_set_argin_prefix(samba_optimizer* opt, const char* prefix);

/* One eager update of every parameter that has a gradient (tensors without
 * one are skipped, as in PyTorch), on the host, with the optimizer's own
 * state (momentum buffers, moments) kept in the optimizer. Runs on
 * `session`'s pool (NULL: the default pool). Errors: NULL_POINTER,
 * INVALID_STATE (a parameter without data). */
SAMBA_API samba_status samba_optimizer_step(samba_session* session, samba_optimizer* opt);

/* Clears the gradient of every parameter of the optimizer (sets it to
 * none, as PyTorch's zero_grad(set_to_none=True)). Errors: NULL_POINTER. */
SAMBA_API samba_status samba_optimizer_zero_grad(samba_optimizer* opt);

/* ==== Compiling a model into a PEF ======================================== */

/* The model, as a callback: called with the model's inputs (`n_inputs`
 * BORROWED tensors, valid during the call) and writes up to `capacity`
 * OWNED output tensors to `outputs` and their count to *n_outputs; the
 * engine takes those references. While compiling, the inputs are symbolic
 * (shape and dtype, no data) and every op called on them (samba_op_call and
 * the typed shorthands) is recorded instead of computed; loops and branches
 * in the callback are unrolled. Called on the thread that compiles (or
 * traces). A status other than SAMBA_OK stops the compile, which fails with
 * that status; outputs written before the failure are released. */
typedef samba_status (*samba_model_fn)(void* user_data, samba_tensor* const* inputs,
                                       size_t n_inputs, samba_tensor** outputs, size_t capacity,
                                       size_t* n_outputs);

/* Options of a compile (SambaFlow's compiler arguments). Not thread-safe. */
typedef struct samba_compile_options samba_compile_options;

/* Creates options with the defaults: name "model", PEF path "<name>.pef",
 * o1, training, no batch size, mapping "section", all outputs are losses,
 * output gradients of ones, weights embedded in the PEF, a .pef.log written
 * beside it. OWNED. Errors: NULL_POINTER. */
SAMBA_API samba_status samba_compile_options_create(samba_compile_options** out);
SAMBA_API void samba_compile_options_release(samba_compile_options* opts);

/* The program's name (also the default PEF file name). Errors: NULL_POINTER,
 * INVALID_ARGUMENT (empty). */
SAMBA_API samba_status samba_compile_options_set_name(samba_compile_options* opts, const char* name);

/* Where the PEF is written; "<path>.log" gets the readable log. Errors:
 * NULL_POINTER, INVALID_ARGUMENT (empty). */
SAMBA_API samba_status samba_compile_options_set_pef_path(samba_compile_options* opts,
                                                         const char* path);

/* Optimization level: 0 keeps one op per kernel; 1 (default) runs constant
 * folding, common-subexpression elimination, elementwise fusion and GEMM
 * epilogue fusion. Errors: NULL_POINTER, INVALID_ARGUMENT (not 0 or 1). */
SAMBA_API samba_status samba_compile_options_set_opt_level(samba_compile_options* opts,
                                                          int32_t level);

/* An inference compile (--inference): forward only, no gradients and no
 * optimizer. Errors: NULL_POINTER. */
SAMBA_API samba_status samba_compile_options_set_inference(samba_compile_options* opts,
                                                          int32_t inference);

/* Batch size (-b) and micro-batch size (-mb). With a micro-batch smaller
 * than the batch, the model is traced at the micro-batch size (every input
 * whose first dim equals the batch size is split along it) and the runtime
 * streams the batch through the FWD and BCKWD sections; gradients of the
 * micro-batches add up to the whole batch's (a scalar loss's output
 * gradient is micro/batch). Errors: NULL_POINTER, INVALID_ARGUMENT
 * (negative). */
SAMBA_API samba_status samba_compile_options_set_batch_size(samba_compile_options* opts,
                                                           int64_t batch_size);
SAMBA_API samba_status samba_compile_options_set_micro_batch_size(samba_compile_options* opts,
                                                                 int64_t micro_batch_size);

/* "section" (each section mapped and run separately; the default) or
 * "spatial" (forward, backward and update run as one unit when a run
 * covers them all). Errors: NULL_POINTER, INVALID_ARGUMENT. */
SAMBA_API samba_status samba_compile_options_set_mapping(samba_compile_options* opts,
                                                        const char* mapping);

/* The model outputs that are losses (the seed's loss_indices); backward
 * starts from them. By default every output is. Errors: NULL_POINTER. */
SAMBA_API samba_status samba_compile_options_set_loss_indices(samba_compile_options* opts,
                                                             const int64_t* indices, size_t n);

/* How the gradient fed to output `index` is initialised (the seed's
 * init_output_grads). */
#define SAMBA_OUTPUT_GRAD_ONES 0        /* a tensor of ones (the default) */
#define SAMBA_OUTPUT_GRAD_CUSTOM 1      /* the values of `values` (copied) */
#define SAMBA_OUTPUT_GRAD_UNSPECIFIED 2 /* left for the app to set at run time */
/* Errors: NULL_POINTER (values for CUSTOM), INVALID_ARGUMENT (unknown mode).
 * The shape of `values` is checked against the output when compiling. */
SAMBA_API samba_status samba_compile_options_set_output_grad(samba_compile_options* opts,
                                                            size_t index, int32_t mode,
                                                            samba_tensor* values);

/* Every input and output tensor lives in HOST memory (io_host_memory).
 * Errors: NULL_POINTER. */
SAMBA_API samba_status samba_compile_options_set_io_host_memory(samba_compile_options* opts,
                                                               int32_t enable);

/* Gradient accumulation: BCKWD adds into the parameters' gradients and a
 * ZEROGRAD section clears them. Errors: NULL_POINTER. */
SAMBA_API samba_status samba_compile_options_set_grad_accumulation(samba_compile_options* opts,
                                                                  int32_t enable);

/* Whether the current values of parameters and buffers are stored in the
 * PEF (default 1), so that it runs with no app tensors. Errors:
 * NULL_POINTER. */
SAMBA_API samba_status samba_compile_options_set_embed_weights(samba_compile_options* opts,
                                                              int32_t enable);

/* Whether "<pef>.log" is written (default 1). Errors: NULL_POINTER. */
SAMBA_API samba_status samba_compile_options_set_write_log(samba_compile_options* opts,
                                                          int32_t enable);

/* Adds a key/value pair to the PEF's user metadata (pef_metadata); a key
 * set twice keeps the last value. Errors: NULL_POINTER, INVALID_ARGUMENT
 * (empty key). */
SAMBA_API samba_status samba_compile_options_add_metadata(samba_compile_options* opts,
                                                         const char* key, const char* value);

/* SambaSession.compile: traces `model` with symbolic stand-ins for `inputs`
 * (n_inputs example tensors; their sn_names, dtypes and shapes are used,
 * never their data), generates the backward graph and the updates of
 * `optimizers` (n_optimizers, may be 0), runs the passes, cuts sections,
 * plans device memory and writes the PEF (and its .pef.log) to the options'
 * path. `opts` may be NULL for the defaults. Parameters are the tensors
 * that require grad reaching the model's ops; they need no data (an
 * unmaterialized parameter compiles). Unnamed parameters are named
 * "param_<n>" in trace order (the name is set on the tensor). Errors:
 * NULL_POINTER, INVALID_ARGUMENT (bad options, no trainable parameter for a
 * training compile, duplicate names), errors raised while tracing (their
 * message names the op and its inputs' shapes), the callback's own status,
 * IO (the PEF cannot be written). */
SAMBA_API samba_status samba_session_compile(samba_session* session, samba_model_fn model,
                                             void* user_data, samba_tensor* const* inputs,
                                             size_t n_inputs, samba_optimizer* const* optimizers,
                                             size_t n_optimizers, const samba_compile_options* opts);

/* *out = 1 while the calling thread is tracing a model for `session`
 * (SambaSession.tracing). Errors: NULL_POINTER. */
SAMBA_API samba_status samba_session_is_tracing(const samba_session* session, int32_t* out);

/* ---- Multigraph ---------------------------------------------------------- */

/* A graph to compile with others into one PEF (SambaGraph). Holds the model
 * callback, its inputs (RETAINED), its optimizers (RETAINED) and the
 * per-graph options (inference, batch and micro-batch size, mapping, loss
 * indices, output gradients, gradient accumulation) copied from `opts`
 * (NULL: defaults). Not thread-safe. */
typedef struct samba_graph samba_graph;

/* Creates a graph named `name`. OWNED. Errors: NULL_POINTER,
 * INVALID_ARGUMENT (empty name). */
SAMBA_API samba_status samba_graph_create(const char* name, samba_model_fn model, void* user_data,
                                          samba_tensor* const* inputs, size_t n_inputs,
                                          samba_optimizer* const* optimizers, size_t n_optimizers,
                                          const samba_compile_options* opts, samba_graph** out);
SAMBA_API void samba_graph_release(samba_graph* graph);

/* SambaSession.add_graph: appends `graph` (RETAINED) to the session's list.
 * A graph with the name of one already added is an error unless
 * `overwrite` is set, which replaces it and moves it to the end. Errors:
 * NULL_POINTER, INVALID_ARGUMENT (duplicate name without overwrite). */
SAMBA_API samba_status samba_session_add_graph(samba_session* session, samba_graph* graph,
                                               int32_t overwrite);

/* Number of graphs added and not yet compiled. Errors: NULL_POINTER. */
SAMBA_API samba_status samba_session_graph_count(const samba_session* session, size_t* out);

/* SambaSession.compile_multigraph: compiles the added graphs, in the order
 * added, into one PEF (name, path, optimization level and the other
 * program-wide settings come from `opts`; NULL: defaults). Persistent
 * tensors with the same sn_name in several graphs are one tensor. The list
 * is kept, so compiling again gives the same PEF. Errors: those of
 * samba_session_compile, INVALID_STATE (no graph added). */
SAMBA_API samba_status samba_session_compile_multigraph(samba_session* session,
                                                        const samba_compile_options* opts);

/* ==== Loading and running a PEF ========================================== */

/* SambaSession(pef_path) / reset(pef_path): reads and verifies the PEF at
 * `path` (every field is checked: a PEF is untrusted input) and loads it on
 * the session's emulated RDU: device memory laid out by the PEF's memory
 * plan, weights from the PEF (when it embeds them), everything else zero.
 * Replaces a program loaded before. Records SAMBA_SET_PEF and
 * SAMBA_INIT_RUNTIME in the Samba profile. For pure inference no model
 * callback is needed. Errors: NULL_POINTER, IO (unreadable file),
 * CORRUPT_FILE (a damaged or inconsistent PEF; the message names the field),
 * VERSION_MISMATCH (a newer PEF format), OUT_OF_MEMORY. On failure the
 * session keeps the program it had. */
SAMBA_API samba_status samba_session_load_pef(samba_session* session, const char* path);

/* SambaSession.reset(''): unloads the program. Accepts a session with none.
 * Errors: NULL_POINTER. */
SAMBA_API samba_status samba_session_unload(samba_session* session);

/* Options of samba_session_trace_graph (the seed's trace_graph arguments).
 * Not thread-safe. */
typedef struct samba_trace_options samba_trace_options;

/* Defaults: init_output_grads on, transfer_device on, mapping "section",
 * data_parallel_mode "normal". OWNED. Errors: NULL_POINTER. */
SAMBA_API samba_status samba_trace_options_create(samba_trace_options** out);
SAMBA_API void samba_trace_options_release(samba_trace_options* opts);

/* Whether output gradients are initialised on the device (ones, unless
 * customized or left unspecified below). Errors: NULL_POINTER. */
SAMBA_API samba_status samba_trace_options_set_init_output_grads(samba_trace_options* opts,
                                                                 int32_t enable);
/* init_output_grads' unspecified_tensor_grad: the gradient of the output
 * named `output_name` is left at zero for the app to set (sn_grad, or run's
 * grad_of_outputs). Errors: NULL_POINTER. */
SAMBA_API samba_status samba_trace_options_add_unspecified_grad(samba_trace_options* opts,
                                                                const char* output_name);
/* init_output_grads' customized_tensors_dict: the gradient of output
 * `output_name` starts as `values` (RETAINED; copied to the device).
 * Errors: NULL_POINTER. */
SAMBA_API samba_status samba_trace_options_set_custom_grad(samba_trace_options* opts,
                                                           const char* output_name,
                                                           samba_tensor* values);
/* Whether weights, buffers and output gradients are copied to the device
 * (transfer_device). Errors: NULL_POINTER. */
SAMBA_API samba_status samba_trace_options_set_transfer_device(samba_trace_options* opts,
                                                               int32_t enable);
/* "normal" is the only data-parallel mode of a single emulated device;
 * "inorder" and "optimal" fail with UNSUPPORTED. Errors: NULL_POINTER,
 * INVALID_ARGUMENT (unknown mode), UNSUPPORTED. */
SAMBA_API samba_status samba_trace_options_set_data_parallel_mode(samba_trace_options* opts,
                                                                  const char* mode);

/* utils.trace_graph: reads and verifies the PEF at `pef_path`, traces
 * `model` again with symbolic stand-ins for `inputs` and checks that the
 * forward graph matches the one the PEF was compiled from (when it does not,
 * the error names the first op that differs and shows both), loads the PEF,
 * registers the host tensors the trace met (parameters, buffers, inputs) by
 * sn_name, and, with transfer_device, copies the values of those that have
 * data to the device and initialises the output gradients. `model` may be
 * NULL to load without re-tracing. `optimizers` are accepted for symmetry
 * with compile (their state lives in the PEF). Writes the traced outputs
 * (model.output_tensors: OWNED symbolic tensors named as the PEF's outputs,
 * to pass to samba_session_run) to `outputs` (capacity entries; may be NULL
 * when capacity is 0) and their count to *n_outputs. Errors: those of
 * samba_session_load_pef and samba_session_compile, INVALID_ARGUMENT (the
 * re-trace differs from the PEF), OUT_OF_RANGE (capacity too small; nothing
 * is loaded then). */
SAMBA_API samba_status samba_session_trace_graph(samba_session* session, samba_model_fn model,
                                                 void* user_data, samba_tensor* const* inputs,
                                                 size_t n_inputs,
                                                 samba_optimizer* const* optimizers,
                                                 size_t n_optimizers, const char* pef_path,
                                                 const samba_trace_options* opts,
                                                 samba_tensor** outputs, size_t capacity,
                                                 size_t* n_outputs);

/* Options of samba_session_run. Not thread-safe; one options object may be
 * used by many runs one after another. */
typedef struct samba_run_options samba_run_options;

/* Defaults: the whole schedule, train on, no hyperparameters. OWNED.
 * Errors: NULL_POINTER. */
SAMBA_API samba_status samba_run_options_create(samba_run_options** out);
SAMBA_API void samba_run_options_release(samba_run_options* opts);

/* section_types: run every section of these types, in the order given
 * ("FWD", "bckwd", "Opt"; case-insensitive). Replaces earlier types.
 * Errors: NULL_POINTER. Unknown types are reported by the run. */
SAMBA_API samba_status samba_run_options_set_section_types(samba_run_options* opts,
                                                           const char* const* types, size_t n);
/* section_ids: run these sections, in this order. Errors: NULL_POINTER. */
SAMBA_API samba_status samba_run_options_set_section_ids(samba_run_options* opts,
                                                         const int32_t* ids, size_t n);
/* run_from_call_id / run_until_call_id: run the schedule's calls with ids
 * from `from_call` (inclusive) up to `until_call` (exclusive: the run stops
 * on reaching it); -1 leaves a bound open. Errors: NULL_POINTER,
 * INVALID_ARGUMENT (a bound below -1). */
SAMBA_API samba_status samba_run_options_set_call_range(samba_run_options* opts,
                                                        int64_t from_call, int64_t until_call);
/* hyperparam_dict: sets argin `name` (lr, momentum, dropout_3.p, ...) for
 * this run and the ones after it. Errors: NULL_POINTER. Unknown names are
 * reported by the run (NOT_FOUND, listing the PEF's argins). */
SAMBA_API samba_status samba_run_options_set_hyperparam(samba_run_options* opts,
                                                        const char* name, double value);
/* Removes every hyperparameter set on the options. Errors: NULL_POINTER. */
SAMBA_API samba_status samba_run_options_clear_hyperparams(samba_run_options* opts);
/* train = 0 is evaluation mode: dropout rates are 0 for the run (the
 * argins keep their values for later training runs). Errors: NULL_POINTER. */
SAMBA_API samba_status samba_run_options_set_train(samba_run_options* opts, int32_t train);
/* grad_of_outputs: per model output, in order, the gradient BCKWD starts
 * from (NULL entries keep the device's); for the seed's "partial model on
 * the device, loss on the host" pattern. Tensors are RETAINED. Errors:
 * NULL_POINTER (grads with n > 0). */
SAMBA_API samba_status samba_run_options_set_grad_of_outputs(samba_run_options* opts,
                                                             samba_tensor* const* grads, size_t n);
/* Data parallelism (data_parallel, reduce_on_rdu, data_parallel_mode). A
 * run with data_parallel set fails with UNSUPPORTED: one session emulates
 * one device. Errors: NULL_POINTER. */
SAMBA_API samba_status samba_run_options_set_data_parallel(samba_run_options* opts,
                                                           int32_t enable, int32_t reduce_on_rdu,
                                                           const char* mode);

/* SambaSession.run: copies `inputs` (n_inputs host tensors, matched to the
 * PEF's tensors by sn_name; inputs not given keep their device values) to
 * the device, runs the sections `opts` selects (NULL: the whole schedule),
 * and returns the device values of `output_tensors` (n_output_tensors
 * tensors matched by sn_name, such as trace_graph's outputs; 0: every output
 * of the graphs that ran) as OWNED host tensors in outputs[0..*n_outputs).
 * Runs that change model state (backward, optimizer, ...) on one session
 * are serialized; inference runs may run on many threads at once, each with
 * its own activations, and give the same results as one thread.
 * Errors: NULL_POINTER, INVALID_STATE (no PEF loaded), NOT_FOUND (unknown
 * tensor, section type, section id or argin), SHAPE_MISMATCH /
 * DTYPE_MISMATCH (an input), INVALID_ARGUMENT (both section types and
 * ids), OUT_OF_RANGE (call range; capacity too small: *n_outputs says how
 * many are needed), UNSUPPORTED (data parallel). A run refused for its
 * arguments changes nothing: no argin, input or device value. */
SAMBA_API samba_status samba_session_run(samba_session* session, samba_tensor* const* inputs,
                                         size_t n_inputs, samba_tensor* const* output_tensors,
                                         size_t n_output_tensors, const samba_run_options* opts,
                                         samba_tensor** outputs, size_t capacity,
                                         size_t* n_outputs);

/* utils.init_output_grads: sets the gradient of every loss output of the
 * loaded PEF to ones, except the outputs named in `unspecified` (n_unspecified
 * names; set to zero, for the app to set later) and in `custom_names`
 * (their values from custom_values, same order). Errors: NULL_POINTER,
 * INVALID_STATE (no PEF), NOT_FOUND (an unknown output name),
 * INVALID_ARGUMENT (an output without a gradient), SHAPE_MISMATCH. Checked
 * before anything changes. */
SAMBA_API samba_status samba_session_init_output_grads(samba_session* session,
                                                       const char* const* unspecified,
                                                       size_t n_unspecified,
                                                       const char* const* custom_names,
                                                       samba_tensor* const* custom_values,
                                                       size_t n_custom);

/* SambaSession.init_multigraph_runtime: loads the multigraph PEF at
 * `pef_path` and, with transfer_device, copies the values of the tensors
 * registered by the compile (parameters and buffers that have data) to the
 * device and sets every output gradient to ones. Errors: those of
 * samba_session_load_pef. */
SAMBA_API samba_status samba_session_init_multigraph_runtime(samba_session* session,
                                                             const char* pef_path,
                                                             int32_t transfer_device);

/* utils.trace_multigraph: re-traces `graph` (as added with
 * samba_session_add_graph) and checks it against the graph of the same
 * name in the loaded PEF, registers the host tensors it met, and writes its
 * traced outputs (OWNED symbolic tensors named as the PEF names them) to
 * `outputs`. Errors: NULL_POINTER, INVALID_STATE (no PEF loaded),
 * NOT_FOUND (the PEF has no graph of that name), INVALID_ARGUMENT (the
 * re-trace differs), OUT_OF_RANGE (capacity). */
SAMBA_API samba_status samba_session_trace_multigraph(samba_session* session,
                                                      const samba_graph* graph,
                                                      samba_tensor** outputs, size_t capacity,
                                                      size_t* n_outputs);

/* ---- What the loaded PEF holds ---------------------------------------- */

/* Name lists of the loaded PEF: */
#define SAMBA_NAMES_SECTION_TYPES 0        /* get_section_types (distinct, schedule order) */
#define SAMBA_NAMES_WEIGHTS 1              /* get_weight_names */
#define SAMBA_NAMES_ARGINS 2               /* get_argin_names */
#define SAMBA_NAMES_DROPOUT_RATE_ARGINS 3  /* get_dropout_rate_argin_names */
#define SAMBA_NAMES_DROPOUT_SEED_ARGINS 4  /* get_dropout_seed_argin_names */
#define SAMBA_NAMES_OUTPUTS 5              /* the model outputs' sn_names */
#define SAMBA_NAMES_INPUTS 6               /* the model inputs' sn_names */

/* Number of names in list `kind`. Errors: NULL_POINTER, INVALID_STATE (no
 * PEF loaded), INVALID_ARGUMENT (unknown kind). */
SAMBA_API samba_status samba_session_name_count(const samba_session* session, int32_t kind,
                                                size_t* out);
/* Name `index` of list `kind`. BORROWED: valid until the session loads
 * another PEF or is released. Errors: as samba_session_name_count,
 * OUT_OF_RANGE. */
SAMBA_API samba_status samba_session_name_at(const samba_session* session, int32_t kind,
                                             size_t index, const char** out);

/* The current value of argin `name` (its default until a run or
 * samba_session_set_argin changes it). Errors: NULL_POINTER, INVALID_STATE,
 * NOT_FOUND. */
SAMBA_API samba_status samba_session_argin(const samba_session* session, const char* name,
                                           double* out);
SAMBA_API samba_status samba_session_set_argin(samba_session* session, const char* name,
                                               double value);

/* ---- Device tensors (sn_data, sn_grad, cpu, rdu) ------------------------- */

/* sn_data / sn_grad getters: a new host tensor with a copy of the device
 * value of t (found by t's sn_name) or of its gradient. OWNED. Errors:
 * NULL_POINTER, INVALID_STATE (no PEF loaded), NOT_FOUND (no such tensor, or
 * no gradient: not a trainable parameter of a training PEF). */
SAMBA_API samba_status samba_tensor_sn_data(samba_session* session, const samba_tensor* t,
                                            samba_tensor** out);
SAMBA_API samba_status samba_tensor_sn_grad(samba_session* session, const samba_tensor* t,
                                            samba_tensor** out);
/* sn_data / sn_grad setters: copies `values` (same shape; converted to the
 * device tensor's dtype) to the device. Errors: as the getters,
 * SHAPE_MISMATCH. */
SAMBA_API samba_status samba_tensor_set_sn_data(samba_session* session, const samba_tensor* t,
                                                const samba_tensor* values);
SAMBA_API samba_status samba_tensor_set_sn_grad(samba_session* session, const samba_tensor* t,
                                                const samba_tensor* values);
/* SambaTensor.cpu(): copies the device value of t (and its gradient, when
 * the PEF has one) into t's host data and grad (a grad is created if t has
 * none). Errors: as samba_tensor_sn_data, INVALID_STATE (t has no host data). */
SAMBA_API samba_status samba_tensor_cpu(samba_session* session, samba_tensor* t);
/* SambaTensor.rdu(): copies t's host data (and grad, when both sides have
 * one) to the device. Errors: as samba_tensor_set_sn_data. */
SAMBA_API samba_status samba_tensor_rdu(samba_session* session, samba_tensor* t);

/* get_tensors_by_name: new host tensors with the device values of the n
 * named tensors, in order. OWNED, written to outputs[0..n). On failure none
 * is returned. Errors: NULL_POINTER, INVALID_STATE, NOT_FOUND. */
SAMBA_API samba_status samba_session_get_tensors_by_name(samba_session* session,
                                                         const char* const* names, size_t n,
                                                         samba_tensor** outputs);

/* get_samba_tensor_by_name: the host tensor registered under `name` by the
 * last compile or trace_graph (or update_tensor). OWNED reference (the same
 * tensor, not a copy). Errors: NULL_POINTER, NOT_FOUND. */
SAMBA_API samba_status samba_session_get_samba_tensor_by_name(samba_session* session,
                                                              const char* name,
                                                              samba_tensor** out);

/* update_tensor: registers `t` (RETAINED) under `name`, replacing what was
 * there; `t` NULL removes the name. Errors: NULL_POINTER (name). */
SAMBA_API samba_status samba_session_update_tensor(samba_session* session, const char* name,
                                                   samba_tensor* t);

/* Which registered tensors a bulk transfer moves. */
#define SAMBA_TRANSFER_PARAMETERS 1u      /* weights (and their gradients) */
#define SAMBA_TRANSFER_BUFFERS 2u         /* persistent non-trained state */
#define SAMBA_TRANSFER_OPTIMIZER_STATE 4u /* momentum, moments, step counters */
/* to_cpu / to_rdu / sync_buffers_to_cpu / sync_buffers_to_rdu / to_device:
 * copies every registered tensor of the kinds in `what` (a combination of
 * SAMBA_TRANSFER_*) from the device to its host tensor, or from the host to
 * the device. Optimizer state has no host tensors until a to_cpu creates
 * them (they are then registered under their sn_names). Tensors the PEF
 * does not know are skipped. Errors: NULL_POINTER, INVALID_STATE. */
SAMBA_API samba_status samba_session_to_cpu(samba_session* session, uint32_t what);
SAMBA_API samba_status samba_session_to_rdu(samba_session* session, uint32_t what);

/* ---- Profiling ------------------------------------------------------------ */

/* start_samba_profile / end_samba_profile(filename): records every event
 * (SAMBA_SET_PEF, SAMBA_INIT_RUNTIME, SAMBA_SESSION_RUN_<TYPES>, the
 * runtime's PyRT_* events, sections and kernels) and writes them as a Chrome
 * trace-event JSON file that Perfetto and chrome://tracing open. `filename`
 * may be NULL or "" to discard. Errors: NULL_POINTER, INVALID_STATE (start
 * while running), IO (the file cannot be written). */
SAMBA_API samba_status samba_session_start_profile(samba_session* session);
SAMBA_API samba_status samba_session_end_profile(samba_session* session, const char* filename);

/* start_runtime_profile / end_runtime_profile(log_file): when the
 * environment variable ENABLE_RUNTIME_PERF is SUMMARY or DETAILED, records
 * the runtime's events and, at the end, writes a summary table (per event:
 * count, total, mean, p50, p99, max, share) to `log_file` (NULL or "": not
 * written) and to the log (info level), with the wall time when
 * `timer_enabled`. Otherwise both calls do nothing. Errors: NULL_POINTER,
 * INVALID_STATE, IO. */
SAMBA_API samba_status samba_session_start_runtime_profile(samba_session* session,
                                                           int32_t timer_enabled);
SAMBA_API samba_status samba_session_end_runtime_profile(samba_session* session,
                                                         const char* log_file);

/* ---- Measuring ------------------------------------------------------------ */

/* What samba_session_measure_performance / _measure_sections report. The
 * caller sets struct_size to sizeof(samba_perf_report); the library fills
 * the fields that fit, so the struct can grow. */
typedef struct samba_perf_report {
  size_t struct_size;
  int32_t section_id;        /* measure_sections: the section; -1 for a whole run */
  int64_t iterations;        /* timed runs */
  int64_t batch_size;        /* samples per run (the graph's batch size) */
  double samples_per_second; /* batch_size * iterations / total time */
  double latency_mean_ms;
  double latency_p50_ms;
  double latency_p99_ms;
  double latency_max_ms;
} samba_perf_report;

/* utils.measure_performance: runs `warmup` untimed then `iterations` timed
 * runs with `inputs` and `opts` (NULL: the whole schedule, which trains the
 * model) and reports throughput and latency. Errors: those of
 * samba_session_run, NULL_POINTER (out), INVALID_ARGUMENT (iterations < 1,
 * warmup < 0, out->struct_size too small for section_id). */
SAMBA_API samba_status samba_session_measure_performance(samba_session* session,
                                                         samba_tensor* const* inputs,
                                                         size_t n_inputs,
                                                         const samba_run_options* opts,
                                                         int64_t iterations, int64_t warmup,
                                                         samba_perf_report* out);

/* utils.measure_sections: for each section of the schedule in order, runs
 * it alone (after the whole schedule once with `inputs`, so every section
 * has its inputs) `warmup` + `iterations` times and reports it in
 * reports[i] (capacity entries, each with struct_size set); *n_sections
 * gets the number of sections. Sections that update the model (OPT) do so.
 * Errors: as samba_session_measure_performance, OUT_OF_RANGE (capacity
 * too small: *n_sections says how many are needed; nothing runs). */
SAMBA_API samba_status samba_session_measure_sections(samba_session* session,
                                                      samba_tensor* const* inputs, size_t n_inputs,
                                                      int64_t iterations, int64_t warmup,
                                                      samba_perf_report* reports, size_t capacity,
                                                      size_t* n_sections);

/* ---- Checkpoints ------------------------------------------------------------ */

/* Saves the device values of the loaded PEF's tensors of the kinds in
 * `what` (SAMBA_TRANSFER_*) to `path`: zstd-compressed and checksummed,
 * written atomically (a temporary file, fsync, rename). Errors:
 * NULL_POINTER, INVALID_STATE, IO. */
SAMBA_API samba_status samba_session_save_checkpoint(samba_session* session, const char* path,
                                                     uint32_t what);
/* Loads a checkpoint into the device tensors of the same names: the whole
 * file is verified, and every name, dtype and shape checked, before any
 * tensor changes. With `strict`, every tensor of the file must exist in the
 * PEF and every tensor of the kinds in `what` must be in the file. Errors:
 * NULL_POINTER, INVALID_STATE, IO, CORRUPT_FILE (damaged or truncated),
 * VERSION_MISMATCH, NOT_FOUND / SHAPE_MISMATCH / DTYPE_MISMATCH (a tensor
 * does not match). On failure no tensor changes. */
SAMBA_API samba_status samba_session_load_checkpoint(samba_session* session, const char* path,
                                                     uint32_t what, int32_t strict);

/* ==== Lazy parameters and materializers ================================== */

/* How random values are rounded from float32 to bfloat16. */
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
                                                                  int32_t rounding);
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

/* ==== Pinned memory and fast-access tensors ============================== */

/* enable_pinned_memory: host-to-device copies of tensors not marked
 * fast_access are staged through page-locked blocks from the process's
 * pinned pool; inputs are marked fast_access by trace_graph (moved into
 * pinned memory when the engine owns their memory). When the memory-lock
 * limit (RLIMIT_MEMLOCK) refuses, the pool falls back to unlocked memory,
 * logs it once and says so in samba_pinned_memory_stats. Errors: NULL_POINTER. */
SAMBA_API samba_status samba_session_enable_pinned_memory(samba_session* session);
/* disable_pinned_memory. Errors: NULL_POINTER. */
SAMBA_API samba_status samba_session_disable_pinned_memory(samba_session* session);
/* use_pinned_memory: *out = 1 when enabled. Errors: NULL_POINTER. */
SAMBA_API samba_status samba_session_use_pinned_memory(const samba_session* session, int32_t* out);

/* The process's pinned pool. The caller sets struct_size to
 * sizeof(samba_pinned_stats); the library fills the fields it knows. */
typedef struct samba_pinned_stats {
  size_t struct_size;
  uint64_t bytes_reserved; /* mapped by the pool */
  uint64_t bytes_locked;   /* of those, page-locked */
  uint64_t bytes_in_use;   /* in blocks handed out */
  uint64_t bytes_cached;   /* in freed blocks kept for reuse */
  uint64_t hits;           /* allocations served by a cached block */
  uint64_t misses;         /* allocations that needed a new block */
  int32_t locked;          /* 1 when every reserved byte is page-locked */
} samba_pinned_stats;
/* Fills *out. Errors: NULL_POINTER, INVALID_ARGUMENT (struct_size too small). */
SAMBA_API samba_status samba_pinned_memory_stats(samba_pinned_stats* out);

/* Sets fast_access: with 1, a tensor whose memory the engine owns moves into
 * pinned memory (same values; its data pointer changes) and transfers
 * without staging; caller-borrowed memory stays where it is. The name is
 * recorded in `session` (may be NULL) for samba_session_is_fast_access.
 * Errors: NULL_POINTER, OUT_OF_MEMORY. */
SAMBA_API samba_status samba_tensor_set_fast_access(samba_session* session, samba_tensor* t, int32_t enable);
/* *out = the tensor's fast_access flag. Errors: NULL_POINTER. */
SAMBA_API samba_status samba_tensor_fast_access(const samba_tensor* t, int32_t* out);
/* SambaTensor.is_fast_access(name): whether the tensor named `name` is fast
 * access in this session (set on a tensor, by name, or by trace_graph).
 * Errors: NULL_POINTER. */
SAMBA_API samba_status samba_session_is_fast_access(const samba_session* session, const char* name,
                                                    int32_t* out);
/* Marks the name `name` fast access (or not) without a tensor, e.g. an
 * output gradient. Errors: NULL_POINTER. */
SAMBA_API samba_status samba_session_set_fast_access(samba_session* session, const char* name,
                                                     int32_t enable);
/* reusable(): *out = 1 when the tensor's memory can be used directly for
 * host-to-device transfers (contiguous, with data). Errors: NULL_POINTER. */
SAMBA_API samba_status samba_tensor_reusable(const samba_tensor* t, int32_t* out);

/* ==== Loader: batches prepared ahead (SambaLoader) ======================== */

/* A loader over a batch producer: a background thread calls the producer
 * for batch 0, 1, ... and copies each batch into pinned buffers, up to
 * `max_prefetch` batches ahead of the consumer, while the consumer runs.
 * Use from one consumer thread. */
typedef struct samba_loader samba_loader;

/* Produces batch `index`: writes `n` OWNED tensors to `tensors` in the
 * order of the loader's names (the loader takes the references, also on
 * failure) and returns SAMBA_OK; or sets *end = 1 at the end of the data;
 * or returns a failing status with a message (samba_set_error_message),
 * which the consumer receives. Called on the loader's thread. */
typedef samba_status (*samba_loader_produce_fn)(void* user_data, int64_t index, samba_tensor** tensors,
                                                size_t n, int32_t* end);

/* Loader options. Not thread-safe. */
typedef struct samba_loader_options samba_loader_options;
/* Defaults: 2 batches ahead, a 60 s timeout, no batch limit. OWNED.
 * Errors: NULL_POINTER. */
SAMBA_API samba_status samba_loader_options_create(samba_loader_options** out);
/* Batches prepared ahead (1..1024). Errors: NULL_POINTER, INVALID_ARGUMENT. */
SAMBA_API samba_status samba_loader_options_set_max_prefetch(samba_loader_options* o, int32_t n);
/* How long samba_loader_next waits for a batch, in milliseconds (> 0).
 * Errors: NULL_POINTER, INVALID_ARGUMENT. */
SAMBA_API samba_status samba_loader_options_set_timeout_ms(samba_loader_options* o, int64_t ms);
/* Stops after `n` batches (-1: when the producer says end). Errors:
 * NULL_POINTER, INVALID_ARGUMENT. */
SAMBA_API samba_status samba_loader_options_set_num_batches(samba_loader_options* o, int64_t n);
/* Releases options. Accepts NULL. */
SAMBA_API void samba_loader_options_release(samba_loader_options* o);

/* Creates a loader producing tensors named `names` (n_names >= 1; their
 * sn_names are set on each batch's tensors) and starts its thread. `opts`
 * may be NULL. `destroy` (may be NULL) is called with user_data when the
 * loader is released. OWNED: release with samba_loader_release. Errors:
 * NULL_POINTER, INVALID_ARGUMENT (no names, a duplicate or empty name). */
SAMBA_API samba_status samba_loader_create(const char* const* names, size_t n_names,
                                           samba_loader_produce_fn produce, void* user_data,
                                           void (*destroy)(void* user_data), const samba_loader_options* opts,
                                           samba_loader** out);
/* The next batch: writes n_names OWNED tensors (in pinned memory, marked
 * fast_access, named) to `tensors` and sets *end = 0; or *end = 1 at the
 * end of the data (tensors untouched). Errors: NULL_POINTER,
 * INVALID_ARGUMENT (capacity < n_names), TIMEOUT (no batch within the
 * timeout; the loader stays usable), the producer's status and message
 * (the loader then stops: later calls return the same error). */
SAMBA_API samba_status samba_loader_next(samba_loader* loader, samba_tensor** tensors, size_t capacity,
                                         int32_t* end);
/* Restarts from batch 0 (a new epoch), dropping prepared batches. Errors:
 * NULL_POINTER. */
SAMBA_API samba_status samba_loader_reset(samba_loader* loader);
/* Stops the loader's thread (waiting for a producer call in progress),
 * frees prepared batches and the loader. Accepts NULL. */
SAMBA_API void samba_loader_release(samba_loader* loader);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* SAMBA_H */
