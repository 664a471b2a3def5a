# make install: header, libraries, a CMake package (find_package(Samba)) and a pkg-config file.
include(CMakePackageConfigHelpers)

install(FILES include/samba.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY include/samba DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} OPTIONAL)
install(TARGETS samba EXPORT SambaTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS samba_static ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(EXPORT SambaTargets NAMESPACE Samba:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/Samba)

configure_package_config_file(${CMAKE_SOURCE_DIR}/cmake/SambaConfig.cmake.in
  ${CMAKE_BINARY_DIR}/SambaConfig.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/Samba)
write_basic_package_version_file(${CMAKE_BINARY_DIR}/SambaConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES ${CMAKE_BINARY_DIR}/SambaConfig.cmake ${CMAKE_BINARY_DIR}/SambaConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/Samba)

configure_file(${CMAKE_SOURCE_DIR}/cmake/samba.pc.in ${CMAKE_BINARY_DIR}/samba.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/samba.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
