// Session: the state an app's calls share (thread pool, random seed). The
// compiler and runtime issues extend it with the graph and loaded program.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "engine/core/parallel.h"

namespace samba {

struct SessionOptions {
  int32_t threads = 0;  // <= 0: one per hardware thread
  uint64_t seed = 0;
};

class Session {
 public:
  explicit Session(const SessionOptions& opts);
  ThreadPool& pool() { return *pool_; }
  uint64_t seed() const { return seed_.load(); }
  void set_seed(uint64_t s) { seed_.store(s); }

 private:
  std::unique_ptr<ThreadPool> pool_;
  std::atomic<uint64_t> seed_;
};

}  // namespace samba
