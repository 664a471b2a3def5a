#include "engine/profile/profile_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <iterator>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "engine/core/isa.h"
#include "engine/core/log.h"
#include "engine/io/atomic_file.h"
#include "engine/profile/memcpy_bandwidth.h"
#include "engine/profile/profile_events.h"

namespace samba {
namespace {

using Json = nlohmann::ordered_json;

// Microseconds, the trace-event format's unit; a double keeps nanoseconds
// exact for traces up to about 100 days.
double us(int64_t ns) { return static_cast<double>(ns) / 1000.0; }

Json arg_value(const ProfileArg& a) {
  switch (a.kind) {
    case ProfileArg::Kind::Int:
      return a.i;
    case ProfileArg::Kind::Float:
      // JSON has no inf or nan; nlohmann would write null, which loses which.
      return std::isfinite(a.f) ? Json(a.f) : Json(fmt::format("{}", a.f));
    case ProfileArg::Kind::String:
      return std::string(a.str());
  }
  return nullptr;
}

Json event_json(const ProfileTrace& t, const ProfileEvent& e) {
  Json j;
  j["name"] = std::string(e.name);
  j["cat"] = std::string(profile_category_name(e.category));
  const bool complete = e.phase == ProfilePhase::Complete;
  j["ph"] = complete ? "X" : "i";
  if (!complete) j["s"] = "t";  // an instant on its thread's track
  j["ts"] = us(e.start_ns - t.start_ns);
  if (complete) j["dur"] = us(e.dur_ns);
  j["pid"] = t.pid;
  j["tid"] = e.tid;
  if (e.num_args) {
    Json& args = j["args"];
    for (const ProfileArg& a : e.arg_list()) args[std::string(a.key())] = arg_value(a);
  }
  return j;
}

Json metadata_json(const ProfileTrace& t, std::string_view what, uint32_t tid, std::string_view name) {
  return Json{{"name", std::string(what)},
              {"ph", "M"},
              {"pid", t.pid},
              {"tid", tid},
              {"args", {{"name", std::string(name)}}}};
}

// Names come from PEFs and applications: bytes that are not UTF-8 become
// U+FFFD instead of making the file unreadable.
void append(std::string& out, const Json& j) {
  out += j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

int64_t nearest_rank(const std::vector<int64_t>& sorted, double p) {
  const size_t n = sorted.size();
  size_t rank = static_cast<size_t>(std::ceil(p * static_cast<double>(n)));
  rank = std::clamp<size_t>(rank, 1, n);
  return sorted[rank - 1];
}

std::string ascii_upper(std::string_view s) {
  std::string u(s);
  for (char& c : u)
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  return u;
}

}  // namespace

// One event at a time into the text, rather than one JSON document of the
// whole trace: a long capture's millions of events never exist twice.
std::string chrome_trace_json(const ProfileTrace& t) {
  std::string out = "{\"traceEvents\":[\n";
  out.reserve(out.size() + 200 * (t.events.size() + t.threads.size() + 1));
  append(out, metadata_json(t, "process_name", 0, t.process_name));
  for (const ProfileThread& th : t.threads) {
    out += ",\n";
    append(out, metadata_json(t, "thread_name", th.tid, th.name));
  }
  for (const ProfileEvent& e : t.events) {
    out += ",\n";
    append(out, event_json(t, e));
  }
  out += "\n],\"displayTimeUnit\":\"ms\",\"otherData\":";
  // The kernels' ISA level: the same program runs at very different speeds
  // at different levels, so a trace says which one it measured.
  append(out, Json{{"wall_ns", t.wall_ns()},
                   {"dropped_events", t.dropped_events},
                   {"isa", isa_name(active_isa())}});
  out += "}\n";
  return out;
}

void write_chrome_trace(const ProfileTrace& trace, const std::string& path) {
  write_file_atomically(path, chrome_trace_json(trace));
}

std::vector<ProfileStats> summarize(const ProfileTrace& t) {
  std::unordered_map<std::string_view, size_t> index;
  std::vector<ProfileStats> rows;
  std::vector<std::vector<int64_t>> durations;
  for (const ProfileEvent& e : t.events) {
    if (e.phase != ProfilePhase::Complete) continue;
    auto [it, fresh] = index.try_emplace(e.name, rows.size());
    if (fresh) {
      rows.push_back({});
      rows.back().name = e.name;
      rows.back().category = e.category;
      durations.emplace_back();
    }
    durations[it->second].push_back(e.dur_ns);
    for (const ProfileArg& a : e.arg_list())
      if (a.key() == profile_events::kArgBytes)
        rows[it->second].bytes += a.kind == ProfileArg::Kind::Int ? static_cast<double>(a.i) : a.f;
  }
  const double wall = static_cast<double>(std::max<int64_t>(t.wall_ns(), 1));
  for (size_t i = 0; i < rows.size(); ++i) {
    std::vector<int64_t>& d = durations[i];
    std::sort(d.begin(), d.end());
    ProfileStats& r = rows[i];
    r.count = static_cast<int64_t>(d.size());
    for (int64_t x : d) r.total_ns += x;
    r.mean_ns = static_cast<double>(r.total_ns) / static_cast<double>(r.count);
    r.p50_ns = nearest_rank(d, 0.50);
    r.p99_ns = nearest_rank(d, 0.99);
    r.max_ns = d.back();
    r.wall_share = static_cast<double>(r.total_ns) / wall;
  }
  std::sort(rows.begin(), rows.end(), [](const ProfileStats& a, const ProfileStats& b) {
    return a.total_ns != b.total_ns ? a.total_ns > b.total_ns : a.name < b.name;
  });
  return rows;
}

std::optional<RuntimePerfMode> parse_runtime_perf_mode(std::string_view text) {
  const std::string u = ascii_upper(text);
  if (u.empty()) return RuntimePerfMode::Off;
  if (u == "SUMMARY") return RuntimePerfMode::Summary;
  if (u == "DETAILED") return RuntimePerfMode::Detailed;
  return std::nullopt;
}

RuntimePerfMode runtime_perf_mode_from_env() {
  const char* env = std::getenv("ENABLE_RUNTIME_PERF");
  if (!env) return RuntimePerfMode::Off;
  if (auto mode = parse_runtime_perf_mode(env)) return *mode;
  log::warn(
      "ENABLE_RUNTIME_PERF='{}' is not a runtime profile mode; expected SUMMARY or DETAILED "
      "(runtime profiling stays off)",
      env);
  return RuntimePerfMode::Off;
}

std::string format_profile_summary(const ProfileTrace& t, RuntimePerfMode mode) {
  const std::vector<ProfileStats> rows = summarize(t);
  size_t width = 4;
  for (const ProfileStats& r : rows) width = std::max(width, r.name.size());

  fmt::memory_buffer out;
  auto app = std::back_inserter(out);
  fmt::format_to(app, "Runtime profile: wall time {:.3f} ms, {} events on {} threads, kernels {}",
                 t.wall_ns() / 1e6, t.events.size(), t.threads.size(), isa_name(active_isa()));
  if (t.dropped_events) fmt::format_to(app, ", {} events dropped", t.dropped_events);
  out.push_back('\n');
  // Measured here, when a summary is written, rather than at load or when
  // the profile starts: it takes a few tenths of a second and evicts the
  // caches, which only someone reading byte rates should pay for, and never
  // inside the window being profiled.
  const MemcpyBandwidth& memcpy = memcpy_bandwidth();
  const double memcpy_gb_per_s = memcpy.bytes_per_s * 1e-9;
  fmt::format_to(app,
                 "memcpy bandwidth {:.2f} GB/s (bytes read + written; {} threads, best of {} "
                 "copies of {} MiB)\n",
                 memcpy_gb_per_s, memcpy.threads, memcpy.repetitions, memcpy.buffer_bytes >> 20);
  fmt::format_to(app, "{:<{}}  {:<8} {:>8} {:>12} {:>11} {:>11} {:>11} {:>11} {:>7} {:>8} {:>8}\n",
                 "name", width, "category", "count", "total ms", "mean us", "p50 us", "p99 us",
                 "max us", "wall %", "GB/s", "memcpy %");
  for (const ProfileStats& r : rows) {
    fmt::format_to(
        app, "{:<{}}  {:<8} {:>8} {:>12.3f} {:>11.3f} {:>11.3f} {:>11.3f} {:>11.3f} {:>7.2f}",
        r.name, width, profile_category_name(r.category), r.count, r.total_ns / 1e6,
        r.mean_ns / 1e3, r.p50_ns / 1e3, r.p99_ns / 1e3, r.max_ns / 1e3, 100.0 * r.wall_share);
    if (r.bytes <= 0)
      fmt::format_to(app, " {:>8} {:>8}\n", "-", "-");
    else if (memcpy_gb_per_s <= 0)
      fmt::format_to(app, " {:>8.2f} {:>8}\n", r.gb_per_s(), "-");
    else
      fmt::format_to(app, " {:>8.2f} {:>8.1f}\n", r.gb_per_s(),
                     100.0 * r.gb_per_s() / memcpy_gb_per_s);
  }

  if (mode == RuntimePerfMode::Detailed) {
    std::vector<const ProfileEvent*> by_time;
    by_time.reserve(t.events.size());
    for (const ProfileEvent& e : t.events) by_time.push_back(&e);
    std::stable_sort(
        by_time.begin(), by_time.end(),
        [](const ProfileEvent* a, const ProfileEvent* b) { return a->start_ns < b->start_ns; });
    fmt::format_to(app, "\nEvents in time order:\n{:>14} {:>12} {:>8}  {:<8} {}\n", "start us",
                   "dur us", "tid", "category", "name");
    for (const ProfileEvent* e : by_time) {
      fmt::format_to(app, "{:>14.3f} ", (e->start_ns - t.start_ns) / 1e3);
      if (e->phase == ProfilePhase::Complete)
        fmt::format_to(app, "{:>12.3f}", e->dur_ns / 1e3);
      else
        fmt::format_to(app, "{:>12}", "instant");
      fmt::format_to(app, " {:>8}  {:<8} {}", e->tid, profile_category_name(e->category), e->name);
      for (const ProfileArg& a : e->arg_list()) {
        fmt::format_to(app, " {}=", a.key());
        switch (a.kind) {
          case ProfileArg::Kind::Int:
            fmt::format_to(app, "{}", a.i);
            break;
          case ProfileArg::Kind::Float:
            fmt::format_to(app, "{}", a.f);
            break;
          case ProfileArg::Kind::String:
            fmt::format_to(app, "{}", a.str());
            break;
        }
      }
      out.push_back('\n');
    }
  }
  return fmt::to_string(out);
}

void write_profile_summary(const ProfileTrace& trace, RuntimePerfMode mode,
                           const std::string& path) {
  write_file_atomically(path, format_profile_summary(trace, mode));
}

}  // namespace samba
