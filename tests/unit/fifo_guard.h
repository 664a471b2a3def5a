// Runs a file-reading call against a FIFO with a time bound: a reader that
// opens the FIFO before checking its kind blocks until a writer appears, so
// the call runs on another thread and, if it has not returned in time, the
// test opens the FIFO for writing to release it and records the hang.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <future>
#include <string>

#include "engine/core/error.h"

namespace samba::testing_support {

// Calls `load(path)` on a fresh FIFO at `path`; returns the message of the
// IoError it must throw within a second.
template <typename Load>
std::string refused_fifo_message(const std::string& path, Load&& load) {
  EXPECT_EQ(::mkfifo(path.c_str(), 0600), 0);
  auto result = std::async(std::launch::async, [&]() -> std::string {
    try {
      load(path);
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Status::IoError) << e.what();
      return e.what();
    }
    return "no error";
  });
  if (result.wait_for(std::chrono::seconds(1)) != std::future_status::ready) {
    ADD_FAILURE() << "reading the FIFO '" << path << "' blocked for more than a second";
    const int writer = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);  // releases the reader
    if (writer >= 0) ::close(writer);
  }
  return result.get();
}

}  // namespace samba::testing_support
