#include "engine/dist/bucket_reducer.h"

#include <algorithm>
#include <cstring>

#include "engine/core/error.h"
#include "engine/memory/pinned_pool.h"

namespace samba::dist {

BucketReducer::BucketReducer(Communicator& comm, std::vector<ReduceRange> buckets) : comm_(comm) {
  // Each bucket's ring has a tag of its own, its index, so the messages of
  // buckets in flight together never match each other's receives.
  SAMBA_CHECK(buckets.size() <= static_cast<size_t>(comm.max_tag()) + 1, Status::OutOfRange,
              "REDUCE: {} gradient buckets; the transport's tags allow at most {} (one per "
              "bucket): compile with larger buckets",
              buckets.size(), static_cast<int64_t>(comm.max_tag()) + 1);
  buckets_.resize(buckets.size());
  for (size_t b = 0; b < buckets.size(); ++b) {
    buckets_[b].range = buckets[b];
    const size_t bytes = buckets[b].count * element_size(buckets[b].dtype);
    buckets_[b].staging = Storage::allocate(bytes, false, pinned_pool());
    buckets_[b].ring = std::make_unique<RingMean>(comm, buckets[b].count, buckets[b].dtype,
                                                  static_cast<int>(b));
  }
  in_flight_.reserve(buckets_.size());
  thread_ = std::thread([this] { loop(); });
}

BucketReducer::~BucketReducer() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  thread_.join();
  // A ring still in flight (after a failure) may yet be written by MPI (a
  // late peer): its buffers are kept until exit.
  for (Slot& s : buckets_)
    if (!s.ring->done()) {
      keep_until_exit(std::shared_ptr<RingMean>(std::move(s.ring)));
      keep_until_exit(std::make_shared<Ref<Storage>>(std::move(s.staging)));
    }
}

void BucketReducer::begin_step(bool staged) {
  bool unfinished = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    throw_if_failed_locked();
    for (const Slot& s : buckets_) unfinished |= (s.ready || s.started) && !s.done;
  }
  // A step that ended early (a kernel failed) still owes the other ranks
  // its remaining all-reduces, in order: finish them, so every rank's
  // collectives stay matched.
  if (unfinished) {
    mark_all_ready();
    wait_all();
  }
  std::lock_guard<std::mutex> lock(mu_);
  for (Slot& s : buckets_) s.ready = s.started = s.done = false;
  next_ = 0;
  staged_ = staged;
}

void BucketReducer::mark_ready(size_t b) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (buckets_[b].ready) return;
    buckets_[b].ready = true;
  }
  work_cv_.notify_all();
}

void BucketReducer::mark_all_ready() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (Slot& s : buckets_) s.ready = true;
  }
  work_cv_.notify_all();
}

void BucketReducer::throw_if_failed_locked() const {
  if (error_) std::rethrow_exception(error_);
}

void BucketReducer::reduce_all() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (Slot& s : buckets_) s.ready = true;
  }
  // No wake-up of the communication thread (about 5 us here): this thread
  // starts and polls what it finds idle. A communication thread that is
  // polling already starts the new buckets in its next round.
  for (size_t b = 0; b < buckets_.size(); ++b) wait(b, false);
}

void BucketReducer::wait(size_t b) { wait(b, true); }

void BucketReducer::wait(size_t b, bool hand_back) {
  std::unique_lock<std::mutex> lock(mu_);
  const auto deadline = std::chrono::steady_clock::now() + timeout();
  bool polled = false;
  while (!buckets_[b].done) {
    throw_if_failed_locked();
    // Rather than sleep while the communication thread polls and then be
    // woken (two thread switches, as long as a small bucket's whole ring),
    // the waiter polls itself when no one else does.
    // (It sleeps when it cannot start its bucket: an earlier one is not
    // ready yet.)
    bool sleep = true;
    if (!polling_ && buckets_[b].ready) {
      polled = true;
      const Round round = poll_round(lock);
      if (round == Round::Waiting) {
        lock.unlock();
        std::this_thread::yield();
        lock.lock();
      }
      sleep = round == Round::Idle;
    }
    if (buckets_[b].done || error_) continue;
    if (sleep ? done_cv_.wait_until(lock, deadline) != std::cv_status::timeout
              : std::chrono::steady_clock::now() < deadline)
      continue;
    // The step cannot be finished or abandoned cleanly (the all-reduce may
    // still be in flight): every later wait and step fails alike.
    error_ = std::make_exception_ptr(Error(
        Status::Timeout, fmt::format("REDUCE: rank {} of {} waited {} ms for gradient bucket {} "
                                     "({}): another rank failed, was "
                                     "killed or runs a different program; end the job",
                                     comm_.rank(), comm_.size(), timeout().count(), b,
                                     buckets_[b].ready ? "its all-reduce did not complete"
                                                       : "backward never finished writing it")));
    done_cv_.notify_all();
  }
  // Buckets still in flight or ready are the communication thread's again.
  const auto left = [](const Slot& s) { return s.ready && !s.done; };
  if (hand_back && polled && std::any_of(buckets_.begin(), buckets_.end(), left))
    work_cv_.notify_all();
}

