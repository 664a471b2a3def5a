# Precompiled headers. Every engine and test file includes Eigen/Core (through
# engine/core/dtype.h, for its bf16 and half types) and most of the standard
# library; parsed once per target instead of once per file, they took about
# half of a build's compile time (4.7 s of a typical file's 10 s on a 2 GHz
# core). One header set serves the engine (samba_pch_engine) and one
# precompiled header serves every C++ test executable (samba_pch_test, reused
# from one of them, so it is compiled once).
#
# Only third-party and standard headers go in: a change to Samba's own headers
# then rebuilds the files that include them, as without precompiled headers.
# Files built with other flags (the per-ISA kernel files, the C ABI's -g files,
# the RNG's -ffp-contract=off) skip it, since a precompiled header is valid
# only with the flags it was made with. SAMBA_PCH=OFF builds without.
option(SAMBA_PCH "Precompile the standard and third-party headers every file includes" ON)

set(SAMBA_PCH_HEADERS
  <algorithm> <array> <atomic> <cmath> <cstddef> <cstdint> <cstring> <functional> <limits> <map>
  <memory> <mutex> <optional> <span> <string> <string_view> <unordered_map> <unordered_set>
  <utility> <vector> <Eigen/Core> <fmt/format.h>)

# clang writes the headers' timestamps into a precompiled header, which
# would make every ccache hit of a file built with it a miss.
function(samba_pch_ccache target)
  if(CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    target_compile_options(${target} PRIVATE "SHELL:-Xclang -fno-pch-timestamp")
  endif()
endfunction()

# samba_pch_engine(target [skipped sources...])
function(samba_pch_engine target)
  if(NOT SAMBA_PCH)
    return()
  endif()
  target_precompile_headers(${target} PRIVATE ${SAMBA_PCH_HEADERS})
  samba_pch_ccache(${target})
  if(ARGN)
    set_source_files_properties(${ARGN} PROPERTIES SKIP_PRECOMPILE_HEADERS ON)
  endif()
endfunction()

# samba_pch_test(target [group]): the first test target of a group makes its
# precompiled header (with GoogleTest's header added); every later one of the
# group reuses it. A group's targets must share its compile flags and
# definitions: the sanitizer trees' tests built at -O0 are one group, those
# at the tree's -O1 another (tests/CMakeLists.txt).
function(samba_pch_test target)
  if(NOT SAMBA_PCH)
    return()
  endif()
  set(_owner_property SAMBA_PCH_TEST_OWNER${ARGN})
  get_property(_first GLOBAL PROPERTY ${_owner_property})
  if(NOT _first)
    target_precompile_headers(${target} PRIVATE ${SAMBA_PCH_HEADERS} <gtest/gtest.h>)
    set_property(GLOBAL PROPERTY ${_owner_property} ${target})
  else()
    target_precompile_headers(${target} REUSE_FROM ${_first})
  endif()
  samba_pch_ccache(${target})
endfunction()
