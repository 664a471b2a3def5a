#include "engine/profile/session_profiles.h"

#include "engine/core/error.h"
#include "engine/io/atomic_file.h"

namespace samba {

void SessionProfiles::start_samba_profile() {
  std::lock_guard<std::mutex> lock(mu_);
  SAMBA_CHECK(!samba_, Status::InvalidState,
              "start_samba_profile: the Samba profile is already running");
  samba_ = profiler_.start(kAllProfileCategories);
}

ProfileTrace SessionProfiles::end_samba_profile(const std::string& filename) {
  ProfileTrace trace;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!samba_) return trace;
    trace = profiler_.stop(*samba_);
    samba_.reset();
  }
  if (!filename.empty()) write_chrome_trace(trace, filename);
  return trace;
}

bool SessionProfiles::samba_profile_running() const {
  std::lock_guard<std::mutex> lock(mu_);
  return samba_.has_value();
}

bool SessionProfiles::start_runtime_profile(bool timer_enabled) {
  return start_runtime_profile(runtime_perf_mode_from_env(), timer_enabled);
}

bool SessionProfiles::start_runtime_profile(RuntimePerfMode mode, bool timer_enabled) {
  std::lock_guard<std::mutex> lock(mu_);
  SAMBA_CHECK(!runtime_, Status::InvalidState,
              "start_runtime_profile: the runtime profile is already running");
  if (mode == RuntimePerfMode::Off) return false;
  runtime_ = profiler_.start(kRuntimeProfileCategories);
  runtime_mode_ = mode;
  timer_enabled_ = timer_enabled;
  return true;
}

RuntimeProfileResult SessionProfiles::end_runtime_profile(const std::string& log_file) {
  RuntimeProfileResult r;
  ProfileTrace trace;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!runtime_) return r;
    trace = profiler_.stop(*runtime_);
    runtime_.reset();
    r.mode = runtime_mode_;
    r.timer_enabled = timer_enabled_;
  }
  r.recorded = true;
  r.wall_ns = trace.wall_ns();
  r.summary = format_profile_summary(trace, r.mode);
  if (!log_file.empty()) write_file_atomically(log_file, r.summary);
  return r;
}

bool SessionProfiles::runtime_profile_running() const {
  std::lock_guard<std::mutex> lock(mu_);
  return runtime_.has_value();
}

}  // namespace samba
