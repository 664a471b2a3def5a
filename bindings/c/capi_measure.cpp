// utils.measure_performance and utils.measure_sections over run().
#include <algorithm>
#include <chrono>
#include <cstddef>

#include "bindings/c/capi.h"
#include "engine/dist/communicator.h"
#include "engine/ops/autograd.h"

using namespace samba;
using namespace samba::capi;

namespace {

void check_report(const samba_perf_report* r, const char* what) {
  require(r, what);
  SAMBA_CHECK(r->struct_size >= offsetof(samba_perf_report, section_id) + sizeof(int32_t), Status::InvalidArgument,
              "{}: struct_size {} is too small; set it to sizeof(samba_perf_report)", what, r->struct_size);
}

// Stores `value` into the field at `offset` when the caller's struct has it.
template <typename T>
void put(samba_perf_report* r, size_t offset, T value) {
  if (r->struct_size >= offset + sizeof(T)) *reinterpret_cast<T*>(reinterpret_cast<char*>(r) + offset) = value;
}

int64_t batch_of(const runtime::Runtime& rt, int32_t graph) {
  const auto& graphs = rt.program().desc().graphs;
  SAMBA_CHECK(graph >= 0 && static_cast<size_t>(graph) < graphs.size(), Status::InvalidState,
              "measure_performance: the PEF has {} graphs, none to measure", graphs.size());
  const auto& g = graphs[static_cast<size_t>(graph)];
  if (g.batch_size > 0) return g.batch_size;
  const auto& d = rt.program().desc();
  for (int32_t t : g.inputs)
    if (!d.tensors[static_cast<size_t>(t)].shape.empty()) return d.tensors[static_cast<size_t>(t)].shape[0];
  return 1;
}

// Times `iterations` runs of `r` after `warmup` untimed ones.
void measure(runtime::Runtime& rt, const runtime::RunRequest& first, const runtime::RunRequest& r, int64_t iterations,
             int64_t warmup, int32_t section_id, int64_t batch, samba_perf_report* out) {
  using Clock = std::chrono::steady_clock;
  std::vector<double> ms;
  ms.reserve(static_cast<size_t>(iterations));
  autograd::NoGradGuard no_grad;
  rt.run(first);
  for (int64_t i = 0; i < warmup; ++i) rt.run(r);
  const auto t0 = Clock::now();
  for (int64_t i = 0; i < iterations; ++i) {
    const auto t = Clock::now();
    rt.run(r);
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t).count());
  }
  double total_s = std::chrono::duration<double>(Clock::now() - t0).count();
  if (r.data_parallel) {
    // Global throughput: every rank's batch, over the slowest rank's time
    // (the ranks step in lockstep; the slowest bounds the job).
    dist::Communicator& comm = dist::require_world("measure_performance: data_parallel");
    std::vector<double> all(static_cast<size_t>(comm.size()));
    auto c = comm.start_allgather(&total_s, sizeof total_s, all.data());
    dist::wait(comm, *c, "measure_performance: gathering the ranks' times");
    total_s = *std::max_element(all.begin(), all.end());
    batch *= comm.size();
  }
  std::vector<double> sorted = ms;
  std::sort(sorted.begin(), sorted.end());
  auto pct = [&](double q) { return sorted[std::min(sorted.size() - 1, static_cast<size_t>(q * sorted.size()))]; };
  double sum = 0;
  for (double v : ms) sum += v;
  put(out, offsetof(samba_perf_report, section_id), section_id);
  put(out, offsetof(samba_perf_report, iterations), iterations);
  put(out, offsetof(samba_perf_report, batch_size), batch);
  put(out, offsetof(samba_perf_report, samples_per_second), static_cast<double>(batch * iterations) / total_s);
  put(out, offsetof(samba_perf_report, latency_mean_ms), sum / static_cast<double>(ms.size()));
  put(out, offsetof(samba_perf_report, latency_p50_ms), pct(0.5));
  put(out, offsetof(samba_perf_report, latency_p99_ms), pct(0.99));
  put(out, offsetof(samba_perf_report, latency_max_ms), sorted.back());
}

runtime::RunRequest request_of(samba_tensor* const* inputs, size_t n_inputs, const samba_run_options* opts) {
  runtime::RunRequest r;
  if (opts) {
    r = opts->request;
  }
  if (n_inputs) require(inputs, "inputs");
  for (size_t i = 0; i < n_inputs; ++i) {
    SAMBA_CHECK(inputs[i], Status::NullPointer, "inputs[{}] is NULL", i);
    r.inputs.push_back(tensor(inputs[i]));
  }
  return r;
}

}  // namespace

extern "C" {

samba_status samba_session_measure_performance(samba_session* s, samba_tensor* const* inputs, size_t n_inputs,
                                               const samba_run_options* opts, int64_t iterations, int64_t warmup,
                                               samba_perf_report* out) {
  return SAMBA_GUARDED({
    require(s, "session");
    check_report(out, "out");
    SAMBA_CHECK(iterations >= 1 && warmup >= 0, Status::InvalidArgument,
                "measure_performance: iterations ({}) must be >= 1 and warmup ({}) >= 0", iterations, warmup);
    auto rt = s->impl.require_runtime("measure_performance");
    const runtime::RunRequest first = request_of(inputs, n_inputs, opts);
    runtime::RunRequest again = first;
    again.inputs.clear();  // the device keeps them
    const auto& d = rt->program().desc();
    const int32_t graph = d.schedule.empty() ? 0 : d.sections[static_cast<size_t>(d.schedule[0].section)].graph;
    measure(*rt, first, again, iterations, warmup, -1, batch_of(*rt, graph), out);
  });
}

samba_status samba_session_measure_sections(samba_session* s, samba_tensor* const* inputs, size_t n_inputs,
                                            int64_t iterations, int64_t warmup, samba_perf_report* reports,
                                            size_t capacity, size_t* n_sections) {
  return SAMBA_GUARDED({
    require(s, "session");
    require(n_sections, "n_sections");
    SAMBA_CHECK(iterations >= 1 && warmup >= 0, Status::InvalidArgument,
                "measure_sections: iterations ({}) must be >= 1 and warmup ({}) >= 0", iterations, warmup);
    auto rt = s->impl.require_runtime("measure_sections");
    const auto& d = rt->program().desc();
    *n_sections = d.schedule.size();
    SAMBA_CHECK(d.schedule.size() <= capacity, Status::OutOfRange,
                "measure_sections: the PEF has {} sections in its schedule but `reports` holds {}",
                d.schedule.size(), capacity);
    if (capacity) require(reports, "reports");
    for (size_t i = 0; i < d.schedule.size(); ++i) check_report(&reports[i], "reports[i]");
    const runtime::RunRequest first = request_of(inputs, n_inputs, nullptr);
    for (size_t i = 0; i < d.schedule.size(); ++i) {
      const auto& sec = d.sections[static_cast<size_t>(d.schedule[i].section)];
      runtime::RunRequest one;
      one.section_ids = {sec.id};
      measure(*rt, first, one, iterations, warmup, sec.id, batch_of(*rt, sec.graph), &reports[i]);
    }
  });
}

}  // extern "C"
