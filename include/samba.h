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
 *  - Thread safety: each handle type states it in one line. Process-wide
 *    state is limited to: the log level and log sink (samba_set_log_level,
 *    samba_set_log_sink; SAMBA_LOG_LEVEL read once), the pinned-memory pool
 *    shared by all sessions (samba_pinned_memory_stats), the thread pool used
 *    by eager ops called without a session, a cache of op schema text behind
 *    samba_op_schema_json, and the per-thread error messages. Each is safe to use
 *    from any thread.
 *  - Compatibility: functions are only ever added. A changed signature gets a
 *    new name (suffix _v2). Status and dtype codes are never renumbered.
 */
#ifndef SAMBA_H
#define SAMBA_H

/* One header per area, each usable on its own (it includes the parts it
 * builds on); this one includes them all. */
#include "samba/core.h"
#include "samba/tensor.h"
#include "samba/ops.h"
#include "samba/compile.h"
#include "samba/run.h"
#include "samba/profile.h"
#include "samba/lazy.h"
#include "samba/pinned.h"
#include "samba/loader.h"
#include "samba/onnx.h"
#include "samba/dist.h"
/* One typed function per registry op (samba_conv2d, samba_max_pool2d, ...),
 * generated at build time from the op registry and installed beside the
 * parts above. */
#include "samba/ops_generated.h"

#endif /* SAMBA_H */

/* Declarations that may still change: visible only with SAMBA_EXPERIMENTAL
 * defined before this header is included. Outside the include guard, so a
 * file may include samba.h again after defining SAMBA_EXPERIMENTAL. */
#include "samba/experimental.h"
