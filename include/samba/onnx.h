/* samba/onnx.h: ONNX models in: an ONNX file or bytes imported as registry
 * ops, then traced and compiled like any model.
 * Part of the C interface; include <samba.h>, which includes every part and
 * states the conventions (ownership, errors, thread safety) they all follow. */
#ifndef SAMBA_ONNX_H
#define SAMBA_ONNX_H

#include "compile.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ==== ONNX import ========================================================== */

/* An imported ONNX model: its graph, checked by the ONNX checker and shape
 * inference, with every node mapped to registry ops; its initializers as
 * tensors named after them (floating ones are trainable parameters, except
 * BatchNormalization's running statistics; the others are constants). The
 * model is a samba_model_fn (samba_onnx_model_forward), so it compiles,
 * traces and runs eagerly as any model callback does. Immutable once
 * loaded: any thread may use it. Opsets 13 to the newest the ONNX library
 * knows (samba_onnx_max_opset) of the default domain are accepted.
 * The ONNX library is optional when Samba is built; without it every load
 * fails with SAMBA_ERR_UNSUPPORTED naming the missing library. */
typedef struct samba_onnx_model samba_onnx_model;

/* Imports a serialized ModelProto (`size` bytes at `data`, copied). A model
 * whose initializers keep their data in external files must be loaded from
 * its path instead. OWNED: release with samba_onnx_model_release.
 * Errors: NULL_POINTER, CORRUPT_FILE (not a ModelProto, refused by the ONNX
 * checker, a cycle, data shorter than its shape), UNSUPPORTED (an opset out
 * of range, an op or attribute value the importer lacks: the message names
 * the node, the op, the opset and what is supported; no ONNX library),
 * OUT_OF_RANGE (a dim above 2^32), INVALID_ARGUMENT (shape inference fails). */
SAMBA_API samba_status samba_onnx_model_load(const void* data, size_t size, samba_onnx_model** out);

/* Imports the ONNX file at `path`; external data files are read from its
 * directory (relative locations only, each bounds-checked against the file).
 * Errors: those of samba_onnx_model_load, and IO (the model or an
 * external data file cannot be read; a file shorter than the data is
 * CORRUPT_FILE). */
SAMBA_API samba_status samba_onnx_model_load_file(const char* path, samba_onnx_model** out);

/* Releases the model; tensors obtained from it stay valid while the caller
 * holds them. Accepts NULL. */
SAMBA_API void samba_onnx_model_release(samba_onnx_model* model);

/* The newest ONNX opset the importer accepts (0 without the ONNX library). */
SAMBA_API int64_t samba_onnx_max_opset(void);

/* The model as a samba_model_fn: pass it with the model as user_data to
 * samba_session_compile, samba_graph_create or trace_graph's callback.
 * Inputs are the graph inputs in order (initializers excluded), each of the
 * declared dtype and of the declared shape where it is fixed; outputs are
 * the graph outputs in order. Called outside tracing it computes eagerly.
 * Errors: NULL_POINTER, INVALID_ARGUMENT / SHAPE_MISMATCH (inputs that do not
 * fit), UNSUPPORTED (a value that must be known at import is computed from
 * the inputs, such as a Reshape's shape), errors of the registry ops. */
SAMBA_API samba_status samba_onnx_model_forward(void* model, samba_tensor* const* inputs, size_t n_inputs,
                                                samba_tensor** outputs, size_t capacity,
                                                size_t* n_outputs);

/* The graph's ONNX opset (default domain). Errors: NULL_POINTER. */
SAMBA_API samba_status samba_onnx_model_opset(const samba_onnx_model* model, int64_t* out);

/* Number of graph inputs (initializers excluded) and outputs. Errors:
 * NULL_POINTER. */
SAMBA_API samba_status samba_onnx_model_input_count(const samba_onnx_model* model, size_t* out);
SAMBA_API samba_status samba_onnx_model_output_count(const samba_onnx_model* model, size_t* out);

/* Input or output `index`: its name (BORROWED, valid while the model lives),
 * dtype, and shape (BORROWED, *ndim dims; -1 where the dim is symbolic, such
 * as a batch size). Any of name, dtype, shape, ndim may be NULL when not
 * wanted. Errors: NULL_POINTER (model), OUT_OF_RANGE (index). */
SAMBA_API samba_status samba_onnx_model_input_info(const samba_onnx_model* model, size_t index,
                                                   const char** name, samba_dtype* dtype,
                                                   const int64_t** shape, size_t* ndim);
SAMBA_API samba_status samba_onnx_model_output_info(const samba_onnx_model* model, size_t index,
                                                    const char** name, samba_dtype* dtype,
                                                    const int64_t** shape, size_t* ndim);

/* Number of initializers, and initializer `index` as a tensor named after it
 * (OWNED reference: release it). Trainable ones require grad: give them to
 * an optimizer (samba_optimizer_add_param_group) to train the model.
 * Errors: NULL_POINTER, OUT_OF_RANGE (index). */
SAMBA_API samba_status samba_onnx_model_initializer_count(const samba_onnx_model* model, size_t* out);
SAMBA_API samba_status samba_onnx_model_initializer(const samba_onnx_model* model, size_t index,
                                                    samba_tensor** out);

/* The ONNX op table as a JSON array of {"op", "since", "until",
 * "registry_ops"}: which ONNX ops (and opset ranges) import, and the
 * registry ops each becomes. BORROWED: valid for the life of the process.
 * Errors: NULL_POINTER. */
SAMBA_API samba_status samba_onnx_op_table_json(const char** out);

#ifdef __cplusplus
}
#endif

#endif /* SAMBA_ONNX_H */
