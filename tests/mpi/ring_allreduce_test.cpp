// The REDUCE section's ring all-reduce (engine/dist/ring_allreduce.h) over
// Open MPI, under mpirun -np 2, 3 and 4 (tests/CMakeLists.txt, label mpi).
//
//   (no argument)  random buckets of 1, p-1, p+1 and 1000003 elements,
//                  float32 and float64: every rank ends with the mean
//                  computed in double (within a few ulps), with the
//                  documented summation order bit for bit, with rank 0's
//                  bytes, and with the same bytes in a second run; a
//                  BucketReducer of those buckets, staged and not, gives the
//                  same bytes again.
//   time [reps]    not a test: times a bare blocking MPI_Allreduce against
//                  the ring (several segment sizes) and the BucketReducer,
//                  alternately, at 104 KiB, 4.3 MiB and 16 MiB of float32; rank 0
//                  prints medians. Indicative only on a loaded machine.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "engine/dist/bucket_reducer.h"
#include "engine/dist/ring_allreduce.h"

namespace {

using samba::DType;
using samba::dist::BucketReducer;
using samba::dist::Communicator;
using samba::dist::RingMean;

int g_rank = 0;
int g_failures = 0;

#define RING_CHECK(cond, ...)                                          \
  do {                                                                 \
    if (!(cond)) {                                                     \
      std::fprintf(stderr, "rank %d: FAILED %s: ", g_rank, #cond);     \
      std::fprintf(stderr, __VA_ARGS__);                               \
      std::fprintf(stderr, "\n");                                      \
      ++g_failures;                                                    \
    }                                                                  \
  } while (0)

// Rank r's input for a bucket of `count` elements: every rank can make every
// other rank's, to compute the expected mean locally.
template <typename T>
std::vector<T> input(int rank, size_t count) {
  std::mt19937_64 gen(static_cast<uint64_t>(rank) * 1000003u + count);
  std::uniform_real_distribution<double> d(-10.0, 10.0);
  std::vector<T> v(count);
  for (T& e : v) e = static_cast<T>(d(gen));
  return v;
}

template <typename T>
constexpr DType dtype_of() {
  return sizeof(T) == 4 ? DType::Float32 : DType::Float64;
}

void run_ring(RingMean& ring, void* data) {
  ring.start(data);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!ring.test()) {
    if (std::chrono::steady_clock::now() > deadline) {
      std::fprintf(stderr, "rank %d: the ring did not complete in 60 s\n", g_rank);
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
    std::this_thread::yield();
  }
}

template <typename T>
void check_bucket(Communicator& comm, size_t count) {
  const int p = comm.size();
  const char* type = sizeof(T) == 4 ? "float32" : "float64";
  std::vector<std::vector<T>> x;
  for (int r = 0; r < p; ++r) x.push_back(input<T>(r, count));
  std::vector<T> mine = x[static_cast<size_t>(g_rank)];
  RingMean ring(comm, count, dtype_of<T>(), 1);
  run_ring(ring, mine.data());

  // Against the mean in double, and against the documented order bit for
  // bit: chunk c's mean is (x[c-1] + ( ... + (x[c+1] + x[c]))) / p.
  const double ulp10 = static_cast<double>(std::nextafter(T(10), T(11)) - T(10));
  size_t i = 0, off_order = 0, off_mean = 0;
  for (int c = 0; c < p; ++c) {
    const size_t chunk = count / p + (static_cast<size_t>(c) < count % p ? 1 : 0);
    for (size_t e = 0; e < chunk; ++e, ++i) {
      double sum = 0;
      for (int r = 0; r < p; ++r) sum += static_cast<double>(x[static_cast<size_t>(r)][i]);
      if (std::fabs(static_cast<double>(mine[i]) - sum / p) > p * ulp10) ++off_mean;
      T acc = x[static_cast<size_t>(c)][i];
      for (int k = 1; k + 1 < p; ++k) acc = x[static_cast<size_t>((c + k) % p)][i] + acc;
      const T expected = (x[static_cast<size_t>((c + p - 1) % p)][i] + acc) / static_cast<T>(p);
      if (std::memcmp(&expected, &mine[i], sizeof(T)) != 0) ++off_order;
    }
  }
  RING_CHECK(off_mean == 0, "%zu of %zu %s elements are off the mean by more than %d ulps",
             off_mean, count, type, p);
  RING_CHECK(off_order == 0, "%zu of %zu %s elements differ from the documented order", off_order,
             count, type);

  // Every rank holds rank 0's bytes.
  std::vector<T> first = mine;
  MPI_Bcast(first.data(), static_cast<int>(count * sizeof(T)), MPI_BYTE, 0, MPI_COMM_WORLD);
  RING_CHECK(std::memcmp(first.data(), mine.data(), count * sizeof(T)) == 0,
             "%zu %s elements differ from rank 0's", count, type);

  // A second run of the same inputs gives the same bytes.
  std::vector<T> again = x[static_cast<size_t>(g_rank)];
  run_ring(ring, again.data());
  RING_CHECK(std::memcmp(again.data(), mine.data(), count * sizeof(T)) == 0,
             "a second run of %zu %s elements differs from the first", count, type);

  // The REDUCE section's reducer, in device memory and staged: same bytes.
  for (bool staged : {false, true}) {
    std::vector<T> bucket = x[static_cast<size_t>(g_rank)];
    BucketReducer reducer(comm, {{bucket.data(), count, dtype_of<T>()}});
    reducer.begin_step(staged);
    reducer.mark_all_ready();
    reducer.wait_all();
    RING_CHECK(std::memcmp(bucket.data(), mine.data(), count * sizeof(T)) == 0,
               "the reducer (%s) of %zu %s elements differs from the ring",
               staged ? "staged" : "in place", count, type);
  }
}

int check(Communicator& comm) {
  const size_t p = static_cast<size_t>(comm.size());
  for (size_t count : {size_t{1}, p - 1, p + 1, size_t{1000003}}) {
    check_bucket<float>(comm, count);
    check_bucket<double>(comm, count);
  }
  int failures = 0;
  MPI_Allreduce(&g_failures, &failures, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (g_rank == 0)
    std::printf("ring all-reduce at %zu ranks: %s (%d failed checks over all ranks)\n", p,
                failures ? "FAILED" : "passed", failures);
  return failures ? 1 : 0;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Times, alternately, a bare MPI_Allreduce and the ring's variants over the
// same float32 bytes; rank 0 prints medians (ms) and bandwidth (GB/s).
int time_against_mpi(Communicator& comm, int reps) {
  for (size_t bytes : {size_t{104} << 10, size_t{4509000}, size_t{16} << 20}) {
    const size_t count = bytes / 4;
    std::vector<float> data = input<float>(g_rank, count);
    const std::vector<size_t> segments{size_t{256} << 10, size_t{1} << 20, size_t{4} << 20,
                                       size_t{1} << 30};
    std::vector<std::unique_ptr<RingMean>> rings;
    for (size_t s : segments)
      rings.push_back(std::make_unique<RingMean>(comm, count, DType::Float32, 2, s));
    BucketReducer reducer(comm, {{data.data(), count, DType::Float32}});
    std::vector<double> bare;
    std::vector<std::vector<double>> ring(segments.size());
    std::vector<double> reduced, woken;
    auto timed = [&](auto&& f) {
      MPI_Barrier(MPI_COMM_WORLD);
      const auto t0 = std::chrono::steady_clock::now();
      f();
      return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
          .count();
    };
    for (int rep = 0; rep < reps; ++rep) {
      bare.push_back(timed([&] {
        MPI_Allreduce(MPI_IN_PLACE, data.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM,
                      MPI_COMM_WORLD);
      }));
      for (size_t k = 0; k < segments.size(); ++k)
        ring[k].push_back(timed([&] { run_ring(*rings[k], data.data()); }));
      // As the REDUCE section of a normal or inorder run does.
      reduced.push_back(timed([&] {
        reducer.begin_step(false);
        reducer.reduce_all();
      }));
      woken.push_back(timed([&] {
        reducer.begin_step(false);
        reducer.mark_all_ready();
        reducer.wait_all();
      }));
      // Keep the values bounded (the bare sum doubles them).
      for (float& v : data) v = std::fmod(v, 100.0f);
    }
    if (g_rank == 0) {
      auto line = [&](const std::string& what, const std::vector<double>& t) {
        std::printf("%9zu B  %-28s %8.3f ms  %6.2f GB/s  %5.0f%% of bare\n", bytes, what.c_str(),
                    median(t), bytes / median(t) / 1e6, 100.0 * median(bare) / median(t));
      };
      line("bare MPI_Allreduce", bare);
      for (size_t k = 0; k < segments.size(); ++k)
        line("ring, segments of " + std::to_string(segments[k] >> 10) + " KiB", ring[k]);
      line("BucketReducer::reduce_all", reduced);
      line("mark_all_ready + wait_all", woken);
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
  samba::dist::init();
  Communicator& comm = samba::dist::require_world("ring_allreduce_test");
  g_rank = comm.rank();
  int rc = 0;
  try {
    if (argc > 1 && std::string(argv[1]) == "time")
      rc = time_against_mpi(comm, argc > 2 ? std::atoi(argv[2]) : 30);
    else
      rc = check(comm);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: %s\n", g_rank, e.what());
    MPI_Abort(MPI_COMM_WORLD, 3);
  }
  samba::dist::finalize();
  MPI_Finalize();
  return rc;
}
