#include "engine/profile/profile_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <iterator>
#include <unordered_map>

#include "engine/core/log.h"
#include "engine/io/atomic_file.h"

namespace samba {
namespace {

using Out = fmt::memory_buffer;

void put(Out& out, std::string_view s) { out.append(s.data(), s.data() + s.size()); }

// Length of the valid UTF-8 sequence starting at s[i], or 0.
size_t utf8_sequence(std::string_view s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  size_t len = 0;
  uint32_t cp = 0;
  if (c < 0x80) return 1;
  if ((c & 0xE0) == 0xC0)
    len = 2, cp = c & 0x1F;
  else if ((c & 0xF0) == 0xE0)
    len = 3, cp = c & 0x0F;
  else if ((c & 0xF8) == 0xF0)
    len = 4, cp = c & 0x07;
  else
    return 0;
  if (i + len > s.size()) return 0;
  for (size_t k = 1; k < len; ++k) {
    if ((b(i + k) & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (b(i + k) & 0x3F);
  }
  static constexpr uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMin[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return len;
}

// A JSON string. Names come from PEFs and applications, so bytes that are
// not UTF-8 become U+FFFD instead of making the file unreadable.
void put_string(Out& out, std::string_view s) {
  out.push_back('"');
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
      ++i;
    } else if (c < 0x20) {
      switch (c) {
        case '\n':
          put(out, "\\n");
          break;
        case '\t':
          put(out, "\\t");
          break;
        case '\r':
          put(out, "\\r");
          break;
        default:
          fmt::format_to(std::back_inserter(out), "\\u{:04x}", c);
      }
      ++i;
    } else if (size_t n = utf8_sequence(s, i)) {
      put(out, s.substr(i, n));
      i += n;
    } else {
      put(out, "\\ufffd");
      ++i;
    }
  }
  out.push_back('"');
}

// Microseconds with exact nanoseconds: 1234567 ns -> "1234.567".
void put_us(Out& out, int64_t ns) {
  if (ns < 0) {
    out.push_back('-');
    ns = -ns;
  }
  fmt::format_to(std::back_inserter(out), "{}.{:03}", ns / 1000, ns % 1000);
}

void put_arg_value(Out& out, const ProfileArg& a) {
  switch (a.kind) {
    case ProfileArg::Kind::Int:
      fmt::format_to(std::back_inserter(out), "{}", a.i);
      break;
    case ProfileArg::Kind::Float:
      if (std::isfinite(a.f))
        fmt::format_to(std::back_inserter(out), "{}", a.f);
      else
        put_string(out, fmt::format("{}", a.f));  // JSON has no inf or nan
      break;
    case ProfileArg::Kind::String:
      put_string(out, a.str());
      break;
  }
}

void put_event(Out& out, const ProfileTrace& t, const ProfileEvent& e) {
  put(out, "{\"name\":");
  put_string(out, e.name);
  put(out, ",\"cat\":");
  put_string(out, profile_category_name(e.category));
  put(out, e.phase == ProfilePhase::Complete ? ",\"ph\":\"X\",\"ts\":"
                                             : ",\"ph\":\"i\",\"s\":\"t\",\"ts\":");
  put_us(out, e.start_ns - t.start_ns);
  if (e.phase == ProfilePhase::Complete) {
    put(out, ",\"dur\":");
    put_us(out, e.dur_ns);
  }
  fmt::format_to(std::back_inserter(out), ",\"pid\":{},\"tid\":{}", t.pid, e.tid);
  if (e.num_args) {
    put(out, ",\"args\":{");
    for (uint8_t i = 0; i < e.num_args; ++i) {
      if (i) out.push_back(',');
      put_string(out, e.args[i].key());
      out.push_back(':');
      put_arg_value(out, e.args[i]);
    }
    out.push_back('}');
  }
  out.push_back('}');
}

void put_metadata(Out& out, const ProfileTrace& t, std::string_view what, uint32_t tid,
                  std::string_view name) {
  put(out, "{\"name\":");
  put_string(out, what);
  fmt::format_to(std::back_inserter(out),
                 ",\"ph\":\"M\",\"pid\":{},\"tid\":{},\"args\":{{\"name\":", t.pid, tid);
  put_string(out, name);
  put(out, "}}");
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

std::string chrome_trace_json(const ProfileTrace& t) {
  Out out;
  put(out, "{\"traceEvents\":[\n");
  put_metadata(out, t, "process_name", 0, t.process_name);
  for (const ProfileThread& th : t.threads) {
    put(out, ",\n");
    put_metadata(out, t, "thread_name", th.tid, th.name);
  }
  for (const ProfileEvent& e : t.events) {
    put(out, ",\n");
    put_event(out, t, e);
  }
  fmt::format_to(
      std::back_inserter(out),
      "\n],\"displayTimeUnit\":\"ms\",\"otherData\":{{\"wall_ns\":{},\"dropped_events\":{}}}}}\n",
      t.wall_ns(), t.dropped_events);
  return fmt::to_string(out);
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

  Out out;
  auto app = std::back_inserter(out);
  fmt::format_to(app, "Runtime profile: wall time {:.3f} ms, {} events on {} threads",
                 t.wall_ns() / 1e6, t.events.size(), t.threads.size());
  if (t.dropped_events) fmt::format_to(app, ", {} events dropped", t.dropped_events);
  out.push_back('\n');
  fmt::format_to(app, "{:<{}}  {:<8} {:>8} {:>12} {:>11} {:>11} {:>11} {:>11} {:>7}\n", "name",
                 width, "category", "count", "total ms", "mean us", "p50 us", "p99 us", "max us",
                 "wall %");
  for (const ProfileStats& r : rows)
    fmt::format_to(
        app, "{:<{}}  {:<8} {:>8} {:>12.3f} {:>11.3f} {:>11.3f} {:>11.3f} {:>11.3f} {:>7.2f}\n",
        r.name, width, profile_category_name(r.category), r.count, r.total_ns / 1e6,
        r.mean_ns / 1e3, r.p50_ns / 1e3, r.p99_ns / 1e3, r.max_ns / 1e3, 100.0 * r.wall_share);

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
