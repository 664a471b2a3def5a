/* samba/tensor.h: host tensors: creation, views, conversions, DLPack, indexing.
 * Part of the C interface; include <samba.h>, which includes every part and
 * states the conventions (ownership, errors, thread safety) they all follow. */
#ifndef SAMBA_TENSOR_H
#define SAMBA_TENSOR_H

#include "core.h"

#ifdef __cplusplus
extern "C" {
#endif

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

/* Shape, strides (elements) and rank; samba_tensor_ndim is SambaTensor.dim()
 * and ndimension(). BORROWED arrays, valid until the tensor
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
typedef int32_t samba_mem_type; /* one of SAMBA_MEM_* */
#define SAMBA_MEM_AUTO (-1)
#define SAMBA_MEM_DDR 0
#define SAMBA_MEM_HBM 1
#define SAMBA_MEM_HOST 2
SAMBA_API samba_status samba_tensor_set_mem_type(samba_tensor* t, samba_mem_type mem_type);
SAMBA_API samba_status samba_tensor_mem_type(const samba_tensor* t, samba_mem_type* out);

/* ==== Tensor conversions and new tensors ================================== */

/* The dtype argument of samba_tensor_new_* that means "the dtype of t". */
#define SAMBA_DTYPE_SAME (-1)

/* DEPRECATED since 0.1: the number of dimensions as int64_t; use
 * samba_tensor_ndim (SambaTensor.dim(), ndimension()). Kept for the ABI. */
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
 * transpose, PyTorch's .t(); a vector or scalar is returned as a new view of
 * itself). Differentiable. OWNED. Errors: NULL_POINTER, INVALID_STATE (no
 * data). */
SAMBA_API samba_status samba_tensor_reverse_dims(samba_tensor* t, samba_tensor** out);

/* DEPRECATED since 0.1: the same as samba_tensor_reverse_dims, under a name
 * that reads like a typedef. Kept for the ABI. */
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
typedef uint32_t samba_slice_flags; /* a combination of SAMBA_SLICE_* */
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
                                             int64_t step, samba_slice_flags flags);

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

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* SAMBA_TENSOR_H */
