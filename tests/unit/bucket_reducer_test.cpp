// The data-parallel bucket reducer's communication thread, over an
// in-process job standing in for MPI (one thread per rank): buckets start in
// bucket order whatever order they become ready in, each ends as the mean on
// every rank, staging gives the same bytes, and a peer's failure or a timeout
// reaches the waiters instead of hanging them. (The MPI path itself runs
// under mpirun: tests/mpi.) Runs under ThreadSanitizer (make tsan-concurrency).
#include "engine/dist/bucket_reducer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "engine/core/error.h"
#include "in_process_job.h"

namespace samba::dist {
namespace {

using testing::InProcessJob;

struct Buckets {
  std::vector<std::vector<float>> data;
  std::vector<ReduceRange> ranges() {
    std::vector<ReduceRange> r;
    for (auto& d : data) r.push_back({d.data(), d.size(), DType::Float32});
    return r;
  }
};

// Rank `rank`'s buckets: rank r holds x + r, so the mean is x + (p - 1) / 2.
Buckets three_buckets(int rank = 0) {
  Buckets b;
  for (int k = 0; k < 3; ++k) {
    std::vector<float> v(257 + 100 * k);
    for (size_t i = 0; i < v.size(); ++i)
      v[i] = 0.1f * static_cast<float>(i) + static_cast<float>(k) + static_cast<float>(rank);
    b.data.push_back(std::move(v));
  }
  return b;
}

// One step of `reducer` on its rank: every bucket ready, all waited for.
void step(BucketReducer& reducer, bool staged) {
  reducer.begin_step(staged);
  reducer.mark_all_ready();
  reducer.wait_all();
}

TEST(BucketReducer, StartsInBucketOrderAndAveragesWhateverTheReadyOrder) {
  InProcessJob job(4);
  std::vector<Buckets> b;
  for (int r = 0; r < 4; ++r) b.push_back(three_buckets(r));
  std::vector<std::unique_ptr<BucketReducer>> reducers;
  for (int r = 0; r < 4; ++r)
    reducers.push_back(std::make_unique<BucketReducer>(job.rank(r), b[r].ranges()));
  std::vector<std::thread> peers;
  for (int r = 1; r < 4; ++r) peers.emplace_back([&, r] { step(*reducers[r], false); });
  BucketReducer& r0 = *reducers[0];
  r0.begin_step(false);
  // Backward finishes bucket 2 first, on other threads: nothing may start
  // before bucket 0.
  std::thread t2([&] { r0.mark_ready(2); });
  std::thread t1([&] { r0.mark_ready(1); });
  t2.join();
  t1.join();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_TRUE(job.sent_tags(0).empty());
  r0.mark_ready(0);
  r0.wait_all();
  for (auto& t : peers) t.join();
  // Rank 0's buckets started in order: each bucket's ring sends on its
  // index, and the first message of each came in bucket order.
  std::vector<int> first_seen;
  for (int tag : job.sent_tags(0))
    if (std::find(first_seen.begin(), first_seen.end(), tag) == first_seen.end())
      first_seen.push_back(tag);
  EXPECT_EQ(first_seen, (std::vector<int>{0, 1, 2}));
  const Buckets x = three_buckets(0);
  for (size_t k = 0; k < 3; ++k)
    for (size_t i = 0; i < x.data[k].size(); ++i) {
      ASSERT_NEAR(b[0].data[k][i], x.data[k][i] + 1.5f, 1e-5f)
          << "bucket " << k << " element " << i;
      for (int r = 1; r < 4; ++r)
        ASSERT_EQ(b[r].data[k][i], b[0].data[k][i]) << "rank " << r << " bucket " << k;
    }
}

TEST(BucketReducer, StagedThroughHostBuffersGivesTheSameBytes) {
  InProcessJob job(3);
  std::vector<Buckets> direct, staged;
  for (int r = 0; r < 3; ++r) {
    direct.push_back(three_buckets(r));
    staged.push_back(three_buckets(r));
  }
  std::vector<std::thread> ranks;
  for (int r = 0; r < 3; ++r)
    ranks.emplace_back([&, r] {
      BucketReducer rd(job.rank(r), direct[r].ranges()), rs(job.rank(r), staged[r].ranges());
      for (int s = 0; s < 3; ++s) {
        // Every rank makes its steps in the same order (as all ranks run
        // the same program), so the two reducers' rings never meet.
        step(rd, false);
        step(rs, true);
      }
    });
  for (auto& t : ranks) t.join();
  for (int r = 0; r < 3; ++r)
    for (size_t k = 0; k < 3; ++k) {
      EXPECT_EQ(std::memcmp(direct[r].data[k].data(), staged[r].data[k].data(),
                            direct[r].data[k].size() * sizeof(float)),
                0);
      // Reduced and copied back: rank 2's values fell to the mean.
      EXPECT_NEAR(staged[r].data[k][5], three_buckets(1).data[k][5], 1e-5f);
    }
}

TEST(BucketReducer, AWorldOfOneKeepsItsGradients) {
  InProcessJob job(1);
  Buckets b = three_buckets();
  BucketReducer r(job.rank(0), b.ranges());
  step(r, false);
  step(r, true);
  for (size_t k = 0; k < 3; ++k) EXPECT_EQ(b.data[k], three_buckets().data[k]);
  EXPECT_EQ(job.messages_sent(), 0u);
}

// Rank 1 never runs its step below: rank 0's rings wait for it.
TEST(BucketReducer, APeerAbortReachesEveryWaiterAndStaysFailed) {
  InProcessJob job(2);
  Buckets b = three_buckets();
  BucketReducer r(job.rank(0), b.ranges());
  r.begin_step(false);
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
  job.peer_failed = true;
  for (auto& t : waiters) t.join();
  EXPECT_EQ(cancelled.load(), 3);
  EXPECT_THROW(r.begin_step(false), Error);
}

TEST(BucketReducer, ABucketThatNeverCompletesTimesOut) {
  InProcessJob job(2);
  Buckets b = three_buckets();
  BucketReducer r(job.rank(0), b.ranges());
  set_timeout(std::chrono::milliseconds(100));
  r.begin_step(false);
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
