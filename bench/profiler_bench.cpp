// The cost the profiler adds to the code it times: a scope while profiling
// is off (the common case: one relaxed atomic load), a scope while a capture
// is running (two clock reads and a copy into the thread's buffer), and the
// same with arguments attached; and writing a capture as a trace file.
#include <benchmark/benchmark.h>

#include "engine/profile/profile_events.h"
#include "engine/profile/profile_report.h"
#include "engine/profile/profiler.h"

using namespace samba;

namespace {

// Restarting the capture now and then keeps the buffers from filling up; the
// pause hides the collection, which is not what is measured.
constexpr int64_t kEventsPerCapture = 1 << 16;

void restart(benchmark::State& state, Profiler& p, Profiler::CaptureId& id) {
  state.PauseTiming();
  p.stop(id);
  id = p.start();
  state.ResumeTiming();
}

}  // namespace

static void BM_ScopeDisabled(benchmark::State& state) {
  Profiler p;
  for (auto _ : state) {
    ProfileScope s(p, profile_events::kRun, ProfileCategory::Runtime);
    benchmark::DoNotOptimize(&s);
  }
}
BENCHMARK(BM_ScopeDisabled);

static void BM_ScopeDisabledWithArgs(benchmark::State& state) {
  Profiler p;
  int64_t i = 0;
  for (auto _ : state) {
    ProfileScope s(p, "FWD", ProfileCategory::Section);
    s.arg(profile_events::kArgSectionId, i).arg(profile_events::kArgMicroBatch, i + 1);
    benchmark::DoNotOptimize(&s);
    ++i;
  }
}
BENCHMARK(BM_ScopeDisabledWithArgs);

static void BM_ScopeEnabled(benchmark::State& state) {
  Profiler p;
  auto id = p.start();
  int64_t n = 0;
  for (auto _ : state) {
    {
      ProfileScope s(p, profile_events::kRun, ProfileCategory::Runtime);
      benchmark::DoNotOptimize(&s);
    }
    if (++n % kEventsPerCapture == 0) restart(state, p, id);
  }
  p.stop(id);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_ScopeEnabled);

static void BM_ScopeEnabledWithArgs(benchmark::State& state) {
  Profiler p;
  auto id = p.start();
  int64_t n = 0;
  for (auto _ : state) {
    {
      ProfileScope s(p, "FWD", ProfileCategory::Section);
      s.arg(profile_events::kArgSectionId, n).arg(profile_events::kArgMicroBatch, n & 7);
      benchmark::DoNotOptimize(&s);
    }
    if (++n % kEventsPerCapture == 0) restart(state, p, id);
  }
  p.stop(id);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_ScopeEnabledWithArgs);

// The clock alone, for reference: an enabled scope reads it twice.
static void BM_ClockRead(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(Profiler::now_ns());
}
BENCHMARK(BM_ClockRead);

// Writing a capture as a Perfetto / chrome://tracing file (through
// nlohmann/json, one event at a time): the cost per event of what
// samba_session_end_samba_profile does once at the end of a capture.
static void BM_ChromeTraceJson(benchmark::State& state) {
  Profiler p;
  auto id = p.start();
  for (int64_t n = 0; n < state.range(0); ++n) {
    ProfileScope s(p, "FWD", ProfileCategory::Section);
    s.arg(profile_events::kArgSectionId, n).arg(profile_events::kArgMicroBatch, n & 7);
  }
  const ProfileTrace trace = p.stop(id);
  size_t bytes = 0;
  for (auto _ : state) {
    const std::string text = chrome_trace_json(trace);
    bytes = text.size();
    benchmark::DoNotOptimize(text.data());
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
  state.counters["bytes_per_event"] = static_cast<double>(bytes) / static_cast<double>(state.range(0));
}
BENCHMARK(BM_ChromeTraceJson)->Arg(1 << 16)->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
