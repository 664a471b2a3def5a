// End-to-end: the models of e2e_models.h compiled to PEFs and run on the
// runtime with a pool of 2 threads (--threads=N for another count), as an
// application runs them: a training
// step is run() of the whole schedule (FWD, BCKWD, OPT) with the image and
// label batch bound, returning loss and logits; inference is run() of FWD
// with the image bound, returning the logits.
//
// Counters (rates per second of wall time unless the name says otherwise):
//   samples_per_s      batch / step time
//   GFLOPS             contraction FLOP (e2e_models.h) per step / step time
//   GFLOPS_pef         the PEF's kernel estimates (all kernels run) / step time
//   cpu_util           process CPU seconds / wall seconds (2 = both cores busy)
//   GFLOP_per_cpu_s    contraction FLOP per process CPU second (steadier on a
//                      shared machine)
// and, for training, the memory of a step against the memory plan:
//   peak_rss_MiB       growth of the process's peak resident set (VmHWM,
//                      reset through /proc/self/clear_refs) from just before
//                      the runtime is created to after the timed steps
//   load_peak_MiB      the same, up to the end of the runtime's creation
//   plan_peak_MiB      the plan's device arenas (state + one activation area)
//   plan_lower_MiB     the plan's lower bound (persistent bytes + the largest
//                      live set of intermediates)
//
//   e2e_bench [--threads=N] [Google Benchmark flags]
//   e2e_bench [--threads=N] --kernel_profile=FILE.json [--kernel_profile_steps=N]
//             [--kernel_profile_filter=S]
// The second form runs each workload (whose key contains S) N steps
// (default 100) under the
// profiler instead and writes, per workload, the time per step of every
// kernel with its FLOP rate (the PEF's estimate) and byte rate (what the
// kernel loads and stores as the runtime runs it, runtime::kernel_bytes_moved)
// with that rate's share of the machine's memcpy bandwidth (measured once,
// printed first), so what limits a workload can be read off: compute
// (GFLOP/s near the FMA peak), bandwidth (memcpy share near 100%) or fixed
// overhead (step time well above the kernels' sum).
#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <malloc.h>
#include <time.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "bench/e2e_models.h"
#include "engine/profile/memcpy_bandwidth.h"
#include "engine/profile/profile_events.h"
#include "engine/profile/profile_report.h"
#include "engine/profile/profiler.h"
#include "engine/runtime/runtime.h"

