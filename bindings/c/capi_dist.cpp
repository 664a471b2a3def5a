// Data parallel across processes (include/samba/dist.h): the distributed
// context, broadcast and gather of device values, the data-parallel compile
// option. The REDUCE section itself runs in engine/runtime.
#include "bindings/c/capi.h"
#include "engine/dist/communicator.h"
#include "samba/dist.h"

using namespace samba;
using namespace samba::capi;

void samba::capi::join_replicas(runtime::Runtime& rt) {
  dist::Communicator* c = dist::world();
  if (!c || c->size() < 2) return;
  rt.check_same_program(*c);
  constexpr uint32_t kState = (1u << static_cast<unsigned>(pef::TensorRole::Parameter)) |
                              (1u << static_cast<unsigned>(pef::TensorRole::Buffer)) |
                              (1u << static_cast<unsigned>(pef::TensorRole::OptimizerState));
  rt.broadcast_state(*c, kState, 0);
}

samba_status samba_dist_available(int32_t* out) {
  return SAMBA_GUARDED({
    require(out, "out");
    *out = dist::built_with_mpi() ? 1 : 0;
  });
}

samba_status samba_dist_init(void) {
  return SAMBA_GUARDED({ dist::init(); });
}

samba_status samba_dist_init_with_comm(int64_t fortran_comm) {
  return SAMBA_GUARDED({ dist::init_with_comm(fortran_comm); });
}

samba_status samba_dist_rank(int32_t* out) {
  return SAMBA_GUARDED({
    require(out, "out");
    const dist::Communicator* c = dist::world();
    *out = c ? c->rank() : 0;
  });
}

samba_status samba_dist_world_size(int32_t* out) {
  return SAMBA_GUARDED({
    require(out, "out");
    const dist::Communicator* c = dist::world();
    *out = c ? c->size() : 1;
  });
}

samba_status samba_dist_is_distributed(int32_t* out) {
  return SAMBA_GUARDED({
    require(out, "out");
    const dist::Communicator* c = dist::world();
    *out = c && c->size() > 1 ? 1 : 0;
  });
}

samba_status samba_dist_set_timeout_ms(int64_t ms) {
  return SAMBA_GUARDED({ dist::set_timeout(std::chrono::milliseconds(ms)); });
}

samba_status samba_dist_abort(int32_t exit_code, const char* reason) {
  return SAMBA_GUARDED({ dist::abort_job(exit_code, reason ? reason : ""); });
}

samba_status samba_dist_finalize(void) {
  return SAMBA_GUARDED({ dist::finalize(); });
}

samba_status samba_compile_options_set_data_parallel(samba_compile_options* o, int32_t world_size,
                                                     int64_t bucket_bytes) {
  return SAMBA_GUARDED({
    require(o, "opts");
    SAMBA_CHECK(
        world_size >= 0, Status::InvalidArgument,
        "data parallel world size {}; expected the number of replicas (0 turns data parallel off)",
        world_size);
    SAMBA_CHECK(
        bucket_bytes >= 0, Status::InvalidArgument,
        "data parallel bucket size {} bytes; expected a positive size (0: the default 25 MiB)",
        bucket_bytes);
    o->program.data_parallel_world_size = world_size;
    o->program.data_parallel_bucket_bytes = static_cast<uint64_t>(bucket_bytes);
  });
}

samba_status samba_session_broadcast(samba_session* s, samba_transfer_kinds what, int32_t root) {
  return SAMBA_GUARDED({
    require(s, "session");
    const uint32_t roles = transfer_roles(what);
    auto rt = s->impl.require_runtime("broadcast");
    dist::Communicator* c = dist::world();
    if (!c) return;
    SAMBA_CHECK(root >= 0 && root < c->size(), Status::OutOfRange,
                "broadcast: root rank {} of a job of {} ranks", root, c->size());
    rt->broadcast_state(*c, roles, root);
  });
}

samba_status samba_session_gather_tensors_by_name(samba_session* s, const char* const* names,
                                                  size_t n, samba_tensor** outputs) {
  if (outputs)
    for (size_t i = 0; i < n; ++i) outputs[i] = nullptr;
  return SAMBA_GUARDED({
    require(s, "session");
    if (n) require(outputs, "outputs");
    const std::vector<std::string> v = names_of(names, n, "names");
    auto rt = s->impl.require_runtime("gather_tensors_by_name");
    std::vector<Tensor> got = rt->gather(dist::world(), v);
    for (size_t i = 0; i < n; ++i)
      outputs[i] = got[i].defined() ? to_handle(std::move(got[i])) : nullptr;
  });
}
