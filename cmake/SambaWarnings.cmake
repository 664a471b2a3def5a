# Warnings are errors in Samba's own code; third-party headers are system includes.
#
# GCC 12 before 12.3 (Debian bookworm has 12.2) reports the AVX-512
# intrinsics' deliberately undefined registers (_mm512_undefined_epi32 and
# friends, GCC bug 105593) as "used uninitialized" wherever Eigen's AVX-512
# code is inlined into ours, so -isystem does not hide them. On such a
# compiler the two uninitialized warnings are turned off, or whether Samba
# builds would depend on the ISA of the machine (-march=native) it builds on.
set(SAMBA_GCC_AVX512_NOISE
    $<$<AND:$<CXX_COMPILER_ID:GNU>,$<VERSION_LESS:$<CXX_COMPILER_VERSION>,12.3>>:-Wno-uninitialized;-Wno-maybe-uninitialized>)
function(samba_warnings target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Werror -Wno-unused-parameter ${SAMBA_GCC_AVX512_NOISE}>
    $<$<COMPILE_LANGUAGE:C>:-Wall -Wextra -Werror>)
endfunction()
