#include "engine/dist/ring_allreduce.h"

#include <algorithm>

#include "engine/core/error.h"

namespace samba::dist {
namespace {

// The reduce-scatter's adds. __restrict (the received segment is a separate
// buffer) lets GCC vectorize both loops; the mean divides rather than
// multiplies by 1/p, so it is the correctly rounded quotient of the sum.
template <typename T>
void add_received(T* __restrict mine, const T* __restrict received, size_t n) {
  for (size_t i = 0; i < n; ++i) mine[i] += received[i];
}

template <typename T>
void add_received_mean(T* __restrict mine, const T* __restrict received, size_t n, T ranks) {
  for (size_t i = 0; i < n; ++i) mine[i] = (mine[i] + received[i]) / ranks;
}

template <typename T>
void add(void* mine, const void* received, size_t n, bool last, int ranks) {
  if (last)
    add_received_mean(static_cast<T*>(mine), static_cast<const T*>(received), n,
                      static_cast<T>(ranks));
  else
    add_received(static_cast<T*>(mine), static_cast<const T*>(received), n);
}

// A message's elements: bounded so its byte count fits MPI's int.
constexpr size_t kMaxMessageBytes = size_t{1} << 30;

int modulo(int x, int p) { return ((x % p) + p) % p; }

}  // namespace

RingMean::RingMean(Communicator& comm, size_t count, DType dtype, int tag, size_t segment_bytes)
    : comm_(comm),
      count_(count),
      dtype_(dtype),
      elsize_(element_size(dtype)),
      tag_(tag),
      ranks_(comm.size()),
      rank_(comm.rank()),
      steps_(2 * (comm.size() - 1)) {
  SAMBA_CHECK(dtype == DType::Float32 || dtype == DType::Float64, Status::DTypeMismatch,
              "all-reduce of {} values; data parallel reduces float32 and float64",
              dtype_name(dtype));
  SAMBA_CHECK(tag >= 0 && tag <= comm.max_tag(), Status::OutOfRange,
              "ring all-reduce tag {}; the transport's tags are 0 to {}", tag, comm.max_tag());
  segment_ = std::max<size_t>(1, std::min(segment_bytes, kMaxMessageBytes) / elsize_);
  exchange_ = ranks_ == 2 && count * elsize_ <= kExchangeBytes;
  if (ranks_ > 1) {
    // The first chunks take the remainder.
    const size_t largest = exchange_ ? count : chunk(0).count;
    scratch_ = Storage::allocate(std::max<size_t>(1, largest) * elsize_);
    recvs_.reserve(segments(chunk(0)));
    sends_.reserve(segments(chunk(0)));
    next_sends_.reserve(segments(chunk(0)));
  }
}

RingMean::Chunk RingMean::chunk(int c) const {
  const size_t p = static_cast<size_t>(ranks_), i = static_cast<size_t>(c);
  const size_t base = count_ / p, extra = count_ % p;
  return {i * base + std::min(i, extra), base + (i < extra ? 1 : 0)};
}

int RingMean::send_chunk(int step) const {
  return step < ranks_ - 1 ? modulo(rank_ - step, ranks_)
                           : modulo(rank_ + 1 - (step - (ranks_ - 1)), ranks_);
}

int RingMean::recv_chunk(int step) const {
  return step < ranks_ - 1 ? modulo(rank_ - step - 1, ranks_)
                           : modulo(rank_ - (step - (ranks_ - 1)), ranks_);
}

void RingMean::start(void* data) {
  SAMBA_CHECK(done_, Status::InvalidState,
              "ring all-reduce (tag {}) started again before its previous run completed", tag_);
  data_ = static_cast<std::byte*>(data);
  step_ = 0;
  if (ranks_ == 1) return;
  done_ = false;
  sends_.clear();
  next_sends_.clear();
  if (exchange_) {
    const int peer = 1 - rank_;
    recvs_.clear();
    recvs_.push_back(comm_.start_recv(scratch_->data(), count_ * elsize_, peer, tag_));
    sends_.push_back(comm_.start_send(data_, count_ * elsize_, peer, tag_));
    return;
  }
  post_recvs(0);
  const Chunk c = chunk(send_chunk(0));
  for (size_t s = 0; s < segments(c); ++s) post_send(0, s, sends_);
}

void RingMean::post_recvs(int step) {
  recvs_.clear();
  next_segment_ = 0;
  const Chunk c = chunk(recv_chunk(step));
  // Reduce-scatter receives beside the data (it is added), all-gather into
  // place. Every earlier send from that place has completed: a step begins
  // only when the previous step's sends are done.
  const bool to_scratch = step < ranks_ - 1;
  const int from = modulo(rank_ - 1, ranks_);
  for (size_t s = 0; s < segments(c); ++s) {
    const size_t off = s * segment_, n = std::min(segment_, c.count - off);
    void* into = to_scratch ? static_cast<std::byte*>(scratch_->data()) + off * elsize_
                            : element(c.begin + off);
    recvs_.push_back(comm_.start_recv(into, n * elsize_, from, tag_));
  }
}

void RingMean::post_send(int step, size_t segment,
                         std::vector<std::unique_ptr<Collective>>& into) {
  const Chunk c = chunk(send_chunk(step));
  const size_t off = segment * segment_, n = std::min(segment_, c.count - off);
  into.push_back(
      comm_.start_send(element(c.begin + off), n * elsize_, modulo(rank_ + 1, ranks_), tag_));
}

void RingMean::received(int step, size_t segment) {
  if (step < ranks_ - 1) {
    const Chunk c = chunk(recv_chunk(step));
    const size_t off = segment * segment_, n = std::min(segment_, c.count - off);
    const void* got = static_cast<std::byte*>(scratch_->data()) + off * elsize_;
    const bool last = step == ranks_ - 2;
    if (dtype_ == DType::Float32)
      add<float>(element(c.begin + off), got, n, last, ranks_);
    else
      add<double>(element(c.begin + off), got, n, last, ranks_);
  }
  // The segment just received (and added) is the one to pass on next.
  if (step + 1 < steps_) post_send(step + 1, segment, next_sends_);
}

bool RingMean::sends_done(std::vector<std::unique_ptr<Collective>>& sends) {
  while (!sends.empty() && comm_.test(*sends.back())) sends.pop_back();
  return sends.empty();
}

bool RingMean::test(bool* advanced) {
  if (advanced) *advanced = false;
  if (exchange_ && !done_) {
    // The send reads the bucket: it must be done before the mean replaces it.
    if (!comm_.test(*recvs_[0]) || !sends_done(sends_)) return false;
    if (dtype_ == DType::Float32)
      add<float>(data_, scratch_->data(), count_, true, 2);
    else
      add<double>(data_, scratch_->data(), count_, true, 2);
    recvs_.clear();
    done_ = true;
    if (advanced) *advanced = true;
  }
  while (!done_) {
    for (; next_segment_ < recvs_.size(); ++next_segment_) {
      if (!comm_.test(*recvs_[next_segment_])) return false;
      received(step_, next_segment_);
      if (advanced) *advanced = true;
    }
    if (!sends_done(sends_)) return false;
    if (++step_ == steps_) {
      recvs_.clear();
      done_ = true;
      break;
    }
    std::swap(sends_, next_sends_);
    post_recvs(step_);
    if (advanced) *advanced = true;
  }
  return true;
}

}  // namespace samba::dist
