// BatchLoader (SambaLoader): a background thread asks a producer for batch
// 0, 1, ... and copies each into pinned host memory, staying up to
// `max_prefetch` batches ahead of the consumer, so preparing the next
// batches overlaps running the current one. Errors in the producer reach
// the consumer with their message; a wait longer than the timeout is an
// error, never a hang; destroying the loader mid-epoch stops and joins
// its thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "engine/core/error.h"
#include "engine/core/tensor.h"

namespace samba {

class BatchLoader {
 public:
  // Batch i's tensors, in the order of the loader's names; nullopt at the
  // end of the data. Throws samba::Error to fail the epoch. Called on the
  // loader's thread only.
  using Producer = std::function<std::optional<std::vector<Tensor>>(int64_t index)>;

  struct Options {
    int max_prefetch = 2;
    std::chrono::milliseconds timeout{60000};
    int64_t num_batches = -1;  // -1: until the producer says end
  };

  BatchLoader(std::vector<std::string> names, Producer producer, Options options);
  ~BatchLoader();
  BatchLoader(const BatchLoader&) = delete;
  BatchLoader& operator=(const BatchLoader&) = delete;

  const std::vector<std::string>& names() const { return names_; }
  // The next batch (pinned, fast_access, named), or nullopt at the end.
  // Throws the producer's error (again on every later call), or Timeout.
  std::optional<std::vector<Tensor>> next();
  // Back to batch 0: stops the thread, drops prepared batches, starts again.
  void reset();

 private:
  void start();
  void stop();
  void run(uint64_t epoch);
  std::vector<Tensor> to_pinned(std::vector<Tensor> batch, int64_t index) const;

  const std::vector<std::string> names_;
  const Producer producer_;
  const Options options_;

  std::mutex mu_;
  std::condition_variable changed_;
  std::deque<std::vector<Tensor>> ready_;
  bool ended_ = false;
  bool stopping_ = false;
  std::optional<Error> error_;
  uint64_t epoch_ = 0;
  std::thread thread_;
};

}  // namespace samba
