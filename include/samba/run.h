/* samba/run.h: loading a PEF, running its sections, device tensors, checkpoints.
 * Part of the C interface; include <samba.h>, which includes every part and
 * states the conventions (ownership, errors, thread safety) they all follow. */
#ifndef SAMBA_RUN_H
#define SAMBA_RUN_H

#include "compile.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ==== Loading and running a PEF ========================================== */

/* SambaSession(pef_path) / reset(pef_path): reads and verifies the PEF at
 * `path` (every field is checked: a PEF is untrusted input) and loads it on
 * the session's emulated RDU: device memory laid out by the PEF's memory
 * plan, weights from the PEF (when it embeds them), everything else zero.
 * Replaces a program loaded before. Records SAMBA_SET_PEF and
 * SAMBA_INIT_RUNTIME in the Samba profile. For pure inference no model
 * callback is needed. Errors: NULL_POINTER, IO (unreadable file, or not a
 * regular file: FIFOs, devices and directories are refused without reading),
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
/* data_parallel_mode of the runs after trace_graph (a run's own mode, set
 * with samba_run_options_set_data_parallel, wins): "normal", "inorder" or
 * "optimal" (see samba_run_options_set_data_parallel). Errors: NULL_POINTER,
 * INVALID_ARGUMENT (unknown mode). */
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
/* graph_name: run only this graph's sections (its whole schedule, or the
 * section types or call range given). A PEF of several graphs needs it
 * unless section ids or a call range name the calls. NULL or "" clears it.
 * Errors: NULL_POINTER. An unknown name is reported by the run (NOT_FOUND). */
SAMBA_API samba_status samba_run_options_set_graph_name(samba_run_options* opts, const char* graph_name);
/* hyperparam_dict: sets argin `name` (lr, momentum, beta1, max_grad_norm,
 * dropout_3.p, ...: the names samba_optimizer_create takes) for this run and
 * the ones after it. Errors: NULL_POINTER. Unknown names are reported by the
 * run (NOT_FOUND, listing the PEF's argins), values the argin refuses too
 * (INVALID_ARGUMENT: see "Argin values" at samba_session_set_argin). */
SAMBA_API samba_status samba_run_options_set_hyperparam(samba_run_options* opts,
                                                        const char* name, double value);
/* Removes every hyperparameter set on the options. Errors: NULL_POINTER. */
SAMBA_API samba_status samba_run_options_clear_hyperparams(samba_run_options* opts);
/* train = 0 is evaluation mode, as torch's model.eval(): dropout rates are 0
 * for the run (the argins keep their values for later training runs) and
 * batch_norm normalizes with its running statistics without updating them.
 * Errors: NULL_POINTER. */
SAMBA_API samba_status samba_run_options_set_train(samba_run_options* opts, int32_t train);
/* grad_of_outputs: per model output, in order, the gradient BCKWD starts
 * from (NULL entries keep the device's); for the seed's "partial model on
 * the device, loss on the host" pattern. Tensors are RETAINED. Errors:
 * NULL_POINTER (grads with n > 0). */
SAMBA_API samba_status samba_run_options_set_grad_of_outputs(samba_run_options* opts,
                                                             samba_tensor* const* grads, size_t n);
/* Data parallelism (run's data_parallel, reduce_on_rdu, data_parallel_mode;
 * include samba/dist.h). With `enable`, the run executes the PEF's REDUCE
 * section: each gradient bucket is averaged over the ranks of the job. Modes:
 * "normal" (REDUCE after BCKWD), "inorder" (a bucket's all-reduce starts as
 * soon as the backward kernels writing it have run, overlapping the rest of
 * BCKWD), "optimal" (as inorder, and OPT work on a bucket starts once that
 * bucket is reduced). NULL mode: the trace options' mode ("normal"). All
 * modes and both reduce_on_rdu settings (1: reduce in device memory, 0:
 * stage through pinned host buffers) give bit-identical results. Errors:
 * NULL_POINTER, INVALID_ARGUMENT (unknown mode). The run reports the rest:
 * INVALID_ARGUMENT (a PEF compiled without data parallel: recompile with
 * it; a world size other than the PEF's), UNSUPPORTED (built without MPI),
 * TIMEOUT / CANCELLED (a peer failed; the message names it). */
SAMBA_API samba_status samba_run_options_set_data_parallel(samba_run_options* opts,
                                                           int32_t enable, int32_t reduce_on_rdu,
                                                           const char* mode);

