# make install: the header, libsamba.so (SONAME libsamba.so.<ABI major>),
# libsamba.a, a CMake package and a pkg-config file.
#
#   find_package(Samba)                     -> Samba::samba (shared; needs nothing else)
#   find_package(Samba COMPONENTS static)   -> also Samba::samba_static (pulls in TBB and fmt)
#   pkg-config --cflags --libs samba        (add --static for libsamba.a)
#
# Both package files locate the prefix from where they are installed, so an
# install tree can be moved or installed with `cmake --install --prefix DIR`.
include(CMakePackageConfigHelpers)

set(SAMBA_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/Samba)

install(FILES include/samba.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY include/samba DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} OPTIONAL)

# The shared and static libraries are exported separately: the shared one
# hides its dependencies, the static one needs them found in the consumer.
install(TARGETS samba EXPORT SambaTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(TARGETS samba_static EXPORT SambaStaticTargets ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(EXPORT SambaTargets NAMESPACE Samba:: DESTINATION ${SAMBA_CMAKE_DIR})
install(EXPORT SambaStaticTargets NAMESPACE Samba:: DESTINATION ${SAMBA_CMAKE_DIR})

configure_package_config_file(${CMAKE_SOURCE_DIR}/cmake/SambaConfig.cmake.in
  ${CMAKE_BINARY_DIR}/SambaConfig.cmake INSTALL_DESTINATION ${SAMBA_CMAKE_DIR})
write_basic_package_version_file(${CMAKE_BINARY_DIR}/SambaConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES ${CMAKE_BINARY_DIR}/SambaConfig.cmake ${CMAKE_BINARY_DIR}/SambaConfigVersion.cmake
        DESTINATION ${SAMBA_CMAKE_DIR})

# pkg-config: ${pcfiledir} makes the file relocatable; the path from
# <libdir>/pkgconfig back to the prefix depends on how deep libdir is.
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(SAMBA_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
  set(SAMBA_PC_LIBDIR "${CMAKE_INSTALL_LIBDIR}")
else()
  file(RELATIVE_PATH _pc_up "/root/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/root")
  string(REGEX REPLACE "/$" "" _pc_up "${_pc_up}")
  set(SAMBA_PC_PREFIX "\${pcfiledir}/${_pc_up}")
  set(SAMBA_PC_LIBDIR "\${prefix}/${CMAKE_INSTALL_LIBDIR}")
endif()
if(IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
  set(SAMBA_PC_INCLUDEDIR "${CMAKE_INSTALL_INCLUDEDIR}")
else()
  set(SAMBA_PC_INCLUDEDIR "\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}")
endif()
# Libs carries an rpath to libdir, so that a program linked with the flags
# pkg-config gives (a cgo package with `#cgo pkg-config: samba`, a plain
# compiler call) finds libsamba.so in a prefix outside the loader's search
# path without LD_LIBRARY_PATH. A distribution package installing into the
# system libdir turns it off.
option(SAMBA_PKGCONFIG_RPATH "samba.pc's Libs add -Wl,-rpath to the installed libdir" ON)
if(SAMBA_PKGCONFIG_RPATH)
  set(SAMBA_PC_RPATH " -Wl,-rpath,\${libdir}")
else()
  set(SAMBA_PC_RPATH "")
endif()
configure_file(${CMAKE_SOURCE_DIR}/cmake/samba.pc.in ${CMAKE_BINARY_DIR}/samba.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/samba.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
