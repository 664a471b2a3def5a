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
#include <string>
#include <utility>

#include "state_fixture.h"

namespace {

using namespace samba;
using fuzz::kAllKinds;

struct Fixture : samba::fuzz::StateFixture {
  bool load(const std::string& path, samba_transfer_kinds what, bool strict) {
    return judge_load(samba_session_load_checkpoint(session, path.c_str(), what, strict ? 1 : 0),
                      "load_checkpoint");
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
  f.load_each_pass(
      path, data, size, {{kAllKinds, false}, {SAMBA_TRANSFER_PARAMETERS, true}},
      [&](samba_transfer_kinds what, bool strict) { return f.load(path, what, strict); });
  return 0;
}
