// What the targets that load state into a session share: a session holding
// the convolutional model of fuzz_models.h (parameters, batch-norm buffers,
// AdamW state), the device bytes a refused load must leave as they were, a
// training step to run after an accepted load, and the restore to the state
// every input starts from.
#pragma once

#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "fuzz_models.h"
#include "fuzz_target.h"

namespace samba::fuzz {

inline constexpr samba_transfer_kinds kAllKinds =
    SAMBA_TRANSFER_PARAMETERS | SAMBA_TRANSFER_BUFFERS | SAMBA_TRANSFER_OPTIMIZER_STATE;

struct StateFixture {
  samba_session* session = nullptr;
  FuzzModel model;
  std::string baseline;  // a checkpoint of the state every input starts from
  std::vector<std::string> watched;
  std::vector<std::vector<uint8_t>> watched_bytes;

  StateFixture() {
    samba_session_options* o = nullptr;
    samba_session_options_create(&o);
    samba_session_options_set_num_threads(o, 1);
    must(samba_session_create(o, &session), "samba_session_create");
    samba_session_options_release(o);
    samba_set_log_level(SAMBA_LOG_ERROR);
    const std::string pef = scratch_path(".model.pef");
    compile_conv_adamw(session, model, pef);
    must(samba_session_load_pef(session, pef.c_str()), "samba_session_load_pef");
    std::remove(pef.c_str());
    baseline = scratch_path(".baseline.ckpt");
    must(samba_session_save_checkpoint(session, baseline.c_str(), kAllKinds), "save baseline");
    for (samba_tensor* t : model.params) watched.push_back(name_of(t));
    for (samba_tensor* t : model.buffers) watched.push_back(name_of(t));
    watched_bytes = state();
  }

  static std::string name_of(const samba_tensor* t) {
    const char* n = nullptr;
    samba_tensor_name(t, &n);
    return n;
  }

  // The device bytes of the parameters and buffers.
  std::vector<std::vector<uint8_t>> state() const {
    std::vector<std::vector<uint8_t>> out;
    for (const auto& name : watched) {
      const char* n = name.c_str();
      samba_tensor* t = nullptr;
      must(samba_session_get_tensors_by_name(session, &n, 1, &t), "get_tensors_by_name");
      size_t nbytes = 0;
      void* data = nullptr;
      samba_tensor_nbytes(t, &nbytes);
      samba_tensor_data(t, &data);
      out.emplace_back(static_cast<uint8_t*>(data), static_cast<uint8_t*>(data) + nbytes);
      samba_tensor_release(t);
    }
    return out;
  }

  // Judges a load's status; true when it loaded. A refusal must leave the
  // state as it was.
  bool judge_load(samba_status st, const char* call) {
    if (judged(st, call) == SAMBA_OK) return true;
    last_refusal = samba_last_error_message();
    if (state() != watched_bytes) finding(call, "a refused load changed device tensors");
    return false;
  }

  void train_step() {
    samba_tensor* loss = nullptr;
    size_t n = 0;
    judged(samba_session_run(session, model.inputs.data(), model.inputs.size(), nullptr, 0, nullptr,
                             &loss, 1, &n),
           "samba_session_run");
    if (n == 1) samba_tensor_release(loss);
  }

  // Writes the input to `path` and loads it once per (kinds, strict) pass
  // through `load`; each accepted load is trained on for a step, then the
  // starting state comes back.
  template <typename Load>
  void load_each_pass(const std::string& path, const uint8_t* data, size_t size,
                      std::initializer_list<std::pair<samba_transfer_kinds, bool>> passes,
                      Load&& load) {
    write_scratch(path, data, size);
    last_input_accepted = false;
    for (const auto& [what, strict] : passes) {
      if (!load(what, strict)) continue;
      last_input_accepted = true;
      train_step();
      restore();
    }
  }

  void restore() {
    must(samba_session_load_checkpoint(session, baseline.c_str(), kAllKinds, 1),
         "restore baseline");
  }
};

}  // namespace samba::fuzz
