# The binary ABI of libsamba.so never loses or changes a function: libabigail
# reads the exported samba_* functions and the public types from the library
# (bindings/c is built with full debug info for this) and abidiff compares
# them with the committed baseline tests/abi/samba_abi.xml. A removed
# function, a changed parameter or return type, or a changed public struct
# fails; a new function passes (it is reported; refresh the baseline so it is
# guarded from then on). Beside abi.api_only_grows (check_api.cmake), which
# compares the headers' declarations as text, this checks what the compiler
# actually emitted. Refresh the baseline, after building `samba`, with
#   cmake -DLIB=build/libsamba.so -DINCLUDE_DIRS="include;build/generated/include" \
#         -DBASELINE=tests/abi/samba_abi.xml -DSUPPRESSIONS=tests/abi/samba_abi.suppr \
#         -DWORK_DIR=build -DUPDATE=1 -P tests/abi/check_abi.cmake
# MUTATE=removed|changed checks the gate itself: the baseline copy gets a
# function the library lacks, or a return type the library does not have,
# and the gate must refuse it, naming the function.
foreach(v LIB INCLUDE_DIRS BASELINE SUPPRESSIONS WORK_DIR)
  if(NOT ${v})
    message(FATAL_ERROR "check_abi.cmake needs -D${v}=")
  endif()
endforeach()
find_program(ABIDW abidw)
find_program(ABIDIFF abidiff)
if(NOT ABIDW OR NOT ABIDIFF)
  message(FATAL_ERROR "abidw/abidiff not found: install abigail-tools (make setup)")
endif()

set(headers "")
foreach(dir ${INCLUDE_DIRS})
  list(APPEND headers --headers-dir ${dir})
endforeach()
# Only what callers see: no source locations, parameter names, paths or
# DT_NEEDED list, and type ids hashed from the types, so two builds of the
# same headers (Release or Debug, with or without sanitizers) write the same
# description.
set(current ${WORK_DIR}/samba_abi${MUTATE}.current.xml)  # per test: ctest -j runs them at once
execute_process(
  COMMAND ${ABIDW} ${headers} --suppressions ${SUPPRESSIONS} --drop-private-types --no-show-locs
          --no-comp-dir-path --no-corpus-path --no-parameter-names --no-elf-needed --type-id-style hash
          --out-file ${current} ${LIB}
  RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "abidw failed on ${LIB} (exit ${rc}): ${err}")
endif()
file(READ ${current} text)
string(REGEX MATCHALL "<function-decl name='samba_" decls "${text}")
list(LENGTH decls n_decls)
if(n_decls LESS 100)
  message(FATAL_ERROR "abidw found only ${n_decls} samba_* functions with debug info in ${LIB}; "
                      "bindings/c must be built with -g (CMakeLists.txt)")
endif()

if(UPDATE)
  file(COPY_FILE ${current} ${BASELINE})
  message(STATUS "wrote the ABI of ${n_decls} functions to ${BASELINE}")
  return()
endif()

set(baseline ${BASELINE})
if(MUTATE)
  # samba_version_number: declared `int32_t samba_version_number(void)`.
  file(READ ${BASELINE} base)
  set(fn samba_version_number)
  if(MUTATE STREQUAL "removed")
    set(gone ${fn}_removed_by_the_gate_test)
    string(REPLACE "'${fn}'" "'${gone}'" base "${base}")
    string(REPLACE "'${fn}@@" "'${gone}@@" base "${base}")
    set(expect "${gone}")
  elseif(MUTATE STREQUAL "changed")
    if(NOT base MATCHES "<type-decl name='double'[^>]* id='([^']+)'")
      message(FATAL_ERROR "no double in ${BASELINE}")
    endif()
    set(double_id ${CMAKE_MATCH_1})
    string(REGEX REPLACE "(<function-decl name='${fn}'[^>]*>[ \n]*<return type-id=')[^']+'"
                         "\\1${double_id}'" changed "${base}")
    if(changed STREQUAL base)
      message(FATAL_ERROR "${fn} not found in ${BASELINE}")
    endif()
    set(base "${changed}")
    set(expect "${fn}")
  else()
    message(FATAL_ERROR "MUTATE=${MUTATE}: expected 'removed' or 'changed'")
  endif()
  set(baseline ${WORK_DIR}/samba_abi.${MUTATE}.xml)
  file(WRITE ${baseline} "${base}")
endif()

execute_process(COMMAND ${ABIDIFF} --no-added-syms --no-show-locs ${baseline} ${current}
                RESULT_VARIABLE rc OUTPUT_VARIABLE report ERROR_VARIABLE err)
if(MUTATE)
  # abidiff's exit status is a bit set: 4 an ABI change, 8 an incompatible one.
  if(NOT rc MATCHES "^[0-9]+$" OR rc EQUAL 0 OR NOT report MATCHES "${expect}")
    message(FATAL_ERROR "the ABI gate let a ${MUTATE} function through (abidiff exit ${rc}):\n${report}${err}")
  endif()
  message(STATUS "a ${MUTATE} ${fn} is refused:\n${report}")
  return()
endif()
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "libsamba.so's ABI differs from ${BASELINE} (abidiff exit ${rc}); a function "
                      "was removed or changed. Keep the old function and add a new name (*_v2):\n${report}${err}")
endif()
execute_process(COMMAND ${ABIDIFF} --added-fns --no-show-locs ${BASELINE} ${current} OUTPUT_VARIABLE added)
string(REGEX MATCHALL "\\[A\\] [^\n]*" added "${added}")
list(LENGTH added n_added)
if(n_added GREATER 0)
  string(REPLACE ";" "\n  " added "${added}")
  message(STATUS "${n_added} new function(s), not yet in ${BASELINE} (refresh it: see "
                 "tests/abi/check_abi.cmake):\n  ${added}")
endif()
message(STATUS "ABI: ${n_decls} functions, none removed or changed since ${BASELINE}")
