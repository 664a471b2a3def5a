# The LibTorch bridge (include/samba/torch.hpp) is header-only and installed
# with the other headers either way; its example and test are built only
# where LibTorch is (Debian's libtorch-dev, or Torch_DIR pointing at a
# LibTorch tree). Without it the configure says so in one line.
option(SAMBA_WITH_LIBTORCH "Build the LibTorch bridge's example and test when LibTorch is found" ON)
set(SAMBA_HAVE_LIBTORCH OFF)
if(NOT SAMBA_WITH_LIBTORCH)
  message(STATUS "LibTorch bridge: off (SAMBA_WITH_LIBTORCH=OFF)")
elseif(SAMBA_SANITIZE STREQUAL "thread")
  # LibTorch's uninstrumented intra-op thread pool would be all TSan reports.
  message(STATUS "LibTorch bridge: not built under ThreadSanitizer")
elseif(SAMBA_FUZZ)
  message(STATUS "LibTorch bridge: not built with the fuzz targets")
else()
  # TorchConfig.cmake (through Caffe2's) prints what it finds even with QUIET.
  set(_samba_log_level "${CMAKE_MESSAGE_LOG_LEVEL}")
  set(CMAKE_MESSAGE_LOG_LEVEL WARNING)
  find_package(Torch QUIET CONFIG)
  set(CMAKE_MESSAGE_LOG_LEVEL "${_samba_log_level}")
  if(Torch_FOUND)
    set(SAMBA_HAVE_LIBTORCH ON)
    message(STATUS "LibTorch bridge: LibTorch ${Torch_VERSION} found; building its example and test")
  else()
    message(STATUS "LibTorch bridge: LibTorch not found (Debian: libtorch-dev); its example and test are not built")
  endif()
endif()

# A C++ target using samba/torch.hpp: LibTorch, libsamba.so, Samba's warnings.
function(samba_libtorch_target target)
  target_link_libraries(${target} PRIVATE samba ${TORCH_LIBRARIES})
  target_include_directories(${target} PRIVATE ${CMAKE_SOURCE_DIR}/include)
  samba_warnings(${target})
endfunction()
