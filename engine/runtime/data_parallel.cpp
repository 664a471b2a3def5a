#include "engine/runtime/data_parallel.h"

#include <algorithm>

#include "engine/runtime/runtime.h"

namespace samba::runtime {
namespace {

std::vector<dist::ReduceRange> ranges(const Program& program, const DeviceMemory& state) {
  const auto& d = program.desc();
  std::vector<dist::ReduceRange> out;
  for (const auto& b : d.data_parallel.buckets) {
    // The verifier checked the bucket is its gradients back to back, the
    // first at the bucket's offset.
    const Tensor first = device_view(state, d.tensors[static_cast<size_t>(b.gradients.front())]);
    out.push_back({first.raw_data(), b.nbytes / element_size(b.dtype), b.dtype});
  }
  return out;
}

}  // namespace

DataParallelStep::DataParallelStep(const Program& program, const DeviceMemory& state,
                                   dist::Communicator& comm)
    : reducer_(comm, ranges(program, state)) {
  const auto& d = program.desc();
  std::vector<int32_t> bucket_of(d.tensors.size(), -1);
  for (size_t b = 0; b < d.data_parallel.buckets.size(); ++b)
    for (int32_t g : d.data_parallel.buckets[b].gradients)
      bucket_of[static_cast<size_t>(g)] = static_cast<int32_t>(b);
  written_by_.resize(d.kernels.size());
  read_by_.resize(d.kernels.size());
  writers_.assign(d.data_parallel.buckets.size(), 0);
  const auto add = [](std::vector<int32_t>& v, int32_t b) {
    if (b >= 0 && std::find(v.begin(), v.end(), b) == v.end()) v.push_back(b);
  };
  for (const auto& s : d.sections) {
    if (s.type != pef::SectionType::BCKWD && s.type != pef::SectionType::OPT) continue;
    for (int32_t k : s.kernels) {
      const auto& kd = d.kernels[static_cast<size_t>(k)];
      if (s.type == pef::SectionType::BCKWD) {
        for (int32_t t : kd.writes)
          add(written_by_[static_cast<size_t>(k)], bucket_of[static_cast<size_t>(program.root(t))]);
        for (int32_t b : written_by_[static_cast<size_t>(k)]) ++writers_[static_cast<size_t>(b)];
      } else {
        for (int32_t t : kd.reads)
          add(read_by_[static_cast<size_t>(k)], bucket_of[static_cast<size_t>(program.root(t))]);
        for (int32_t t : kd.writes)
          add(read_by_[static_cast<size_t>(k)], bucket_of[static_cast<size_t>(program.root(t))]);
      }
    }
  }
  remaining_ = std::make_unique<std::atomic<int32_t>[]>(writers_.size());
}

void DataParallelStep::begin(DataParallelMode mode, bool reduce_on_rdu, bool overlap) {
  reducer_.begin_step(!reduce_on_rdu);
  mode_ = mode;
  overlap_ = overlap && mode != DataParallelMode::Normal;
  for (size_t b = 0; b < writers_.size(); ++b) remaining_[b].store(writers_[b]);
}

void DataParallelStep::before_section(pef::SectionType type) {
  if (type == pef::SectionType::REDUCE) {
    // Buckets no BCKWD kernel of this run wrote (or all of them, without
    // overlap) are final now.
    if (!overlap_ || mode_ != DataParallelMode::Optimal)
      reducer_.reduce_all();
    else
      reducer_.mark_all_ready();
  } else if (type == pef::SectionType::GRADNORM && overlap_) {
    reducer_.wait_all();
  }
}

void DataParallelStep::end() { reducer_.wait_all(); }

void DataParallelStep::before_kernel(int32_t kernel) {
  if (mode_ != DataParallelMode::Optimal) return;
  for (int32_t b : read_by_[static_cast<size_t>(kernel)]) reducer_.wait(static_cast<size_t>(b));
}

void DataParallelStep::after_kernel(int32_t kernel) {
  for (int32_t b : written_by_[static_cast<size_t>(kernel)])
    if (remaining_[static_cast<size_t>(b)].fetch_sub(1) == 1)
      reducer_.mark_ready(static_cast<size_t>(b));
}

}  // namespace samba::runtime
