// BucketReducer: the communication thread of a data-parallel session. It
// all-reduces the REDUCE section's gradient buckets, each one contiguous
// range of device memory, as the mean over the ranks.
//
// Polling. The communication thread starts and polls the buckets while
// backward runs; a thread that waits for a bucket polls in its place while
// it waits (one poller at a time), so a small bucket costs no thread
// switches: at 104 KiB two wake-ups cost as much as the whole ring.
//
// Order. Buckets start strictly in their index order (the PEF's order: the
// reverse of the order backward produces gradients), whatever order they
// become ready in, whichever thread starts them, so every rank starts the
// same rings in the same order. A bucket's mean is always the same ring all-reduce on the bucket's
// own tag, its index (engine/dist/ring_allreduce.h: the reduce-scatter's
// last add divides by the world size). So the summation order of an element
// depends only on the world size and the bucket's size, never on the overlap
// mode or on staging: normal, inorder and optimal runs, on device memory or
// staged through pinned host buffers, give bit-identical results, and every
// rank ends with the same bytes.
//
// Staging (reduce_on_rdu off): the bucket is copied to a pinned host buffer
// made at construction, reduced there and copied back, as the real system
// moves gradients through host memory to the network.
//
// One step: begin_step(); mark_ready(b) for each bucket as backward finishes
// writing it (from any thread); wait(b) / wait_all() before reading it. An
// error (a timeout, a peer's abort notice) ends the step: every wait after it
// rethrows it, and the reducer stays failed (the job must end).
#pragma once

#include <condition_variable>
#include <cstddef>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "engine/core/dtype.h"
#include "engine/core/storage.h"
#include "engine/dist/communicator.h"
#include "engine/dist/ring_allreduce.h"

namespace samba::dist {

struct ReduceRange {
  void* device = nullptr;  // the bucket's bytes in device memory
  size_t count = 0;        // elements
  DType dtype = DType::Float32;
};

class BucketReducer {
 public:
  // Starts the communication thread. Makes the staging buffers (pinned) and
  // the rings' receive buffers now, so a step allocates nothing but request
  // handles.
  BucketReducer(Communicator& comm, std::vector<ReduceRange> buckets);
  ~BucketReducer();
  BucketReducer(const BucketReducer&) = delete;
  BucketReducer& operator=(const BucketReducer&) = delete;

  size_t size() const { return buckets_.size(); }
  // A new step: no bucket ready or reduced. `staged`: through host buffers.
  // A step left unfinished (a kernel failed) is completed first, so the
  // ranks' collectives stay matched.
  void begin_step(bool staged);
  void mark_ready(size_t bucket);
  void mark_all_ready();
  // Blocks until bucket `b` (all buckets) is reduced; throws the step's error,
  // or Timeout after dist::timeout() naming the bucket.
  void wait(size_t bucket);
  void wait_all();
  // mark_all_ready() and wait_all() by a thread that has nothing else to do:
  // it polls the buckets itself without waking the communication thread.
  void reduce_all();

 private:
  struct Slot {
    ReduceRange range;
    Ref<Storage> staging;
    bool ready = false;
    bool started = false;
    bool done = false;
    std::unique_ptr<RingMean> ring;
    std::chrono::steady_clock::time_point start_time;
  };
  // What one poll_round did: nothing in flight (or failed), something
  // moved, or buckets in flight that did not move.
  enum class Round { Idle, Moved, Waiting };
  void loop();
  // Starts the ready buckets in order and tests those in flight once. Holds
  // `lock` on entry and return; releases it while testing.
  Round poll_round(std::unique_lock<std::mutex>& lock);
  // `hand_back`: wake the communication thread for what is left in flight
  // when this wait polled.
  void wait(size_t bucket, bool hand_back);
  void finish(Slot& s);
  void throw_if_failed_locked() const;

  Communicator& comm_;
  std::vector<Slot> buckets_;
  std::mutex mu_;
  std::condition_variable work_cv_;  // ready buckets, stop
  std::condition_variable done_cv_;  // reduced buckets, errors
  size_t next_ = 0;                  // the first bucket not yet started
  // Polling is done by the communication thread, or by a waiter when no one
  // else polls (one poller at a time: `polling_`).
  bool polling_ = false;
  std::vector<size_t> in_flight_;  // the poller's: buckets in flight
  // When a bucket last started, moved or completed.
  std::chrono::steady_clock::time_point last_progress_;
  bool staged_ = false;
  bool stop_ = false;
  std::exception_ptr error_;
  std::thread thread_;
};

}  // namespace samba::dist
