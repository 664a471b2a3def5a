// Logging: leveled messages to a process-wide sink. The default sink writes
// "samba: warning: ..." lines to stderr; the C ABI lets an embedding program
// install its own (samba_set_log_sink). The level comes from SAMBA_LOG_LEVEL
// (error, warning, info, debug; default warning) or samba_set_log_level.
#pragma once

#include <fmt/format.h>

#include <functional>
#include <string>
#include <string_view>

namespace samba::log {

// Values match SAMBA_LOG_* in include/samba.h.
enum class Level : int32_t { Error = 0, Warning = 1, Info = 2, Debug = 3 };

std::string_view level_name(Level l);  // "error", "warning", ...

// Messages at `l` or more severe are delivered.
void set_level(Level l);
Level level();
inline bool enabled(Level l) { return static_cast<int32_t>(l) <= static_cast<int32_t>(level()); }

// The sink gets every delivered message, from whichever thread logs it; it
// must be thread-safe. An empty function restores the stderr sink.
using Sink = std::function<void(Level, std::string_view message)>;
void set_sink(Sink sink);

void write(Level l, std::string_view message);

template <typename... Args>
void error(fmt::format_string<Args...> f, Args&&... args) {
  if (enabled(Level::Error)) write(Level::Error, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void warn(fmt::format_string<Args...> f, Args&&... args) {
  if (enabled(Level::Warning)) write(Level::Warning, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void info(fmt::format_string<Args...> f, Args&&... args) {
  if (enabled(Level::Info)) write(Level::Info, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void debug(fmt::format_string<Args...> f, Args&&... args) {
  if (enabled(Level::Debug)) write(Level::Debug, fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace samba::log
