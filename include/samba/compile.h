/* samba/compile.h: optimizers, tracing a model and compiling it into a PEF, multigraph.
 * Part of the C interface; include <samba.h>, which includes every part and
 * states the conventions (ownership, errors, thread safety) they all follow. */
#ifndef SAMBA_COMPILE_H
#define SAMBA_COMPILE_H

#include "ops.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ==== Optimizers ========================================================== */

/* An optimizer: SGD or AdamW over parameter groups. The compiler turns it
 * into OPT (and, with max_grad_norm, GRADNORM) sections whose numeric
 * hyperparameters are argins run() can change; it can also step eagerly on
 * host tensors (samba_optimizer_step). Not thread-safe: build it on one
 * thread; once built it may be read by compiles on any thread. */
typedef struct samba_optimizer samba_optimizer;

/* Creates an optimizer of `kind`, "sgd" or "adamw" (case-insensitive), with
 * the hyperparameters in `defaults` (may be NULL) applied to every group.
 * The hyperparameters are the attributes of the op that performs the step
 * ("sgd_update", "adamw_update": their names, defaults and valid ranges are
 * in samba_op_schema_json) plus max_grad_norm (no default: no clipping),
 * which clips all of the optimizer's gradients together as
 * torch.nn.utils.clip_grad_norm_ does, for SGD and AdamW alike;
 * samba_optimizer_schema_json lists them all. A hyperparameter has the same
 * name here as in samba_run_options_set_hyperparam (adamw: beta1, beta2;
 * defaults 0.9 and 0.997 as in SambaFlow). Deprecated: adamw's "betas" (two
 * floats) for beta1 and beta2, still accepted.
 * OWNED: release with samba_optimizer_release. Errors: NULL_POINTER,
 * NOT_FOUND (unknown kind or hyperparameter), INVALID_ARGUMENT (a value out
 * of range, such as a negative lr). */
SAMBA_API samba_status samba_optimizer_create(const char* kind, const samba_attrs* defaults,
                                              samba_optimizer** out);

/* The hyperparameters of optimizer `kind` ("sgd" or "adamw"), read from the
 * op registry, as a JSON array of objects {"name", "type" ("float" or
 * "bool"), "default" (null: none), "argin" (true: run() may change it
 * through samba_run_options_set_hyperparam), "range" ({"min", "max",
 * "min_open", "max_open"}, null bounds unbounded; null: any value), "doc"}.
 * For bindings that expose optimizers with the registry's defaults, and for
 * documentation. BORROWED: valid for the life of the process. Errors:
 * NULL_POINTER, NOT_FOUND (unknown kind). */
SAMBA_API samba_status samba_optimizer_schema_json(const char* kind, const char** out);

/* Releases an optimizer and the parameter references it holds. Accepts NULL. */
SAMBA_API void samba_optimizer_release(samba_optimizer* opt);

/* Adds a parameter group: `params` (n tensors that require grad; RETAINED)
 * with hyperparameter overrides `hyper` (may be NULL; max_grad_norm is
 * refused: it is the optimizer's). Errors: NULL_POINTER, INVALID_ARGUMENT (a
 * tensor that does not require grad, or already in a group),
 * NOT_FOUND / INVALID_ARGUMENT (bad hyperparameters). On failure the
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
 * one are skipped, as in PyTorch), after clipping them together when
 * max_grad_norm is set, on the host, by the same update ops the compiled
 * OPT section runs, with the optimizer's own
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

/* Mixed precision (SambaFlow's mixed-precision compile; its GraphAMP
 * presets "mp0" and "mp1" are accepted for "none" and "bf16"):
 *   "none"  every op in the dtypes the model traced (the default);
 *   "bf16"  matrix products and convolutions take bf16 operands and give bf16
 *           results, accumulating in fp32 inside the kernel; reductions,
 *           softmax, normalizations, losses, exp and log run in fp32 (their
 *           bf16 inputs cast up); other ops run in the dtype of their inputs.
 *           Parameters stay fp32 (the master weights the optimizer updates,
 *           with fp32 gradients), and outputs keep the dtype they were
 *           traced with. Inference compiles are rewritten the same way.
 * The PEF records the mode (metadata "compiler.mixed_precision") and its
 * .pef.log shows it. Errors: NULL_POINTER, INVALID_ARGUMENT (another mode;
 * the message lists the accepted ones). */
SAMBA_API samba_status samba_compile_options_set_mixed_precision(samba_compile_options* opts,
                                                                const char* mode);

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

/* The model outputs that are losses (the seed's loss_indices): exactly
 * these are differentiated, each from its output gradient (ones unless
 * samba_compile_options_set_output_grad says otherwise).
 *
 * Without loss indices every output is differentiated. Scalar outputs start
 * from a gradient of ones. If at least one output is a scalar, the
 * non-scalar outputs start from zeros (they are not losses: a model
 * returning (loss, logits) trains on the loss alone; give them values with
 * set_output_grad or samba_run_options_set_grad_of_outputs), and the
 * compiler logs them at SAMBA_LOG_INFO. If no output is a scalar, every
 * output is a loss with a gradient of ones (as if its sum were the loss),
 * and the compiler logs a SAMBA_LOG_WARNING per output naming it and its
 * shape. Errors: NULL_POINTER, OUT_OF_RANGE (a negative index; an index
 * past the model's outputs fails the compile with OUT_OF_RANGE). */
SAMBA_API samba_status samba_compile_options_set_loss_indices(samba_compile_options* opts,
                                                             const int64_t* indices, size_t n);

/* How the gradient fed to output `index` is initialised (the seed's
 * init_output_grads). A mode set here is kept even for an output the
 * default loss set (no loss indices, see above) would start from zeros;
 * trace_graph starts each output gradient from the compiled values. */
typedef int32_t samba_output_grad_mode; /* one of SAMBA_OUTPUT_GRAD_* */
#define SAMBA_OUTPUT_GRAD_ONES 0        /* a tensor of ones (the default) */
#define SAMBA_OUTPUT_GRAD_CUSTOM 1      /* the values of `values` (copied) */
#define SAMBA_OUTPUT_GRAD_UNSPECIFIED 2 /* left for the app to set at run time */
/* Errors: NULL_POINTER (values for CUSTOM), INVALID_ARGUMENT (unknown mode).
 * The shape of `values` is checked against the output when compiling. */
SAMBA_API samba_status samba_compile_options_set_output_grad(samba_compile_options* opts,
                                                            size_t index, samba_output_grad_mode mode,
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

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* SAMBA_COMPILE_H */
