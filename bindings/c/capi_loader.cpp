// The loader (SambaLoader): batches from a C producer, prepared ahead.
#include "bindings/c/capi.h"
#include "engine/loader/batch_loader.h"

using namespace samba;
using namespace samba::capi;

struct samba_loader_options {
  BatchLoader::Options impl;
};

struct samba_loader {
  std::unique_ptr<BatchLoader> impl;
  // The loader's thread stops before the producer's user data is destroyed.
  void (*destroy)(void*) = nullptr;
  void* user_data = nullptr;
  ~samba_loader() {
    impl.reset();
    if (destroy) destroy(user_data);
  }
};

namespace {

BatchLoader::Producer producer_from(samba_loader_produce_fn fn, void* user_data, size_t n) {
  return [fn, user_data, n](int64_t index) -> std::optional<std::vector<Tensor>> {
    std::vector<samba_tensor*> handles(n, nullptr);
    int32_t end = 0;
    clear_error();
    const samba_status st = fn(user_data, index, handles.data(), n, &end);
    // The loader owns whatever the producer wrote, even when it then failed.
    std::vector<Tensor> batch;
    bool complete = true;
    for (samba_tensor* h : handles) {
      if (h)
        batch.emplace_back(Ref<TensorImpl>::adopt(impl(h)));
      else
        complete = false;
    }
    if (st != SAMBA_OK) fail_from_callback(st, "the loader's producer");
    if (end) return std::nullopt;
    SAMBA_CHECK(complete, Status::NullPointer, "the loader's producer wrote {} of the {} tensors of batch {}",
                batch.size(), n, index);
    return batch;
  };
}

}  // namespace

extern "C" {

samba_status samba_loader_options_create(samba_loader_options** out) {
  return SAMBA_GUARDED({
    out_param(out, "out");
    *out = new samba_loader_options();
  });
}

samba_status samba_loader_options_set_max_prefetch(samba_loader_options* o, int32_t n) {
  return SAMBA_GUARDED({
    require(o, "opts");
    SAMBA_CHECK(n >= 1 && n <= 1024, Status::InvalidArgument, "max_prefetch must be 1..1024, got {}", n);
    o->impl.max_prefetch = n;
  });
}

samba_status samba_loader_options_set_timeout_ms(samba_loader_options* o, int64_t ms) {
  return SAMBA_GUARDED({
    require(o, "opts");
    SAMBA_CHECK(ms > 0, Status::InvalidArgument, "the loader timeout must be > 0 ms, got {}", ms);
    o->impl.timeout = std::chrono::milliseconds(ms);
  });
}

samba_status samba_loader_options_set_num_batches(samba_loader_options* o, int64_t n) {
  return SAMBA_GUARDED({
    require(o, "opts");
    SAMBA_CHECK(n >= -1, Status::InvalidArgument, "num_batches must be >= 0, or -1 for no limit; got {}", n);
    o->impl.num_batches = n;
  });
}

samba_status samba_loader_options_set_shard(samba_loader_options* o, int32_t rank, int32_t world_size) {
  return SAMBA_GUARDED({
    require(o, "opts");
    SAMBA_CHECK(world_size >= 1 && rank >= 0 && rank < world_size, Status::InvalidArgument,
                "loader shard: rank {} of world size {}; expected 0 <= rank < world_size, world_size >= 1", rank,
                world_size);
    o->impl.shard_rank = rank;
    o->impl.shard_count = world_size;
  });
}

samba_status samba_loader_options_set_shuffle_seed(samba_loader_options* o, uint64_t seed) {
  return SAMBA_GUARDED({
    require(o, "opts");
    o->impl.shuffle_seed = seed;
  });
}

void samba_loader_options_release(samba_loader_options* o) { delete o; }

samba_status samba_loader_create(const char* const* names, size_t n_names, samba_loader_produce_fn produce,
                                 void* user_data, void (*destroy)(void*), const samba_loader_options* opts,
                                 samba_loader** out) {
  return SAMBA_GUARDED({
    out_param(out, "out");
    if (n_names) require(names, "names");
    require(reinterpret_cast<const void*>(produce), "produce");
    std::vector<std::string> n;
    for (size_t i = 0; i < n_names; ++i) {
      require(names[i], "names[i]");
      n.emplace_back(names[i]);
    }
    auto l = std::make_unique<samba_loader>();
    l->impl = std::make_unique<BatchLoader>(std::move(n), producer_from(produce, user_data, n_names),
                                            opts ? opts->impl : BatchLoader::Options{});
    l->destroy = destroy;
    l->user_data = user_data;
    *out = l.release();
  });
}

samba_status samba_loader_next(samba_loader* l, samba_tensor** tensors, size_t capacity, int32_t* end) {
  return SAMBA_GUARDED({
    require(l, "loader");
    require(end, "end");
    const size_t n = l->impl->names().size();
    SAMBA_CHECK(capacity >= n, Status::InvalidArgument, "loader: `tensors` holds {} but a batch has {} tensors",
                capacity, n);
    require(tensors, "tensors");
    std::optional<std::vector<Tensor>> batch = l->impl->next();
    *end = batch ? 0 : 1;
    if (!batch) return;
    for (size_t i = 0; i < n; ++i) tensors[i] = to_handle(std::move((*batch)[i]));
  });
}

samba_status samba_loader_reset(samba_loader* l) {
  return SAMBA_GUARDED({
    require(l, "loader");
    l->impl->reset();
  });
}

void samba_loader_release(samba_loader* l) { delete l; }

}  // extern "C"
