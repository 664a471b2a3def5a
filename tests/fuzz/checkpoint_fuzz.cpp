// libFuzzer target for checkpoint loading: any bytes, loaded through the C
// ABI into a session holding the convolutional model of fuzz_models.h
// (parameters, batch-norm buffers, AdamW state), are either refused with a
// status and a message naming the problem and no device tensor changed, or
// loaded, after which a training step runs. A crash, a sanitizer report,
// SAMBA_ERR_INTERNAL, an empty message or a refused load that changed a
// tensor is a finding. Each input is loaded twice: every kind, not strict;
// parameters only, strict (the other kinds' entries are still verified).
//
//   build-fuzz/tests/fuzz/checkpoint_fuzz -max_len=65536 tests/fuzz/corpus/checkpoint_fuzz
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "fuzz_models.h"
#include "fuzz_target.h"

namespace {

using namespace samba;

constexpr samba_transfer_kinds kAllKinds =
    SAMBA_TRANSFER_PARAMETERS | SAMBA_TRANSFER_BUFFERS | SAMBA_TRANSFER_OPTIMIZER_STATE;

struct Fixture {
  samba_session* session = nullptr;
  fuzz::FuzzModel model;
  std::string baseline;  // a checkpoint of the state every input starts from
  std::vector<std::string> watched;
  std::vector<std::vector<uint8_t>> watched_bytes;

  Fixture() {
    samba_session_options* o = nullptr;
    samba_session_options_create(&o);
    samba_session_options_set_num_threads(o, 1);
    fuzz::must(samba_session_create(o, &session), "samba_session_create");
    samba_session_options_release(o);
    samba_set_log_level(SAMBA_LOG_ERROR);
    const std::string pef = fuzz::scratch_path(".model.pef");
    fuzz::compile_conv_adamw(session, model, pef);
    fuzz::must(samba_session_load_pef(session, pef.c_str()), "samba_session_load_pef");
    std::remove(pef.c_str());
    baseline = fuzz::scratch_path(".baseline.ckpt");
    fuzz::must(samba_session_save_checkpoint(session, baseline.c_str(), kAllKinds), "save baseline");
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
      fuzz::must(samba_session_get_tensors_by_name(session, &n, 1, &t), "get_tensors_by_name");
      size_t nbytes = 0;
      void* data = nullptr;
      samba_tensor_nbytes(t, &nbytes);
      samba_tensor_data(t, &data);
      out.emplace_back(static_cast<uint8_t*>(data), static_cast<uint8_t*>(data) + nbytes);
      samba_tensor_release(t);
    }
    return out;
  }

  // Loads `path`; true when it loaded. A refusal must leave the state as it was.
  bool load(const std::string& path, samba_transfer_kinds what, int32_t strict) {
    const samba_status st =
        fuzz::judged(samba_session_load_checkpoint(session, path.c_str(), what, strict), "load_checkpoint");
    if (st == SAMBA_OK) return true;
    fuzz::last_refusal = samba_last_error_message();
    if (state() != watched_bytes) fuzz::finding("load_checkpoint", "a refused checkpoint changed device tensors");
    return false;
  }

  void train_step() {
    samba_tensor* loss = nullptr;
    size_t n = 0;
    fuzz::judged(samba_session_run(session, model.inputs.data(), model.inputs.size(), nullptr, 0, nullptr, &loss, 1, &n),
                 "samba_session_run");
    if (n == 1) samba_tensor_release(loss);
  }

  void restore() {
    fuzz::must(samba_session_load_checkpoint(session, baseline.c_str(), kAllKinds, 1), "restore baseline");
  }
};

Fixture& fixture() {
  static Fixture f;
  return f;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fixture();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Fixture& f = fixture();
  static const std::string path = fuzz::scratch_path(".ckpt");
  fuzz::write_scratch(path, data, size);
  fuzz::last_input_accepted = false;
  for (const auto& [what, strict] : {std::pair{kAllKinds, 0}, std::pair{SAMBA_TRANSFER_PARAMETERS, 1}}) {
    if (!f.load(path, what, strict)) continue;
    fuzz::last_input_accepted = true;
    f.train_step();
    f.restore();
  }
  return 0;
}
