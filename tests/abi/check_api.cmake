# The stable C API only grows: every function declared by the public headers
# (include/samba.h, include/samba/*.h and the generated typed op functions,
# but not the experimental tier) must appear in the committed list
# tests/abi/samba_api.txt with exactly the same declaration, and nothing may
# be declared that the list lacks. A changed or removed declaration is an ABI
# break (add a new name, e.g. *_v2, instead); a new function is added to the
# list on purpose:
#   cmake -DINCLUDE_DIRS="include;build/generated/include" -DBASELINE=tests/abi/samba_api.txt \
#         -DUPDATE=1 -P tests/abi/check_api.cmake
cmake_policy(SET CMP0057 NEW)
set(headers "")
foreach(dir ${INCLUDE_DIRS})
  file(GLOB found ${dir}/samba.h ${dir}/samba/*.h)
  list(APPEND headers ${found})
endforeach()
set(current "")
foreach(h ${headers})
  get_filename_component(name ${h} NAME)
  if(name STREQUAL "experimental.h")
    continue()
  endif()
  file(READ ${h} text)
  # Comments first, so a declaration's text is only its tokens.
  string(REGEX REPLACE "/\\*([^*]|\\*+[^*/])*\\*+/" "" text "${text}")
  string(REGEX MATCHALL "SAMBA_API[^;{}#]*;" decls "${text}")
  foreach(d ${decls})
    string(REGEX REPLACE "[ \t\r\n]+" " " d "${d}")
    string(REPLACE "( " "(" d "${d}")
    string(REPLACE " )" ")" d "${d}")
    string(REPLACE "SAMBA_API " "" d "${d}")
    list(APPEND current "${d}")
  endforeach()
endforeach()
list(SORT current)
list(LENGTH current n_current)
if(n_current LESS 100)
  message(FATAL_ERROR "only ${n_current} declarations found in ${INCLUDE_DIRS}; the headers moved?")
endif()

if(UPDATE)
  string(REPLACE ";" "\n" out "${current}")
  file(WRITE ${BASELINE} "${out}\n")
  message(STATUS "wrote ${n_current} declarations to ${BASELINE}")
  return()
endif()

file(STRINGS ${BASELINE} baseline)
set(bad "")
foreach(d ${baseline})
  if(NOT d IN_LIST current)
    list(APPEND bad "changed or removed (the ABI only grows): ${d}")
  endif()
endforeach()
foreach(d ${current})
  if(NOT d IN_LIST baseline)
    list(APPEND bad "new, not yet in tests/abi/samba_api.txt (add it with -DUPDATE=1 if meant): ${d}")
  endif()
endforeach()
if(bad)
  string(REPLACE ";" "\n  " msg "${bad}")
  message(FATAL_ERROR "C API check failed:\n  ${msg}")
endif()
message(STATUS "C API: ${n_current} declarations, all as in the committed list")
