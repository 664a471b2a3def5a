// What a loaded PEF holds (names, argins), device tensors (sn_data, sn_grad,
// cpu, rdu, bulk transfers), profiles and checkpoints.
#include <algorithm>

#include "bindings/c/capi.h"
#include "engine/core/log.h"
#include "engine/rng/lazy_param.h"

using namespace samba;
using namespace samba::capi;

namespace {

void check_kind(int32_t kind) {
  SAMBA_CHECK(kind >= SAMBA_NAMES_SECTION_TYPES && kind <= SAMBA_NAMES_INPUTS, Status::InvalidArgument,
              "name list kind {} is unknown; expected SAMBA_NAMES_SECTION_TYPES (0) .. SAMBA_NAMES_INPUTS (6)",
              kind);
}

uint32_t roles_of(uint32_t what) {
  SAMBA_CHECK((what & ~7u) == 0 && what != 0, Status::InvalidArgument,
              "transfer kinds {:#x} are not a combination of SAMBA_TRANSFER_PARAMETERS (1), _BUFFERS (2) and "
              "_OPTIMIZER_STATE (4)",
              what);
  uint32_t roles = 0;
  auto bit = [](pef::TensorRole r) { return 1u << static_cast<unsigned>(r); };
  if (what & SAMBA_TRANSFER_PARAMETERS) roles |= bit(pef::TensorRole::Parameter) | bit(pef::TensorRole::Gradient);
  if (what & SAMBA_TRANSFER_BUFFERS) roles |= bit(pef::TensorRole::Buffer);
  if (what & SAMBA_TRANSFER_OPTIMIZER_STATE) roles |= bit(pef::TensorRole::OptimizerState);
  return roles;
}

// Roles a safetensors file holds: a state dict's, without gradients.
uint32_t state_dict_roles_of(uint32_t what) {
  return roles_of(what) & ~(1u << static_cast<unsigned>(pef::TensorRole::Gradient));
}

}  // namespace

uint32_t samba::capi::transfer_roles(uint32_t what) { return roles_of(what); }

std::vector<std::string> samba::capi::names_of(const char* const* names, size_t n, const char* what) {
  if (n) require(names, what);
  std::vector<std::string> v;
  for (size_t i = 0; i < n; ++i) {
    SAMBA_CHECK(names[i], Status::NullPointer, "{}[{}] is NULL", what, i);
    v.emplace_back(names[i]);
  }
  return v;
}

namespace {

bool selected(uint32_t roles, pef::TensorRole r) { return (roles >> static_cast<unsigned>(r)) & 1u; }

// Copies device values into the host tensor `t` (and its grad).
void copy_to_host(runtime::Runtime& rt, const Tensor& t) {
  SAMBA_CHECK(t.has_data(), Status::InvalidState, "cpu: tensor '{}' has no host data to copy into", t.name());
  t.copy_from(rt.read(t.name()));
  const int32_t i = rt.program().find_tensor(t.name());
  if (i >= 0 && rt.program().desc().tensors[static_cast<size_t>(i)].grad >= 0) {
    Tensor g = rt.read(t.name(), true);
    if (t.impl()->grad)
      Tensor(t.impl()->grad).copy_from(g);
    else
      t.impl()->grad = g.ref();
  }
}

}  // namespace

namespace samba::capi {

void transfer_to_device(runtime::Runtime& rt, const Tensor& t) {
  if (t.is_lazy()) {
    // A lazy parameter is materialized straight into device memory: the
    // host keeps its placeholder and no host copy is ever made.
    if (const auto* init = rng::lazy_initializer(t)) {
      rt.fill(t.name(), [&](const Tensor& dst) { init->fill(dst, t.name()); });
      return;
    }
    t.materialize();
  }
  SAMBA_CHECK(t.has_data(), Status::InvalidState, "rdu: tensor '{}' has no host data to copy", t.name());
  rt.write(t.name(), t);
  const int32_t i = rt.program().find_tensor(t.name());
  if (i >= 0 && rt.program().desc().tensors[static_cast<size_t>(i)].grad >= 0 && t.impl()->grad)
    rt.write(t.name(), Tensor(t.impl()->grad), true);
}

}  // namespace samba::capi

