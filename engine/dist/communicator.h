// The distributed context of the process: one Communicator over the ranks
// of the job (data-parallel replicas), and the process-wide settings every
// collective obeys (the timeout, abort notices).
//
// Samba uses MPI (Open MPI) as its transport; MPI's types never leave
// engine/dist/*.cpp, so the rest of the engine and the C ABI compile without
// mpi.h, and a build without MPI links engine/dist/no_mpi.cpp instead.
//
// Collectives and messages are non-blocking underneath (MPI_I*, MPI_Isend,
// MPI_Irecv): a Collective is started, then polled with test() until done,
// so no call ever blocks inside MPI and every wait is bounded by the timeout.
// test() also reports an abort notice from a peer (samba_dist_abort), failing
// with Cancelled and the peer's rank.
//
// Thread safety: every member may be called from any thread; the MPI calls
// behind them are serialized (MPI_THREAD_SERIALIZED is what Samba asks MPI
// for).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

#include "engine/core/dtype.h"

namespace samba::dist {

// An in-flight operation: a collective, or one point-to-point message (an
// MPI request and what it needs alive).
class Collective {
 public:
  virtual ~Collective() = default;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;

  // Point-to-point messages of `bytes` to / from rank `peer` (the ring
  // all-reduce's, engine/dist/ring_allreduce.h). Messages from one rank to
  // another with one tag are received in the order they were started (MPI's
  // non-overtaking rule), and never match a collective: the collectives and
  // the abort notices cannot take them. `tag` is in [0, max_tag()].
  virtual std::unique_ptr<Collective> start_send(const void* data, size_t bytes, int peer,
                                                 int tag) = 0;
  virtual std::unique_ptr<Collective> start_recv(void* data, size_t bytes, int peer, int tag) = 0;
  // The largest tag the transport accepts (MPI_TAG_UB: at least 32767).
  virtual int max_tag() const = 0;
  // `bytes` from rank `root` to every rank.
  virtual std::unique_ptr<Collective> start_broadcast(void* data, size_t bytes, int root) = 0;
  // Every rank's `bytes` into recv (size() * bytes), in rank order.
  virtual std::unique_ptr<Collective> start_allgather(const void* send, size_t bytes,
                                                      void* recv) = 0;
  // As allgather, received on `root` only (recv may be null elsewhere).
  virtual std::unique_ptr<Collective> start_gather(const void* send, size_t bytes, void* recv,
                                                   int root) = 0;
  // True when `c` has completed. Throws Cancelled when a peer's abort notice
  // has arrived (now or earlier).
  virtual bool test(Collective& c) = 0;
  // Throws Cancelled when a peer's abort notice has arrived.
  virtual void check_peers() = 0;
};

// The job's communicator: initialized lazily when the process was launched
// by mpirun; nullptr in a plain process (or a build without MPI).
Communicator* world();
// world(), or a throw (Unsupported without MPI, InvalidState when not
// launched by mpirun and not initialized) naming `what`.
Communicator& require_world(std::string_view what);

bool built_with_mpi();
// Whether mpirun (or another MPI launcher) started this process.
bool launched_by_mpirun();
// samba_dist_init / samba_dist_init_with_comm / samba_dist_finalize.
void init();
void init_with_comm(int64_t fortran_comm);
void finalize();
// Sends the abort notice (this rank, `reason`) to every other rank, gives
// them a moment to report it, then MPI_Abort(exit_code). Returns only in a
// plain process.
void abort_job(int exit_code, std::string_view reason);

// The bound on every wait (default 60 s, SAMBA_DIST_TIMEOUT_S).
std::chrono::milliseconds timeout();
void set_timeout(std::chrono::milliseconds t);

// Waits for `c` by polling, up to timeout(); on timeout throws Timeout
// naming `what`, this rank and the world size.
void wait(Communicator& comm, Collective& c, std::string_view what);
// Keeps `what` alive until process exit: buffers (and the requests on them)
// that MPI may still write after a failed wait, as a late peer completes.
void keep_until_exit(std::shared_ptr<void> what);
// As wait, for a collective on buffers the caller would free on failure:
// when the wait fails, `c` and `buffers` are kept until process exit, since
// MPI may still complete the collective into them (a late peer).
void wait(Communicator& comm, std::unique_ptr<Collective> c, std::shared_ptr<void> buffers,
          std::string_view what);

// The message of a build without MPI.
inline constexpr std::string_view kNoMpi = "built without MPI: install libopenmpi-dev and rebuild";

}  // namespace samba::dist
