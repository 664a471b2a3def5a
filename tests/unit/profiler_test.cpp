#include "engine/profile/profiler.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>
#include <vector>

#include "engine/core/error.h"
#include "engine/core/log.h"
#include "engine/profile/memcpy_bandwidth.h"
#include "engine/profile/profile_events.h"
#include "engine/profile/profile_report.h"
#include "engine/profile/session_profiles.h"

using namespace samba;
using json = nlohmann::json;

namespace {

std::filesystem::path temp_dir(const std::string& name) {
  auto d = std::filesystem::temp_directory_path() /
           ("samba_profiler_test_" + std::to_string(::getpid())) / name;
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}

std::string read_text(const std::filesystem::path& p) {
  std::ifstream f(p);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

// Work that takes a visible amount of time without sleeping.
void spin_ns(int64_t ns) {
  const int64_t end = Profiler::now_ns() + ns;
  while (Profiler::now_ns() < end) {
  }
}

size_t count_named(const ProfileTrace& t, std::string_view name) {
  size_t n = 0;
  for (const auto& e : t.events) n += e.name == name;
  return n;
}

// A trace built by hand, so statistics can be checked against arithmetic.
ProfileTrace hand_trace(const std::vector<std::pair<std::string_view, int64_t>>& events,
                        int64_t wall_ns) {
  ProfileTrace t;
  t.process_name = "test";
  t.pid = 7;
  t.start_ns = 1000;
  t.end_ns = 1000 + wall_ns;
  int64_t at = t.start_ns;
  for (auto [name, dur] : events) {
    ProfileEvent e;
    e.name = name;
    e.start_ns = at;
    e.dur_ns = dur;
    e.tid = 1;
    e.category = ProfileCategory::Runtime;
    t.events.push_back(e);
    at += dur;
  }
  t.threads.push_back({1, "main"});
  return t;
}

// Removes every file the tests wrote (one directory per process).
class TempRoot : public ::testing::Environment {
 public:
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(std::filesystem::temp_directory_path() /
                                    ("samba_profiler_test_" + std::to_string(::getpid())),
                                ec);
  }
};
const auto* const kTempRoot = ::testing::AddGlobalTestEnvironment(new TempRoot);

}  // namespace

TEST(Profiler, NothingIsRecordedWithoutACapture) {
  Profiler p;
  EXPECT_FALSE(p.enabled(ProfileCategory::Samba));
  {
    ProfileScope s(p, "before", ProfileCategory::Samba);
    EXPECT_FALSE(s.active());
    s.arg("bytes", int64_t{5});
  }
  p.record_complete(ProfileCategory::Kernel, "direct", 0, 10);
  profile_instant(p, "instant");

  auto id = p.start();
  ProfileTrace t = p.stop(id);
  EXPECT_TRUE(t.events.empty()) << "events recorded while profiling was off leaked into a capture";
  EXPECT_TRUE(t.threads.empty());
  EXPECT_FALSE(p.enabled(ProfileCategory::Samba))
      << "stopping the only capture must disable recording";

  {
    ProfileScope s(p, "after", ProfileCategory::Samba);
    EXPECT_FALSE(s.active());
  }
  id = p.start();
  t = p.stop(id);
  EXPECT_TRUE(t.events.empty());
}

TEST(Profiler, CaptureSeesOnlyItsCategories) {
  Profiler p;
  auto id = p.start(category_bit(ProfileCategory::Runtime));
  EXPECT_TRUE(p.enabled(ProfileCategory::Runtime));
  EXPECT_FALSE(p.enabled(ProfileCategory::Samba));
  {
    ProfileScope s(p, "samba_event", ProfileCategory::Samba);
  }
  {
    ProfileScope s(p, "runtime_event", ProfileCategory::Runtime);
  }
  ProfileTrace t = p.stop(id);
  ASSERT_EQ(t.events.size(), 1u);
  EXPECT_EQ(t.events[0].name, "runtime_event");
  EXPECT_EQ(t.events[0].category, ProfileCategory::Runtime);
}

