#include "batcher.h"

namespace samba_server {

Batcher::Batcher(const ServedModel& model, BatchingOptions options, Metrics& metrics)
    : model_(model), options_(options), metrics_(metrics) {
  for (int i = 0; i < std::max(1, options_.concurrent_runs); ++i)
    runners_.emplace_back([this] { runner(); });
}

Batcher::~Batcher() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  arrived_.notify_all();
  for (std::thread& t : runners_) t.join();
}

std::vector<HostTensor> Batcher::infer(const Rows& rows) {
  Pending p{&rows, std::chrono::steady_clock::now(), {}};
  std::future<std::vector<HostTensor>> result = p.done.get_future();
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(&p);
    queued_rows_ += rows.count;
    publish_queue_locked();
  }
  arrived_.notify_one();
  return result.get();
}

void Batcher::publish_queue_locked() { metrics_.set_queued_rows(model_.name(), queued_rows_); }

std::vector<Batcher::Pending*> Batcher::gather() {
  std::lock_guard<std::mutex> gathering(gather_mu_);
  std::unique_lock<std::mutex> lock(mu_);
  arrived_.wait(lock, [&] { return !queue_.empty() || stopping_; });
  std::vector<Pending*> batch;
  if (queue_.empty()) return batch;  // stopping, and nothing is left
  const int64_t capacity = options_.enabled ? model_.batch_size() : 1;
  const auto deadline = queue_.front()->arrival + options_.max_delay;
  int64_t rows = 0;
  for (;;) {
    while (!queue_.empty() && (batch.empty() || rows + queue_.front()->rows->count <= capacity)) {
      rows += queue_.front()->rows->count;
      queued_rows_ -= queue_.front()->rows->count;
      batch.push_back(queue_.front());
      queue_.pop_front();
    }
    // Full, or the next request does not fit: run what is gathered. With no
    // run in flight no answer is about to send its client back with another
    // request, so waiting would only add latency (a lone client's case).
    if (rows >= capacity || !queue_.empty() || stopping_ || runs_in_flight_ == 0) break;
    if (arrived_.wait_until(lock, deadline, [&] { return !queue_.empty() || stopping_; })) continue;
    break;  // the oldest request has waited long enough
  }
  ++runs_in_flight_;  // before the next gatherer looks
  publish_queue_locked();
  return batch;
}

void Batcher::runner() {
  for (;;) {
    std::vector<Pending*> batch = gather();
    if (batch.empty()) return;
    std::vector<const Rows*> rows;
    int64_t count = 0;
    for (Pending* p : batch) {
      rows.push_back(p->rows);
      count += p->rows->count;
    }
    metrics_.count_run(model_.name(), count);
    std::vector<std::vector<HostTensor>> answers;
    std::exception_ptr failure;
    try {
      answers = model_.run(rows);
    } catch (...) {
      failure = std::current_exception();
    }
    --runs_in_flight_;
    for (size_t i = 0; i < batch.size(); ++i) {
      if (failure)
        batch[i]->done.set_exception(failure);
      else
        batch[i]->done.set_value(std::move(answers[i]));
    }
  }
}

}  // namespace samba_server
