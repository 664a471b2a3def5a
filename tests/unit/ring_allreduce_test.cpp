// The ring all-reduce's mean over an in-process job of p ranks (one thread
// per rank): the documented summation order, bit for bit, whatever the
// segment size; every rank ends with the same bytes; uneven and tiny
// buckets; world size 1. (Over MPI: tests/mpi/ring_allreduce_test.cpp.)
#include "engine/dist/ring_allreduce.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "in_process_job.h"

namespace samba::dist {
namespace {

using testing::InProcessJob;

template <typename T>
std::vector<std::vector<T>> random_inputs(int ranks, size_t count, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> d(-10.0, 10.0);
  std::vector<std::vector<T>> x(static_cast<size_t>(ranks), std::vector<T>(count));
  for (auto& v : x)
    for (T& e : v) e = static_cast<T>(d(gen));
  return x;
}

template <typename T>
constexpr DType dtype_of() {
  return sizeof(T) == 4 ? DType::Float32 : DType::Float64;
}

// Each run's inputs [run][rank] reduced by one ring per rank, back to back on
// one tag, each rank on a thread; the outputs, [run][rank].
template <typename T>
std::vector<std::vector<std::vector<T>>> ring_mean_runs(
    std::vector<std::vector<std::vector<T>>> runs, size_t segment_bytes) {
  const int p = static_cast<int>(runs[0].size());
  InProcessJob job(p);
  std::vector<std::thread> threads;
  for (int r = 0; r < p; ++r)
    threads.emplace_back([&, r] {
      RingMean ring(job.rank(r), runs[0][0].size(), dtype_of<T>(), 5, segment_bytes);
      for (auto& run : runs) {
        ring.start(run[static_cast<size_t>(r)].data());
        while (!ring.test()) std::this_thread::yield();
      }
    });
  for (auto& t : threads) t.join();
  return runs;
}

template <typename T>
std::vector<std::vector<T>> ring_mean(std::vector<std::vector<T>> x, size_t segment_bytes) {
  return ring_mean_runs<T>({std::move(x)}, segment_bytes)[0];
}

// The order docs/distributed-runtime.md states: chunk c's mean is
// (x[c-1] + ( ... + (x[c+1] + x[c]))) / p, ranks mod p.
template <typename T>
std::vector<T> documented_mean(const std::vector<std::vector<T>>& x) {
  const size_t p = x.size(), n = x[0].size();
  std::vector<T> mean(n);
  size_t i = 0;
  for (size_t c = 0; c < p; ++c) {
    const size_t chunk = n / p + (c < n % p ? 1 : 0);
    for (size_t e = 0; e < chunk; ++e, ++i) {
      T acc = x[c][i];
      for (size_t k = 1; k + 1 < p; ++k) acc = x[(c + k) % p][i] + acc;
      mean[i] = (x[(c + p - 1) % p][i] + acc) / static_cast<T>(p);
    }
  }
  return mean;
}

template <typename T>
void check_ring(int p, size_t count, size_t segment_bytes) {
  SCOPED_TRACE(::testing::Message() << p << " ranks, " << count << " elements of "
                                    << sizeof(T) << " bytes, segments of " << segment_bytes);
  const auto x = random_inputs<T>(p, count, static_cast<uint32_t>(p * 7919 + count));
  const auto out = ring_mean(x, segment_bytes);
  const std::vector<T> expected = documented_mean(x);
  for (int r = 0; r < p; ++r)
    ASSERT_EQ(std::memcmp(out[static_cast<size_t>(r)].data(), expected.data(), count * sizeof(T)),
              0)
        << "rank " << r << " differs from the documented summation order";
  for (size_t i = 0; i < count; ++i) {
    double sum = 0;
    for (int r = 0; r < p; ++r) sum += static_cast<double>(x[static_cast<size_t>(r)][i]);
    const double mean = sum / p;
    // p - 1 roundings of sums of |x| <= 10, one of the quotient.
    const double ulp = std::nextafter(static_cast<T>(10), static_cast<T>(11)) - static_cast<T>(10);
    ASSERT_NEAR(static_cast<double>(out[0][i]), mean, p * ulp) << "element " << i;
  }
}

TEST(RingMean, FollowsTheDocumentedOrderOnEveryRankForUnevenAndTinyBuckets) {
  for (int p : {2, 3, 4, 5})
    for (size_t count : {size_t{1}, size_t(p - 1), size_t(p + 1), size_t{1001}}) {
      if (count == 0) continue;
      check_ring<float>(p, count, RingMean::kDefaultSegmentBytes);
      check_ring<double>(p, count, RingMean::kDefaultSegmentBytes);
      check_ring<float>(p, count, 12);  // three floats a message: many segments
      check_ring<double>(p, count, 8);
    }
}

TEST(RingMean, ABigBucketInSegmentsGivesTheSameBytesAsInOneMessage) {
  // At 2 ranks above kExchangeBytes, and at 3: the ring proper.
  for (int p : {2, 3}) {
    const auto x = random_inputs<float>(p, 300007, 11);
    ASSERT_GT(x[0].size() * sizeof(float), RingMean::kExchangeBytes);
    const auto segmented = ring_mean(x, 64 << 10);
    const auto whole = ring_mean(x, size_t{1} << 30);
    for (int r = 0; r < p; ++r)
      EXPECT_EQ(std::memcmp(segmented[r].data(), whole[r].data(), x[0].size() * sizeof(float)),
                0);
    EXPECT_EQ(
        std::memcmp(whole[0].data(), documented_mean(x).data(), x[0].size() * sizeof(float)), 0);
  }
}

TEST(RingMean, TwoRanksExchangeASmallBucketInOneMessageEach) {
  const auto x = random_inputs<double>(2, 1001, 5);
  InProcessJob job(2);
  std::vector<std::vector<double>> out = x;
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r)
    threads.emplace_back([&, r] {
      RingMean ring(job.rank(r), 1001, DType::Float64, 0);
      ring.start(out[r].data());
      while (!ring.test()) std::this_thread::yield();
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(job.messages_sent(), 2u);
  for (int r = 0; r < 2; ++r)
    EXPECT_EQ(std::memcmp(out[r].data(), documented_mean(x).data(), 1001 * sizeof(double)), 0);
}

TEST(RingMean, RunsBackToBackOnOneTagWithoutMixingTheirMessages) {
  // A rank that finishes a run starts the next at once, while its neighbour
  // still receives the last one: each run's messages must meet its own
  // receives.
  std::vector<std::vector<std::vector<double>>> runs;
  for (uint32_t run = 0; run < 3; ++run) runs.push_back(random_inputs<double>(4, 1003, run));
  const auto out = ring_mean_runs(runs, 64);
  for (size_t run = 0; run < 3; ++run)
    for (int r = 0; r < 4; ++r)
      ASSERT_EQ(std::memcmp(out[run][r].data(), documented_mean(runs[run]).data(), 1003 * 8), 0)
          << "run " << run << " rank " << r;
}

TEST(RingMean, WorldOfOneIsTheIdentityAndSendsNothing) {
  InProcessJob job(1);
  std::vector<float> v{1.5f, -2.0f, 3.25f};
  RingMean ring(job.rank(0), v.size(), DType::Float32, 0);
  ring.start(v.data());
  EXPECT_TRUE(ring.done());
  EXPECT_TRUE(ring.test());
  EXPECT_EQ(v, (std::vector<float>{1.5f, -2.0f, 3.25f}));
  EXPECT_EQ(job.messages_sent(), 0u);
}

// Making a ring of four `dtype` values on `tag` fails with `code` and a
// message containing `text`.
void expect_refused(DType dtype, int tag, Status code, const std::string& text) {
  InProcessJob job(2);
  try {
    RingMean ring(job.rank(0), 4, dtype, tag);
    ADD_FAILURE() << "a ring of " << dtype_name(dtype) << " on tag " << tag << " was made";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code);
    EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
  }
}

TEST(RingMean, RefusesOtherDtypesAndTagsOutOfRange) {
  expect_refused(DType::Int32, 0, Status::DTypeMismatch, "float32 and float64");
  expect_refused(DType::Float32, 40000, Status::OutOfRange, "0 to 32767");
}

}  // namespace
}  // namespace samba::dist
