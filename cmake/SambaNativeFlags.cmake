# Flags that vectorize for the build machine (SAMBA_NATIVE=ON), minus what the
# compiler gets wrong there. The result is SAMBA_NATIVE_FLAGS.
#
# GCC 12.2 (Debian bookworm's) miscompiles constant vectors that mix NaN with
# other values once AVX-512 is enabled: {NaN, NaN, NaN, 0} becomes four NaNs.
# The check below compiles and runs such a constant with -march=native; when
# the result is wrong, AVX-512 code generation is turned off (-mno-avx512f).
# AVX2 and FMA stay, so the float kernels keep their vector width on the
# machines this matters for (Zen 4 runs 512-bit FMAs as two 256-bit halves).
set(SAMBA_NATIVE_FLAGS -march=native)
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND NOT CMAKE_CROSSCOMPILING)
  try_run(_samba_vc_run _samba_vc_compile
          ${CMAKE_BINARY_DIR}/checks/avx512_vector_constant
          ${CMAKE_CURRENT_LIST_DIR}/checks/avx512_vector_constant.cpp
          COMPILE_DEFINITIONS -O2 -march=native
          CMAKE_FLAGS -DCMAKE_CXX_STANDARD=17
          RUN_OUTPUT_VARIABLE _samba_vc_out)
  if(_samba_vc_compile AND NOT _samba_vc_run EQUAL 0)
    list(APPEND SAMBA_NATIVE_FLAGS -mno-avx512f)
    message(STATUS "Samba: ${CMAKE_CXX_COMPILER_ID} ${CMAKE_CXX_COMPILER_VERSION} miscompiles "
                   "AVX-512 vector constants on this machine; building with -march=native -mno-avx512f")
  endif()
endif()
