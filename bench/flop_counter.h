// The GFLOP/s counters of the kernel benchmarks (linear_bench, kernel_peers_bench).
#pragma once

#include <benchmark/benchmark.h>
#include <time.h>

inline double process_cpu_seconds() {
  timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

// Reports GFLOPS (per second of wall time) and, because this machine is
// shared, GFLOP per CPU-second of this process (all its threads, spin-waits
// included): with other jobs running a straggling thread costs wall time but
// no CPU time, so the second is the steadier measure of what the kernel does
// with the cores it gets.
class FlopCounter {
 public:
  FlopCounter(benchmark::State& state, double flops_per_iteration)
      : state_(state), flops_(flops_per_iteration), cpu0_(process_cpu_seconds()) {}
  // A product of m x k by k x n: 2 m n k.
  FlopCounter(benchmark::State& state, double m, double n, double k)
      : FlopCounter(state, 2.0 * m * n * k) {}
  ~FlopCounter() {
    const double cpu = process_cpu_seconds() - cpu0_;
    state_.counters["GFLOPS"] =
        benchmark::Counter(flops_ * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
    if (cpu > 0)
      state_.counters["GFLOP_per_cpu_s"] =
          flops_ * 1e-9 * static_cast<double>(state_.iterations()) / cpu;
  }
  FlopCounter(const FlopCounter&) = delete;
  FlopCounter& operator=(const FlopCounter&) = delete;

 private:
  benchmark::State& state_;
  double flops_, cpu0_;
};
