/* samba/pinned.h: pinned host memory and fast-access tensors.
 * Part of the C interface; include <samba.h>, which includes every part and
 * states the conventions (ownership, errors, thread safety) they all follow. */
#ifndef SAMBA_PINNED_H
#define SAMBA_PINNED_H

#include "run.h"

#ifdef __cplusplus
extern "C" {
#endif

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
  size_t struct_size;      /* set by the caller: sizeof(samba_pinned_stats) */
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

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* SAMBA_PINNED_H */
