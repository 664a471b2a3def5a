// The runtime's state as files: checkpoints (full training state) and
// safetensors (weights exchanged with PyTorch and Hugging Face), both saved
// from and loaded into the primary context's state tensors.
#include <mutex>
#include <shared_mutex>

#include "engine/checkpoint/checkpoint.h"
#include "engine/checkpoint/safetensors.h"
#include "engine/runtime/runtime.h"

namespace samba::runtime {

namespace {

CheckpointKind checkpoint_kind(pef::TensorRole r) {
  switch (r) {
    case pef::TensorRole::Parameter:
      return CheckpointKind::Parameter;
    case pef::TensorRole::OptimizerState:
      return CheckpointKind::OptimizerState;
    case pef::TensorRole::Buffer:
      return CheckpointKind::Buffer;
    case pef::TensorRole::Gradient:
      return CheckpointKind::Gradient;
    default:
      return CheckpointKind::Other;
  }
}

bool selected(uint32_t roles, pef::TensorRole r) {
  return (roles >> static_cast<unsigned>(r)) & 1u;
}

}  // namespace

std::vector<CheckpointEntry> Runtime::state_snapshot(uint32_t roles) {
  const auto& d = program_->desc();
  std::vector<CheckpointEntry> entries;
  std::shared_lock<std::shared_mutex> shared(state_mu_);
  std::unique_lock<std::mutex> lock(primary_mu_);
  for (size_t i = 0; i < d.tensors.size(); ++i) {
    const auto& t = d.tensors[i];
    if (t.role == pef::TensorRole::Alias || !selected(roles, t.role)) continue;
    entries.push_back(
        {t.name, checkpoint_kind(t.role), primary_->tensor(static_cast<int32_t>(i)).clone()});
  }
  return entries;
}

void Runtime::load_state(
    uint32_t roles,
    const std::function<void(std::span<const CheckpointTarget>, CheckpointKindMask)>& load) {
  const auto& d = program_->desc();
  std::unique_lock<std::shared_mutex> unique = lock_state_for_writing();
  std::unique_lock<std::mutex> lock(primary_mu_);
  std::vector<CheckpointTarget> targets;
  CheckpointKindMask kinds = 0;
  for (size_t i = 0; i < d.tensors.size(); ++i) {
    const auto& t = d.tensors[i];
    if (t.role == pef::TensorRole::Alias || !selected(roles, t.role)) continue;
    targets.push_back({t.name, primary_->tensor(static_cast<int32_t>(i))});
    kinds |= kind_bit(checkpoint_kind(t.role));
  }
  load(targets, kinds);
}

void Runtime::save_checkpoint(const std::string& path, uint32_t roles) {
  samba::save_checkpoint(
      path, state_snapshot(roles),
      {{"program", program_->desc().name}, {"step", std::to_string(step_.load())}});
}

void Runtime::load_checkpoint(const std::string& path, uint32_t roles, bool strict) {
  load_state(roles, [&](std::span<const CheckpointTarget> targets, CheckpointKindMask kinds) {
    LoadOptions opts;
    opts.strict = strict;
    opts.kinds = kinds;
    samba::load_checkpoint(path, targets, opts);
  });
}

void Runtime::save_safetensors(const std::string& path, uint32_t roles) {
  samba::save_safetensors(path, state_snapshot(roles),
                          {{"format", "pt"},
                           {"producer", "samba"},
                           {"program", program_->desc().name},
                           {"step", std::to_string(step_.load())}});
}

LoadReport Runtime::load_safetensors(const std::string& path, uint32_t roles,
                                     const SafetensorsLoadOptions& options) {
  LoadReport report;
  load_state(roles, [&](std::span<const CheckpointTarget> targets, CheckpointKindMask) {
    report = samba::load_safetensors(path, targets, options);
  });
  return report;
}

}  // namespace samba::runtime
