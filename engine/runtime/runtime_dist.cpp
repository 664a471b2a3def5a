// The data-parallel members of Runtime: the start-up checks and transfers a
// job's ranks make together, and the REDUCE step of a run.
#include <optional>

#include "engine/core/error.h"
#include "engine/io/frame_codec.h"
#include "engine/pef/writer.h"
#include "engine/profile/profile_events.h"
#include "engine/profile/profiler.h"
#include "engine/runtime/data_parallel.h"
#include "engine/runtime/runtime.h"

namespace samba::runtime {

DataParallelMode data_parallel_mode_from_name(std::string_view name) {
  if (name == "normal") return DataParallelMode::Normal;
  if (name == "inorder") return DataParallelMode::InOrder;
  if (name == "optimal") return DataParallelMode::Optimal;
  fail(Status::InvalidArgument,
       "data_parallel_mode '{}' is unknown; expected 'normal', 'inorder' or 'optimal'", name);
}

namespace {

// What must be equal on every rank: the program without its initial values
// (ranks that initialized weights differently embed different blobs; rank
// 0's values are broadcast anyway) and without who compiled it.
uint64_t program_fingerprint(const pef::ProgramDesc& d) {
  pef::ProgramDesc shape_only = d;
  for (auto& b : shape_only.blobs) b.data.clear();
  shape_only.compiler_version.clear();
  shape_only.metadata.clear();
  return xxh64(pef::serialize_pef(shape_only));
}

}  // namespace

void Runtime::check_same_program(dist::Communicator& comm) {
  const auto& d = program_->desc();
  struct Identity {
    uint64_t fingerprint;
    int64_t world_size;
  };
  // Every rank's identity after this rank's own (kept alive if the wait fails).
  auto ids = std::make_shared<std::vector<Identity>>(static_cast<size_t>(comm.size()) + 1);
  (*ids)[0] = {program_fingerprint(d), d.data_parallel.world_size};
  auto c = comm.start_allgather(ids->data(), sizeof(Identity), ids->data() + 1);
  dist::wait(comm, std::move(c), ids, "trace_graph: comparing the PEF across ranks");
  const Identity* all = ids->data() + 1;
  std::vector<int> differ;
  for (int r = 1; r < comm.size(); ++r)
    if (all[static_cast<size_t>(r)].fingerprint != all[0].fingerprint) differ.push_back(r);
  SAMBA_CHECK(differ.empty(), Status::InvalidArgument,
              "trace_graph: rank(s) {} loaded a different program than rank 0 (PEF '{}' differs in "
              "its tensors, "
              "kernels, schedule or data-parallel settings); every rank must load the same PEF",
              fmt::join(differ, ", "), d.name);
  if (d.data_parallel.world_size > 0)
    SAMBA_CHECK(
        d.data_parallel.world_size == comm.size(), Status::InvalidArgument,
        "trace_graph: PEF '{}' was compiled for {} data-parallel replicas; the job has {} ranks "
        "(recompile with --data-parallel -ws {}, or launch mpirun -np {})",
        d.name, d.data_parallel.world_size, comm.size(), comm.size(), d.data_parallel.world_size);
}

void Runtime::broadcast_state(dist::Communicator& comm, uint32_t roles, int root) {
  std::optional<ProfileScope> scope;
  if (profiler_)
    scope.emplace(*profiler_, profile_events::kSetTensorsBroadcast, ProfileCategory::Runtime);
  std::unique_lock<std::shared_mutex> unique = lock_state_for_writing();
  std::unique_lock<std::mutex> lock(primary_mu_);
  const auto& d = program_->desc();
  for (size_t i = 0; i < d.tensors.size(); ++i) {
    const auto& td = d.tensors[i];
    if (!((roles >> static_cast<unsigned>(td.role)) & 1u) || pef::in_activation_area(td.role) ||
        td.nbytes == 0)
      continue;
    const Tensor& t = primary_->full_tensor(static_cast<int32_t>(i));
    auto c = comm.start_broadcast(t.raw_data(), t.nbytes(), root);
    dist::wait(comm, *c, fmt::format("broadcast of '{}' from rank {}", td.name, root));
  }
}

std::vector<Tensor> Runtime::gather(dist::Communicator* comm,
                                    const std::vector<std::string>& names) {
  std::optional<ProfileScope> scope;
  if (profiler_)
    scope.emplace(*profiler_, profile_events::kGetTensorsGather, ProfileCategory::Runtime);
  std::vector<Tensor> local;
  for (const std::string& n : names) local.push_back(read(n));
  if (!comm) return local;
  const int n_ranks = comm->size();
  std::vector<Tensor> out(names.size());
  for (size_t i = 0; i < names.size(); ++i) {
    const Tensor& v = local[i];
    SAMBA_CHECK(!v.shape().empty(), Status::InvalidArgument,
                "gather_tensors_by_name: '{}' is a scalar; gathering concatenates along dim 0",
                names[i]);
    if (comm->rank() == 0) {
      Dims shape = v.shape();
      shape[0] *= n_ranks;
      out[i] = Tensor::empty(shape, v.dtype());
      out[i].impl()->name = names[i];
    }
    auto c = comm->start_gather(v.raw_data(), v.nbytes(),
                                comm->rank() == 0 ? out[i].raw_data() : nullptr, 0);
    dist::wait(*comm, std::move(c), std::make_shared<std::pair<Tensor, Tensor>>(v, out[i]),
               fmt::format("gather of '{}' to rank 0", names[i]));
  }
  return out;
}

// Checks a data-parallel request against the program and the job, and
// makes the step's state on first use. Returns null for a run that does
// not reduce.
DataParallelStep* Runtime::data_parallel_step(const RunRequest& r,
                                              const std::vector<int32_t>& calls) {
  const auto& d = program_->desc();
  if (!r.data_parallel) return nullptr;
  SAMBA_CHECK(
      d.data_parallel.world_size > 0, Status::InvalidArgument,
      "run: data_parallel needs a PEF compiled for data parallel; PEF '{}' was not (recompile with "
      "--data-parallel -ws N, samba_compile_options_set_data_parallel)",
      d.name);
  dist::Communicator& comm = dist::require_world("run: data_parallel");
  SAMBA_CHECK(comm.size() == d.data_parallel.world_size, Status::InvalidArgument,
              "run: PEF '{}' was compiled for {} data-parallel replicas; the job has {} ranks "
              "(recompile with "
              "--data-parallel -ws {}, or launch mpirun -np {})",
              d.name, d.data_parallel.world_size, comm.size(), comm.size(),
              d.data_parallel.world_size);
  bool reduces = false;
  for (int32_t c : calls)
    reduces |=
        d.sections[static_cast<size_t>(d.schedule[c].section)].type == pef::SectionType::REDUCE;
  if (!reduces) return nullptr;
  if (!data_parallel_) data_parallel_ = std::make_unique<DataParallelStep>(*program_, state_, comm);
  return data_parallel_.get();
}

}  // namespace samba::runtime
