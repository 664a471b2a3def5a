// The distributed context over Open MPI. The only file that includes mpi.h.
//
// Threads: Samba asks MPI for MPI_THREAD_SERIALIZED and serializes its own
// MPI calls with one mutex. The calls come from the application's thread
// (broadcast, gather, the PEF check) and from one communication thread per
// data-parallel session (engine/dist/bucket_reducer.h) that starts and polls
// the REDUCE buckets' ring all-reduces (point-to-point messages on comm_,
// engine/dist/ring_allreduce.h). MPI_THREAD_MULTIPLE would buy nothing: Open
// MPI serializes inside anyway, and a single thread owning the buckets is
// what keeps their order identical on every rank.
//
// Traffic on comm_: the collectives (broadcast, gather, allgather) and the
// rings' messages, whose tags are bucket indices; MPI never matches a
// point-to-point message with a collective, so they cannot collide. The
// abort notices travel on control_, a communicator of their own.
// The C API only: MPI's deprecated C++ bindings need a library Samba does
// not link.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "engine/core/error.h"
#include "engine/core/log.h"
#include "engine/dist/communicator.h"

namespace samba::dist {
namespace {

constexpr int kAbortTag = 7411;
constexpr int kMaxReason = 1024;

std::string mpi_error(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) return fmt::format("MPI error {}", code);
  return std::string(text, static_cast<size_t>(len));
}

void check_mpi(int code, std::string_view call) {
  if (code != MPI_SUCCESS) fail(Status::Internal, "{} failed: {}", call, mpi_error(code));
}

class MpiCollective final : public Collective {
 public:
  MPI_Request request = MPI_REQUEST_NULL;
  bool done = false;
};

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator(MPI_Comm parent, bool owns_mpi) : owns_mpi_(owns_mpi) {
    check_mpi(MPI_Comm_dup(parent, &comm_), "MPI_Comm_dup");
    check_mpi(MPI_Comm_dup(parent, &control_), "MPI_Comm_dup");
    // Errors come back as codes (turned into samba::Error), never as
    // MPI's default abort of the whole job.
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(control_, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    // MPI_TAG_UB is an attribute of MPI_COMM_WORLD (every communicator shares it).
    int* tag_ub = nullptr;
    int has_tag_ub = 0;
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &tag_ub, &has_tag_ub);
    if (has_tag_ub && tag_ub) max_tag_ = *tag_ub;
    post_abort_receive();
  }

