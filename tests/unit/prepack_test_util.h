// Helpers of the tests of weights packed at load: a buffer for one packed
// operand, a runtime loaded with SAMBA_PREPACK set as asked, one inference.
#pragma once

#include <stdlib.h>

#include <cstdlib>
#include <memory>

#include "compile_test_util.h"
#include "engine/kernels/gemm.h"
#include "engine/runtime/runtime.h"

namespace samba::testing {

// Whether the active ISA level has a kernel that reads weights packed at load.
inline bool level_has_packed_kernel() { return ops::prepacked_b_floats(8, 8) > 0; }

// An aligned buffer for one packed operand.
struct PackBuffer {
  explicit PackBuffer(size_t floats)
      : p(static_cast<float*>(std::aligned_alloc(64, (floats * sizeof(float) + 63) / 64 * 64))) {}
  ~PackBuffer() { std::free(p); }
  PackBuffer(const PackBuffer&) = delete;
  PackBuffer& operator=(const PackBuffer&) = delete;
  float* p;
};

// The runtime with SAMBA_PREPACK set to `prepack` (unset when null).
inline std::unique_ptr<runtime::Runtime> load_prepacked(const pef::ProgramDesc& p, ThreadPool& pool,
                                                        const char* prepack,
                                                        Profiler* profiler = nullptr) {
  if (prepack)
    setenv("SAMBA_PREPACK", prepack, 1);
  else
    unsetenv("SAMBA_PREPACK");
  auto rt = std::make_unique<runtime::Runtime>(round_trip(p), pool, profiler);
  unsetenv("SAMBA_PREPACK");
  return rt;
}

// One run of a program with a single input and output.
inline Tensor run_one(runtime::Runtime& rt, const Tensor& x) {
  runtime::RunRequest r;
  r.inputs = {x};
  return rt.run(r)[0];
}

}  // namespace samba::testing
