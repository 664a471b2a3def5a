// The distributed context of a library built without MPI: a plain process,
// and UNSUPPORTED for every call that needs MPI.
#include "engine/core/error.h"
#include "engine/dist/communicator.h"

namespace samba::dist {

bool built_with_mpi() { return false; }
Communicator* world() { return nullptr; }
void init() { fail(Status::Unsupported, "samba_dist_init: {}", kNoMpi); }
void init_with_comm(int64_t) { fail(Status::Unsupported, "samba_dist_init_with_comm: {}", kNoMpi); }
void finalize() {}
void abort_job(int, std::string_view) {
  SAMBA_CHECK(!launched_by_mpirun(), Status::Unsupported, "samba_dist_abort: {}", kNoMpi);
}

}  // namespace samba::dist