/* SambaSession.run: copies `inputs` (n_inputs host tensors, matched to the
 * PEF's tensors by sn_name; inputs not given keep their device values) to
 * the device, runs the sections `opts` selects (NULL: the whole schedule),
 * and returns the device values of `output_tensors` (n_output_tensors
 * tensors matched by sn_name, such as trace_graph's outputs; 0: every output
 * of the graphs whose FWD section ran, so a run of only BCKWD, GRADNORM, OPT
 * or ZEROGRAD sections returns none and takes outputs = NULL, capacity = 0)
 * as OWNED host tensors in outputs[0..*n_outputs).
 * Runs that change model state (backward, optimizer, ...) on one session
 * are serialized; inference runs may run on many threads at once, each with
 * its own activations, and give the same results as one thread.
 * Errors: NULL_POINTER, INVALID_STATE (no PEF loaded), NOT_FOUND (unknown
 * tensor, section type, section id or argin), SHAPE_MISMATCH /
 * DTYPE_MISMATCH (an input), INVALID_ARGUMENT (an argin out of range;
 * both section types and ids), OUT_OF_RANGE (call range; capacity too small: *n_outputs says how
 * many are needed), UNSUPPORTED (data parallel in a build without MPI),
 * TIMEOUT / CANCELLED (a data-parallel peer failed). A run refused for its
 * arguments changes nothing: no argin, input or device value, and
 * *n_outputs only in the capacity case; a run that fails while running
 * (a kernel's error) does not advance the dropout step, so the next run
 * draws the masks it would have drawn. */
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
typedef int32_t samba_names_kind; /* one of SAMBA_NAMES_* */
#define SAMBA_NAMES_SECTION_TYPES 0        /* get_section_types (distinct, schedule order) */
#define SAMBA_NAMES_WEIGHTS 1              /* get_weight_names */
#define SAMBA_NAMES_ARGINS 2               /* get_argin_names */
#define SAMBA_NAMES_DROPOUT_RATE_ARGINS 3  /* get_dropout_rate_argin_names */
#define SAMBA_NAMES_DROPOUT_SEED_ARGINS 4  /* get_dropout_seed_argin_names */
#define SAMBA_NAMES_OUTPUTS 5              /* the model outputs' sn_names */
#define SAMBA_NAMES_INPUTS 6               /* the model inputs' sn_names */

/* Number of names in list `kind`. Errors: NULL_POINTER, INVALID_STATE (no
 * PEF loaded), INVALID_ARGUMENT (unknown kind). */
SAMBA_API samba_status samba_session_name_count(const samba_session* session, samba_names_kind kind,
                                                size_t* out);
/* Name `index` of list `kind`. BORROWED: valid until the session loads
 * another PEF or is released. Errors: as samba_session_name_count,
 * OUT_OF_RANGE. */
SAMBA_API samba_status samba_session_name_at(const samba_session* session, samba_names_kind kind,
                                             size_t index, const char** out);

/* Argin values. One check, the op schema's, decides on every path that
 * gives one: samba_session_set_argin, a run's hyperparam_dict, the same
 * attribute of an eager op call (samba_dropout's p and seed) and
 * samba_optimizer_create. All refuse, with INVALID_ARGUMENT and the same
 * words, what is outside these ranges:
 *   lr, momentum, dampening, weight_decay   >= 0
 *   beta1, beta2                            in [0, 1)
 *   eps, max_grad_norm                      > 0
 *   dropout rates (dropout_3.p)             in [0, 1], as torch (1 drops all)
 *   dropout seeds (dropout_3.seed)          integers in [-2^63, 2^63); the
 *                                           64 bits are the Philox key
 * NaN and infinities are outside every range. samba_optimizer_schema_json
 * and samba_op_schema_json give the ranges as data. A refused value changes
 * nothing: the argin keeps its value, and a run refused for it runs nothing
 * (no step counter, device value or output changes). samba_session_argin
 * gives a seed as a double: exact for any seed set through this ABI, and
 * for any compiled one up to 2^53. */

/* The current value of argin `name` (its default until a run or
 * samba_session_set_argin changes it). Errors: NULL_POINTER, INVALID_STATE,
 * NOT_FOUND; for the setter also INVALID_ARGUMENT (a value outside the
 * argin's range, above, which leaves the argin as it was). */
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
typedef uint32_t samba_transfer_kinds; /* a combination of SAMBA_TRANSFER_* */
#define SAMBA_TRANSFER_PARAMETERS 1u      /* weights (and their gradients) */
#define SAMBA_TRANSFER_BUFFERS 2u         /* persistent non-trained state */
#define SAMBA_TRANSFER_OPTIMIZER_STATE 4u /* momentum, moments, step counters */
/* to_cpu / to_rdu / sync_buffers_to_cpu / sync_buffers_to_rdu / to_device:
 * copies every registered tensor of the kinds in `what` (a combination of
 * SAMBA_TRANSFER_*) from the device to its host tensor, or from the host to
 * the device. Optimizer state has no host tensors until a to_cpu creates
 * them (they are then registered under their sn_names). Tensors the PEF
 * does not know are skipped. Errors: NULL_POINTER, INVALID_STATE. */
