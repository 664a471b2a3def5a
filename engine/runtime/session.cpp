#include "engine/runtime/session.h"

#include <optional>

#include "engine/core/error.h"
#include "engine/runtime/profile_events.h"

namespace samba {

Session::Session(const SessionOptions& opts)
    : pool_(std::make_unique<ThreadPool>(opts.threads)), seed_(opts.seed) {}

std::shared_ptr<runtime::Runtime> Session::runtime() const {
  std::lock_guard<std::mutex> lock(mu_);
  return runtime_;
}

std::shared_ptr<runtime::Runtime> Session::require_runtime(const char* what) const {
  auto rt = runtime();
  SAMBA_CHECK(rt, Status::InvalidState,
              "{}: no PEF is loaded in this session (load one with samba_session_load_pef or "
              "samba_session_trace_graph)",
              what);
  return rt;
}

void Session::load(pef::ProgramDesc program, std::string pef_path) {
  std::shared_ptr<runtime::Runtime> rt;
  {
    ProfileScope scope(profiles_.profiler(), profile_events::kInitRuntime, ProfileCategory::Samba);
    rt = std::make_shared<runtime::Runtime>(std::move(program), *pool_, &profiles_.profiler());
  }
  std::lock_guard<std::mutex> lock(mu_);
  runtime_ = std::move(rt);
  pef_path_ = std::move(pef_path);
}

void Session::unload() {
  std::lock_guard<std::mutex> lock(mu_);
  runtime_.reset();
  pef_path_.clear();
}

std::string Session::pef_path() const {
  std::lock_guard<std::mutex> lock(mu_);
  return pef_path_;
}

void Session::register_tensor(const Tensor& t) {
  if (!t.defined() || t.name().empty()) return;
  std::lock_guard<std::mutex> lock(mu_);
  tensors_[t.name()] = t;
}

void Session::update_tensor(const std::string& name, const Tensor& t) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!t.defined()) {
    tensors_.erase(name);
    return;
  }
  tensors_[name] = t;
}

Tensor Session::find_tensor(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = tensors_.find(name);
  return it == tensors_.end() ? Tensor() : it->second;
}

std::vector<Tensor> Session::registered_tensors() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<Tensor> out;
  for (const auto& [n, t] : tensors_) out.push_back(t);
  return out;
}

}  // namespace samba
