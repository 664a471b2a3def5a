// Profiler: records timed events from any number of threads for the Samba
// profile (samba_profile: frontend and runtime calls, written as a Chrome
// trace) and the runtime profile (ENABLE_RUNTIME_PERF: sections and kernels,
// printed as a summary table).
//
// Recording is driven by captures. start(categories) begins one, stop(id)
// ends it and returns the ProfileTrace of the events it saw; captures may
// overlap (a runtime profile inside a Samba profile), each seeing the events
// of its categories recorded between its start and its stop.
//
// Cost. With no capture of an event's category running, a ProfileScope is
// one relaxed atomic load. With one running, an event is two clock reads and
// a copy into the calling thread's own buffer (preallocated chunks, reused
// across captures): no lock, no allocation once the thread has warmed up.
//
// Names and string arguments are not copied: they must be string literals
// or strings returned by intern(), which keeps them alive for the profiler's
// lifetime (and for that of every trace it returned).
//
// Thread safety: every member may be called from any thread at once.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace samba {

// Values are stable: they appear in traces as "cat" names.
enum class ProfileCategory : uint8_t {
  Samba = 0,     // the frontend calls of the seed's Samba profiler (SAMBA_*)
  Runtime = 1,   // runtime calls (PyRT_*: set/get tensors, run)
  Section = 2,   // one run of a section (per micro-batch when pipelined)
  Kernel = 3,    // one kernel of a section
  Transfer = 4,  // host <-> device copies
  User = 5,      // events an application adds
};
inline constexpr int kNumProfileCategories = 6;

using ProfileCategoryMask = uint32_t;
constexpr ProfileCategoryMask category_bit(ProfileCategory c) {
  return 1u << static_cast<unsigned>(c);
}
inline constexpr ProfileCategoryMask kAllProfileCategories = (1u << kNumProfileCategories) - 1;
// What the runtime profile (start_runtime_profile) captures.
inline constexpr ProfileCategoryMask kRuntimeProfileCategories =
    category_bit(ProfileCategory::Runtime) | category_bit(ProfileCategory::Section) |
    category_bit(ProfileCategory::Kernel) | category_bit(ProfileCategory::Transfer);

std::string_view profile_category_name(ProfileCategory c);  // "samba", "runtime", ...

// A named value attached to an event (section id, micro-batch, bytes, ...).
// Trivially constructible so an unused argument array costs nothing. Keys
// and string values must be literals or interned.
struct ProfileArg {
  enum class Kind : uint8_t { Int, Float, String };

  const char* key_data;
  uint32_t key_size;
  Kind kind;
  union {
    int64_t i;
    double f;
    struct {
      const char* data;
      size_t size;
    } s;
  };

  static ProfileArg integer(std::string_view key, int64_t v) {
    ProfileArg a = make(key, Kind::Int);
    a.i = v;
    return a;
  }
  static ProfileArg number(std::string_view key, double v) {
    ProfileArg a = make(key, Kind::Float);
    a.f = v;
    return a;
  }
  static ProfileArg text(std::string_view key, std::string_view v) {
    ProfileArg a = make(key, Kind::String);
    a.s.data = v.data();
    a.s.size = v.size();
    return a;
  }
  std::string_view key() const { return {key_data, key_size}; }
  std::string_view str() const { return {s.data, s.size}; }

 private:
  static ProfileArg make(std::string_view key, Kind k) {
    ProfileArg a;
    a.key_data = key.data();
    a.key_size = static_cast<uint32_t>(key.size());
    a.kind = k;
    return a;
  }
};
inline constexpr int kMaxProfileArgs = 3;

enum class ProfilePhase : uint8_t { Complete = 0, Instant = 1 };

struct ProfileEvent {
  std::string_view name;
  int64_t start_ns = 0;  // Profiler::now_ns() clock
  int64_t dur_ns = 0;    // 0 for an instant
  uint32_t tid = 0;      // the operating system's thread id
  ProfileCategory category = ProfileCategory::Samba;
  ProfilePhase phase = ProfilePhase::Complete;
  uint8_t num_args = 0;
  std::array<ProfileArg, kMaxProfileArgs> args;

  int64_t end_ns() const { return start_ns + dur_ns; }
  std::span<const ProfileArg> arg_list() const { return {args.data(), num_args}; }
};

struct ProfileThread {
  uint32_t tid = 0;
  std::string name;
};

