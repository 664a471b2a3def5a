#include "engine/profile/profile_events.h"

namespace samba::profile_events {
namespace {

template <typename S>
std::string build_run_name(std::span<const S> section_types) {
  std::string name(kSessionRun);
  for (const auto& type : section_types) {
    name += '_';
    for (char ch : std::string_view(type))
      name += (ch >= 'a' && ch <= 'z') ? static_cast<char>(ch - 'a' + 'A') : ch;
  }
  return name;
}

}  // namespace

std::string session_run_name(std::span<const std::string_view> section_types) {
  return build_run_name(section_types);
}

std::string session_run_name(std::span<const std::string> section_types) {
  return build_run_name(section_types);
}

}  // namespace samba::profile_events
