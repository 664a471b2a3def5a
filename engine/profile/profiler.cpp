#include "engine/profile/profiler.h"

#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <mutex>
#include <unordered_set>

#include "engine/core/error.h"
#include "engine/core/log.h"

namespace samba {

std::string_view profile_category_name(ProfileCategory c) {
  switch (c) {
    case ProfileCategory::Samba:
      return "samba";
    case ProfileCategory::Runtime:
      return "runtime";
    case ProfileCategory::Section:
      return "section";
    case ProfileCategory::Kernel:
      return "kernel";
    case ProfileCategory::Transfer:
      return "transfer";
    case ProfileCategory::User:
      return "user";
  }
  return "unknown";
}

namespace {

// Events per chunk: big enough that a new chunk is rare, small enough that
// an idle thread's first chunk (~400 KiB) is not a burden.
constexpr uint32_t kChunkEvents = 2048;

// A chunk is written only by the thread that owns its buffer. `size` is
// published with release after the event is written, so a collector that
// reads `size` with acquire sees complete events below it.
struct Chunk {
  std::atomic<uint32_t> size{0};
  std::atomic<Chunk*> next{nullptr};
  ProfileEvent events[kChunkEvents];
};

// One thread's events. Chunks are kept (and reused) for the buffer's life.
// `epoch` says which recording period the chunks hold: the owner resets its
// own buffer lazily when it first records in a new period, so stopping a
// capture never has to touch another thread's memory.
struct ThreadBuffer {
  std::atomic<uint64_t> epoch{0};
  std::atomic<bool> orphaned{false};  // its thread has exited; another may adopt it
  std::atomic<uint64_t> dropped{0};
  uint32_t tid = 0;  // owner only
  Chunk* head = nullptr;
  Chunk* tail = nullptr;  // owner only
  size_t count = 0;       // owner only: events in this epoch

  ThreadBuffer() : head(new Chunk()), tail(head) {}
  ~ThreadBuffer() {
    for (Chunk* c = head; c;) {
      Chunk* n = c->next.load(std::memory_order_relaxed);
      delete c;
      c = n;
    }
  }

  void reset(uint64_t e) {
    for (Chunk* c = head; c; c = c->next.load(std::memory_order_relaxed))
      c->size.store(0, std::memory_order_relaxed);
    tail = head;
    count = 0;
    dropped.store(0, std::memory_order_relaxed);
    epoch.store(e, std::memory_order_release);
  }
};

uint32_t current_tid() {
  thread_local uint32_t tid = static_cast<uint32_t>(::gettid());
  return tid;
}

std::string system_thread_name() {
  char buf[64] = {0};
  if (pthread_getname_np(pthread_self(), buf, sizeof buf) == 0 && buf[0]) return buf;
  return "thread " + std::to_string(current_tid());
}

// Profilers alive in the process, by id (ids are never reused), so a thread
// that exits can tell which of the buffers it used still exist.
struct LiveProfilers {
  std::mutex mu;
  std::unordered_set<uint64_t> ids;
  uint64_t next_id = 1;
};
LiveProfilers& live_profilers() {
  static LiveProfilers* l =
      new LiveProfilers();  // never destroyed: threads may exit during teardown
  return *l;
}

// The calling thread's buffer in each profiler it recorded into.
struct ThreadSlots {
  struct Slot {
    uint64_t profiler_id;
    ThreadBuffer* buffer;
  };
  std::vector<Slot> slots;

  ~ThreadSlots() {
    LiveProfilers& live = live_profilers();
    std::lock_guard<std::mutex> lock(live.mu);
    for (const Slot& s : slots)
      if (live.ids.count(s.profiler_id)) s.buffer->orphaned.store(true, std::memory_order_release);
  }
};
thread_local ThreadSlots tls_slots;

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
struct StringPool {
  std::mutex mu;
  std::unordered_set<std::string, StringHash, std::equal_to<>> strings;  // nodes never move
};

}  // namespace

struct Profiler::State {
  struct Capture {
    CaptureId id;
    ProfileCategoryMask categories;
    int64_t start_ns;
  };

