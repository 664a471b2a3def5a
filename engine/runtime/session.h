// Session: the state an app's calls share: the thread pool, the random seed,
// the profiler, the host tensors of the last trace (by sn_name), and the
// loaded program (a Runtime) once a PEF is loaded.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/core/parallel.h"
#include "engine/runtime/runtime.h"
#include "engine/runtime/session_profiles.h"

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
  void set_seed(uint64_t s) { seed_.store(s); }
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
  SessionProfiles profiles_;
  mutable std::mutex mu_;
  std::shared_ptr<runtime::Runtime> runtime_;
  std::string pef_path_;
  std::unordered_map<std::string, Tensor> tensors_;
};

}  // namespace samba
