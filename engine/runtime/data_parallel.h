// DataParallelStep: the REDUCE section of a data-parallel program at run
// time. It owns the bucket reducer (the communication thread) and decides,
// per overlap mode, when a bucket's all-reduce may start and what waits for
// it (docs/distributed-runtime.md):
//
//   normal   REDUCE marks every bucket ready and waits for all;
//   inorder  a bucket is ready as soon as the last BCKWD kernel writing it
//            has run (the all-reduce overlaps the rest of BCKWD); REDUCE
//            waits for all;
//   optimal  as inorder, but REDUCE waits for nothing: GRADNORM waits for
//            all buckets, an OPT kernel for the buckets it reads, and the
//            run for all before it returns.
//
// Made once per runtime, by the first data-parallel run (the staging
// buffers with it); a step allocates nothing.
#pragma once

#include <atomic>
#include <memory>
#include <vector>

#include "engine/dist/bucket_reducer.h"
#include "engine/runtime/execution_context.h"

namespace samba::runtime {

enum class DataParallelMode : uint8_t;

class DataParallelStep final : public KernelObserver {
 public:
  DataParallelStep(const Program& program, const DeviceMemory& state, dist::Communicator& comm);

  // A run's step: `overlap` is false when BCKWD is micro-batched (its
  // kernels run once per micro-batch, so a bucket is final only at REDUCE).
  void begin(DataParallelMode mode, bool reduce_on_rdu, bool overlap);
  // Before a section of the run (REDUCE, GRADNORM) runs.
  void before_section(pef::SectionType type);
  // The run's end: every bucket reduced.
  void end();
  KernelObserver* observer() { return overlap_ ? this : nullptr; }

  void before_kernel(int32_t kernel) override;
  void after_kernel(int32_t kernel) override;

 private:
  dist::BucketReducer reducer_;
  std::vector<std::vector<int32_t>> written_by_;  // per kernel: the buckets a BCKWD kernel writes
  std::vector<std::vector<int32_t>> read_by_;     // per kernel: the buckets an OPT kernel touches
  std::vector<int32_t> writers_;                  // per bucket: BCKWD kernels writing it
  std::unique_ptr<std::atomic<int32_t>[]> remaining_;
  DataParallelMode mode_{};
  bool overlap_ = false;
};

}  // namespace samba::runtime
