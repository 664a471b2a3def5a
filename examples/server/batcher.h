// Batcher: the queue between HTTP handler threads and runs of one model.
//
// Handler threads enqueue a request's rows and wait for its outputs. Runner
// threads (one per run that may be in flight; the runtime gives each
// concurrent run its own execution context) take turns gathering: the
// gatherer takes queued requests in arrival order while their rows fit in
// the model's batch, until the batch is full or the oldest request has
// waited the maximum batch delay, then runs the batch while the next runner
// gathers. It waits only while another run is in flight: then answers are
// about to come back and their clients to send again; otherwise (a lone
// client) waiting would only add latency. Without batching a run takes one request. Rows of a
// request stay together, and a row's result does not depend on the rows beside it, so a batched
// answer is the answer of the request run alone.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include "metrics.h"
#include "served_model.h"

namespace samba_server {

struct BatchingOptions {
  bool enabled = true;
  std::chrono::microseconds max_delay{500};
  int concurrent_runs = 2;
};

class Batcher {
 public:
  Batcher(const ServedModel& model, BatchingOptions options, Metrics& metrics);
  ~Batcher();  // finishes every queued request, then joins the runners
  Batcher(const Batcher&) = delete;
  Batcher& operator=(const Batcher&) = delete;

  // Blocks until `rows` has run; returns its outputs in the model's output
  // order. Throws std::runtime_error when the run failed.
  std::vector<HostTensor> infer(const Rows& rows);

 private:
  struct Pending {
    const Rows* rows;
    std::chrono::steady_clock::time_point arrival;
    std::promise<std::vector<HostTensor>> done;
  };
  void runner();
  std::vector<Pending*> gather();
  void publish_queue_locked();

  const ServedModel& model_;
  const BatchingOptions options_;
  Metrics& metrics_;
  std::mutex gather_mu_;  // one runner gathers at a time
  std::mutex mu_;         // guards the fields below
  std::condition_variable arrived_;
  std::deque<Pending*> queue_;
  int64_t queued_rows_ = 0;
  bool stopping_ = false;
  std::atomic<int> runs_in_flight_{0};
  std::vector<std::thread> runners_;
};

}  // namespace samba_server
