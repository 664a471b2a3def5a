// samba::Error: what the core throws; bindings/c turns it into a status code.
#pragma once

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdint>
#include <stdexcept>
#include <string>

namespace samba {

// Values match the SAMBA_* status codes in include/samba.h; never renumbered.
enum class Status : int32_t {
  Ok = 0,
  InvalidArgument = 1,
  NullPointer = 2,
  OutOfRange = 3,
  ShapeMismatch = 4,
  DTypeMismatch = 5,
  NotFound = 6,
  OutOfMemory = 7,
  Unsupported = 8,
  InvalidState = 9,
  IoError = 10,
  CorruptFile = 11,
  VersionMismatch = 12,
  Timeout = 13,
  Cancelled = 14,
  Internal = 15,
};

class Error : public std::runtime_error {
 public:
  Error(Status code, std::string message) : std::runtime_error(std::move(message)), code_(code) {}
  Status code() const { return code_; }

 private:
  Status code_;
};

template <typename... Args>
[[noreturn]] void fail(Status code, fmt::format_string<Args...> f, Args&&... args) {
  throw Error(code, fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace samba

// SAMBA_CHECK(cond, Status::X, "fmt {}", args...): throws samba::Error when cond is false.
#define SAMBA_CHECK(cond, code, ...)             \
  do {                                           \
    if (!(cond)) ::samba::fail(code, __VA_ARGS__); \
  } while (0)