  ~MpiCommunicator() override {
    std::lock_guard<std::mutex> lock(mu_);
    if (abort_req_ != MPI_REQUEST_NULL) {
      MPI_Cancel(&abort_req_);
      MPI_Wait(&abort_req_, MPI_STATUS_IGNORE);
    }
    MPI_Comm_free(&control_);
    MPI_Comm_free(&comm_);
    if (owns_mpi_) {
      int finalized = 0;
      MPI_Finalized(&finalized);
      if (!finalized) MPI_Finalize();
    }
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  std::unique_ptr<Collective> start_send(const void* data, size_t bytes, int peer,
                                         int tag) override {
    return start("MPI_Isend", [&](MPI_Request* r) {
      return MPI_Isend(data, int_count(bytes), MPI_BYTE, peer, tag, comm_, r);
    });
  }
  std::unique_ptr<Collective> start_recv(void* data, size_t bytes, int peer, int tag) override {
    return start("MPI_Irecv", [&](MPI_Request* r) {
      return MPI_Irecv(data, int_count(bytes), MPI_BYTE, peer, tag, comm_, r);
    });
  }
  int max_tag() const override { return max_tag_; }
  std::unique_ptr<Collective> start_broadcast(void* data, size_t bytes, int root) override {
    return start("MPI_Ibcast", [&](MPI_Request* r) {
      return MPI_Ibcast(data, int_count(bytes), MPI_BYTE, root, comm_, r);
    });
  }
  std::unique_ptr<Collective> start_allgather(const void* send, size_t bytes, void* recv) override {
    return start("MPI_Iallgather", [&](MPI_Request* r) {
      return MPI_Iallgather(send, int_count(bytes), MPI_BYTE, recv, int_count(bytes), MPI_BYTE,
                            comm_, r);
    });
  }
  std::unique_ptr<Collective> start_gather(const void* send, size_t bytes, void* recv,
                                           int root) override {
    return start("MPI_Igather", [&](MPI_Request* r) {
      return MPI_Igather(send, int_count(bytes), MPI_BYTE, recv, int_count(bytes), MPI_BYTE, root,
                         comm_, r);
    });
  }

  bool test(Collective& c) override {
    auto& m = static_cast<MpiCollective&>(c);
    std::lock_guard<std::mutex> lock(mu_);
    check_peers_locked();
    if (m.done) return true;
    int flag = 0;
    check_mpi(MPI_Test(&m.request, &flag, MPI_STATUS_IGNORE), "MPI_Test");
    m.done = flag != 0;
    return m.done;
  }

  void check_peers() override {
    std::lock_guard<std::mutex> lock(mu_);
    check_peers_locked();
  }

  [[noreturn]] void abort(int exit_code, std::string_view reason) {
    std::string msg(reason.substr(0, kMaxReason - 1));
    log::error("rank {} of {} ends the job: {}", rank_, size_,
               msg.empty() ? "(no reason given)" : msg);
    {
      std::lock_guard<std::mutex> lock(mu_);
      std::vector<MPI_Request> sends;
      for (int r = 0; r < size_; ++r) {
        if (r == rank_) continue;
        sends.emplace_back();
        MPI_Isend(msg.data(), static_cast<int>(msg.size()), MPI_CHAR, r, kAbortTag, control_,
                  &sends.back());
      }
      // The notices are small (sent eagerly); give them a moment to leave,
      // and the peers a moment to report them, before MPI_Abort ends all.
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(1);
      int all = 0;
      while (!all && std::chrono::steady_clock::now() < until) {
        MPI_Testall(static_cast<int>(sends.size()), sends.data(), &all, MPI_STATUSES_IGNORE);
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    }
    std::this_thread::sleep_for(std::chrono::seconds(1));
    MPI_Abort(comm_, exit_code);
    std::_Exit(exit_code);
  }

 private:
  static int int_count(size_t n) {
    SAMBA_CHECK(n <= static_cast<size_t>(INT32_MAX), Status::OutOfRange,
                "a collective of {} elements; MPI counts stop at {}", n, INT32_MAX);
    return static_cast<int>(n);
  }

  template <typename F>
  std::unique_ptr<Collective> start(std::string_view call, F&& f) {
    auto c = std::make_unique<MpiCollective>();
    std::lock_guard<std::mutex> lock(mu_);
    check_peers_locked();
    check_mpi(f(&c->request), call);
    return c;
  }

  void post_abort_receive() {
    check_mpi(MPI_Irecv(abort_buf_, kMaxReason, MPI_CHAR, MPI_ANY_SOURCE, kAbortTag, control_,
                        &abort_req_),
              "MPI_Irecv");
  }

  void check_peers_locked() {
    if (aborted_rank_ < 0 && abort_req_ != MPI_REQUEST_NULL) {
      int flag = 0;
      MPI_Status st;
      MPI_Test(&abort_req_, &flag, &st);
      if (flag) {
        int len = 0;
        MPI_Get_count(&st, MPI_CHAR, &len);
        aborted_rank_ = st.MPI_SOURCE;
        abort_reason_.assign(abort_buf_, static_cast<size_t>(len < 0 ? 0 : len));
      }
    }
    if (aborted_rank_ >= 0)
      fail(Status::Cancelled, "rank {} of {} failed and ended the job: {}", aborted_rank_, size_,
           abort_reason_.empty() ? "(no reason given)" : abort_reason_);
  }

  std::mutex mu_;  // serializes every MPI call (MPI_THREAD_SERIALIZED)
  MPI_Comm comm_ = MPI_COMM_NULL;
  MPI_Comm control_ = MPI_COMM_NULL;  // abort notices only, apart from the collectives
  MPI_Request abort_req_ = MPI_REQUEST_NULL;
  char abort_buf_[kMaxReason] = {};
  int aborted_rank_ = -1;
  std::string abort_reason_;
  int rank_ = 0;
  int size_ = 1;
  int max_tag_ = 32767;  // the least MPI_TAG_UB the standard allows
  bool owns_mpi_ = false;
};

std::mutex g_mu;
std::unique_ptr<MpiCommunicator> g_world;
bool g_finalized = false;

void finalize_at_exit() { finalize(); }

void init_locked(MPI_Comm parent, bool from_app) {
  SAMBA_CHECK(!g_finalized, Status::InvalidState,
              "samba_dist_init: the distributed context was finalized");
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  SAMBA_CHECK(!finalized, Status::InvalidState, "samba_dist_init: MPI was finalized already");
  bool owns = false;
  if (!initialized) {
    SAMBA_CHECK(
        !from_app, Status::InvalidState,
        "samba_dist_init_with_comm: MPI is not initialized; initialize it first (MPI_Init_thread)");
    int provided = 0;
    check_mpi(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided),
              "MPI_Init_thread");
    owns = true;
    std::atexit(finalize_at_exit);
  }
  int provided = 0;
  MPI_Query_thread(&provided);
  SAMBA_CHECK(
      provided >= MPI_THREAD_SERIALIZED, Status::InvalidState,
      "MPI was initialized with thread level {}; Samba needs MPI_THREAD_SERIALIZED or above "
      "(MPI_Init_thread)",
      provided);
  g_world = std::make_unique<MpiCommunicator>(parent, owns);
}

}  // namespace

