// Shared by the files that implement include/samba.h: handle conversions and
// the boundary that turns C++ exceptions into status codes.
#pragma once

#include <atomic>
#include <functional>
#include <mutex>
#include <new>
#include <nlohmann/json_fwd.hpp>
#include <span>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "compiler/compile.h"
#include "engine/core/error.h"
#include "engine/core/tensor.h"
#include "engine/ops/registry.h"
#include "engine/runtime/session.h"
// The hand-written parts of samba.h one by one: samba/ops_generated.h is
// written by a program linked from these very files.
#include "samba/compile.h"
#include "samba/core.h"
#include "samba/dist.h"
#include "samba/lazy.h"
#include "samba/loader.h"
#include "samba/onnx.h"
#include "samba/ops.h"
#include "samba/pinned.h"
#include "samba/profile.h"
#include "samba/run.h"
#include "samba/tensor.h"

struct samba_session {
  explicit samba_session(const samba::SessionOptions& o) : impl(o) {}
  samba::Session impl;
  mutable std::mutex mu;  // guards graphs
  std::vector<samba::compiler::GraphSpec> graphs;  // add_graph, for compile_multigraph
  // trace_graph's data_parallel_mode: runs that name none use it.
  std::atomic<samba::runtime::DataParallelMode> data_parallel_mode{
      samba::runtime::DataParallelMode::Normal};
};
struct samba_optimizer {
  samba::compiler::OptimizerSpec spec;
  // Per parameter, the state of eager steps (samba_optimizer_step).
  std::unordered_map<const samba::TensorImpl*, std::unordered_map<std::string, samba::Tensor>> eager_state;
};
struct samba_compile_options {
  samba::compiler::CompileOptions program;
  std::string pef_path;  // "" means "<name>.pef"
  bool write_log = true;
  bool inference = false;
  int64_t batch_size = 0;
  int64_t micro_batch_size = 0;
  samba::pef::Mapping mapping = samba::pef::Mapping::Section;
  samba::compiler::BackwardOptions backward;
};
struct samba_graph {
  samba::compiler::GraphSpec spec;
};
struct samba_run_options {
  samba::runtime::RunRequest request;  // everything but inputs and outputs
  bool mode_given = false;             // else the trace options' mode
};
struct samba_trace_options {
  bool init_output_grads = true;
  bool transfer_device = true;
  std::vector<std::string> unspecified_grads;
  std::vector<std::pair<std::string, samba::Tensor>> custom_grads;
  samba::runtime::DataParallelMode data_parallel_mode = samba::runtime::DataParallelMode::Normal;
};
struct samba_session_options {
  samba::SessionOptions impl;
};
struct samba_attrs {
  samba::Attrs impl;
};

