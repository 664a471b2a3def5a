// RingMean: the mean over the ranks of one gradient bucket, in place, as a
// ring all-reduce over the communicator's point-to-point messages (MPI_Isend
// / MPI_Irecv), progressed by test() as a state machine. Nothing blocks: each
// test() starts what can start and returns, so the caller bounds every wait
// by dist::timeout(), and Communicator::test() reports a peer's abort notice.
//
// Why not MPI_Iallreduce: Open MPI's non-blocking all-reduce (libnbc) reached
// 29% of a blocking MPI_Allreduce's bandwidth at 4.3 MiB and 57% at 104 KiB
// on shared memory (2 ranks, docs/DISTRIBUTED.md), and it sums only, so a
// second pass divided by N (about 0.6 ms for 4.3 MiB, as long as the whole
// blocking all-reduce). The ring moves the same bytes as MPI's own ring
// algorithm and folds the 1/N into the last add: (mine + received) / N, in
// one vectorized pass. Measured against a blocking MPI_Allreduce of the same
// bytes (2 ranks, shared memory, a loaded machine): 96-104% at 104 KiB,
// 108-153% at 4.3 MiB (docs/distributed-runtime.md).
//
// Algorithm over p ranks: the bucket is cut into p chunks (chunk c holds
// count/p elements, one more for the first count % p; a chunk may be empty).
// Reduce-scatter, steps k = 0 .. p-2: rank r sends chunk (r-k) mod p to rank
// r+1 and adds the chunk (r-k-1) mod p it receives from r-1 into its own
// copy; the last of these adds divides by p. Rank r then owns the mean of
// chunk (r+1) mod p. All-gather, steps j = 0 .. p-2: rank r sends chunk
// (r+1-j) mod p and receives chunk (r-j) mod p in place. The chunk a rank
// sends at a step is the one it received at the step before; a chunk cut
// into segments (messages) moves on segment by segment, segment s sent on
// as soon as it is added, while segment s+1 may still be arriving.
//
// At two ranks a small bucket is one exchange of the whole bucket instead
// (kExchangeBytes), with the same result bit for bit.
//
// Summation order (fixed): chunk c's mean is
//   (x[c-1] + (x[c-2] + ( ... + (x[c+1] + x[c]) ... ))) / p   (ranks mod p),
// computed once, on rank c-1, and copied to every other rank, so every rank
// ends with bit-identical values. The order depends only on p and count
// (through the chunk bounds), never on timing, segmenting, staging or the
// overlap mode.
//
// Tags: one per ring (the bucket's index). Messages from one rank to its
// neighbour on one tag are matched in the order sent, and each rank sends
// and receives a ring's segments in the same (step, segment) order, so a ring
// needs one tag however many messages it has, and consecutive runs of the
// same ring cannot mix. Rings in flight at the same time need distinct tags.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "engine/core/dtype.h"
#include "engine/core/storage.h"
#include "engine/dist/communicator.h"

namespace samba::dist {

class RingMean {
 public:
  // The largest message (a segment of a chunk). Segmenting a chunk, so that
  // adding segment s overlaps receiving s+1, did not pay on shared memory
  // (2 ranks, 4.3 MiB: 256 KiB segments 80%, 1 MiB 104%, 4 MiB 114%, whole
  // chunks 138% of a blocking MPI_Allreduce; Open MPI already pipelines a
  // large message in fragments, and each more message is one more
  // rendezvous that needs the peer's next MPI call), so by default a chunk
  // is one message up to 1 GiB (MPI counts are int).
  static constexpr size_t kDefaultSegmentBytes = size_t{1} << 30;
  // At two ranks a bucket up to this size is one exchange of the whole
  // bucket, each rank computing (mine + received) / 2 over all of it: the
  // ring's result bit for bit (IEEE addition is commutative), in one round
  // trip instead of two, which is what a latency-bound bucket pays for.
  static constexpr size_t kExchangeBytes = size_t{1} << 20;

  // A ring for buckets of `count` elements of `dtype` (Float32 or Float64)
  // on `tag`. Makes its receive buffer now (one chunk), so a run allocates
  // nothing but the request handles.
  RingMean(Communicator& comm, size_t count, DType dtype, int tag,
           size_t segment_bytes = kDefaultSegmentBytes);
  RingMean(const RingMean&) = delete;
  RingMean& operator=(const RingMean&) = delete;

  // Starts the mean of data[0, count) in place; the previous run must be
  // done. At world size 1 it is done at once (the mean is the identity).
  void start(void* data);
  // Advances the ring as far as the messages that have arrived allow; true
  // once `data` holds the mean and every send has completed (the buffer may
  // be reused). `advanced` (if given) tells whether anything moved.
  bool test(bool* advanced = nullptr);
  bool done() const { return done_; }

 private:
  struct Chunk {
    size_t begin = 0;
    size_t count = 0;
  };
  Chunk chunk(int c) const;
  size_t segments(const Chunk& c) const { return (c.count + segment_ - 1) / segment_; }
  int send_chunk(int step) const;
  int recv_chunk(int step) const;
  std::byte* element(size_t i) const { return data_ + i * elsize_; }
  void post_recvs(int step);
  void post_send(int step, size_t segment, std::vector<std::unique_ptr<Collective>>& into);
  void received(int step, size_t segment);
  bool sends_done(std::vector<std::unique_ptr<Collective>>& sends);

  Communicator& comm_;
  size_t count_;
  DType dtype_;
  size_t elsize_;
  int tag_;
  int ranks_;
  int rank_;
  size_t segment_;  // elements per message
  int steps_;       // 2 (p - 1)
  Ref<Storage> scratch_;

  std::byte* data_ = nullptr;
  int step_ = 0;  // the step whose receives are in flight
  size_t next_segment_ = 0;
  std::vector<std::unique_ptr<Collective>> recvs_;       // step_'s, by segment
  std::vector<std::unique_ptr<Collective>> sends_;       // step_'s
  std::vector<std::unique_ptr<Collective>> next_sends_;  // step_ + 1's, started early
  bool exchange_ = false;  // two ranks, a small bucket: kExchangeBytes
  bool done_ = true;
};

}  // namespace samba::dist