extern "C" {

samba_status samba_session_name_count(const samba_session* s, int32_t kind, size_t* out) {
  return SAMBA_GUARDED({
    require(s, "session");
    require(out, "out");
    check_kind(kind);
    auto rt = s->impl.require_runtime("names");
    *out = rt->names(static_cast<runtime::NameList>(kind)).size();
  });
}

samba_status samba_session_name_at(const samba_session* s, int32_t kind, size_t index, const char** out) {
  return SAMBA_GUARDED({
    out_param(out, "out");
    require(s, "session");
    check_kind(kind);
    auto rt = s->impl.require_runtime("names");
    const auto& list = rt->names(static_cast<runtime::NameList>(kind));
    SAMBA_CHECK(index < list.size(), Status::OutOfRange, "name index {} is out of range; the list has {}", index,
                list.size());
    *out = list[index].c_str();
  });
}

samba_status samba_session_argin(const samba_session* s, const char* name, double* out) {
  return SAMBA_GUARDED({
    require(s, "session");
    require(name, "name");
    require(out, "out");
    const AttrValue v = s->impl.require_runtime("argin")->argin(name);
    *out = std::holds_alternative<int64_t>(v) ? static_cast<double>(std::get<int64_t>(v))
           : std::holds_alternative<double>(v) ? std::get<double>(v)
                                               : 0.0;
  });
}

samba_status samba_session_set_argin(samba_session* s, const char* name, double value) {
  return SAMBA_GUARDED({
    require(s, "session");
    require(name, "name");
    s->impl.require_runtime("set_argin")->set_argin(name, value);
  });
}

samba_status samba_tensor_sn_data(samba_session* s, const samba_tensor* t, samba_tensor** out) {
  return SAMBA_GUARDED({
    out_param(out, "out");
    require(s, "session");
    const Tensor x = tensor_arg(t, "t");
    *out = to_handle(s->impl.require_runtime("sn_data")->read(x.name()));
  });
}

samba_status samba_tensor_sn_grad(samba_session* s, const samba_tensor* t, samba_tensor** out) {
  return SAMBA_GUARDED({
    out_param(out, "out");
    require(s, "session");
    const Tensor x = tensor_arg(t, "t");
    *out = to_handle(s->impl.require_runtime("sn_grad")->read(x.name(), true));
  });
}

samba_status samba_tensor_set_sn_data(samba_session* s, const samba_tensor* t, const samba_tensor* values) {
  return SAMBA_GUARDED({
    require(s, "session");
    const Tensor x = tensor_arg(t, "t");
    s->impl.require_runtime("sn_data")->write(x.name(), tensor_arg(values, "values"));
  });
}

samba_status samba_tensor_set_sn_grad(samba_session* s, const samba_tensor* t, const samba_tensor* values) {
  return SAMBA_GUARDED({
    require(s, "session");
    const Tensor x = tensor_arg(t, "t");
    s->impl.require_runtime("sn_grad")->write(x.name(), tensor_arg(values, "values"), true);
  });
}

samba_status samba_tensor_cpu(samba_session* s, samba_tensor* t) {
  return SAMBA_GUARDED({
    require(s, "session");
    copy_to_host(*s->impl.require_runtime("cpu"), tensor_arg(t, "t"));
  });
}

samba_status samba_tensor_rdu(samba_session* s, samba_tensor* t) {
  return SAMBA_GUARDED({
    require(s, "session");
    transfer_to_device(*s->impl.require_runtime("rdu"), tensor_arg(t, "t"));
  });
}

samba_status samba_session_get_tensors_by_name(samba_session* s, const char* const* names, size_t n,
                                               samba_tensor** outputs) {
  if (outputs)
    for (size_t i = 0; i < n; ++i) outputs[i] = nullptr;
  return SAMBA_GUARDED({
    require(s, "session");
    if (n) {
      require(names, "names");
      require(outputs, "outputs");
    }
    auto rt = s->impl.require_runtime("get_tensors_by_name");
    std::vector<Tensor> got;
    for (size_t i = 0; i < n; ++i) {
      SAMBA_CHECK(names[i], Status::NullPointer, "names[{}] is NULL", i);
      got.push_back(rt->read(names[i]));
    }
    for (size_t i = 0; i < n; ++i) outputs[i] = to_handle(got[i]);
  });
}

samba_status samba_session_get_samba_tensor_by_name(samba_session* s, const char* name, samba_tensor** out) {
  return SAMBA_GUARDED({
    out_param(out, "out");
    require(s, "session");
    require(name, "name");
    Tensor t = s->impl.find_tensor(name);
    SAMBA_CHECK(t.defined(), Status::NotFound,
                "get_samba_tensor_by_name: no traced tensor is named '{}' (tensors are registered by compile, "
                "trace_graph and update_tensor)",
                name);
    *out = to_handle(t);
  });
}

samba_status samba_session_update_tensor(samba_session* s, const char* name, samba_tensor* t) {
  return SAMBA_GUARDED({
    require(s, "session");
    require(name, "name");
    s->impl.update_tensor(name, t ? tensor(t) : Tensor());
  });
}

samba_status samba_session_to_cpu(samba_session* s, uint32_t what) {
  return SAMBA_GUARDED({
    require(s, "session");
    const uint32_t roles = roles_of(what);
    auto rt = s->impl.require_runtime("to_cpu");
    const auto& d = rt->program().desc();
    for (const auto& td : d.tensors) {
      if (!selected(roles, td.role) || td.role == pef::TensorRole::Gradient) continue;
      Tensor host = s->impl.find_tensor(td.name);
      if (host.defined() && host.is_lazy()) {
        // A placeholder takes the device values as its data.
        const Tensor v = rt->read(td.name);
        host.impl()->strides = v.strides();
        host.impl()->offset = 0;
        host.impl()->storage = v.impl()->storage;
        continue;
      }
      if (!host.defined() || !host.has_data()) {
        if (td.role != pef::TensorRole::OptimizerState) continue;
        // Optimizer state gets a host tensor the first time it is synced.
        host = rt->read(td.name);
        s->impl.register_tensor(host);
        continue;
      }
      copy_to_host(*rt, host);
    }
  });
}

samba_status samba_session_to_rdu(samba_session* s, uint32_t what) {
  return SAMBA_GUARDED({
    require(s, "session");
    const uint32_t roles = roles_of(what);
    auto rt = s->impl.require_runtime("to_rdu");
    for (const auto& td : rt->program().desc().tensors) {
      if (!selected(roles, td.role) || td.role == pef::TensorRole::Gradient) continue;
      Tensor host = s->impl.find_tensor(td.name);
      if (host.defined() && (host.has_data() || host.is_lazy())) transfer_to_device(*rt, host);
    }
  });
}

samba_status samba_session_start_profile(samba_session* s) {
  return SAMBA_GUARDED({
    require(s, "session");
    s->impl.profiles().start_samba_profile();
  });
}

samba_status samba_session_end_profile(samba_session* s, const char* filename) {
  return SAMBA_GUARDED({
    require(s, "session");
    s->impl.profiles().end_samba_profile(filename ? filename : "");
  });
}

samba_status samba_session_start_runtime_profile(samba_session* s, int32_t timer_enabled) {
  return SAMBA_GUARDED({
    require(s, "session");
    s->impl.profiles().start_runtime_profile(timer_enabled != 0);
  });
}

samba_status samba_session_end_runtime_profile(samba_session* s, const char* log_file) {
  return SAMBA_GUARDED({
    require(s, "session");
    const RuntimeProfileResult r = s->impl.profiles().end_runtime_profile(log_file ? log_file : "");
    if (!r.recorded) return;
    log::info("runtime profile:\n{}", r.summary);
    if (r.timer_enabled) log::info("runtime profile: wall time {:.3f} ms", static_cast<double>(r.wall_ns) / 1e6);
  });
}

samba_status samba_session_save_checkpoint(samba_session* s, const char* path, uint32_t what) {
  return SAMBA_GUARDED({
    require(s, "session");
    require(path, "path");
    s->impl.require_runtime("save_checkpoint")->save_checkpoint(path, roles_of(what));
  });
}

samba_status samba_session_load_checkpoint(samba_session* s, const char* path, uint32_t what, int32_t strict) {
  return SAMBA_GUARDED({
    require(s, "session");
    require(path, "path");
    s->impl.require_runtime("load_checkpoint")->load_checkpoint(path, roles_of(what), strict != 0);
  });
}

samba_status samba_session_save_safetensors(samba_session* s, const char* path, uint32_t what) {
  return SAMBA_GUARDED({
    require(s, "session");
    require(path, "path");
    s->impl.require_runtime("save_safetensors")->save_safetensors(path, state_dict_roles_of(what));
  });
}

samba_status samba_session_load_safetensors(samba_session* s, const char* path, uint32_t what,
                                            const char* const* map_from, const char* const* map_to,
                                            size_t n_map, int32_t strict) {
  return SAMBA_GUARDED({
    require(s, "session");
    require(path, "path");
    SafetensorsLoadOptions options;
    options.strict = strict != 0;
    if (n_map > 0) {
      require(map_from, "map_from");
      require(map_to, "map_to");
    }
    for (size_t i = 0; i < n_map; ++i) {
      SAMBA_CHECK(map_from[i] && map_to[i], Status::NullPointer,
                  "load_safetensors: name map rule {} has a NULL name", i);
      options.name_map.emplace_back(map_from[i], map_to[i]);
    }
    const LoadReport report = s->impl.require_runtime("load_safetensors")
                                  ->load_safetensors(path, state_dict_roles_of(what), options);
    if (!report.missing.empty())
      log::warn("load_safetensors '{}': {} tensors of the session are not in the file: {}", path,
                report.missing.size(), fmt::join(report.missing, ", "));
    if (!report.unused.empty())
      log::warn("load_safetensors '{}': {} tensors of the file have no target: {}", path,
                report.unused.size(), fmt::join(report.unused, ", "));
  });
}

}  // extern "C"
