#include "engine/core/parallel.h"

#include <oneapi/tbb/info.h>

namespace samba {
namespace {
thread_local ThreadPool* t_current = nullptr;
}

ThreadPool::ThreadPool(int threads) {
  threads_ = threads > 0 ? threads : tbb::info::default_concurrency();
  arena_ = std::make_unique<tbb::task_arena>(threads_);
}

ThreadPool::Scope::Scope(ThreadPool* p) : prev_(t_current) { t_current = p; }
ThreadPool::Scope::~Scope() { t_current = prev_; }

ThreadPool& default_pool() {
  static ThreadPool pool(0);
  return pool;
}

ThreadPool& current_pool() { return t_current ? *t_current : default_pool(); }

}  // namespace samba
