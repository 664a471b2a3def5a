/* samba/dist.h: data-parallel training across processes (Open MPI).
 * Part of the C interface; include <samba.h>, which includes every part and
 * states the conventions (ownership, errors, thread safety) they all follow.
 *
 * One process per replica, launched by `mpirun -np N app ...`. Each replica
 * loads the same data-parallel PEF (compiled with
 * samba_compile_options_set_data_parallel), runs it on its share of the
 * batch, and the PEF's REDUCE section averages every parameter gradient over
 * the replicas, so N replicas at batch B train as one process at batch N*B.
 * This header never includes mpi.h: a communicator crosses it as the integer
 * MPI_Comm_c2f returns. docs/distributed-runtime.md describes the PEF fields,
 * buckets, overlap modes, summation order and fault handling.
 *
 * In a library built without MPI (samba_dist_available gives 0) the process
 * is a plain one: rank 0 of 1. samba_dist_init and samba_dist_init_with_comm
 * fail with UNSUPPORTED, naming the missing component ("built without MPI:
 * install libopenmpi-dev and rebuild"), as do a data-parallel run and
 * samba_dist_abort under mpirun; the rest behave as in a plain process.
 *
 * Thread safety: the process has one distributed context; these functions
 * may be called from any thread, but collectives (a session's broadcast,
 * gather, trace_graph and data-parallel run) must be called in the same
 * order on every rank, as MPI requires. */
#ifndef SAMBA_DIST_H
#define SAMBA_DIST_H

#include "run.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ==== The distributed context ============================================ */

/* *out = 1 when this library was built with MPI, 0 otherwise. Errors:
 * NULL_POINTER. */
SAMBA_API samba_status samba_dist_available(int32_t* out);

/* Joins the job on a duplicate of MPI_COMM_WORLD. When MPI is not yet
 * initialized Samba calls MPI_Init_thread itself and then also finalizes it
 * at process exit (or at samba_dist_finalize). Idempotent: a second call
 * (or one after a lazy initialization, below) does nothing. Errors:
 * UNSUPPORTED (built without MPI), INVALID_STATE (finalized before, or
 * MPI already finalized by the application), INTERNAL (MPI failed; the
 * message has MPI's error string). */
SAMBA_API samba_status samba_dist_init(void);

/* Joins the job on a duplicate of the application's communicator, given as
 * MPI_Comm_c2f(comm). The application initialized MPI and finalizes it
 * (after samba_dist_finalize). Errors: UNSUPPORTED, INVALID_STATE (MPI not
 * initialized, or Samba already joined on another communicator),
 * INVALID_ARGUMENT (not a valid communicator). */
SAMBA_API samba_status samba_dist_init_with_comm(int64_t fortran_comm);

/* utils.get_rank / get_world_size / is_distributed. In a process launched by
 * mpirun (OMPI_COMM_WORLD_SIZE in the environment) the first of these calls
 * initializes the context as samba_dist_init does; in a plain process (or a
 * library built without MPI) they give rank 0, world size 1, not
 * distributed. is_distributed is 1 when the world size is above 1.
 * Errors: NULL_POINTER, and those of samba_dist_init under mpirun. */
SAMBA_API samba_status samba_dist_rank(int32_t* out);
SAMBA_API samba_status samba_dist_world_size(int32_t* out);
SAMBA_API samba_status samba_dist_is_distributed(int32_t* out);

/* The bound on every collective Samba makes (broadcast, gather, the PEF hash
 * check, each REDUCE bucket): a collective that has not completed after `ms`
 * milliseconds fails with TIMEOUT naming the ranks that did not take part.
 * Default 60000, or SAMBA_DIST_TIMEOUT_S (seconds, a positive number; a bad
 * value is ignored with a warning) read at initialization. After a timeout
 * the job cannot continue: end it with samba_dist_abort. Process-wide.
 * Errors: INVALID_ARGUMENT (ms <= 0). Works without MPI (it has no effect). */
SAMBA_API samba_status samba_dist_set_timeout_ms(int64_t ms);

/* The seed's use_abexit: tells every other rank that this rank failed
 * (`reason`, may be NULL), so each ends its current or next collective with
 * CANCELLED and a message naming this rank and the reason, then ends the
 * job with MPI_Abort(exit_code). Does not return when distributed; in a plain
 * process it returns SAMBA_OK without doing anything, so an app may call it
 * unconditionally from its error path. Errors: UNSUPPORTED (built without
 * MPI, when launched by mpirun). */
SAMBA_API samba_status samba_dist_abort(int32_t exit_code, const char* reason);

/* Leaves the job: frees Samba's communicator and, when Samba initialized MPI,
 * finalizes it. Sessions must not run data parallel afterwards. A no-op when
 * never initialized (always so in a library built without MPI). Errors:
 * INTERNAL (MPI failed). */
SAMBA_API samba_status samba_dist_finalize(void);

/* ==== Compiling and running data parallel ================================ */

/* --data-parallel -ws N: the PEF records `world_size` and gets a REDUCE
 * section between BCKWD (and GRADNORM) and OPT that averages every parameter
 * gradient over the replicas. Gradients are grouped into buckets of about
 * `bucket_bytes` (0: 25 MiB, as PyTorch DDP), each contiguous in the memory
 * plan and all-reduced at once, in the reverse order of their production.
 * world_size 0 turns data parallel off again. A training compile is needed
 * (an inference compile with data parallel fails at compile time with
 * INVALID_ARGUMENT). Compiling needs no MPI. Errors: NULL_POINTER,
 * INVALID_ARGUMENT (world_size < 0, bucket_bytes < 0). */
SAMBA_API samba_status samba_compile_options_set_data_parallel(samba_compile_options* opts,
                                                               int32_t world_size,
                                                               int64_t bucket_bytes);

/* SambaSession.broadcast: copies the device values of the loaded PEF's
 * tensors of the kinds in `what` (SAMBA_TRANSFER_*) from rank `root` to
 * every rank. A collective: every rank calls it with the same arguments.
 * trace_graph and init_multigraph_runtime do it for parameters, buffers and
 * optimizer state when distributed (profile event
 * PyRT_SET_TENSORS_BROADCAST). A process that is not distributed returns OK
 * at once. Errors: NULL_POINTER, INVALID_ARGUMENT (`what`), INVALID_STATE (no
 * PEF loaded), OUT_OF_RANGE (root), TIMEOUT, CANCELLED (a peer aborted). */
SAMBA_API samba_status samba_session_broadcast(samba_session* session, samba_transfer_kinds what,
                                               int32_t root);

/* Gathers device values to rank 0: on rank 0 outputs[i] is a new host tensor
 * (OWNED) whose dim 0 is the concatenation, in rank order, of every rank's
 * device value of names[i]; on the other ranks outputs[i] is NULL. A
 * collective (profile event PyRT_GET_TENSORS_GATHER). In a plain process it
 * is samba_session_get_tensors_by_name. Errors: NULL_POINTER, INVALID_STATE,
 * NOT_FOUND, INVALID_ARGUMENT (a scalar tensor), TIMEOUT, CANCELLED. On
 * failure no tensor is returned. */
SAMBA_API samba_status samba_session_gather_tensors_by_name(samba_session* session,
                                                            const char* const* names, size_t n,
                                                            samba_tensor** outputs);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* SAMBA_DIST_H */
