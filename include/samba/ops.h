/* samba/ops.h: op attributes and op calls: generic samba_op_call and typed shorthands.
 * Part of the C interface; include <samba.h>, which includes every part and
 * states the conventions (ownership, errors, thread safety) they all follow. */
#ifndef SAMBA_OPS_H
#define SAMBA_OPS_H

#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

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
 * (wrong input count or attribute type, or a value outside the attribute's
 * range: the same check as run-time argins, see samba_session_set_argin; an
 * int attribute takes a float that is an integer in [-2^63, 2^63)),
 * SHAPE_MISMATCH, DTYPE_MISMATCH,
 * OUT_OF_RANGE (capacity too small: *n_outputs says how many are needed). */
SAMBA_API samba_status samba_op_call(samba_session* session, const char* name,
                                     samba_tensor* const* inputs, size_t n_inputs,
                                     const samba_attrs* attrs, samba_tensor** outputs,
                                     size_t capacity, size_t* n_outputs);

/* ---- Typed shorthands for the most used ops ------------------------------
 * Every registry op also has a typed function generated from the registry,
 * with every attribute (samba/ops_generated.h, included by samba.h). Where
 * a shorthand below has an op's name, the generated function of an op with
 * attributes is named samba_<op>_v2 (samba_sum_v2); an op without attributes
 * keeps the shorthand, which has the generated signature.
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

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* SAMBA_OPS_H */
