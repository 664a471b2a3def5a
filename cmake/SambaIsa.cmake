# What the library is compiled for, and the kernel files compiled once per ISA
# level (selected at load by engine/core/isa.cpp).
#
# Default: a baseline every x86-64 CPU of the last decade runs
# (SAMBA_X86_BASELINE, x86-64-v2), so a built library can be shipped; the GEMM
# kernels of engine/kernels/x86/ are compiled once per level with that level's
# flags and picked at load from CPUID. SAMBA_NATIVE=ON vectorizes everything
# for the build machine instead (local experiments). Other architectures build
# the generic path only (no x86 intrinsics are compiled there).
#
# Sets SAMBA_ARCH_FLAGS (for every C++ file), SAMBA_ISA_SOURCES (the per-level
# kernel files, with their flags set), SAMBA_ISA_DEFINITIONS (which levels are
# built) and SAMBA_ISA_HOST_LEVELS (the levels the build machine runs, for the
# per-level test runs).
set(SAMBA_X86_BASELINE "x86-64-v2" CACHE STRING "-march of the portable build (SAMBA_NATIVE=OFF) on x86-64")

set(SAMBA_ARCH_FLAGS "")
set(SAMBA_ISA_SOURCES "")
set(SAMBA_ISA_DEFINITIONS "")
set(SAMBA_ISA_HOST_LEVELS generic)

if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64)$")
  if(SAMBA_NATIVE)
    include(${CMAKE_CURRENT_LIST_DIR}/SambaNativeFlags.cmake)
    set(SAMBA_ARCH_FLAGS ${SAMBA_NATIVE_FLAGS})
  else()
    set(SAMBA_ARCH_FLAGS -march=${SAMBA_X86_BASELINE} -mtune=generic)
  endif()

  # The AVX-512 kernel file holds intrinsics only, built with the
  # auto-vectorizer off: GCC 12.2's AVX-512 miscompile (see
  # SambaNativeFlags.cmake) is in the vector constants the vectorizer builds
  # from scalar code, which then never exist there. The check stays as a
  # guard, run with exactly the file's flags; where it still fails the level
  # is not built and the library stops at AVX2.
  set(SAMBA_AVX2_FLAGS -mavx2 -mfma -mf16c)
  set(SAMBA_AVX512_FLAGS ${SAMBA_AVX2_FLAGS} -mavx512f -mavx512bw -mavx512vl -mavx512dq -fno-tree-vectorize)
  # The AVX512_BF16 file (vdpbf16ps) adds one extension to the same flags,
  # and is checked with them like the AVX-512 files.
  set(SAMBA_AVX512_BF16_FLAGS ${SAMBA_AVX512_FLAGS} -mavx512bf16)
  # The levels this machine runs, for the per-level test runs.
  if(NOT CMAKE_CROSSCOMPILING)
    try_run(_samba_levels_run _samba_levels_compile ${CMAKE_BINARY_DIR}/checks/cpu_isa_levels
            ${CMAKE_CURRENT_LIST_DIR}/checks/cpu_isa_levels.cpp RUN_OUTPUT_VARIABLE _levels)
    if(_samba_levels_compile AND _samba_levels_run EQUAL 0)
      string(STRIP "${_levels}" SAMBA_ISA_HOST_LEVELS)
    endif()
  endif()
  # The check runs where the CPU has the level; elsewhere it cannot (the flags
  # are then trusted, and the level is never selected on that machine anyway).
  # Sets <ok_var> FALSE when the compiler miscompiles the check with <flags>.
  function(samba_check_kernel_flags ok_var level flags)
    set(${ok_var} TRUE PARENT_SCOPE)
    if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND "${level}" IN_LIST SAMBA_ISA_HOST_LEVELS)
      try_run(_samba_${level}_run _samba_${level}_compile ${CMAKE_BINARY_DIR}/checks/${level}_kernel_flags
              ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/checks/avx512_vector_constant.cpp
              COMPILE_DEFINITIONS -O3 ${flags} CMAKE_FLAGS -DCMAKE_CXX_STANDARD=17)
      if(NOT _samba_${level}_compile OR NOT _samba_${level}_run EQUAL 0)
        set(${ok_var} FALSE PARENT_SCOPE)
      endif()
    endif()
  endfunction()
  samba_check_kernel_flags(_avx512_ok avx512 "${SAMBA_AVX512_FLAGS}")
  if(NOT _avx512_ok)
    message(STATUS "Samba: ${CMAKE_CXX_COMPILER_ID} ${CMAKE_CXX_COMPILER_VERSION} miscompiles the "
                   "AVX-512 kernel files; the AVX-512 level is not built")
    list(REMOVE_ITEM SAMBA_ISA_HOST_LEVELS avx512 avx512_bf16)
  endif()
  set(_avx512_bf16_ok FALSE)
  if(_avx512_ok)
    samba_check_kernel_flags(_avx512_bf16_ok avx512_bf16 "${SAMBA_AVX512_BF16_FLAGS}")
    if(NOT _avx512_bf16_ok)
      message(STATUS "Samba: ${CMAKE_CXX_COMPILER_ID} ${CMAKE_CXX_COMPILER_VERSION} miscompiles the "
                     "AVX512_BF16 kernel file; bf16 products use the AVX-512 level's widened kernel")
    endif()
  endif()

  # Every x86/*_<level>.cpp file is a kernel file of that level.
  set(_dir ${CMAKE_SOURCE_DIR}/engine/kernels/x86)
  file(GLOB _avx2_files CONFIGURE_DEPENDS ${_dir}/*_avx2.cpp)
  file(GLOB _avx512_files CONFIGURE_DEPENDS ${_dir}/*_avx512.cpp)
  list(APPEND SAMBA_ISA_SOURCES ${_avx2_files})
  set_source_files_properties(${_avx2_files} PROPERTIES COMPILE_OPTIONS "${SAMBA_AVX2_FLAGS}")
  list(APPEND SAMBA_ISA_DEFINITIONS SAMBA_ISA_AVX2_BUILT)
  if(_avx512_ok)
    list(APPEND SAMBA_ISA_SOURCES ${_avx512_files})
    set_source_files_properties(${_avx512_files} PROPERTIES COMPILE_OPTIONS "${SAMBA_AVX512_FLAGS}")
    list(APPEND SAMBA_ISA_DEFINITIONS SAMBA_ISA_AVX512_BUILT)
  endif()
  if(_avx512_bf16_ok)
    list(APPEND SAMBA_ISA_SOURCES ${_dir}/bf16gemm_avx512bf16.cpp)
    set_source_files_properties(${_dir}/bf16gemm_avx512bf16.cpp PROPERTIES COMPILE_OPTIONS
                                "${SAMBA_AVX512_BF16_FLAGS}")
    list(APPEND SAMBA_ISA_DEFINITIONS SAMBA_ISA_AVX512_BF16_BUILT)
  endif()
endif()
message(STATUS "Samba: compiled for ${SAMBA_ARCH_FLAGS}; kernel levels built: generic "
               "${SAMBA_ISA_DEFINITIONS}; this machine runs: ${SAMBA_ISA_HOST_LEVELS}")