bool built_with_mpi() { return true; }

Communicator* world() {
  std::lock_guard<std::mutex> lock(g_mu);
  if (!g_world && !g_finalized && launched_by_mpirun()) init_locked(MPI_COMM_WORLD, false);
  return g_world.get();
}

void init() {
  std::lock_guard<std::mutex> lock(g_mu);
  if (!g_world) init_locked(MPI_COMM_WORLD, false);
}

void init_with_comm(int64_t fortran_comm) {
  std::lock_guard<std::mutex> lock(g_mu);
  SAMBA_CHECK(!g_world, Status::InvalidState,
              "samba_dist_init_with_comm: Samba has joined the job already (samba_dist_init, or "
              "lazily under "
              "mpirun); call it before any other distributed call");
  int initialized = 0;
  MPI_Initialized(&initialized);
  SAMBA_CHECK(
      initialized, Status::InvalidState,
      "samba_dist_init_with_comm: MPI is not initialized; initialize it first (MPI_Init_thread)");
  SAMBA_CHECK(fortran_comm >= INT32_MIN && fortran_comm <= INT32_MAX, Status::InvalidArgument,
              "samba_dist_init_with_comm: {} is not an MPI_Fint (from MPI_Comm_c2f)", fortran_comm);
  MPI_Comm comm = MPI_Comm_f2c(static_cast<MPI_Fint>(fortran_comm));
  int size = 0;
  SAMBA_CHECK(comm != MPI_COMM_NULL && MPI_Comm_size(comm, &size) == MPI_SUCCESS,
              Status::InvalidArgument,
              "samba_dist_init_with_comm: {} is not a valid communicator (from MPI_Comm_c2f)",
              fortran_comm);
  init_locked(comm, true);
}

void finalize() {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_world) g_finalized = true;
  g_world.reset();
}

void abort_job(int exit_code, std::string_view reason) {
  Communicator* c = world();
  if (!c) return;
  static_cast<MpiCommunicator*>(c)->abort(exit_code, reason);
}

}  // namespace samba::dist
