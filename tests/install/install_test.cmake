# Driver of the install.consumers test; see CMakeLists.txt beside it.
# Every step must succeed; the first failure stops the test with its output.
function(run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}):\n${out}")
  endif()
  message(STATUS "${what}: ok")
  set(run_output "${out}" PARENT_SCOPE)
endfunction()

set(prefix ${WORK_DIR}/prefix)
file(REMOVE_RECURSE ${WORK_DIR})
run("install" ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix} --config ${CONFIG})

# The shared library carries the ABI major version in its SONAME.
file(GLOB_RECURSE shared_libs ${prefix}/lib*/libsamba.so)
list(LENGTH shared_libs n)
if(NOT n EQUAL 1)
  message(FATAL_ERROR "expected one installed libsamba.so, found: ${shared_libs}")
endif()
get_filename_component(libdir ${shared_libs} DIRECTORY)
run("readelf" readelf -d ${shared_libs})
if(NOT run_output MATCHES "Library soname: \\[libsamba\\.so\\.${ABI_MAJOR}\\]")
  message(FATAL_ERROR "expected SONAME libsamba.so.${ABI_MAJOR}:\n${run_output}")
endif()
foreach(f ${prefix}/include/samba.h ${prefix}/include/samba/torch.hpp ${libdir}/libsamba.a ${libdir}/pkgconfig/samba.pc
          ${libdir}/cmake/Samba/SambaConfig.cmake)
  if(NOT EXISTS ${f})
    message(FATAL_ERROR "not installed: ${f}")
  endif()
endforeach()

# The Python package: imported from the prefix with nothing set but
# PYTHONPATH, it loads the prefix's library (its libsamba.so.0 is a relative
# link), not a build tree's.
if(PYTHON)
  set(pythondir ${prefix}/${PYTHONDIR})
  run("import sambaflow.samba from the prefix" ${CMAKE_COMMAND} -E env --unset=SAMBA_LIBRARY PYTHONPATH=${pythondir}
      ${PYTHON} -c "import sys, sambaflow.samba\nprint(sys.modules['sambaflow.samba._lib'].path)")
  string(STRIP "${run_output}" loaded)
  file(REAL_PATH "${loaded}" loaded)
  file(REAL_PATH "${libdir}/libsamba.so.${ABI_MAJOR}" installed)
  if(NOT loaded STREQUAL installed)
    message(FATAL_ERROR "sambaflow.samba loaded ${loaded}, expected the installed ${installed}")
  endif()
endif()

# 1. find_package(Samba): a separate CMake project configured against the prefix.
set(consumer_build ${WORK_DIR}/cmake-consumer)
run("configure find_package consumer" ${CMAKE_COMMAND} -S ${SOURCE_DIR}/consumer -B ${consumer_build}
    -G ${GENERATOR} -DCMAKE_BUILD_TYPE=${CONFIG} -DCMAKE_PREFIX_PATH=${prefix}
    -DCMAKE_C_COMPILER=${C_COMPILER} -DCMAKE_CXX_COMPILER=${CXX_COMPILER}
    "-DCMAKE_C_FLAGS=${SANITIZE_FLAGS}" "-DCMAKE_CXX_FLAGS=${SANITIZE_FLAGS}"
    "-DCMAKE_EXE_LINKER_FLAGS=${SANITIZE_FLAGS} ${SANITIZE_C_LINK}")
run("build find_package consumer" ${CMAKE_COMMAND} --build ${consumer_build} --config ${CONFIG})
# CMake gives build-tree executables an RPATH to the imported library.
foreach(exe consumer_shared consumer_static consumer_cpp)
  run("run ${exe}" ${consumer_build}/${exe})
endforeach()

# 2. pkg-config: a plain compiler call with the flags the .pc file gives.
if(NOT PKG_CONFIG)
  message(FATAL_ERROR "pkg-config not found (make setup installs it)")
endif()
set(ENV{PKG_CONFIG_PATH} ${libdir}/pkgconfig)
run("pkg-config" ${PKG_CONFIG} --cflags --libs samba)
separate_arguments(pc_flags UNIX_COMMAND "${run_output}")
separate_arguments(san_flags UNIX_COMMAND "${SANITIZE_FLAGS}")
separate_arguments(san_c_link UNIX_COMMAND "${SANITIZE_C_LINK}")
set(pc_exe ${WORK_DIR}/pkgconfig-consumer)
run("build pkg-config consumer" ${C_COMPILER} -std=c99 -Wall -Wextra -Werror -pedantic ${san_flags}
    ${SOURCE_DIR}/consumer/consumer.c -o ${pc_exe} ${pc_flags} ${san_c_link})
# samba.pc's Libs carry an rpath to libdir (unless SAMBA_PKGCONFIG_RPATH is
# off): the consumer runs with nothing in LD_LIBRARY_PATH, as a user's
# program linked this way would.
if(PC_RPATH)
  run("run pkg-config consumer" ${CMAKE_COMMAND} -E env --unset=LD_LIBRARY_PATH ${pc_exe})
else()
  run("run pkg-config consumer" ${CMAKE_COMMAND} -E env LD_LIBRARY_PATH=${libdir} ${pc_exe})
endif()
