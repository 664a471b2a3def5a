// Prints the kernel ISA levels this CPU runs (as SAMBA_ISA spells them),
// ";"-separated: cmake/SambaIsa.cmake registers one run of the kernel tests
// per level. Kept in step with engine/core/isa.cpp's detection.
#include <cstdio>

int main() {
  std::printf("generic");
#if defined(__x86_64__)
  __builtin_cpu_init();
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  const bool avx512 = avx2 && __builtin_cpu_supports("avx512f") &&
                      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
                      __builtin_cpu_supports("avx512dq");
  if (avx2) std::printf(";avx2");
  if (avx512) std::printf(";avx512");
  if (avx512 && __builtin_cpu_supports("avx512bf16")) std::printf(";avx512_bf16");
#endif
  std::printf("\n");
  return 0;
}
