# The Python package sambaflow.samba (bindings/python/sambaflow): pure Python
# over ctypes, which loads libsamba.so.0 from the package's own directory
# first (bindings/python/sambaflow/samba/_lib.py).
#
# - A wheel (pyproject.toml, scikit-build-core, which sets SKBUILD): the
#   package's files are copied by the backend; the one thing CMake installs,
#   as the `python` component, is the library into the package directory.
#   The file is copied, not linked: a wheel holds no symlinks.
# - make install (the package alone: cmake --install build --component
#   python): the package into SAMBA_INSTALL_PYTHONDIR (relative to the
#   prefix), with libsamba.so.0 in it a relative symlink to the installed
#   library, so the tree stays relocatable.
if(SKBUILD)
  install(FILES $<TARGET_FILE:samba> DESTINATION sambaflow/samba RENAME libsamba.so.${SAMBA_ABI_MAJOR}
          COMPONENT python)
  return()
endif()

# Debian's interpreters search PREFIX/lib/python3/dist-packages for /usr; for
# another prefix, PYTHONPATH names it (docs/user-guide.md, "Python").
set(SAMBA_INSTALL_PYTHONDIR "lib/python3/dist-packages"
    CACHE STRING "Where make install puts the Python package sambaflow, relative to the prefix")
install(DIRECTORY bindings/python/sambaflow DESTINATION ${SAMBA_INSTALL_PYTHONDIR} COMPONENT python
        PATTERN "__pycache__" EXCLUDE)
file(RELATIVE_PATH _samba_lib_from_package "/prefix/${SAMBA_INSTALL_PYTHONDIR}/sambaflow/samba"
     "/prefix/${CMAKE_INSTALL_LIBDIR}/libsamba.so.${SAMBA_ABI_MAJOR}")
install(CODE "
  set(_pkg \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${SAMBA_INSTALL_PYTHONDIR}/sambaflow/samba\")
  message(STATUS \"Installing: \${_pkg}/libsamba.so.${SAMBA_ABI_MAJOR} -> ${_samba_lib_from_package}\")
  file(CREATE_LINK \"${_samba_lib_from_package}\" \"\${_pkg}/libsamba.so.${SAMBA_ABI_MAJOR}\" SYMBOLIC)"
  COMPONENT python)
