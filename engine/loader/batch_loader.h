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
    // A distributed sampler's share: this rank takes the epoch's batches
    // shard_rank, shard_rank + shard_count, ... of the global order, and
    // every rank the same num_batches / shard_count of them (the remainder
    // is dropped), so replicas step in lockstep through a collective.
    int32_t shard_rank = 0;
    int32_t shard_count = 1;
    // The epoch's global order is a permutation of 0..num_batches-1 drawn
    // from (seed, epoch): the same on every rank given the same seed.
    std::optional<uint64_t> shuffle_seed;
  };

  BatchLoader(std::vector<std::string> names, Producer producer, Options options);
  ~BatchLoader();
  BatchLoader(const BatchLoader&) = delete;
  BatchLoader& operator=(const BatchLoader&) = delete;

  const std::vector<std::string>& names() const { return names_; }
  // The next batch (pinned, fast_access, named), or nullopt at the end.
  // Throws the producer's error (again on every later call), or Timeout.
  std::optional<std::vector<Tensor>> next();
  // Back to batch 0 of a new epoch (a new shuffle): stops the thread, drops
  // prepared batches, starts again.
  void reset();
  // How many batches an epoch gives this rank (-1: until the producer ends).
  int64_t batches_per_epoch() const;

 private:
  void start();
  void stop();
  void run(uint64_t epoch);
  // The producer's index of this rank's `local`-th batch of the epoch.
  std::vector<int64_t> epoch_order(uint64_t epoch) const;
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
