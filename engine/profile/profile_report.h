// What a ProfileTrace becomes: a Chrome trace-event JSON file (the Samba
// profile; ui.perfetto.dev and chrome://tracing open it) and the runtime
// profile's summary table (ENABLE_RUNTIME_PERF=SUMMARY or DETAILED).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/profile/profiler.h"

namespace samba {

// The trace as Chrome trace-event JSON: {"traceEvents": [...]} with one
// "M" (metadata) event naming the process and one per thread, "X" complete
// events and "i" instant events. Timestamps ("ts", "dur") are microseconds
// since the capture started, printed with three decimals so the
// nanoseconds are exact.
std::string chrome_trace_json(const ProfileTrace& trace);
// Writes chrome_trace_json(trace) to `path` atomically; IoError names the path.
void write_chrome_trace(const ProfileTrace& trace, const std::string& path);

// Statistics of the complete events of one name. Percentiles are
// nearest-rank: p50 is the ceil(0.50 n)-th smallest duration, p99 the
// ceil(0.99 n)-th. wall_share is total / the capture's wall time; nested
// events and several threads can make the shares add up to more than 1.
struct ProfileStats {
  std::string_view name;
  ProfileCategory category = ProfileCategory::Samba;  // of the first event with this name
  int64_t count = 0;
  int64_t total_ns = 0;
  double mean_ns = 0;
  int64_t p50_ns = 0;
  int64_t p99_ns = 0;
  int64_t max_ns = 0;
  double wall_share = 0;
  // Sum of the events' "bytes" arguments (kernels: what they load and store;
  // transfers: what they copy); 0 when they carry none.
  double bytes = 0;

  // Bytes per nanosecond of event time, which is GB/s.
  double gb_per_s() const { return total_ns > 0 ? bytes / static_cast<double>(total_ns) : 0; }
};

// One row per event name, by total time (largest first; ties by name).
std::vector<ProfileStats> summarize(const ProfileTrace& trace);

// How much the runtime profile prints (ENABLE_RUNTIME_PERF).
enum class RuntimePerfMode { Off, Summary, Detailed };

// "SUMMARY" / "DETAILED" (any case) and "" (off); nullopt for anything else.
std::optional<RuntimePerfMode> parse_runtime_perf_mode(std::string_view text);
// Reads ENABLE_RUNTIME_PERF. A value that is not a mode is reported with a
// warning naming it and the accepted values, and profiling stays off.
RuntimePerfMode runtime_perf_mode_from_env();

// The summary table: a header (wall time, event and thread counts, the
// kernels' ISA level, then the machine's memcpy bandwidth, measured on the
// first summary of the process), then one row per summarize() entry with its
// GB/s and that rate's share of memcpy's where its events carry bytes.
// Detailed appends every event in time order.
std::string format_profile_summary(const ProfileTrace& trace,
                                   RuntimePerfMode mode = RuntimePerfMode::Summary);
// Writes format_profile_summary() to `path` atomically.
void write_profile_summary(const ProfileTrace& trace, RuntimePerfMode mode,
                           const std::string& path);

}  // namespace samba
