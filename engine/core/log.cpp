#include "engine/core/log.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <optional>

namespace samba::log {
namespace {

std::optional<Level> parse_level(std::string_view s) {
  if (s == "error") return Level::Error;
  if (s == "warning" || s == "warn") return Level::Warning;
  if (s == "info") return Level::Info;
  if (s == "debug") return Level::Debug;
  return std::nullopt;
}

// Read once, at the first log call. A bad value is reported (at the default
// level) instead of being silently ignored.
Level initial_level(bool& bad) {
  const char* env = std::getenv("SAMBA_LOG_LEVEL");
  if (!env || !*env) return Level::Warning;
  if (auto l = parse_level(env)) return *l;
  bad = true;
  return Level::Warning;
}

struct State {
  std::atomic<int32_t> level;
  std::mutex mu;
  Sink sink;
  State() {
    bool bad = false;
    level.store(static_cast<int32_t>(initial_level(bad)));
    if (bad)
      std::fprintf(stderr,
                   "samba: warning: SAMBA_LOG_LEVEL='%s' is not a log level; expected error, "
                   "warning, info or debug (using warning)\n",
                   std::getenv("SAMBA_LOG_LEVEL"));
  }
};

State& state() {
  static State* s = new State();  // never destroyed: logging may happen during exit
  return *s;
}

}  // namespace

std::string_view level_name(Level l) {
  switch (l) {
    case Level::Error: return "error";
    case Level::Warning: return "warning";
    case Level::Info: return "info";
    case Level::Debug: return "debug";
  }
  return "unknown";
}

void set_level(Level l) { state().level.store(static_cast<int32_t>(l)); }
Level level() { return static_cast<Level>(state().level.load(std::memory_order_relaxed)); }

void set_sink(Sink sink) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.sink = std::move(sink);
}

void write(Level l, std::string_view message) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.sink) {
    s.sink(l, message);
    return;
  }
  std::fprintf(stderr, "samba: %s: %.*s\n", level_name(l).data(), static_cast<int>(message.size()),
               message.data());
}

}  // namespace samba::log
