#include "engine/loader/batch_loader.h"

#include <algorithm>
#include <numeric>
#include <random>
#include <unordered_set>

#include "engine/memory/pinned_pool.h"

namespace samba {

BatchLoader::BatchLoader(std::vector<std::string> names, Producer producer, Options options)
    : names_(std::move(names)), producer_(std::move(producer)), options_(options) {
  SAMBA_CHECK(!names_.empty(), Status::InvalidArgument, "loader: no tensor names given; expected at least one");
  std::unordered_set<std::string> seen;
  for (const auto& n : names_) {
    SAMBA_CHECK(!n.empty(), Status::InvalidArgument, "loader: a tensor name is empty");
    SAMBA_CHECK(seen.insert(n).second, Status::InvalidArgument, "loader: tensor name '{}' is given twice", n);
  }
  SAMBA_CHECK(static_cast<bool>(producer_), Status::NullPointer, "loader: the producer is missing");
  SAMBA_CHECK(options_.max_prefetch >= 1 && options_.max_prefetch <= 1024, Status::InvalidArgument,
              "loader: max_prefetch must be 1..1024, got {}", options_.max_prefetch);
  SAMBA_CHECK(options_.timeout.count() > 0, Status::InvalidArgument, "loader: the timeout must be > 0 ms, got {}",
              options_.timeout.count());
  SAMBA_CHECK(options_.num_batches >= -1, Status::InvalidArgument, "loader: num_batches must be >= -1, got {}",
              options_.num_batches);
  SAMBA_CHECK(options_.shard_count >= 1 && options_.shard_rank >= 0 && options_.shard_rank < options_.shard_count,
              Status::InvalidArgument, "loader: shard rank {} of world size {}; expected 0 <= rank < world size >= 1",
              options_.shard_rank, options_.shard_count);
  SAMBA_CHECK(options_.num_batches >= 0 || (options_.shard_count == 1 && !options_.shuffle_seed),
              Status::InvalidArgument,
              "loader: sharding over {} ranks{} needs num_batches (the epoch's global batch count), so that every "
              "rank gets the same number of batches; set it with samba_loader_options_set_num_batches",
              options_.shard_count, options_.shuffle_seed ? " and shuffling" : "");
  start();
}

BatchLoader::~BatchLoader() { stop(); }

void BatchLoader::start() {
  std::lock_guard<std::mutex> lock(mu_);
  ready_.clear();
  ended_ = false;
  stopping_ = false;
  error_.reset();
  const uint64_t epoch = ++epoch_;
  thread_ = std::thread([this, epoch] { run(epoch); });
}

void BatchLoader::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  changed_.notify_all();
  if (thread_.joinable()) thread_.join();
  std::lock_guard<std::mutex> lock(mu_);
  ready_.clear();
}

void BatchLoader::reset() {
  stop();
  start();
}

int64_t BatchLoader::batches_per_epoch() const {
  return options_.num_batches < 0 ? -1 : options_.num_batches / options_.shard_count;
}

std::vector<int64_t> BatchLoader::epoch_order(uint64_t epoch) const {
  const int64_t local = batches_per_epoch();
  if (local < 0) return {};
  std::vector<int64_t> global(static_cast<size_t>(options_.num_batches));
  std::iota(global.begin(), global.end(), int64_t{0});
  if (options_.shuffle_seed) {
    // mt19937_64 and this Fisher-Yates are fully specified (std::shuffle's
    // algorithm is not), so ranks built by different compilers agree.
    std::mt19937_64 rng(*options_.shuffle_seed ^ (epoch * 0x9E3779B97F4A7C15ull));
    for (size_t i = global.size(); i > 1; --i) std::swap(global[i - 1], global[rng() % i]);
  }
  std::vector<int64_t> mine(static_cast<size_t>(local));
  for (int64_t j = 0; j < local; ++j) mine[j] = global[j * options_.shard_count + options_.shard_rank];
  return mine;
}

std::vector<Tensor> BatchLoader::to_pinned(std::vector<Tensor> batch, int64_t index) const {
  SAMBA_CHECK(batch.size() == names_.size(), Status::InvalidArgument,
              "loader: batch {} has {} tensors; expected {} (one per name)", index, batch.size(), names_.size());
  std::vector<Tensor> out;
  out.reserve(batch.size());
  for (size_t i = 0; i < batch.size(); ++i) {
    const Tensor& t = batch[i];
    SAMBA_CHECK(t.defined(), Status::NullPointer, "loader: batch {}: tensor '{}' is NULL", index, names_[i]);
    Tensor p = pinned_empty(t.shape(), t.dtype());
    p.copy_from(t);
    p.impl()->name = names_[i];
    p.impl()->fast_access = true;
    out.push_back(std::move(p));
  }
  return out;
}

void BatchLoader::run(uint64_t epoch) {
  const std::vector<int64_t> order = epoch_order(epoch);
  const int64_t limit = batches_per_epoch();
  for (int64_t local = 0;; ++local) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      changed_.wait(lock, [&] {
        return stopping_ || static_cast<int>(ready_.size()) < options_.max_prefetch;
      });
      if (stopping_ || epoch != epoch_) return;
      if (limit >= 0 && local >= limit) {
        ended_ = true;
        changed_.notify_all();
        return;
      }
    }
    const int64_t index = order.empty() ? local : order[static_cast<size_t>(local)];
    std::optional<std::vector<Tensor>> batch;
    std::optional<Error> failure;
    try {
      batch = producer_(index);
      if (batch) batch = to_pinned(std::move(*batch), index);
    } catch (const Error& e) {
      failure = e;
    } catch (const std::bad_alloc&) {
      failure = Error(Status::OutOfMemory, "loader: out of memory preparing a batch");
    } catch (const std::exception& e) {
      failure = Error(Status::Internal, e.what());
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    if (failure) {
      error_ = Error(failure->code(), fmt::format("loader: batch {}: {}", index, failure->what()));
    } else if (batch) {
      ready_.push_back(std::move(*batch));
    } else {
      ended_ = true;
    }
    changed_.notify_all();
    if (failure || !batch) return;
  }
}

std::optional<std::vector<Tensor>> BatchLoader::next() {
  std::unique_lock<std::mutex> lock(mu_);
  const bool woke = changed_.wait_for(lock, options_.timeout, [&] { return !ready_.empty() || ended_ || error_; });
  if (!ready_.empty()) {
    std::vector<Tensor> b = std::move(ready_.front());
    ready_.pop_front();
    lock.unlock();
    changed_.notify_all();
    return b;
  }
  if (error_) throw *error_;
  if (ended_) return std::nullopt;
  SAMBA_CHECK(woke, Status::Timeout, "loader: no batch within {} ms (the producer is slow or stuck)",
              options_.timeout.count());
  return std::nullopt;
}

}  // namespace samba
