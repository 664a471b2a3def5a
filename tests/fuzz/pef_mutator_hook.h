// Structure-aware PEF mutations (tests/pef_mutate): with SAMBA_PEF_MUTATOR
// defined and samba_pef_mutate linked in, the libFuzzer
// binaries of the PEF targets mutate through the FlatBuffers fields (edits
// that keep the file parseable, so inputs get past the reader to the
// verifier and the runtime) three times out of four, and byte-wise
// otherwise (for the reader's own checks). Included by one source per
// target; the replay executables (no libFuzzer) never define it.
#pragma once

#if defined(SAMBA_PEF_MUTATOR) && defined(SAMBA_LIBFUZZER)
#include <cstddef>
#include <cstdint>

size_t mutate_pef(uint8_t* data, size_t size, size_t max_size, unsigned seed);
extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned int seed) {
  if (seed % 4 == 0) return LLVMFuzzerMutate(data, size, max_size);
  return mutate_pef(data, size, max_size, seed / 4);
}
#endif