  ProfilerOptions options;
  uint64_t id = 0;
  int64_t pid = ::getpid();
  std::shared_ptr<StringPool> strings = std::make_shared<StringPool>();
  std::atomic<uint64_t> epoch{1};

  std::mutex mu;  // guards everything below
  std::vector<Capture> captures;
  CaptureId next_capture = 1;
  std::vector<std::unique_ptr<ThreadBuffer>> buffers;
  std::map<uint32_t, std::string> thread_names;

  ThreadBuffer* thread_buffer() {
    for (const ThreadSlots::Slot& s : tls_slots.slots)
      if (s.profiler_id == id) return s.buffer;
    return register_thread();
  }

  // Slow path: the first event of a thread in this profiler.
  ThreadBuffer* register_thread() {
    {  // forget buffers of profilers that no longer exist
      LiveProfilers& live = live_profilers();
      std::lock_guard<std::mutex> lock(live.mu);
      std::erase_if(tls_slots.slots,
                    [&](const ThreadSlots::Slot& s) { return !live.ids.count(s.profiler_id); });
    }
    const uint32_t tid = current_tid();
    std::lock_guard<std::mutex> lock(mu);
    ThreadBuffer* buf = nullptr;
    for (auto& b : buffers) {
      bool expected = true;
      if (b->orphaned.load(std::memory_order_acquire) &&
          b->orphaned.compare_exchange_strong(expected, false, std::memory_order_acq_rel)) {
        buf = b.get();
        break;
      }
    }
    if (!buf) {
      buffers.push_back(std::make_unique<ThreadBuffer>());
      buf = buffers.back().get();
    }
    buf->tid = tid;
    thread_names[tid] = system_thread_name();  // the system may reuse the id of an exited thread
    tls_slots.slots.push_back({id, buf});
    return buf;
  }
};

Profiler::Profiler(ProfilerOptions options) : state_(std::make_unique<State>()) {
  state_->options = std::move(options);
  LiveProfilers& live = live_profilers();
  std::lock_guard<std::mutex> lock(live.mu);
  state_->id = live.next_id++;
  live.ids.insert(state_->id);
}

Profiler::~Profiler() {
  LiveProfilers& live = live_profilers();
  std::lock_guard<std::mutex> lock(live.mu);
  live.ids.erase(state_->id);
}

int64_t Profiler::now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

Profiler::CaptureId Profiler::start(ProfileCategoryMask categories) {
  SAMBA_CHECK((categories & ~kAllProfileCategories) == 0 && categories != 0,
              Status::InvalidArgument,
              "profile categories {:#x} are not a non-empty subset of the known ones ({:#x})",
              categories, kAllProfileCategories);
  State& s = *state_;
  std::lock_guard<std::mutex> lock(s.mu);
  CaptureId id = s.next_capture++;
  s.captures.push_back({id, categories, now_ns()});
  mask_.fetch_or(categories, std::memory_order_relaxed);
  return id;
}

bool Profiler::running(CaptureId id) const {
  std::lock_guard<std::mutex> lock(state_->mu);
  for (const auto& c : state_->captures)
    if (c.id == id) return true;
  return false;
}

ProfileTrace Profiler::stop(CaptureId id) {
  State& s = *state_;
  std::lock_guard<std::mutex> lock(s.mu);
  auto it = std::find_if(s.captures.begin(), s.captures.end(),
                         [&](const State::Capture& c) { return c.id == id; });
  SAMBA_CHECK(it != s.captures.end(), Status::InvalidArgument,
              "profile capture {} is not running (it was never started or was already stopped)",
              id);
  const State::Capture cap = *it;
  s.captures.erase(it);
  ProfileCategoryMask mask = 0;
  for (const auto& c : s.captures) mask |= c.categories;
  mask_.store(mask, std::memory_order_relaxed);

  ProfileTrace t;
  t.process_name = s.options.process_name;
  t.pid = s.pid;
  t.start_ns = cap.start_ns;
  t.end_ns = now_ns();
  t.categories = cap.categories;
  t.strings = s.strings;

  const uint64_t epoch = s.epoch.load(std::memory_order_relaxed);
  for (const auto& b : s.buffers) {
    if (b->epoch.load(std::memory_order_acquire) != epoch) continue;
    t.dropped_events += b->dropped.load(std::memory_order_relaxed);
    for (Chunk* c = b->head; c; c = c->next.load(std::memory_order_acquire)) {
      const uint32_t n = c->size.load(std::memory_order_acquire);
      for (uint32_t i = 0; i < n; ++i) {
        const ProfileEvent& e = c->events[i];
        if ((category_bit(e.category) & cap.categories) && e.start_ns >= t.start_ns &&
            e.start_ns <= t.end_ns)
          t.events.push_back(e);
      }
      if (n < kChunkEvents) break;
    }
  }
  // No capture left: the next recording period starts empty.
  if (s.captures.empty()) s.epoch.fetch_add(1, std::memory_order_release);

  std::sort(t.events.begin(), t.events.end(), [](const ProfileEvent& a, const ProfileEvent& b) {
    if (a.tid != b.tid) return a.tid < b.tid;
    if (a.start_ns != b.start_ns) return a.start_ns < b.start_ns;
    return a.dur_ns > b.dur_ns;
  });
  for (const ProfileEvent& e : t.events)
    if (t.threads.empty() || t.threads.back().tid != e.tid) {
      auto name = s.thread_names.find(e.tid);
      t.threads.push_back(
          {e.tid, name != s.thread_names.end() ? name->second : "thread " + std::to_string(e.tid)});
    }
  if (t.dropped_events)
    log::warn(
        "profile: {} events were dropped because a thread recorded more than {} since profiling "
        "started",
        t.dropped_events, s.options.max_events_per_thread);
  return t;
}

std::string_view Profiler::intern(std::string_view str) {
  StringPool& pool = *state_->strings;
  std::lock_guard<std::mutex> lock(pool.mu);
  auto it = pool.strings.find(str);
  if (it == pool.strings.end()) it = pool.strings.emplace(str).first;
  return *it;
}

void Profiler::set_thread_name(std::string_view name) {
  state_->thread_buffer();  // registers the thread first, so its default name cannot overwrite this
                            // one
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->thread_names[current_tid()] = std::string(name);
}

void Profiler::record_complete(ProfileCategory c, std::string_view name, int64_t start_ns,
                               int64_t end_ns, std::span<const ProfileArg> args) {
  if (!enabled(c)) return;
  append(c, ProfilePhase::Complete, name, start_ns, std::max<int64_t>(end_ns - start_ns, 0), args);
}

void Profiler::record_instant(ProfileCategory c, std::string_view name,
                              std::span<const ProfileArg> args) {
  if (!enabled(c)) return;
  append(c, ProfilePhase::Instant, name, now_ns(), 0, args);
}

void Profiler::append(ProfileCategory c, ProfilePhase ph, std::string_view name, int64_t start_ns,
                      int64_t dur_ns, std::span<const ProfileArg> args) {
  State& s = *state_;
  ThreadBuffer* b = s.thread_buffer();
  const uint64_t epoch = s.epoch.load(std::memory_order_acquire);
  if (b->epoch.load(std::memory_order_relaxed) != epoch) b->reset(epoch);
  if (b->count >= s.options.max_events_per_thread) {
    b->dropped.store(b->dropped.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    return;
  }
  Chunk* chunk = b->tail;
  uint32_t n = chunk->size.load(std::memory_order_relaxed);
  if (n == kChunkEvents) {
    Chunk* next = chunk->next.load(std::memory_order_relaxed);
    if (!next) {
      next = new Chunk();
      chunk->next.store(next, std::memory_order_release);
    }
    b->tail = chunk = next;
    n = 0;
  }
  ProfileEvent& e = chunk->events[n];
  e.name = name;
  e.start_ns = start_ns;
  e.dur_ns = dur_ns;
  e.tid = b->tid;
  e.category = c;
  e.phase = ph;
  const size_t na = std::min<size_t>(args.size(), kMaxProfileArgs);
  e.num_args = static_cast<uint8_t>(na);
  for (size_t i = 0; i < na; ++i) e.args[i] = args[i];
  chunk->size.store(n + 1, std::memory_order_release);
  ++b->count;
}

}  // namespace samba