// The events one capture saw, independent of the profiler that recorded
// them. Events are ordered by thread, then start time, an enclosing event
// before the events it contains.
struct ProfileTrace {
  std::string process_name;
  int64_t pid = 0;
  int64_t start_ns = 0;  // when the capture started
  int64_t end_ns = 0;    // when it stopped
  ProfileCategoryMask categories = 0;
  std::vector<ProfileEvent> events;
  std::vector<ProfileThread> threads;   // every thread that has an event, by tid
  uint64_t dropped_events = 0;          // lost to the per-thread event limit
  std::shared_ptr<const void> strings;  // keeps interned names alive

  int64_t wall_ns() const { return end_ns - start_ns; }
};

struct ProfilerOptions {
  std::string process_name = "samba";
  // Events one thread keeps between two times no capture is running; more
  // are dropped (and counted) rather than letting a forgotten capture eat
  // the memory. An event takes about 200 bytes.
  size_t max_events_per_thread = size_t{1} << 20;
};

class Profiler {
 public:
  using CaptureId = uint64_t;

  explicit Profiler(ProfilerOptions options = {});
  ~Profiler();
  Profiler(const Profiler&) = delete;
  Profiler& operator=(const Profiler&) = delete;

  // Whether a running capture wants events of category `c`.
  bool enabled(ProfileCategory c) const {
    return (mask_.load(std::memory_order_relaxed) & category_bit(c)) != 0;
  }

  // Begins a capture of `categories`; the id is what stop() takes.
  CaptureId start(ProfileCategoryMask categories = kAllProfileCategories);
  // Ends capture `id` and returns what it saw; throws InvalidArgument when
  // `id` is not running. Warns when events were dropped.
  ProfileTrace stop(CaptureId id);
  bool running(CaptureId id) const;

  // A copy of `s` that lives as long as the profiler and its traces. Call it
  // once per dynamic name (at PEF load), not per event.
  std::string_view intern(std::string_view s);
  // Names the calling thread in traces (default: its system name).
  void set_thread_name(std::string_view name);

  // Records an event; ProfileScope and profile_instant() call these. Both do
  // nothing unless `c` is enabled. At most kMaxProfileArgs arguments are kept.
  void record_complete(ProfileCategory c, std::string_view name, int64_t start_ns, int64_t end_ns,
                       std::span<const ProfileArg> args = {});
  void record_instant(ProfileCategory c, std::string_view name,
                      std::span<const ProfileArg> args = {});

  // Monotonic nanoseconds (the steady clock) used for every timestamp.
  static int64_t now_ns();

  struct State;  // defined in profiler.cpp

 private:
  void append(ProfileCategory c, ProfilePhase ph, std::string_view name, int64_t start_ns,
              int64_t dur_ns, std::span<const ProfileArg> args);

  std::atomic<ProfileCategoryMask> mask_{0};
  std::unique_ptr<State> state_;
};

// Times the enclosing block as one complete event, when its category is
// enabled at construction.
class ProfileScope {
 public:
  ProfileScope(Profiler& p, std::string_view name, ProfileCategory c = ProfileCategory::Samba) {
    if (p.enabled(c)) {
      profiler_ = &p;
      name_ = name;
      category_ = c;
      start_ns_ = Profiler::now_ns();
    }
  }
  ~ProfileScope() {
    if (profiler_) finish();
  }
  ProfileScope(const ProfileScope&) = delete;
  ProfileScope& operator=(const ProfileScope&) = delete;

  bool active() const { return profiler_ != nullptr; }

  // Attach arguments; ignored when inactive or when kMaxProfileArgs are set.
  ProfileScope& arg(std::string_view key, int64_t v) { return add(ProfileArg::integer(key, v)); }
  ProfileScope& arg(std::string_view key, double v) { return add(ProfileArg::number(key, v)); }
  ProfileScope& arg(std::string_view key, std::string_view v) {
    return add(ProfileArg::text(key, v));
  }

 private:
  ProfileScope& add(const ProfileArg& a) {
    if (profiler_ && num_args_ < kMaxProfileArgs) args_[num_args_++] = a;
    return *this;
  }
  void finish() {
    profiler_->record_complete(category_, name_, start_ns_, Profiler::now_ns(),
                               {args_.data(), num_args_});
  }

  Profiler* profiler_ = nullptr;
  std::string_view name_;
  int64_t start_ns_;
  ProfileCategory category_;
  uint8_t num_args_ = 0;
  std::array<ProfileArg, kMaxProfileArgs> args_;
};

// Records an instant event when `c` is enabled.
inline void profile_instant(Profiler& p, std::string_view name,
                            ProfileCategory c = ProfileCategory::Samba,
                            std::span<const ProfileArg> args = {}) {
  if (p.enabled(c)) p.record_instant(c, name, args);
}

}  // namespace samba
