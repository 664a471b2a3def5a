// Helpers for tests of failures: what a call throws, as the samba::Error's
// status code and message, and the expectation that it fails in a given way.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "engine/core/error.h"

namespace samba::testing {

// The status of the samba::Error `f` throws; Status::Ok when it returns.
inline Status status_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.code();
  }
  return Status::Ok;
}

// The message of the samba::Error `f` throws; empty when it returns.
inline std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// Expects `f` to throw a samba::Error with status `want` whose message
// contains every one of `fragments`.
inline void expect_status(Status want, const std::function<void()>& f,
                          const std::vector<std::string>& fragments = {}) {
  try {
    f();
    ADD_FAILURE() << "no error thrown; expected status " << static_cast<int>(want);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), want) << e.what();
    for (const std::string& part : fragments)
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos)
          << "'" << part << "' not in: " << e.what();
  }
}

}  // namespace samba::testing
