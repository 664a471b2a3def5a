// libFuzzer target for the PEF reader: any bytes either parse into a
// verified program or are refused with samba::Error; anything else (a crash,
// a sanitizer report, another exception) is a bug. Seed corpus: PEFs from
// pef_sample_writer.
//
//   build-fuzz/tests/fuzz/pef_fuzz -max_len=65536 CORPUS_DIR
#include <cstddef>
#include <cstdint>

#include "engine/core/error.h"
#include "engine/pef/reader.h"
#include "fuzz_target.h"
#include "pef_mutator_hook.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  samba::fuzz::last_input_accepted = false;
  try {
    samba::pef::parse_pef({data, size});
    samba::fuzz::last_input_accepted = true;
  } catch (const samba::Error& e) {
    samba::fuzz::last_refusal = e.what();
  }
  return 0;
}
