# The layering test: `cmake -DROOT=<source dir> -P layering.cmake`.
#
# The folders of the project form a strict order; a file may include headers
# of its own folder and of folders in lower layers only. Folders that share
# a layer are independent of each other. From the bottom:
#
#   engine/core                          dtypes, shapes, tensors, attributes, errors, threads
#   engine/io                            atomic files, whole-file reads, the zstd + XXH64 codec
#   engine/memory  engine/rng            pinned pool and staged copies | Philox, materializers
#   engine/kernels                       GEMM, convolution, elementwise, reduction loops
#   engine/ops                           the op registry, its families and autograd
#   engine/pef                           program.h, writer, reader and verifier
#   engine/checkpoint  engine/profile    checkpoint files | the profiler and its reports
#   engine/dist                          the MPI communicator and the REDUCE buckets' all-reduce thread
#   engine/runtime                       program, device, execution, session
#   engine/loader  engine/onnx           the batch loader | the ONNX importer
#   compiler                             depends on engine, never the reverse
#   bindings                             the C ABI and the language bindings over it
#
# docs/ARCHITECTURE.md ("Layers") describes the same order; keep the two alike.
cmake_minimum_required(VERSION 3.22)

set(layers
  "engine/core"
  "engine/io"
  "engine/memory engine/rng"
  "engine/kernels"
  "engine/ops"
  "engine/pef"
  "engine/checkpoint engine/profile"
  "engine/dist"
  "engine/runtime"
  "engine/loader engine/onnx"
  "compiler"
  "bindings")

if(NOT ROOT)
  message(FATAL_ERROR "usage: cmake -DROOT=<source dir> -P layering.cmake")
endif()

set(rank 0)
foreach(layer IN LISTS layers)
  separate_arguments(folders UNIX_COMMAND "${layer}")
  foreach(folder IN LISTS folders)
    set(rank_of_${folder} ${rank})
  endforeach()
  math(EXPR rank "${rank} + 1")
endforeach()
# A layer holds "engine/<folder>"s or a top folder (compiler, bindings) whole.
set(layer_of_path_regex "^(engine/[^/]+|compiler|bindings)/")

function(unit_of path out)
  if(path MATCHES "${layer_of_path_regex}")
    set(${out} "${CMAKE_MATCH_1}" PARENT_SCOPE)
  else()
    set(${out} "" PARENT_SCOPE)
  endif()
endfunction()

file(GLOB_RECURSE sources RELATIVE ${ROOT} ${ROOT}/engine/*.h ${ROOT}/engine/*.cpp
     ${ROOT}/compiler/*.h ${ROOT}/compiler/*.cpp ${ROOT}/bindings/c/*.h ${ROOT}/bindings/c/*.cpp)
set(violations "")
set(checked 0)
foreach(src IN LISTS sources)
  unit_of(${src} from)
  if(NOT DEFINED rank_of_${from})
    string(APPEND violations "\n  ${src}: folder ${from} is in no layer (add it to cmake/checks/layering.cmake)")
    continue()
  endif()
  file(STRINGS ${ROOT}/${src} includes REGEX "^[ \t]*#[ \t]*include[ \t]+\"(engine|compiler|bindings)/")
  foreach(line IN LISTS includes)
    string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]+\"([^\"]+)\".*" "\\1" header "${line}")
    unit_of(${header} to)
    math(EXPR checked "${checked} + 1")
    if(to STREQUAL from)
      continue()
    endif()
    if(NOT DEFINED rank_of_${to})
      string(APPEND violations "\n  ${src} includes ${header}: folder ${to} is in no layer")
    elseif(NOT rank_of_${to} LESS rank_of_${from})
      string(APPEND violations
             "\n  ${src} (${from}, layer ${rank_of_${from}}) includes ${header} (${to}, layer ${rank_of_${to}})")
    endif()
  endforeach()
endforeach()

if(violations)
  message(FATAL_ERROR "includes that go up or across the layers:${violations}\n"
                      "A file may include its own folder and lower layers only.")
endif()
list(LENGTH sources files)
message(STATUS "layering: ${checked} includes in ${files} files follow the layers")
