/* samba/loader.h: the loader: batches prepared ahead on a background thread.
 * Part of the C interface; include <samba.h>, which includes every part and
 * states the conventions (ownership, errors, thread safety) they all follow. */
#ifndef SAMBA_LOADER_H
#define SAMBA_LOADER_H

#include "pinned.h"

#ifdef __cplusplus
extern "C" {
#endif

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
/* A distributed sampler's share of each epoch: this rank gets the
 * producer's batches rank, rank + world_size, rank + 2*world_size, ... of
 * the epoch's order, num_batches / world_size of them on every rank (the
 * remainder is dropped, so replicas step together); the producer is still
 * called with the global batch index. Ranks given the same options get
 * disjoint shares that together cover the epoch. world_size > 1 needs
 * samba_loader_options_set_num_batches (the global count); the default is
 * rank 0 of 1. Errors: NULL_POINTER, INVALID_ARGUMENT (rank outside
 * 0..world_size-1). */
SAMBA_API samba_status samba_loader_options_set_shard(samba_loader_options* o, int32_t rank, int32_t world_size);
/* Shuffles each epoch's batch order: a permutation of 0..num_batches-1
 * drawn from (seed, epoch number), the same on every rank given the same
 * seed; samba_loader_reset starts the next epoch and its new order. Needs
 * samba_loader_options_set_num_batches. Default: in order. Errors:
 * NULL_POINTER. */
SAMBA_API samba_status samba_loader_options_set_shuffle_seed(samba_loader_options* o, uint64_t seed);
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
/* Restarts from batch 0 of a new epoch (with a shuffle seed, a new order),
 * dropping prepared batches. Errors: NULL_POINTER. */
SAMBA_API samba_status samba_loader_reset(samba_loader* loader);
/* Stops the loader's thread (waiting for a producer call in progress),
 * frees prepared batches and the loader. Accepts NULL. */
SAMBA_API void samba_loader_release(samba_loader* loader);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* SAMBA_LOADER_H */
