// What the fuzz targets share: where an input goes when the C ABI wants a
// path, how an outcome is judged, and what the replay driver reads back.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "samba.h"

namespace samba::fuzz {

// Set by a target for the replay driver: whether the last input was
// accepted (loaded), and otherwise the message it was refused with.
inline bool last_input_accepted = false;
inline std::string last_refusal;

// A per-process file for inputs the C ABI reads by path: in /dev/shm (no
// disk traffic at tens of thousands of writes a second) when it exists.
inline std::string scratch_path(const char* suffix) {
  const char* dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : (std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp");
  return std::string(dir) + "/samba_fuzz_" + std::to_string(getpid()) + suffix;
}

inline void write_scratch(const std::string& path, const uint8_t* data, size_t size) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  if (!out.flush()) {
    std::fprintf(stderr, "fuzz: cannot write %s\n", path.c_str());
    std::abort();
  }
}

// A finding: the engine broke a promise of samba.h. Aborts, so libFuzzer
// saves the input as a crash.
[[noreturn]] inline void finding(const char* what, const std::string& detail) {
  std::fprintf(stderr, "fuzz finding: %s: %s\n", what, detail.c_str());
  std::abort();
}

// Every failure of a call on untrusted input must be a status other than
// SAMBA_ERR_INTERNAL ("a bug in Samba") with a message naming the problem.
// SAMBA_FUZZ_VERBOSE=1 prints every refusal (to see what a seed reaches).
inline samba_status judged(samba_status st, const char* call) {
  static const bool verbose = std::getenv("SAMBA_FUZZ_VERBOSE") != nullptr;
  if (st == SAMBA_OK) return st;
  const std::string message = samba_last_error_message();
  if (verbose) std::fprintf(stderr, "fuzz: %s: %s: %s\n", call, samba_status_name(st), message.c_str());
  if (st == SAMBA_ERR_INTERNAL) finding(call, "SAMBA_ERR_INTERNAL: " + message);
  if (message.empty()) finding(call, std::string(samba_status_name(st)) + " with an empty message");
  return st;
}

}  // namespace samba::fuzz
