#include "engine/kernels/wide_float_math.h"

#include "engine/core/isa.h"

namespace samba::ops::ew {

const WideFloatMath& wide_float_math() {
  static const WideFloatMath none{};
#if defined(SAMBA_ISA_AVX512_BUILT)
  static const WideFloatMath& active =
      active_isa() >= IsaLevel::Avx512 ? wide_float_math_avx512() : none;
  return active;
#else
  return none;
#endif
}

}  // namespace samba::ops::ew
