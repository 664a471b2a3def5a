// A job of several ranks inside one process, standing in for MPI in the
// distributed runtime's unit tests: each rank's Communicator is one object,
// the ranks run on threads of their own. A send copies its bytes into the
// job's mailbox at once (completes eagerly); a receive completes on the first
// test() that finds a message from its peer on its tag, taking messages in
// the order they were sent, as MPI's non-overtaking rule does. A message
// whose size differs from the receive's fails the test (the ring always
// sends exactly what its peer expects).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <vector>

#include "engine/core/error.h"
#include "engine/dist/communicator.h"

namespace samba::dist::testing {

class InProcessJob {
 public:
  explicit InProcessJob(int size) {
    for (int r = 0; r < size; ++r) ranks_.push_back(std::make_unique<Rank>(*this, r));
    sent_tags_.resize(static_cast<size_t>(size));
  }
  int size() const { return static_cast<int>(ranks_.size()); }
  Communicator& rank(int r) { return *ranks_[static_cast<size_t>(r)]; }

  // Every test() and start fails as on a peer's abort notice.
  std::atomic<bool> peer_failed{false};

  // The tags of rank `r`'s sends, in the order they were started.
  std::vector<int> sent_tags(int r) {
    std::lock_guard<std::mutex> lock(mu_);
    return sent_tags_[static_cast<size_t>(r)];
  }
  size_t messages_sent() {
    std::lock_guard<std::mutex> lock(mu_);
    return messages_sent_;
  }

 private:
  struct Message {
    int from, to, tag;
    std::vector<std::byte> bytes;
  };
  struct Done final : Collective {};
  struct Recv final : Collective {
    void* data = nullptr;
    size_t bytes = 0;
    int from = 0, tag = 0;
    bool done = false;
  };

  class Rank final : public Communicator {
   public:
    Rank(InProcessJob& job, int rank) : job_(job), rank_(rank) {}
    int rank() const override { return rank_; }
    int size() const override { return job_.size(); }
    std::unique_ptr<Collective> start_send(const void* data, size_t bytes, int peer,
                                           int tag) override {
      check_peers();
      std::lock_guard<std::mutex> lock(job_.mu_);
      const auto* p = static_cast<const std::byte*>(data);
      job_.mailbox_.push_back({rank_, peer, tag, std::vector<std::byte>(p, p + bytes)});
      job_.sent_tags_[static_cast<size_t>(rank_)].push_back(tag);
      ++job_.messages_sent_;
      return std::make_unique<Done>();
    }
    std::unique_ptr<Collective> start_recv(void* data, size_t bytes, int peer, int tag) override {
      check_peers();
      auto r = std::make_unique<Recv>();
      r->data = data;
      r->bytes = bytes;
      r->from = peer;
      r->tag = tag;
      return r;
    }
    int max_tag() const override { return 32767; }
    std::unique_ptr<Collective> start_broadcast(void*, size_t, int) override {
      return std::make_unique<Done>();
    }
    std::unique_ptr<Collective> start_allgather(const void*, size_t, void*) override {
      return std::make_unique<Done>();
    }
    std::unique_ptr<Collective> start_gather(const void*, size_t, void*, int) override {
      return std::make_unique<Done>();
    }
    bool test(Collective& c) override {
      check_peers();
      auto* r = dynamic_cast<Recv*>(&c);
      if (!r || r->done) return true;
      std::lock_guard<std::mutex> lock(job_.mu_);
      for (auto it = job_.mailbox_.begin(); it != job_.mailbox_.end(); ++it) {
        if (it->from != r->from || it->to != rank_ || it->tag != r->tag) continue;
        EXPECT_EQ(it->bytes.size(), r->bytes)
            << "rank " << rank_ << " received a message of another size from " << r->from;
        std::memcpy(r->data, it->bytes.data(), std::min(r->bytes, it->bytes.size()));
        job_.mailbox_.erase(it);
        r->done = true;
        return true;
      }
      return false;
    }
    void check_peers() override {
      if (job_.peer_failed.load())
        fail(Status::Cancelled, "rank 1 of {} failed and ended the job: out of memory",
             job_.size());
    }

   private:
    InProcessJob& job_;
    int rank_;
  };

  std::mutex mu_;
  std::deque<Message> mailbox_;
  std::vector<std::vector<int>> sent_tags_;
  size_t messages_sent_ = 0;
  std::vector<std::unique_ptr<Rank>> ranks_;
};

}  // namespace samba::dist::testing
