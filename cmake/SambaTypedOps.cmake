# Typed C functions for every registry op (samba_conv2d(session, x, weight,
# bias, stride, ...)), generated at build time from the registry: a small
# program linked from the engine's objects writes samba/ops_generated.h and
# its implementation, which is compiled into libsamba.so and libsamba.a
# beside the engine's objects (never into them: the generator links those).
set(SAMBA_TYPED_OPS_INCLUDE_DIR ${CMAKE_BINARY_DIR}/generated/include)
set(SAMBA_TYPED_OPS_HEADER ${SAMBA_TYPED_OPS_INCLUDE_DIR}/samba/ops_generated.h)
set(SAMBA_TYPED_OPS_SOURCE ${CMAKE_BINARY_DIR}/generated/ops_generated.cpp)

add_executable(samba_generate_typed_ops ${CMAKE_SOURCE_DIR}/tools/typed_ops/generate_typed_ops.cpp)
target_link_libraries(samba_generate_typed_ops PRIVATE samba_engine)
samba_warnings(samba_generate_typed_ops)

# The hand-written parts: a function they declare is not generated again.
file(GLOB SAMBA_HAND_WRITTEN_HEADERS CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/include/samba/*.h)
add_custom_command(OUTPUT ${SAMBA_TYPED_OPS_HEADER} ${SAMBA_TYPED_OPS_SOURCE}
  COMMAND ${CMAKE_COMMAND} -E make_directory ${SAMBA_TYPED_OPS_INCLUDE_DIR}/samba
  COMMAND samba_generate_typed_ops ${SAMBA_TYPED_OPS_HEADER} ${SAMBA_TYPED_OPS_SOURCE}
          ${SAMBA_HAND_WRITTEN_HEADERS}
  DEPENDS samba_generate_typed_ops ${SAMBA_HAND_WRITTEN_HEADERS}
  COMMENT "typed op functions from the registry" VERBATIM)
add_custom_target(samba_typed_ops_header DEPENDS ${SAMBA_TYPED_OPS_HEADER})

add_library(samba_typed_ops OBJECT ${SAMBA_TYPED_OPS_SOURCE})
target_link_libraries(samba_typed_ops PRIVATE samba_engine)
target_include_directories(samba_typed_ops PRIVATE ${SAMBA_TYPED_OPS_INCLUDE_DIR})
set_target_properties(samba_typed_ops PROPERTIES CXX_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON)
samba_warnings(samba_typed_ops)
# Full debug info for the ABI gate, as for bindings/c (CMakeLists.txt).
target_compile_options(samba_typed_ops PRIVATE -g)

foreach(lib samba samba_static)
  target_sources(${lib} PRIVATE $<TARGET_OBJECTS:samba_typed_ops>)
  target_include_directories(${lib} PUBLIC $<BUILD_INTERFACE:${SAMBA_TYPED_OPS_INCLUDE_DIR}>)
  add_dependencies(${lib} samba_typed_ops_header)
endforeach()
install(FILES ${SAMBA_TYPED_OPS_HEADER} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/samba)