SAMBA_API samba_status samba_session_to_cpu(samba_session* session, samba_transfer_kinds what);
SAMBA_API samba_status samba_session_to_rdu(samba_session* session, samba_transfer_kinds what);

/* ---- Checkpoints ------------------------------------------------------------ */

/* Saves the device values of the loaded PEF's tensors of the kinds in
 * `what` (SAMBA_TRANSFER_*) to `path`: zstd-compressed and checksummed,
 * written atomically (a temporary file beside `path`, fsync of that file,
 * rename over `path`, fsync of the directory): once this returns OK the new
 * checkpoint survives a crash or power loss, and a crash during the save
 * leaves the previous file intact. Temporary files that killed saves to the
 * same path left behind (".<name>.tmp.<pid>.<n>", pid no longer running) are
 * removed by the next save. Errors:
 * NULL_POINTER, INVALID_STATE, IO. */
SAMBA_API samba_status samba_session_save_checkpoint(samba_session* session, const char* path,
                                                     samba_transfer_kinds what);
/* Loads a checkpoint into the device tensors of the same names: the whole
 * file is verified (header, table, and the checksum of every frame, those of
 * entries of kinds not in `what` included), and every name, dtype and shape checked, before any
 * tensor changes. With `strict`, every tensor of the file must exist in the
 * PEF and every tensor of the kinds in `what` must be in the file. Errors:
 * NULL_POINTER, INVALID_STATE, IO (unreadable, or not a regular file: FIFOs,
 * devices and directories are refused without reading), CORRUPT_FILE
 * (damaged or truncated),
 * VERSION_MISMATCH, NOT_FOUND / SHAPE_MISMATCH / DTYPE_MISMATCH (a tensor
 * does not match). On failure no tensor changes. */
SAMBA_API samba_status samba_session_load_checkpoint(samba_session* session, const char* path,
                                                     samba_transfer_kinds what, int32_t strict);

/* ---- safetensors ------------------------------------------------------------ */

/* Saves the device values of the loaded PEF's tensors of the kinds in `what`
 * (SAMBA_TRANSFER_*; gradients are not saved) to `path` in the Hugging Face
 * safetensors format, which safetensors.torch.load_file and transformers
 * read. Tensors keep their names; optimizer state is named
 * "<parameter>.<state>" (fc.weight.exp_avg). __metadata__ holds "format":
 * "pt", "producer": "samba", "program" (the PEF's name) and "step". Written
 * atomically as samba_session_save_checkpoint does. For full training state
 * the native checkpoint is the format: it is compressed and checksummed.
 * Errors: NULL_POINTER, INVALID_ARGUMENT (`what`), INVALID_STATE (no PEF
 * loaded), IO. Thread safety: as samba_session_save_checkpoint. */
SAMBA_API samba_status samba_session_save_safetensors(samba_session* session, const char* path,
                                                      samba_transfer_kinds what);
/* Loads a safetensors file (a Hugging Face save_pretrained or
 * safetensors.torch.save_file output) into the device tensors of the kinds in
 * `what`, matched by name after a name mapping: `n_map` rules (map_from[i],
 * map_to[i]), each replacing a leading map_from[i] of a file tensor's name
 * by map_to[i] ("transformer." -> "" strips a prefix). A rule whose map_from
 * is the whole name wins, then the longest matching one; names no rule
 * matches are kept. The arrays are BORROWED for the call (NULL when n_map is
 * 0). Values are converted to each target's dtype. With `strict` (as torch's
 * load_state_dict(strict=True)) every file tensor must have a target and
 * every selected tensor of the PEF must be in the file; otherwise both are
 * skipped and listed in a warning log line. The whole file is validated and
 * every match checked before any tensor changes; the file is mapped, not
 * read into memory. Errors: NULL_POINTER, INVALID_ARGUMENT (`what`, two
 * file tensors mapped to one name, a file tensor without target when
 * strict), INVALID_STATE, IO (unreadable or not a regular file),
 * CORRUPT_FILE (header length beyond the file or above 100 MB, bad JSON,
 * repeated names, offsets out of range, overlapping or leaving holes,
 * dtype/shape/byte-size disagreement; the message names the tensor and what
 * was expected), UNSUPPORTED (a dtype Samba does not have, named),
 * NOT_FOUND (a target missing from the file when strict), SHAPE_MISMATCH.
 * On failure no tensor changes. Thread safety: as
 * samba_session_load_checkpoint. */
SAMBA_API samba_status samba_session_load_safetensors(samba_session* session, const char* path,
                                                      samba_transfer_kinds what,
                                                      const char* const* map_from,
                                                      const char* const* map_to, size_t n_map,
                                                      int32_t strict);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* SAMBA_RUN_H */