TEST(Profiler, BadCaptureArgumentsAreRefused) {
  Profiler p;
  EXPECT_THROW(p.start(0), Error);
  EXPECT_THROW(p.start(1u << 20), Error);
  try {
    p.stop(12345);
    FAIL() << "stopping an unknown capture must throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Status::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("12345"), std::string::npos) << e.what();
  }
  auto id = p.start();
  EXPECT_TRUE(p.running(id));
  p.stop(id);
  EXPECT_FALSE(p.running(id));
  EXPECT_THROW(p.stop(id), Error) << "a capture can be stopped once";
}

TEST(Profiler, EventsOfAPreviousCaptureDoNotReappear) {
  Profiler p;
  auto a = p.start();
  for (int i = 0; i < 5000; ++i) ProfileScope s(p, "first");  // more than one chunk
  ProfileTrace ta = p.stop(a);
  EXPECT_EQ(count_named(ta, "first"), 5000u);

  auto b = p.start();
  for (int i = 0; i < 3; ++i) ProfileScope s(p, "second");
  ProfileTrace tb = p.stop(b);
  EXPECT_EQ(count_named(tb, "first"), 0u);
  EXPECT_EQ(count_named(tb, "second"), 3u);
  EXPECT_EQ(tb.events.size(), 3u);
}

TEST(Profiler, OverlappingCapturesEachSeeTheirWindow) {
  Profiler p;
  auto outer = p.start(kAllProfileCategories);
  {
    ProfileScope s(p, profile_events::kSetPef, ProfileCategory::Samba);
  }
  auto inner = p.start(kRuntimeProfileCategories);
  {
    ProfileScope s(p, profile_events::kRun, ProfileCategory::Runtime);
  }
  {
    ProfileScope s(p, "fwd_section", ProfileCategory::Section);
  }
  {
    ProfileScope s(p, profile_events::kSessionRun, ProfileCategory::Samba);
  }
  ProfileTrace ti = p.stop(inner);
  EXPECT_TRUE(p.enabled(ProfileCategory::Runtime))
      << "the outer capture still wants every category";
  {
    ProfileScope s(p, profile_events::kGetTensors, ProfileCategory::Runtime);
  }
  ProfileTrace to = p.stop(outer);

  std::set<std::string_view> inner_names, outer_names;
  for (auto& e : ti.events) inner_names.insert(e.name);
  for (auto& e : to.events) outer_names.insert(e.name);
  EXPECT_EQ(inner_names, (std::set<std::string_view>{"PyRT_RUN", "fwd_section"}));
  EXPECT_EQ(outer_names, (std::set<std::string_view>{"SAMBA_SET_PEF", "PyRT_RUN", "fwd_section",
                                                     "SAMBA_SESSION_RUN", "PyRT_GET_TENSORS"}));
  EXPECT_LE(to.start_ns, ti.start_ns);
  EXPECT_GE(to.end_ns, ti.end_ns);
}

