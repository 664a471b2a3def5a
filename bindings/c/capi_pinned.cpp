// Pinned memory (enable_pinned_memory), fast-access tensors and the pool's
// statistics.
#include <cstring>

#include "bindings/c/capi.h"
#include "engine/memory/pinned_pool.h"

using namespace samba;
using namespace samba::capi;

namespace samba::capi {

void move_to_pinned(const Tensor& t) {
  TensorImpl& impl = *t.impl();
  // Only memory the engine owns and nothing else shares: moving it must not
  // split a view from its base or pull memory from under the caller.
  if (!impl.storage || impl.storage->kind() != MemoryKind::Host || impl.storage->ref_count() != 1) return;
  Ref<Storage> pinned = Storage::allocate(impl.storage->nbytes(), false, pinned_pool());
  if (impl.storage->nbytes()) std::memcpy(pinned->data(), impl.storage->data(), impl.storage->nbytes());
  impl.storage = std::move(pinned);
}

void mark_fast_access(Session* s, const Tensor& t, bool on) {
  if (on) move_to_pinned(t);
  t.impl()->fast_access = on;
  if (s && !t.name().empty()) s->set_fast_access(t.name(), on);
}

}  // namespace samba::capi

extern "C" {

samba_status samba_session_enable_pinned_memory(samba_session* s) {
  return SAMBA_GUARDED({
    require(s, "session");
    s->impl.set_pinned_memory(true);
  });
}

samba_status samba_session_disable_pinned_memory(samba_session* s) {
  return SAMBA_GUARDED({
    require(s, "session");
    s->impl.set_pinned_memory(false);
  });
}

samba_status samba_session_use_pinned_memory(const samba_session* s, int32_t* out) {
  return SAMBA_GUARDED({
    require(s, "session");
    require(out, "out");
    *out = s->impl.pinned_memory() ? 1 : 0;
  });
}

samba_status samba_pinned_memory_stats(samba_pinned_stats* out) {
  return SAMBA_GUARDED({
    require(out, "out");
    SAMBA_CHECK(out->struct_size >= sizeof(samba_pinned_stats), Status::InvalidArgument,
                "pinned stats: struct_size is {}; expected at least sizeof(samba_pinned_stats) = {}",
                out->struct_size, sizeof(samba_pinned_stats));
    const PinnedPoolStats st = pinned_pool().stats();
    out->bytes_reserved = st.bytes_reserved;
    out->bytes_locked = st.bytes_locked;
    out->bytes_in_use = st.bytes_in_use;
    out->bytes_cached = st.bytes_cached;
    out->hits = st.hits;
    out->misses = st.misses;
    out->locked = st.locked ? 1 : 0;
  });
}

samba_status samba_tensor_set_fast_access(samba_session* s, samba_tensor* t, int32_t enable) {
  return SAMBA_GUARDED({
    Tensor x = tensor_arg(t, "t");
    mark_fast_access(s ? &s->impl : nullptr, x, enable != 0);
  });
}

samba_status samba_tensor_fast_access(const samba_tensor* t, int32_t* out) {
  return SAMBA_GUARDED({
    Tensor x = tensor_arg(t, "t");
    require(out, "out");
    *out = x.impl()->fast_access ? 1 : 0;
  });
}

samba_status samba_session_is_fast_access(const samba_session* s, const char* name, int32_t* out) {
  return SAMBA_GUARDED({
    require(s, "session");
    require(name, "name");
    require(out, "out");
    *out = s->impl.is_fast_access(name) ? 1 : 0;
  });
}

samba_status samba_session_set_fast_access(samba_session* s, const char* name, int32_t enable) {
  return SAMBA_GUARDED({
    require(s, "session");
    require(name, "name");
    s->impl.set_fast_access(name, enable != 0);
  });
}

samba_status samba_tensor_reusable(const samba_tensor* t, int32_t* out) {
  return SAMBA_GUARDED({
    Tensor x = tensor_arg(t, "t");
    require(out, "out");
    *out = x.has_data() && x.is_contiguous() ? 1 : 0;
  });
}

}  // extern "C"
