// libFuzzer target for safetensors loading: any bytes, loaded through the C
// ABI into a session holding the convolutional model of fuzz_models.h, are
// either refused with a status and a message naming the problem and no
// device tensor changed, or loaded, after which a training step runs. A
// crash, a sanitizer report, SAMBA_ERR_INTERNAL, an empty message or a
// refused load that changed a tensor is a finding. Each input is loaded
// twice: every kind, not strict, through a prefix-stripping name map; and
// parameters and buffers, strict, names as they are.
//
//   build-fuzz/tests/fuzz/safetensors_fuzz -max_len=65536 tests/fuzz/corpus/safetensors_fuzz
#include <string>

#include "state_fixture.h"

namespace {

using namespace samba;

struct Fixture : fuzz::StateFixture {
  bool load(const std::string& path, samba_transfer_kinds what, bool strict) {
    const char* from[] = {"model."};
    const char* to[] = {""};
    const size_t n_map = strict ? 0 : 1;
    return judge_load(samba_session_load_safetensors(session, path.c_str(), what, from, to, n_map,
                                                     strict ? 1 : 0),
                      "load_safetensors");
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
  static const std::string path = fuzz::scratch_path(".safetensors");
  const samba_transfer_kinds state_dict = SAMBA_TRANSFER_PARAMETERS | SAMBA_TRANSFER_BUFFERS;
  f.load_each_pass(
      path, data, size, {{fuzz::kAllKinds, false}, {state_dict, true}},
      [&](samba_transfer_kinds what, bool strict) { return f.load(path, what, strict); });
  return 0;
}