// Four threads record nested scopes; the JSON must parse, carry the right
// fields, and per thread the complete events must be in time order and
// either disjoint or nested, never partly overlapping.
TEST(Profiler, FourThreadsNestedScopesMakeValidChromeJson) {
  Profiler p({.process_name = "profiler_test"});
  const std::string_view kernel_name = p.intern(std::string("gemm_") + "kernel");
  constexpr int kThreads = 4, kIters = 300;
  auto id = p.start();
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      p.set_thread_name("worker " + std::to_string(t));
      for (int i = 0; i < kIters; ++i) {
        ProfileScope run(p, profile_events::kRun, ProfileCategory::Runtime);
        run.arg("iteration", int64_t{i});
        {
          ProfileScope section(p, "FWD", ProfileCategory::Section);
          section.arg(profile_events::kArgSectionId, int64_t{t})
              .arg(profile_events::kArgMicroBatch, int64_t{i % 4});
          {
            ProfileScope k(p, kernel_name, ProfileCategory::Kernel);
            k.arg(profile_events::kArgBytes, 1.5e6);
            spin_ns(200);
          }
          profile_instant(p, "micro_batch_done", ProfileCategory::Section);
        }
        spin_ns(100);
      }
    });
  for (auto& th : threads) th.join();
  ProfileTrace trace = p.stop(id);

  EXPECT_EQ(trace.events.size(), size_t{kThreads} * kIters * 4);
  EXPECT_EQ(trace.threads.size(), size_t{kThreads});
  EXPECT_EQ(trace.dropped_events, 0u);

  json j = json::parse(chrome_trace_json(trace));
  ASSERT_TRUE(j.contains("traceEvents"));
  const json& evs = j["traceEvents"];
  std::map<int64_t, std::vector<std::pair<double, double>>> complete_by_tid;
  std::map<int64_t, std::string> thread_names;
  std::map<std::string, int> counts;
  bool saw_process_name = false;
  for (const json& e : evs) {
    ASSERT_TRUE(e.contains("ph") && e.contains("pid") && e.contains("tid") && e.contains("name"))
        << e.dump();
    EXPECT_EQ(e["pid"].get<int64_t>(), trace.pid);
    const std::string ph = e["ph"];
    if (ph == "M") {
      if (e["name"] == "process_name") {
        saw_process_name = true;
        EXPECT_EQ(e["args"]["name"], "profiler_test");
      } else {
        ASSERT_EQ(e["name"], "thread_name");
        thread_names[e["tid"].get<int64_t>()] = e["args"]["name"];
      }
      continue;
    }
    counts[e["name"]]++;
    ASSERT_TRUE(e.contains("ts") && e.contains("cat")) << e.dump();
    EXPECT_GE(e["ts"].get<double>(), 0.0);
    if (ph == "X") {
      ASSERT_TRUE(e.contains("dur"));
      complete_by_tid[e["tid"].get<int64_t>()].push_back(
          {e["ts"].get<double>(), e["dur"].get<double>()});
      if (e["name"] == "FWD") {
        EXPECT_EQ(e["cat"], "section");
        EXPECT_TRUE(e["args"].contains("section_id"));
        EXPECT_TRUE(e["args"].contains("micro_batch"));
      }
      if (e["name"] == "gemm_kernel") {
        EXPECT_EQ(e["cat"], "kernel");
        EXPECT_DOUBLE_EQ(e["args"]["bytes"].get<double>(), 1.5e6);
        EXPECT_GE(e["dur"].get<double>(), 0.2) << "the kernel spun for 200 ns";
      }
    } else {
      EXPECT_EQ(ph, "i");
      EXPECT_EQ(e["s"], "t");
    }
  }
  EXPECT_TRUE(saw_process_name);
  EXPECT_EQ(counts["PyRT_RUN"], kThreads * kIters);
  EXPECT_EQ(counts["FWD"], kThreads * kIters);
  EXPECT_EQ(counts["gemm_kernel"], kThreads * kIters);
  EXPECT_EQ(counts["micro_batch_done"], kThreads * kIters);
  ASSERT_EQ(complete_by_tid.size(), size_t{kThreads});
  for (auto& [tid, spans] : complete_by_tid) {
    EXPECT_EQ(thread_names[tid].rfind("worker ", 0), 0u)
        << "thread " << tid << " is named '" << thread_names[tid] << "'";
    // Stack check: each event must start after the previous one started
    // and, relative to the events still open, either nest inside the
    // innermost or begin after it ended.
    std::vector<double> open_ends;
    double last_start = -1;
    for (auto [ts, dur] : spans) {
      ASSERT_GE(ts, last_start) << "events of thread " << tid << " are not in time order";
      last_start = ts;
      while (!open_ends.empty() && ts >= open_ends.back()) open_ends.pop_back();
      if (!open_ends.empty()) {
        ASSERT_LE(ts + dur, open_ends.back() + 1e-9)
            << "event at " << ts << " overlaps its parent partly";
      }
      open_ends.push_back(ts + dur);
    }
  }
}

