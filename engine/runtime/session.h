// Session: the state an app's calls share: the thread pool, the random seed,
// the profiler, the host tensors of the last trace (by sn_name), and the
// loaded program (a Runtime) once a PEF is loaded.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/core/parallel.h"
#include "engine/profile/session_profiles.h"
#include "engine/rng/lazy_param.h"
#include "engine/runtime/runtime.h"

namespace samba {

struct SessionOptions {
  int32_t threads = 0;  // <= 0: one per hardware thread
  uint64_t seed = 0;
};

class Session {
 public:
  explicit Session(const SessionOptions& opts);
  ThreadPool& pool() { return *pool_; }
  uint64_t seed() const { return seed_.load(); }
  // Sets the seed and restarts the random streams drawn from it.
  void set_seed(uint64_t s);
  // reset_random_generator: the next draw is the first one of the seed again.
  void reset_random_generator() { random_stream_.store(0); }
  // The Philox stream for the next random draw (rand, randn, ...): each call
  // gives a new stream of the seed, so draws are independent and repeat
  // after reset_random_generator.
  uint64_t next_random_stream() { return random_stream_.fetch_add(1); }

  // Lazy parameter mode (enable_lazy_param); nullopt when off.
  std::optional<rng::LazySettings> lazy_settings() const;
  void set_lazy_settings(std::optional<rng::LazySettings> s);
  // The options parameters are materialized with: the lazy settings (with
  // this session's seed when they name none), or defaults when lazy mode is off.
  rng::MaterializeOptions materialize_options() const;

  // Pinned memory (enable_pinned_memory): staged host-to-device transfers,
  // inputs marked fast_access after trace_graph. Applies to a runtime loaded
  // later too.
  bool pinned_memory() const { return pinned_.load(); }
  void set_pinned_memory(bool on);
  // fast_access by sn_name (SambaTensor.is_fast_access), including names of
  // tensors that have no host tensor (output gradients).
  void set_fast_access(const std::string& name, bool on);
  bool is_fast_access(const std::string& name) const;
  SessionProfiles& profiles() { return profiles_; }

  // The loaded program; null before a PEF is loaded. Callers keep the
  // shared pointer for the duration of a call, so a reset() on another
  // thread never pulls the runtime from under a run.
  std::shared_ptr<runtime::Runtime> runtime() const;
  // Loads `program` (already verified), replacing any loaded one. Records
  // SAMBA_INIT_RUNTIME in the profile.
  void load(pef::ProgramDesc program, std::string pef_path);
  // Unloads the program (SambaSession.reset with no PEF).
  void unload();
  std::string pef_path() const;
  // The loaded runtime, or InvalidState naming `what` when none is loaded.
  std::shared_ptr<runtime::Runtime> require_runtime(const char* what) const;

  // Host tensors the app traced with (parameters, buffers, inputs), by
  // sn_name: get_samba_tensor_by_name, to_cpu / to_rdu, update_tensor.
  void register_tensor(const Tensor& t);
  // Removes (t undefined) or replaces the tensor registered under `name`.
  void update_tensor(const std::string& name, const Tensor& t);
  Tensor find_tensor(const std::string& name) const;
  std::vector<Tensor> registered_tensors() const;

 private:
  std::unique_ptr<ThreadPool> pool_;
  std::atomic<uint64_t> seed_;
  std::atomic<uint64_t> random_stream_{0};
  std::atomic<bool> pinned_{false};
  std::optional<rng::LazySettings> lazy_;  // guarded by mu_
  std::set<std::string, std::less<>> fast_access_;  // guarded by mu_
  SessionProfiles profiles_;
  mutable std::mutex mu_;
  std::shared_ptr<runtime::Runtime> runtime_;
  std::string pef_path_;
  std::unordered_map<std::string, Tensor> tensors_;
};

}  // namespace samba
