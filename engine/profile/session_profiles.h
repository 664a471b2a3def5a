// SessionProfiles: the seed's two profilers of a SambaSession over one
// Profiler, with the semantics of its methods:
//
//   start_samba_profile() / end_samba_profile(filename)
//     every event (frontend calls, runtime calls, sections, kernels),
//     written as a Chrome trace (samba_profile(filename) is the pair);
//   start_runtime_profile(timer_enabled) / end_runtime_profile(log_file)
//     runtime, section, kernel and transfer events, summarized as a table,
//     and only when ENABLE_RUNTIME_PERF is SUMMARY or DETAILED.
//
// The two may overlap. Thread safety: every member may be called from any
// thread; starting a profile that is already running is an InvalidState
// error, ending one that is not running returns an empty result.
#pragma once

#include <mutex>
#include <optional>
#include <string>

#include "engine/profile/profile_report.h"
#include "engine/profile/profiler.h"

namespace samba {

struct RuntimeProfileResult {
  bool recorded = false;  // false when the runtime profile was off
  RuntimePerfMode mode = RuntimePerfMode::Off;
  bool timer_enabled = false;  // the caller prints the wall time when set
  int64_t wall_ns = 0;
  std::string summary;  // format_profile_summary() of the capture
};

class SessionProfiles {
 public:
  explicit SessionProfiles(ProfilerOptions options = {}) : profiler_(std::move(options)) {}

  // What the runtime records into (scopes, interned names).
  Profiler& profiler() { return profiler_; }

  void start_samba_profile();
  // Ends the Samba profile and, when `filename` is not empty, writes its
  // Chrome trace there (atomically; IoError names the file). Returns the
  // trace; an empty one when no Samba profile was running.
  ProfileTrace end_samba_profile(const std::string& filename);
  bool samba_profile_running() const;

  // Reads ENABLE_RUNTIME_PERF (a bad value is warned about) and starts the
  // runtime profile when it asks for one. Returns whether it started.
  bool start_runtime_profile(bool timer_enabled = true);
  // The same with the mode given rather than read from the environment.
  bool start_runtime_profile(RuntimePerfMode mode, bool timer_enabled);
  // Ends the runtime profile and, when one was recorded and `log_file` is not
  // empty, writes its summary there.
  RuntimeProfileResult end_runtime_profile(const std::string& log_file);
  bool runtime_profile_running() const;

 private:
  Profiler profiler_;
  mutable std::mutex mu_;
  std::optional<Profiler::CaptureId> samba_;
  std::optional<Profiler::CaptureId> runtime_;
  RuntimePerfMode runtime_mode_ = RuntimePerfMode::Off;
  bool timer_enabled_ = false;
};

}  // namespace samba