// Captures start and stop while other threads record: every trace holds
// only events of its own window, and nothing is torn.
TEST(Profiler, CapturesStartAndStopWhileThreadsRecord) {
  Profiler p;
  std::atomic<bool> done{false};
  std::atomic<int> running{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t)
    threads.emplace_back([&, t] {
      int64_t i = 0;
      running.fetch_add(1);
      while (!done.load()) {
        ProfileScope s(p, "loop", t == 0 ? ProfileCategory::Kernel : ProfileCategory::Section);
        s.arg("i", i++);
      }
    });
  while (running.load() < 3) std::this_thread::yield();
  size_t total = 0;
  // 50 windows; on a loaded machine the recording threads may not run in
  // any of them, so capturing goes on until one has seen an event (a
  // profiler that never captures still fails, after 10 s).
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (int round = 0; round < 50 || (total == 0 && std::chrono::steady_clock::now() < give_up); ++round) {
    auto id = p.start(round % 2 ? kAllProfileCategories : category_bit(ProfileCategory::Kernel));
    spin_ns(100'000);
    ProfileTrace t = p.stop(id);
    total += t.events.size();
    for (const ProfileEvent& e : t.events) {
      ASSERT_EQ(e.name, "loop");
      ASSERT_GE(e.start_ns, t.start_ns);
      ASSERT_LE(e.start_ns, t.end_ns);
      ASSERT_EQ(e.num_args, 1);
      ASSERT_EQ(e.args[0].key(), "i");
      ASSERT_TRUE(round % 2 == 1 || e.category == ProfileCategory::Kernel);
    }
  }
  done = true;
  for (auto& th : threads) th.join();
  EXPECT_GT(total, 0u);
}

TEST(Profiler, JsonTimestampsAreExactAndStringsEscaped) {
  Profiler p;
  auto id = p.start();
  const int64_t t0 = Profiler::now_ns();  // inside the capture window
  const std::string_view odd = p.intern(std::string("quote\" slash\\ tab\t nl\n bad\xff end"));
  const std::array<ProfileArg, 3> args{
      ProfileArg::integer("n", -42), ProfileArg::text("s", odd),
      ProfileArg::number("inf", std::numeric_limits<double>::infinity())};
  p.record_complete(ProfileCategory::User, odd, t0, t0 + 1'234'567, args);
  ProfileTrace t = p.stop(id);
  ASSERT_EQ(t.events.size(), 1u);
  const std::string text = chrome_trace_json(t);
  EXPECT_NE(text.find("\"dur\":1234.567"), std::string::npos) << text;

  json j = json::parse(text);
  const json& e = j["traceEvents"].back();
  // Microseconds that give back the exact nanosecond.
  const int64_t rel = t0 - t.start_ns;
  EXPECT_EQ(std::llround(e["ts"].get<double>() * 1000.0), rel) << text;
  EXPECT_EQ(e["name"], "quote\" slash\\ tab\t nl\n bad\xef\xbf\xbd end");
  EXPECT_EQ(e["cat"], "user");
  EXPECT_EQ(e["args"]["n"], -42);
  EXPECT_EQ(e["args"]["s"], e["name"]);
  EXPECT_EQ(e["args"]["inf"], "inf");
}

TEST(Profiler, InternedNamesOutliveTheProfiler) {
  ProfileTrace t;
  std::string_view a1, a2;
  {
    Profiler p;
    std::string dynamic = "section_" + std::to_string(17);
    a1 = p.intern(dynamic);
    a2 = p.intern("section_17");
    EXPECT_EQ(a1.data(), a2.data()) << "interning the same text twice must give the same string";
    EXPECT_NE(a1.data(), dynamic.data());
    dynamic.assign("overwritten");
    auto id = p.start();
    {
      ProfileScope s(p, a1, ProfileCategory::Section);
    }
    t = p.stop(id);
  }
  ASSERT_EQ(t.events.size(), 1u);
  EXPECT_EQ(t.events[0].name, "section_17");
  EXPECT_NE(chrome_trace_json(t).find("section_17"), std::string::npos);
}

TEST(Profiler, EventsBeyondTheThreadLimitAreDroppedAndCounted) {
  Profiler p({.process_name = "samba", .max_events_per_thread = 10});
  auto id = p.start();
  for (int i = 0; i < 25; ++i) profile_instant(p, "tick");
  ProfileTrace t = p.stop(id);
  EXPECT_EQ(t.events.size(), 10u);
  EXPECT_EQ(t.dropped_events, 15u);
  EXPECT_NE(format_profile_summary(t).find("15 events dropped"), std::string::npos);
}

// Threads that come and go reuse the buffers of exited threads; every event
// keeps the id of the thread that recorded it.
TEST(Profiler, ShortLivedThreadsKeepTheirEvents) {
  Profiler p;
  auto id = p.start();
  std::set<uint32_t> tids;
  std::mutex mu;
  for (int round = 0; round < 10; ++round) {
    std::thread th([&] {
      {
        ProfileScope s(p, "short", ProfileCategory::User);
      }
      std::lock_guard<std::mutex> lock(mu);
      tids.insert(static_cast<uint32_t>(::gettid()));
    });
    th.join();
  }
  ProfileTrace t = p.stop(id);
  ASSERT_EQ(t.events.size(), 10u);
  std::set<uint32_t> seen;
  for (auto& e : t.events) seen.insert(e.tid);
  EXPECT_EQ(seen, tids);
}

TEST(ProfileSummary, StatisticsMatchHandComputedValues) {
  // A: durations 1..100 us; B: 4 events of 1000 us; C: one of 10 us.
  std::vector<std::pair<std::string_view, int64_t>> evs;
  for (int i = 1; i <= 100; ++i) evs.push_back({"A", i * 1000});
  for (int i = 0; i < 4; ++i) evs.push_back({"B", 1'000'000});
  evs.push_back({"C", 10'000});
  const int64_t wall = 10'000'000;  // 10 ms
  ProfileTrace t = hand_trace(evs, wall);
  ProfileEvent inst;
  inst.name = "A";
  inst.phase = ProfilePhase::Instant;
  inst.start_ns = 2000;
  t.events.push_back(inst);  // instants do not count toward durations

  // Totals: A = 5050 us, B = 4000 us, C = 10 us -> order A, B, C.
  auto rows = summarize(t);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].name, "A");
  EXPECT_EQ(rows[1].name, "B");
  EXPECT_EQ(rows[2].name, "C");
  std::map<std::string_view, ProfileStats> by;
  for (auto& r : rows) by[r.name] = r;
  EXPECT_EQ(by["A"].count, 100);
  EXPECT_EQ(by["A"].total_ns, 5'050'000);
  EXPECT_DOUBLE_EQ(by["A"].mean_ns, 50'500.0);
  EXPECT_EQ(by["A"].p50_ns, 50'000);  // ceil(0.5 * 100) = 50th smallest
  EXPECT_EQ(by["A"].p99_ns, 99'000);  // ceil(0.99 * 100) = 99th smallest
  EXPECT_EQ(by["A"].max_ns, 100'000);
  EXPECT_DOUBLE_EQ(by["A"].wall_share, 0.505);
  EXPECT_EQ(by["B"].count, 4);
  EXPECT_EQ(by["B"].p50_ns, 1'000'000);
  EXPECT_DOUBLE_EQ(by["B"].wall_share, 0.4);
  EXPECT_EQ(by["C"].count, 1);
  EXPECT_EQ(by["C"].p50_ns, 10'000);
  EXPECT_EQ(by["C"].p99_ns, 10'000);
  EXPECT_EQ(by["A"].category, ProfileCategory::Runtime);
}

TEST(ProfileSummary, RowsAreSortedByTotalAndFormatted) {
  std::vector<std::pair<std::string_view, int64_t>> evs = {
      {"small", 1000}, {"big", 3'000'000}, {"medium", 500'000}, {"medium", 500'000}};
  ProfileTrace t = hand_trace(evs, 8'000'000);
  auto rows = summarize(t);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].name, "big");
  EXPECT_EQ(rows[1].name, "medium");
  EXPECT_EQ(rows[2].name, "small");

  const std::string s = format_profile_summary(t, RuntimePerfMode::Summary);
  EXPECT_NE(s.find("wall time 8.000 ms"), std::string::npos) << s;
  const size_t big = s.find("big"), medium = s.find("medium"), small = s.find("small");
  ASSERT_NE(big, std::string::npos);
  EXPECT_LT(big, medium);
  EXPECT_LT(medium, small);
  // big: count 1, total 3.000 ms, mean 3000 us, 37.50 % of the wall time.
  const std::string big_line = s.substr(big, s.find('\n', big) - big);
  EXPECT_NE(big_line.find("3.000"), std::string::npos) << big_line;
  EXPECT_NE(big_line.find("3000.000"), std::string::npos) << big_line;
  EXPECT_NE(big_line.find("37.50"), std::string::npos) << big_line;
  EXPECT_EQ(s.find("Events in time order"), std::string::npos);

  const std::string d = format_profile_summary(t, RuntimePerfMode::Detailed);
  EXPECT_NE(d.find("Events in time order"), std::string::npos);
  EXPECT_EQ(std::count(d.begin(), d.end(), '\n'), std::count(s.begin(), s.end(), '\n') + 3 + 4);
}

// Two kernel events of 1 and 3 ms moving 2 MB each: 4 MB in 4 ms is
// 1.00 GB/s; an event without bytes shows dashes.
TEST(ProfileSummary, BytesGiveGbPerSecondAndShareOfMemcpy) {
  ProfileTrace t = hand_trace({{"k", 1'000'000}, {"k", 3'000'000}, {"plain", 500'000}}, 5'000'000);
  for (ProfileEvent& e : t.events) {
    if (e.name != "k") continue;
    e.category = ProfileCategory::Kernel;
    e.args[e.num_args++] = ProfileArg::integer(profile_events::kArgBytes, 2'000'000);
  }
  auto rows = summarize(t);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].bytes, 4e6);
  EXPECT_DOUBLE_EQ(rows[0].gb_per_s(), 1.0);
  EXPECT_EQ(rows[1].bytes, 0);

  const std::string s = format_profile_summary(t);
  const size_t k = s.find("\nk ") + 1;
  const std::string k_line = s.substr(k, s.find('\n', k) - k);
  const double memcpy_gb_per_s = memcpy_bandwidth().bytes_per_s * 1e-9;
  EXPECT_NE(k_line.find(fmt::format(" {:>8.2f} {:>8.1f}", 1.0, 100.0 / memcpy_gb_per_s)),
            std::string::npos)
      << s;
  const size_t plain = s.find("\nplain ");
  EXPECT_EQ(s.substr(s.find('\n', plain + 1) - 3, 3), "  -") << s;
  EXPECT_NE(s.find(fmt::format("memcpy bandwidth {:.2f} GB/s", memcpy_gb_per_s)),
            std::string::npos)
      << s;
}

TEST(ProfileSummary, EmptyTraceFormats) {
  ProfileTrace t = hand_trace({}, 0);
  EXPECT_TRUE(summarize(t).empty());
  EXPECT_NE(format_profile_summary(t).find("0 events"), std::string::npos);
  json parsed;
  EXPECT_NO_THROW(parsed = json::parse(chrome_trace_json(t)));
  EXPECT_TRUE(parsed.is_object());
}

TEST(ProfileFiles, WritesAtomicallyAndReadsBack) {
  auto dir = temp_dir("write");
  ProfileTrace t = hand_trace({{"A", 1000}, {"B", 2000}}, 5000);
  const auto trace_path = dir / "trace.json";
  write_chrome_trace(t, trace_path.string());
  json j = json::parse(read_text(trace_path));
  EXPECT_EQ(j["traceEvents"].size(), 4u);  // process, thread, A, B
  const auto summary_path = dir / "summary.txt";
  write_profile_summary(t, RuntimePerfMode::Summary, summary_path.string());
  EXPECT_EQ(read_text(summary_path), format_profile_summary(t));
  for (auto& entry : std::filesystem::directory_iterator(dir))
    EXPECT_EQ(entry.path().filename().string().find(".tmp"), std::string::npos)
        << "temporary left: " << entry.path();
}

TEST(ProfileFiles, UnwritablePathsGiveIoErrorNamingThePath) {
  auto dir = temp_dir("unwritable");
  ProfileTrace t = hand_trace({{"A", 1000}}, 5000);
  const std::string missing = (dir / "no_such_dir" / "trace.json").string();
  try {
    write_chrome_trace(t, missing);
    FAIL() << "writing into a missing directory must fail";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Status::IoError);
    EXPECT_NE(std::string(e.what()).find(missing), std::string::npos) << e.what();
  }
  const std::string is_dir = dir.string();
  try {
    write_profile_summary(t, RuntimePerfMode::Summary, is_dir);
    FAIL() << "writing over a directory must fail";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Status::IoError);
    EXPECT_NE(std::string(e.what()).find(is_dir), std::string::npos) << e.what();
  }
  EXPECT_TRUE(std::filesystem::is_directory(dir));
  // A directory where no file can be created, whoever runs the test.
  const std::string in_proc = "/proc/samba_profiler_test_trace.json";
  try {
    write_chrome_trace(t, in_proc);
    FAIL() << "writing into /proc must fail";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Status::IoError);
    EXPECT_NE(std::string(e.what()).find(in_proc), std::string::npos) << e.what();
  }
}

TEST(ProfileFiles, ReadOnlyDirectoryGivesIoError) {
  if (::geteuid() == 0) GTEST_SKIP() << "running as root: directory permissions do not stop writes";
  auto dir = temp_dir("readonly");
  std::filesystem::permissions(
      dir, std::filesystem::perms::owner_read | std::filesystem::perms::owner_exec);
  const std::string path = (dir / "trace.json").string();
  try {
    write_chrome_trace(hand_trace({{"A", 1}}, 10), path);
    FAIL() << "writing into a read-only directory must fail";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Status::IoError);
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
  std::filesystem::permissions(dir, std::filesystem::perms::owner_all);
}

TEST(RuntimePerfMode, ParsesTheEnvironmentVariable) {
  EXPECT_EQ(parse_runtime_perf_mode("SUMMARY"), RuntimePerfMode::Summary);
  EXPECT_EQ(parse_runtime_perf_mode("summary"), RuntimePerfMode::Summary);
  EXPECT_EQ(parse_runtime_perf_mode("Detailed"), RuntimePerfMode::Detailed);
  EXPECT_EQ(parse_runtime_perf_mode(""), RuntimePerfMode::Off);
  EXPECT_EQ(parse_runtime_perf_mode("SUMMARIES"), std::nullopt);
  EXPECT_EQ(parse_runtime_perf_mode("1"), std::nullopt);

  std::vector<std::string> warnings;
  std::mutex mu;
  log::set_sink([&](log::Level l, std::string_view m) {
    std::lock_guard<std::mutex> lock(mu);
    if (l == log::Level::Warning) warnings.emplace_back(m);
  });
  ::unsetenv("ENABLE_RUNTIME_PERF");
  EXPECT_EQ(runtime_perf_mode_from_env(), RuntimePerfMode::Off);
  ::setenv("ENABLE_RUNTIME_PERF", "DETAILED", 1);
  EXPECT_EQ(runtime_perf_mode_from_env(), RuntimePerfMode::Detailed);
  EXPECT_TRUE(warnings.empty());
  ::setenv("ENABLE_RUNTIME_PERF", "verbose", 1);
  EXPECT_EQ(runtime_perf_mode_from_env(), RuntimePerfMode::Off);
  ::unsetenv("ENABLE_RUNTIME_PERF");
  log::set_sink({});
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("'verbose'"), std::string::npos) << warnings[0];
  EXPECT_NE(warnings[0].find("SUMMARY or DETAILED"), std::string::npos) << warnings[0];
}

TEST(ProfileEvents, SessionRunNameJoinsUpperCasedSectionTypes) {
  std::vector<std::string_view> types = {"fwd", "Bckwd", "OPT"};
  EXPECT_EQ(profile_events::session_run_name(types), "SAMBA_SESSION_RUN_FWD_BCKWD_OPT");
  std::vector<std::string> one = {"fwd"};
  EXPECT_EQ(profile_events::session_run_name(one), "SAMBA_SESSION_RUN_FWD");
  EXPECT_EQ(profile_events::session_run_name(std::span<const std::string_view>{}),
            "SAMBA_SESSION_RUN");
  EXPECT_EQ(profile_events::kSetPef, "SAMBA_SET_PEF");
  EXPECT_EQ(profile_events::kInitRuntime, "SAMBA_INIT_RUNTIME");
  EXPECT_EQ(profile_events::kGetTensors, "PyRT_GET_TENSORS");
  EXPECT_EQ(profile_events::kSetTensors, "PyRT_SET_TENSORS");
  EXPECT_EQ(profile_events::kSetPinnedInputTensors, "PyRT_SET_PINNED_INPUT_TENSORS");
  EXPECT_EQ(profile_events::kRun, "PyRT_RUN");
}

TEST(SessionProfiles, SambaAndRuntimeProfilesFollowTheSeed) {
  auto dir = temp_dir("session");
  SessionProfiles sp;
  Profiler& p = sp.profiler();
  EXPECT_TRUE(sp.end_samba_profile("").events.empty())
      << "ending a profile that is not running is harmless";
  EXPECT_FALSE(sp.end_runtime_profile("").recorded);

  // The runtime profile is off unless asked for.
  EXPECT_FALSE(sp.start_runtime_profile(RuntimePerfMode::Off, true));
  EXPECT_FALSE(sp.runtime_profile_running());

  sp.start_samba_profile();
  EXPECT_THROW(sp.start_samba_profile(), Error);
  {
    ProfileScope s(p, profile_events::kSetPef, ProfileCategory::Samba);
  }
  ASSERT_TRUE(sp.start_runtime_profile(RuntimePerfMode::Summary, true));
  EXPECT_THROW(sp.start_runtime_profile(RuntimePerfMode::Summary, true), Error);
  {
    ProfileScope run(p, profile_events::kSessionRun, ProfileCategory::Samba);
    ProfileScope rt(p, profile_events::kRun, ProfileCategory::Runtime);
    ProfileScope sec(p, "fwd_0", ProfileCategory::Section);
  }
  const auto log_file = dir / "runtime.log";
  RuntimeProfileResult r = sp.end_runtime_profile(log_file.string());
  EXPECT_TRUE(r.recorded);
  EXPECT_TRUE(r.timer_enabled);
  EXPECT_EQ(r.mode, RuntimePerfMode::Summary);
  EXPECT_GT(r.wall_ns, 0);
  EXPECT_EQ(read_text(log_file), r.summary);
  EXPECT_NE(r.summary.find("PyRT_RUN"), std::string::npos) << r.summary;
  EXPECT_NE(r.summary.find("fwd_0"), std::string::npos) << r.summary;
  EXPECT_EQ(r.summary.find("SAMBA_SESSION_RUN"), std::string::npos)
      << "frontend events are not runtime events";

  const auto trace_file = dir / "samba.json";
  ProfileTrace t = sp.end_samba_profile(trace_file.string());
  EXPECT_FALSE(sp.samba_profile_running());
  EXPECT_EQ(t.events.size(), 4u);
  json j = json::parse(read_text(trace_file));
  std::set<std::string> names;
  for (auto& e : j["traceEvents"])
    if (e["ph"] == "X") names.insert(e["name"]);
  EXPECT_EQ(names,
            (std::set<std::string>{"SAMBA_SET_PEF", "SAMBA_SESSION_RUN", "PyRT_RUN", "fwd_0"}));

  ASSERT_TRUE(sp.start_runtime_profile(RuntimePerfMode::Detailed, false));
  {
    ProfileScope k(p, "gemm", ProfileCategory::Kernel);
  }
  r = sp.end_runtime_profile("");
  EXPECT_FALSE(r.timer_enabled);
  EXPECT_NE(r.summary.find("Events in time order"), std::string::npos);
}
