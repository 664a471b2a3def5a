// One thread pool per session: a oneTBB task_arena. Kernels split work with
// samba::parallel_for, which stays on the calling thread when the work is too
// small to be worth a task.
#pragma once

#include <oneapi/tbb/blocked_range.h>
#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/task_arena.h>

#include <cstdint>
#include <memory>

namespace samba {

class ThreadPool {
 public:
  explicit ThreadPool(int threads);  // <= 0: one per hardware thread
  int threads() const { return threads_; }
  tbb::task_arena& arena() { return *arena_; }

  // Makes this pool the one parallel_for uses on the calling thread for the
  // lifetime of the guard.
  class Scope {
   public:
    explicit Scope(ThreadPool* p);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    ThreadPool* prev_;
  };

 private:
  int threads_;
  std::unique_ptr<tbb::task_arena> arena_;
};

ThreadPool& default_pool();
ThreadPool& current_pool();

// Elements of work below which a task is not worth spawning, for a loop whose
// body costs about one cycle per element.
inline constexpr int64_t kMinGrain = 32768;

// Calls fn(begin, end) over [0, n) in chunks of at least `grain`.
template <typename F>
void parallel_for(int64_t n, int64_t grain, F&& fn) {
  if (n <= 0) return;
  ThreadPool& pool = current_pool();
  if (grain < 1) grain = 1;
  if (n <= grain || pool.threads() == 1) {
    fn(int64_t{0}, n);
    return;
  }
  auto body = [&] {
    tbb::parallel_for(tbb::blocked_range<int64_t>(0, n, grain),
                      [&](const tbb::blocked_range<int64_t>& r) { fn(r.begin(), r.end()); });
  };
  if (tbb::this_task_arena::current_thread_index() != tbb::task_arena::not_initialized &&
      tbb::this_task_arena::max_concurrency() == pool.threads())
    body();  // already running inside the pool's arena
  else
    pool.arena().execute(body);
}

}  // namespace samba