namespace {

using namespace samba;
using samba::bench::DigitsConvNet;
using samba::bench::ResFFNLogReg;

// The pool's threads (--threads).
int g_threads = 2;

// A positive count from flag `name`'s value, or -1 with a message.
int positive_flag(const std::string& name, const std::string& value) {
  int v = 0;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
  if (ec != std::errc() || end != value.data() + value.size() || v < 1) {
    std::fprintf(stderr, "e2e_bench: --%s=%s: expected a positive integer\n", name.c_str(),
                 value.c_str());
    return -1;
  }
  return v;
}

double process_cpu_seconds() {
  timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

// A field of /proc/self/status in KiB ("VmRSS", "VmHWM"); -1 if unreadable.
int64_t status_kib(const char* field) {
  std::ifstream f("/proc/self/status");
  std::string line;
  const std::string key = std::string(field) + ":";
  while (std::getline(f, line))
    if (line.rfind(key, 0) == 0) return std::stoll(line.substr(key.size()));
  return -1;
}

// Resets VmHWM to the current resident set (Linux 4.0 and later).
bool reset_peak_rss() {
  std::FILE* f = std::fopen("/proc/self/clear_refs", "w");
  if (!f) return false;
  const bool ok = std::fputs("5", f) >= 0;
  return std::fclose(f) == 0 && ok;
}

// One workload: its compiled program and the inputs a step binds.
struct Workload {
  std::string key;  // "resffn_train_b256_h1024", "convnet_infer_b256"
  bool train = false;
  int64_t batch = 0;
  double flops = 0;  // contraction FLOP per step
  pef::ProgramDesc desc;
  std::vector<Tensor> inputs;
};

// Either model (ResFFNLogReg, DigitsConvNet) compiled for training or inference.
template <typename Model>
Workload make_workload(const Model& m, std::string key, int64_t batch, bool train,
                       compiler::MixedPrecision mixed = compiler::MixedPrecision::None) {
  Workload w;
  w.key = std::move(key);
  w.train = train;
  w.batch = batch;
  w.flops = train ? m.train_flops() : m.forward_flops();
  w.desc = bench::compile_to_pef(m.spec(!train), mixed);
  w.inputs = train ? std::vector<Tensor>{m.image(), m.label()} : std::vector<Tensor>{m.image()};
  return w;
}

Workload resffn(int64_t batch, int64_t hidden, bool train, bool bf16) {
  return make_workload(ResFFNLogReg(batch, hidden),
                       fmt::format("resffn_{}_b{}_h{}{}", train ? "train" : "infer", batch, hidden,
                                   bf16 ? "_bf16" : ""),
                       batch, train, bf16 ? compiler::MixedPrecision::Bf16 : compiler::MixedPrecision::None);
}

Workload convnet(int64_t batch, bool train) {
  return make_workload(DigitsConvNet(batch), fmt::format("convnet_{}_b{}", train ? "train" : "infer", batch), batch,
                       train);
}

// Compiled once per process: Google Benchmark calls a benchmark several
// times while it settles the iteration count.
const Workload& workload(const std::string& key) {
  static std::map<std::string, std::unique_ptr<Workload>> cache;
  auto it = cache.find(key);
  if (it != cache.end()) return *it->second;
  int64_t batch = 0, hidden = 0;
  char kind[8] = {0};
  std::unique_ptr<Workload> w;
  if (std::sscanf(key.c_str(), "resffn_%5[a-z]_b%ld_h%ld", kind, &batch, &hidden) == 3)
    w = std::make_unique<Workload>(resffn(batch, hidden, std::string(kind) == "train",
                                          key.ends_with("_bf16")));
  else if (std::sscanf(key.c_str(), "convnet_%5[a-z]_b%ld", kind, &batch) == 2)
    w = std::make_unique<Workload>(convnet(batch, std::string(kind) == "train"));
  else
    throw std::invalid_argument("e2e_bench: unknown workload " + key);
  return *cache.emplace(key, std::move(w)).first->second;
}

runtime::RunRequest step_request(const Workload& w) {
  runtime::RunRequest r;
  r.inputs = w.inputs;
  if (!w.train) {
    r.section_types = {"FWD"};
    r.train = false;
  }
  return r;
}

// Sum of the PEF's kernel FLOP estimates over the sections a step runs.
double pef_flops_per_step(const runtime::Program& p, bool train) {
  double f = 0;
  for (const auto& s : p.sections())
    if (train || s.type == pef::SectionType::FWD)
      for (int32_t k : s.kernels) f += p.kernels()[static_cast<size_t>(k)].flops;
  return f;
}

constexpr double kMiB = 1024.0 * 1024.0;

void BM_Step(benchmark::State& state, const std::string& key) {
  const Workload& w = workload(key);
  malloc_trim(0);
  const int64_t rss0 = status_kib("VmRSS");
  const bool peak_tracked = reset_peak_rss() && rss0 >= 0;
  ThreadPool pool(g_threads);
  runtime::Runtime rt(w.desc, pool, nullptr);
  const runtime::RunRequest r = step_request(w);
  // Loading holds the PEF's decoded values and the parameters' pages of the
  // device arena at once; after it the runtime keeps the arenas only.
  const int64_t load_hwm = status_kib("VmHWM");
  for (int i = 0; i < 10; ++i) benchmark::DoNotOptimize(rt.run(r));  // arenas touched, graphs built
  const double cpu0 = process_cpu_seconds();
  for (auto _ : state) benchmark::DoNotOptimize(rt.run(r));
  const double cpu = process_cpu_seconds() - cpu0;
  const double steps = static_cast<double>(state.iterations());
  using C = benchmark::Counter;
  state.counters["samples_per_s"] = C(static_cast<double>(w.batch), C::kIsIterationInvariantRate);
  state.counters["GFLOPS"] = C(w.flops * 1e-9, C::kIsIterationInvariantRate);
  state.counters["GFLOPS_pef"] =
      C(pef_flops_per_step(rt.program(), w.train) * 1e-9, C::kIsIterationInvariantRate);
  state.counters["cpu_util"] = C(cpu, C::kIsRate);
  if (cpu > 0) state.counters["GFLOP_per_cpu_s"] = w.flops * 1e-9 * steps / cpu;
  const auto& mem = w.desc.memory;
  state.counters["plan_peak_MiB"] = static_cast<double>(mem.peak_bytes) / kMiB;
  state.counters["plan_lower_MiB"] = static_cast<double>(mem.lower_bound_bytes) / kMiB;
  if (peak_tracked) {
    const double peak = static_cast<double>(status_kib("VmHWM") - rss0) * 1024.0;
    state.counters["peak_rss_MiB"] = peak / kMiB;
    state.counters["load_peak_MiB"] = static_cast<double>(load_hwm - rss0) / 1024.0;
    if (mem.lower_bound_bytes > 0)
      state.counters["peak_over_lower"] = peak / static_cast<double>(mem.lower_bound_bytes);
  }
}

const std::vector<std::string>& workload_keys() {
  static const std::vector<std::string> keys = {
      "resffn_train_b16_h256",   "resffn_infer_b16_h256",    "resffn_train_b256_h1024",
      "resffn_infer_b256_h1024", "resffn_train_b1024_h2048", "resffn_infer_b1024_h2048",
      "convnet_train_b256",      "convnet_infer_b256",
      // bf16 mixed precision (products on bf16 operands, fp32 master weights)
      "resffn_train_b1024_h2048_bf16", "resffn_infer_b1024_h2048_bf16",
  };
  return keys;
}

// ---- the kernel profile ------------------------------------------------------

nlohmann::json kernel_profile(const std::string& key, int steps, double memcpy_bytes_per_s) {
  const Workload& w = workload(key);
  ThreadPool pool(g_threads);
  Profiler profiler;
  runtime::Runtime rt(w.desc, pool, &profiler);
  const runtime::RunRequest r = step_request(w);
  for (int i = 0; i < 10; ++i) rt.run(r);  // first touch of pages and caches settle
  const auto id = profiler.start(category_bit(ProfileCategory::Kernel) |
                                 category_bit(ProfileCategory::Section) |
                                 category_bit(ProfileCategory::Runtime));
  const auto t0 = Profiler::now_ns();
  for (int i = 0; i < steps; ++i) rt.run(r);
  const double step_ns = static_cast<double>(Profiler::now_ns() - t0) / steps;
  const ProfileTrace trace = profiler.stop(id);

  // A kernel, or a pair the runtime runs as one (KernelPlan::pair_name).
  struct Cost {
    double flops, bytes;
    Fusion fusion;
  };
  std::map<std::string_view, Cost> plan_of;
  for (const auto& k : rt.program().kernels()) {
    plan_of[k.name] = {k.flops, k.bytes, k.fusion};
    if (!k.pair_name.empty()) plan_of[k.pair_name] = {k.pair_flops, k.pair_bytes, k.fusion};
  }
  nlohmann::json kernels = nlohmann::json::array();
  double kernel_ns = 0, section_ns = 0, run_ns = 0;
  for (const ProfileStats& s : summarize(trace)) {
    const double per_step = static_cast<double>(s.total_ns) / steps;
    if (s.category == ProfileCategory::Section) section_ns += per_step;
    if (s.category == ProfileCategory::Runtime && s.name == profile_events::kRun)
      run_ns += per_step;
    if (s.category != ProfileCategory::Kernel) continue;
    kernel_ns += per_step;
    auto it = plan_of.find(s.name);
    const double flops = it != plan_of.end() ? it->second.flops : 0;
    const double bytes = it != plan_of.end() ? it->second.bytes : 0;
    const double calls = static_cast<double>(s.count) / steps;
    kernels.push_back(
        {{"kernel", std::string(s.name)},
         {"fusion", it != plan_of.end() ? std::string(fusion_name(it->second.fusion)) : ""},
         {"us_per_step", per_step * 1e-3},
         {"calls_per_step", calls},
         {"share_of_step", per_step / step_ns},
         {"GFLOPS", per_step > 0 ? flops * calls / per_step : 0},
         {"GBps", per_step > 0 ? bytes * calls / per_step : 0},
         {"share_of_memcpy",
          per_step > 0 && memcpy_bytes_per_s > 0
              ? bytes * calls / per_step * 1e9 / memcpy_bytes_per_s
              : 0}});
  }
  return {{"workload", key},
          {"steps", steps},
          {"step_us", step_ns * 1e-3},
          {"run_us", run_ns * 1e-3},
          {"sections_us", section_ns * 1e-3},
          {"kernels_us", kernel_ns * 1e-3},
          {"kernel_count", kernels.size()},
          {"kernels", kernels}};
}

int write_kernel_profiles(const std::string& path, int steps, const std::string& filter) {
  // Before any workload runs, so its pages and threads do not share the
  // machine with a model.
  const MemcpyBandwidth& memcpy = memcpy_bandwidth();
  fmt::print(
      "memcpy bandwidth {:.2f} GB/s (bytes read + written; {} threads, best of {} copies of {} "
      "MiB)\n",
      memcpy.bytes_per_s * 1e-9, memcpy.threads, memcpy.repetitions, memcpy.buffer_bytes >> 20);
  nlohmann::json all = nlohmann::json::array();
  for (const auto& key : workload_keys()) {
    if (key.find(filter) == std::string::npos) continue;
    nlohmann::json p = kernel_profile(key, steps, memcpy.bytes_per_s);
    p["memcpy_GBps"] = memcpy.bytes_per_s * 1e-9;
    fmt::print(
        "{}: step {:.1f} us, run {:.1f} us, sections {:.1f} us, kernels {:.1f} us (sum over "
        "threads)\n",
        key, p["step_us"].get<double>(), p["run_us"].get<double>(), p["sections_us"].get<double>(),
        p["kernels_us"].get<double>());
    int shown = 0;
    for (const auto& k : p["kernels"]) {
      if (shown++ == 6) break;
      fmt::print(
          "  {:<40} {:>9.1f} us {:>5.1f}%  {:>7.1f} GFLOP/s {:>6.1f} GB/s {:>5.1f}% of memcpy\n",
                 k["kernel"].get<std::string>(), k["us_per_step"].get<double>(),
                 100 * k["share_of_step"].get<double>(), k["GFLOPS"].get<double>(),
                 k["GBps"].get<double>(), 100 * k["share_of_memcpy"].get<double>());
    }
    all.push_back(std::move(p));
  }
  std::ofstream out(path);
  out << all.dump(1) << "\n";
  if (!out) {
    fmt::print(stderr, "e2e_bench: cannot write {}\n", path);
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string profile_path, profile_filter;
  int profile_steps = 100;
  std::vector<char*> rest;
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("--kernel_profile=", 0) == 0) {
      profile_path = a.substr(17);
    } else if (a.rfind("--kernel_profile_steps=", 0) == 0) {
      if ((profile_steps = positive_flag("kernel_profile_steps", a.substr(23))) < 0) return 2;
    } else if (a.rfind("--threads=", 0) == 0) {
      if ((g_threads = positive_flag("threads", a.substr(10))) < 0) return 2;
    } else if (a.rfind("--kernel_profile_filter=", 0) == 0) {
      profile_filter = a.substr(24);
    } else {
      rest.push_back(argv[i]);
    }
  }
  if (!profile_path.empty())
    return write_kernel_profiles(profile_path, profile_steps, profile_filter);

  for (const auto& key : workload_keys())
    benchmark::RegisterBenchmark(("e2e/" + key).c_str(), BM_Step, key)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
  int n = static_cast<int>(rest.size());
  benchmark::Initialize(&n, rest.data());
  if (benchmark::ReportUnrecognizedArguments(n, rest.data())) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
