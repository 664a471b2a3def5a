// What the MPI and no-MPI builds share: the timeout and the polling wait.
#include <atomic>
#include <cstdlib>
#include <mutex>
#include <vector>
#include <string>
#include <thread>

#include "engine/core/error.h"
#include "engine/core/log.h"
#include "engine/dist/communicator.h"

namespace samba::dist {
namespace {

constexpr std::chrono::milliseconds kDefaultTimeout{60000};

std::chrono::milliseconds timeout_from_env() {
  const char* v = std::getenv("SAMBA_DIST_TIMEOUT_S");
  if (!v || !*v) return kDefaultTimeout;
  char* end = nullptr;
  const double s = std::strtod(v, &end);
  if (end == v || *end != '\0' || !(s > 0) || s > 1e7) {
    log::warn("SAMBA_DIST_TIMEOUT_S='{}' is not a positive number of seconds; using {} s", v,
              kDefaultTimeout.count() / 1000);
    return kDefaultTimeout;
  }
  return std::chrono::milliseconds(static_cast<int64_t>(s * 1000.0 + 0.5));
}

std::atomic<int64_t>& timeout_ms() {
  static std::atomic<int64_t> ms{timeout_from_env().count()};
  return ms;
}

}  // namespace

std::chrono::milliseconds timeout() { return std::chrono::milliseconds(timeout_ms().load()); }

void set_timeout(std::chrono::milliseconds t) {
  SAMBA_CHECK(t.count() > 0, Status::InvalidArgument,
              "distributed timeout of {} ms; expected a positive number", t.count());
  timeout_ms().store(t.count());
}

bool launched_by_mpirun() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMI_SIZE") != nullptr ||
         std::getenv("PMIX_RANK") != nullptr;
}

Communicator& require_world(std::string_view what) {
  if (Communicator* c = world()) return *c;
  SAMBA_CHECK(built_with_mpi(), Status::Unsupported, "{}: {}", what, kNoMpi);
  fail(Status::InvalidState,
       "{}: not distributed: launch the program with mpirun (mpirun -np N ...) or call "
       "samba_dist_init first",
       what);
}

void wait(Communicator& comm, Collective& c, std::string_view what) {
  const auto deadline = std::chrono::steady_clock::now() + timeout();
  // Spin briefly (a loopback collective completes in microseconds), then
  // poll at a rate that leaves the core to the compute threads.
  for (int spins = 0;; ++spins) {
    if (comm.test(c)) return;
    if (std::chrono::steady_clock::now() > deadline)
      fail(Status::Timeout,
           "{}: rank {} of {} waited {} ms and the collective did not complete: another rank "
           "failed, was "
           "killed or did not make the same call (set the bound with samba_dist_set_timeout_ms or "
           "SAMBA_DIST_TIMEOUT_S); end the job",
           what, comm.rank(), comm.size(), timeout().count());
    if (spins < 1000)
      std::this_thread::yield();
    else
      std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

void wait(Communicator& comm, std::unique_ptr<Collective> c, std::shared_ptr<void> buffers,
          std::string_view what) {
  try {
    wait(comm, *c, what);
  } catch (...) {
    keep_until_exit(std::shared_ptr<Collective>(std::move(c)));
    keep_until_exit(std::move(buffers));
    throw;
  }
}

void keep_until_exit(std::shared_ptr<void> what) {
  static std::mutex mu;
  // Never destroyed: what it holds must outlive every other static.
  static auto* kept = new std::vector<std::shared_ptr<void>>;
  std::lock_guard<std::mutex> lock(mu);
  kept->push_back(std::move(what));
}

}  // namespace samba::dist
