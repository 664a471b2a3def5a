#include "engine/runtime/session.h"

#include <optional>

#include "engine/core/error.h"
#include "engine/profile/profile_events.h"

namespace samba {

Session::Session(const SessionOptions& opts)
    : pool_(std::make_unique<ThreadPool>(opts.threads)), seed_(opts.seed) {}

void Session::set_seed(uint64_t s) {
  seed_.store(s);
  random_stream_.store(0);
}

std::optional<rng::LazySettings> Session::lazy_settings() const {
  std::lock_guard<std::mutex> lock(mu_);
  return lazy_;
}

void Session::set_lazy_settings(std::optional<rng::LazySettings> s) {
  if (s) {
    SAMBA_CHECK(s->init_threads >= 1 && s->init_threads <= 1024, Status::InvalidArgument,
                "enable_lazy_param: init_threads must be 1..1024, got {}", s->init_threads);
  }
  std::lock_guard<std::mutex> lock(mu_);
  lazy_ = std::move(s);
}

rng::MaterializeOptions Session::materialize_options() const {
  const auto lazy = lazy_settings();
  if (lazy) return lazy->options(seed());
  rng::MaterializeOptions o;
  o.seed = seed();
  o.init_threads = 0;  // the session's own pool
  return o;
}

void Session::set_pinned_memory(bool on) {
  pinned_.store(on);
  if (auto rt = runtime()) rt->set_staged_transfers(on);
}

void Session::set_fast_access(const std::string& name, bool on) {
  std::lock_guard<std::mutex> lock(mu_);
  if (on)
    fast_access_.insert(name);
  else
    fast_access_.erase(name);
}

bool Session::is_fast_access(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  return fast_access_.count(name) != 0;
}

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
    rt->set_staged_transfers(pinned_memory());
    // Tensors the PEF knows how to initialize get their values on the
    // device now; a host tensor transferred later overrides them.
    ThreadPool::Scope on_pool(pool_.get());
    rt->materialize_state(materialize_options());
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