namespace samba::capi {

// A samba_tensor* is the TensorImpl itself, so C references and C++ Refs
// count the same thing.
inline TensorImpl* impl(samba_tensor* t) { return reinterpret_cast<TensorImpl*>(t); }
inline const TensorImpl* impl(const samba_tensor* t) {
  return reinterpret_cast<const TensorImpl*>(t);
}
inline Tensor tensor(const samba_tensor* t) {
  return Tensor(Ref<TensorImpl>(const_cast<TensorImpl*>(impl(t))));
}
// Hands an owned reference to the caller.
inline samba_tensor* to_handle(Tensor t) {
  return reinterpret_cast<samba_tensor*>(Ref<TensorImpl>(t.ref()).release_to_caller());
}
inline samba_tensor* borrowed_handle(const Tensor& t) {
  return reinterpret_cast<samba_tensor*>(t.impl());
}

samba_status set_error(const char* fn, samba_status code, const char* message);

// User callbacks (models, materializers, loaders): the thread's last error
// is cleared before the call, so the message a failing callback sets with
// samba_set_error_message (or leaves from a failed Samba call) is the one
// reported; fail_from_callback throws the error its status stands for.
void clear_error();
[[noreturn]] void fail_from_callback(samba_status st, std::string_view callback);

template <typename T>
void require(const T* p, const char* what) {
  if (!p) fail(Status::NullPointer, "argument '{}' is NULL", what);
}

// Clears an out-parameter first, so it stays NULL on failure.
template <typename T>
T** out_param(T** p, const char* what) {
  require(p, what);
  *p = nullptr;
  return p;
}

DType checked_dtype(samba_dtype d, const char* what);

// The tensor roles (a mask of 1 << pef::TensorRole) of SAMBA_TRANSFER_*
// kinds; InvalidArgument for other bits.
uint32_t transfer_roles(uint32_t what);

// `n` names from a C array (each required); `what` names the array.
std::vector<std::string> names_of(const char* const* names, size_t n, const char* what);

// Under MPI (a job of several ranks), after a PEF is loaded: checks every
// rank loaded the same program for this world size, then gives every rank
// rank 0's parameters, buffers and optimizer state. A no-op otherwise.
void join_replicas(samba::runtime::Runtime& rt);
Dims checked_dims(const int64_t* shape, size_t ndim, const char* what);

// Fails with OutOfRange unless `v` converts to `dt` without undefined
// behaviour (finite and within an integer dtype's range); `what` names it.
void check_representable(double v, DType dt, const char* what);

// A required tensor argument as a Tensor sharing the caller's reference.
inline Tensor tensor_arg(const samba_tensor* t, const char* what) {
  require(t, what);
  return tensor(t);
}

// `n` tensor arguments (each required) as Tensors sharing the caller's
// references; `what` names the array in messages.
std::vector<Tensor> tensors_of(samba_tensor* const* ts, size_t n, const char* what);

// Tensor over memory the engine does not allocate. The layout (strides in
// elements, NULL: contiguous) is validated and the tensor built before
// `make_storage(nbytes)` runs, so a failure never leaves a storage behind
// whose deleter would fire: after make_storage nothing can throw.
Tensor external_tensor(DType dtype, const Dims& shape, const int64_t* strides, void* data,
                       const std::function<Ref<Storage>(size_t nbytes)>& make_storage);

// Runs `op` eagerly (or traced) on `session`'s pool, the default pool when
// session is NULL. The one path by which samba_op_call and the typed
// shorthands reach the registry.
std::vector<Tensor> run_op(samba_session* session, const OpDef& op, std::span<const Tensor> inputs,
                           const Attrs& attrs);
// Single-output form, for ops known to return one tensor.
Tensor run_op1(samba_session* session, std::string_view op, std::span<const Tensor> inputs,
               const Attrs& attrs = {});

// Adds an attribute's run-time facts to its schema JSON object: "argin"
// (run() may change it by name) and "range" (its valid values; null: any).
// Shared by samba_op_schema_json and samba_optimizer_schema_json.
void add_argin_schema(const AttrSpec& a, nlohmann::json& j);

// Host-to-device copy of a host tensor (and its grad) into the device tensor
// of the same name; a lazy placeholder is materialized on the device.
void transfer_to_device(runtime::Runtime& rt, const Tensor& t);

// fast_access: moves engine-owned, unshared host memory into pinned memory,
// sets the flag, and records the name in the session (s may be null).
void mark_fast_access(Session* s, const Tensor& t, bool on);

template <typename F>
samba_status guarded(const char* fn, F&& body) noexcept {
  try {
    body();
    return SAMBA_OK;
  } catch (const Error& e) {
    return set_error(fn, static_cast<samba_status>(e.code()), e.what());
  } catch (const std::bad_alloc&) {
    return set_error(fn, SAMBA_ERR_OUT_OF_MEMORY, "out of memory");
  } catch (const std::exception& e) {
    return set_error(fn, SAMBA_ERR_INTERNAL, e.what());
  } catch (...) {
    return set_error(fn, SAMBA_ERR_INTERNAL, "unknown exception");
  }
}

}  // namespace samba::capi

#define SAMBA_GUARDED(...) ::samba::capi::guarded(__func__, [&] { __VA_ARGS__ })
