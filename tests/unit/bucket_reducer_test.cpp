// The data-parallel bucket reducer's communication thread, with an
// in-process communicator standing in for MPI: buckets start in bucket
// order whatever order they become ready in, each is divided by the world
// size, staging gives the same bytes, and a peer's failure or a timeout
// reaches the waiters instead of hanging them. (The MPI path itself runs
// under mpirun: tests/mpi.) Runs under ThreadSanitizer (make tsan-concurrency).
#include "engine/dist/bucket_reducer.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "engine/core/error.h"

namespace samba::dist {
namespace {

// A job of `size` ranks whose other ranks hold each value plus one: the
// sum is x + (size - 1) * (x + 1). A collective completes on its third test.
class LoopbackCommunicator final : public Communicator {
 public:
  explicit LoopbackCommunicator(int size) : size_(size) {}
  int rank() const override { return 0; }
  int size() const override { return size_; }
  std::unique_ptr<Collective> start_allreduce_sum(void* data, size_t count, DType dtype) override {
    std::lock_guard<std::mutex> lock(mu);
    started.push_back(data);
    auto c = std::make_unique<Pending>();
    c->data = data;
    c->count = count;
    c->dtype = dtype;
    return c;
  }
  std::unique_ptr<Collective> start_broadcast(void*, size_t, int) override {
    return std::make_unique<Pending>();
  }
  std::unique_ptr<Collective> start_allgather(const void*, size_t, void*) override {
    return std::make_unique<Pending>();
  }
  std::unique_ptr<Collective> start_gather(const void*, size_t, void*, int) override {
    return std::make_unique<Pending>();
  }
  bool test(Collective& c) override {
    check_peers();
    auto& p = static_cast<Pending&>(c);
    if (hang.load()) return false;
    if (++p.tests < 3) return false;
    if (!p.summed && p.data) {
      float* x = static_cast<float*>(p.data);
      for (size_t i = 0; i < p.count; ++i)
        x[i] = x[i] + static_cast<float>(size_ - 1) * (x[i] + 1.0f);
      p.summed = true;
    }
    return true;
  }
  void check_peers() override {
    if (peer_failed.load())
      fail(Status::Cancelled, "rank 1 of {} failed and ended the job: out of memory", size_);
  }

  std::mutex mu;
  std::vector<void*> started;  // buckets' data, in start order
  std::atomic<bool> hang{false};
  std::atomic<bool> peer_failed{false};

 private:
  struct Pending final : Collective {
    void* data = nullptr;
    size_t count = 0;
    DType dtype = DType::Float32;
    int tests = 0;
    bool summed = false;
  };
  int size_;
};

struct Buckets {
  std::vector<std::vector<float>> data;
  std::vector<ReduceRange> ranges() {
    std::vector<ReduceRange> r;
    for (auto& d : data) r.push_back({d.data(), d.size(), DType::Float32});
    return r;
  }
};

Buckets three_buckets() {
  Buckets b;
  for (int k = 0; k < 3; ++k) {
    std::vector<float> v(257 + 100 * k);
    for (size_t i = 0; i < v.size(); ++i)
      v[i] = 0.1f * static_cast<float>(i) + static_cast<float>(k);
    b.data.push_back(std::move(v));
  }
  return b;
}

TEST(BucketReducer, StartsInBucketOrderAndAveragesWhateverTheReadyOrder) {
  LoopbackCommunicator comm(4);
  Buckets b = three_buckets();
  const Buckets before = b;
  BucketReducer r(comm, b.ranges());
  r.begin_step(false);
  // Backward finishes bucket 2 first, on other threads: nothing may start
  // before bucket 0.
  std::thread t2([&] { r.mark_ready(2); });
  std::thread t1([&] { r.mark_ready(1); });
  t2.join();
  t1.join();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  {
    std::lock_guard<std::mutex> lock(comm.mu);
    EXPECT_TRUE(comm.started.empty());
  }
  r.mark_ready(0);
  r.wait_all();
  ASSERT_EQ(comm.started.size(), 3u);
  for (size_t k = 0; k < 3; ++k) {
    EXPECT_EQ(comm.started[k], b.data[k].data());
    for (size_t i = 0; i < b.data[k].size(); ++i) {
      const float x = before.data[k][i];
      ASSERT_FLOAT_EQ(b.data[k][i], (x + 3.0f * (x + 1.0f)) / 4.0f)
          << "bucket " << k << " element " << i;
    }
  }
}

TEST(BucketReducer, StagedThroughHostBuffersGivesTheSameBytes) {
  LoopbackCommunicator comm(3);
  Buckets direct = three_buckets(), staged = three_buckets();
  BucketReducer rd(comm, direct.ranges()), rs(comm, staged.ranges());
  for (int step = 0; step < 3; ++step) {
    rd.begin_step(false);
    rs.begin_step(true);
    rd.mark_all_ready();
    rs.mark_all_ready();
    rd.wait_all();
    rs.wait_all();
  }
  for (size_t k = 0; k < 3; ++k) {
    EXPECT_EQ(std::memcmp(direct.data[k].data(), staged.data[k].data(),
                          direct.data[k].size() * sizeof(float)),
              0);
    EXPECT_GT(staged.data[k][5],
              three_buckets().data[k][5] + 1.0f);  // reduced and copied back, 3 times
  }
}

TEST(BucketReducer, APeerAbortReachesEveryWaiterAndStaysFailed) {
  LoopbackCommunicator comm(2);
  Buckets b = three_buckets();
  BucketReducer r(comm, b.ranges());
  r.begin_step(false);
  comm.hang = true;
  r.mark_all_ready();
  std::atomic<int> cancelled{0};
  std::vector<std::thread> waiters;
  for (size_t k = 0; k < 3; ++k)
    waiters.emplace_back([&, k] {
      try {
        r.wait(k);
      } catch (const Error& e) {
        if (e.code() == Status::Cancelled &&
            std::string(e.what()).find("rank 1") != std::string::npos)
          ++cancelled;
      }
    });
  comm.peer_failed = true;
  for (auto& t : waiters) t.join();
  EXPECT_EQ(cancelled.load(), 3);
  EXPECT_THROW(r.begin_step(false), Error);
}

TEST(BucketReducer, ABucketThatNeverCompletesTimesOut) {
  LoopbackCommunicator comm(2);
  Buckets b = three_buckets();
  BucketReducer r(comm, b.ranges());
  set_timeout(std::chrono::milliseconds(100));
  r.begin_step(false);
  comm.hang = true;
  r.mark_all_ready();
  const auto t0 = std::chrono::steady_clock::now();
  try {
    r.wait_all();
    ADD_FAILURE() << "wait_all returned";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Status::Timeout);
    EXPECT_NE(std::string(e.what()).find("bucket 0"), std::string::npos) << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  set_timeout(std::chrono::milliseconds(60000));
}

}  // namespace
}  // namespace samba::dist