void BucketReducer::wait_all() {
  for (size_t b = 0; b < buckets_.size(); ++b) wait(b);
}

// A staged bucket's mean goes back to device memory.
void BucketReducer::finish(Slot& s) {
  if (staged_)
    std::memcpy(s.range.device, s.staging->data(), s.range.count * element_size(s.range.dtype));
}

void BucketReducer::loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    if (stop_) return;
    if (polling_) {  // a waiter polls
      work_cv_.wait(lock);
      continue;
    }
    const Round round = poll_round(lock);
    if (round == Round::Idle) {
      work_cv_.wait(lock);
    } else if (round == Round::Waiting) {
      // Nothing moved. MPI moves a large message only inside MPI calls (a
      // shared-memory rendezvous is copied by the receiver's MPI_Test), and
      // a ring's next step starts only when a poller sees the last one
      // done, so a sleeping poller stretches every step: poll back to back
      // (yielding the core to compute threads that want it) for a while
      // after the last progress, and only then back off to short sleeps.
      const bool recent =
          std::chrono::steady_clock::now() - last_progress_ < std::chrono::milliseconds(5);
      lock.unlock();
      if (recent)
        std::this_thread::yield();
      else
        std::this_thread::sleep_for(std::chrono::microseconds(20));
      lock.lock();
    }
  }
}

BucketReducer::Round BucketReducer::poll_round(std::unique_lock<std::mutex>& lock) {
  // Start ready buckets strictly in order (identical order on every rank,
  // whichever thread polls).
  while (!error_ && next_ < buckets_.size() && buckets_[next_].ready) {
    Slot& s = buckets_[next_];
    try {
      void* data = s.range.device;
      if (staged_) {
        std::memcpy(s.staging->data(), s.range.device,
                    s.range.count * element_size(s.range.dtype));
        data = s.staging->data();
      }
      s.ring->start(data);
    } catch (...) {
      error_ = std::current_exception();
      break;
    }
    s.started = true;
    s.start_time = std::chrono::steady_clock::now();
    last_progress_ = s.start_time;
    ++next_;
  }
  // The buckets in flight, noted under the lock: once the last is done a
  // waiter may begin the next step and reset the slots.
  in_flight_.clear();
  for (size_t b = 0; b < buckets_.size(); ++b)
    if (buckets_[b].started && !buckets_[b].done) in_flight_.push_back(b);
  if (in_flight_.empty() || error_) {
    if (error_) done_cv_.notify_all();
    return Round::Idle;
  }
  // Test them without holding the lock, so backward's threads can mark
  // buckets ready meanwhile. No other thread touches an in-flight slot:
  // `polling_` keeps other pollers out.
  polling_ = true;
  lock.unlock();
  bool completed = false;  // a bucket completed
  bool moved = false;      // or a ring took a step
  std::exception_ptr err;
  for (size_t k = 0; k < in_flight_.size() && !err; ++k) {
    const size_t b = in_flight_[k];
    Slot& s = buckets_[b];
    try {
      bool advanced = false;
      const bool done = s.ring->test(&advanced);
      moved |= advanced;
      if (done) {
        finish(s);
        completed = true;
        lock.lock();
        s.done = true;
        lock.unlock();
      } else if (std::chrono::steady_clock::now() - s.start_time > timeout()) {
        fail(Status::Timeout,
             "REDUCE: rank {} of {}: the all-reduce of gradient bucket {} did not complete "
             "within {} ms: another rank failed, was killed or runs a different program; end "
             "the job",
             comm_.rank(), comm_.size(), b, timeout().count());
      }
    } catch (...) {
      err = std::current_exception();
    }
  }
  lock.lock();
  polling_ = false;
  if (err && !error_) error_ = err;
  if (completed || err) done_cv_.notify_all();
  if (completed || moved) last_progress_ = std::chrono::steady_clock::now();
  return completed || moved || err ? Round::Moved : Round::Waiting;
}

}  // namespace samba::dist
