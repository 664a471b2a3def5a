// Float32 sigmoid and tanh at the AVX-512 level. The elementwise ops are
// compiled at the build's baseline (AVX2 on a native build, since GCC 12's
// AVX-512 miscompile keeps -mno-avx512f there); these 16-lane versions live
// in a kernel file of that level (x86/elementwise_avx512.cpp) and compute each
// element with the same operations as the 8-lane ones of elementwise_math.h
// (sigmoid8, Eigen's rational tanh), so a chain such as layer_norm -> tanh
// runs twice as wide without changing its results.
#pragma once

#include <cstdint>

namespace samba::ops::ew {

struct WideFloatMath {
  using Fn = void (*)(int64_t n, float* o, const float* x);
  Fn sigmoid = nullptr;
  Fn tanh = nullptr;
};

// The versions of the active ISA level (engine/core/isa.h); the members are
// null below AVX-512 or in a build without that level.
const WideFloatMath& wide_float_math();

#if defined(SAMBA_ISA_AVX512_BUILT)
const WideFloatMath& wide_float_math_avx512();
#endif

}  // namespace samba::ops::ew
