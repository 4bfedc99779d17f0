# cmake --install: the `gratingsim` executable, and the CMake package `gratingsim` for other projects:
# the static libraries as gratingsim::core, ::convolution, ::physics and ::io, their public headers
# and the generated core/config.hpp under include/gratingsim (the source tree's layout, so
# `#include "physics/structure.hpp"`), and lib/cmake/gratingsim (config, version, exported targets).
# validation/package/ installs a build and builds a consumer project against it.
include(CMakePackageConfigHelpers)

set(gratingsim_library_targets gratingsim_core gratingsim_convolution gratingsim_physics gratingsim_fitting gratingsim_io)
if(TARGET gratingsim_cufft_legacy_callbacks)  # the shared library of gpu-cufft-callbacks' legacy route
  list(APPEND gratingsim_library_targets gratingsim_cufft_legacy_callbacks)
  set_target_properties(gratingsim PROPERTIES INSTALL_RPATH "$ORIGIN/../${CMAKE_INSTALL_LIBDIR}")
endif()
foreach(target IN LISTS gratingsim_library_targets)
  string(REGEX REPLACE "^gratingsim_" "" name ${target})
  set_target_properties(${target} PROPERTIES EXPORT_NAME ${name})  # gratingsim::physics, ...
endforeach()
if(GRATINGSIM_SANITIZE)
  # Instrumented static libraries need the sanitizer runtimes in whatever links them.
  target_link_options(gratingsim_core INTERFACE $<INSTALL_INTERFACE:-fsanitize=address,undefined>)
endif()

install(TARGETS gratingsim RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS ${gratingsim_library_targets} EXPORT gratingsimTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

# Every header at the top of a library's folder is public (subfolders hold kernel internals), except
# the seams that include a vendor header (CUDA; io's HDF5 and yaml-cpp; physics' private Eigen assembly
# helpers, green_tensors.hpp): those stay in the source tree,
# and validation/package/ checks that no installed header names a vendor header.
# The fitting interface (fitting/, and io's measured data, fit settings and fit files that use it) is
# written in Eigen types: not installed yet.
set(gratingsim_private_headers core/cuda_check.hpp core/device_buffer.hpp io/hdf5_handles.hpp io/strict_yaml.hpp
  io/dimension_scales.hpp io/measured.hpp io/fit_settings.hpp io/fit_results.hpp physics/green_tensors.hpp)
foreach(folder IN ITEMS core convolution physics io)
  file(GLOB headers RELATIVE ${PROJECT_SOURCE_DIR} CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/${folder}/*.hpp)
  list(REMOVE_ITEM headers ${gratingsim_private_headers})
  install(FILES ${headers} DESTINATION ${GRATINGSIM_INSTALL_INCLUDEDIR}/${folder})
endforeach()
install(FILES ${PROJECT_BINARY_DIR}/generated/core/config.hpp DESTINATION ${GRATINGSIM_INSTALL_INCLUDEDIR}/core)

set(gratingsim_install_cmakedir ${CMAKE_INSTALL_LIBDIR}/cmake/gratingsim)
install(EXPORT gratingsimTargets NAMESPACE gratingsim:: DESTINATION ${gratingsim_install_cmakedir})
configure_package_config_file(cmake/gratingsimConfig.cmake.in ${PROJECT_BINARY_DIR}/gratingsimConfig.cmake
  INSTALL_DESTINATION ${gratingsim_install_cmakedir})
# 0.x: a new minor version may change the interface.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/gratingsimConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/gratingsimConfig.cmake ${PROJECT_BINARY_DIR}/gratingsimConfigVersion.cmake
  convolution/cmake/FindFFTW3.cmake DESTINATION ${gratingsim_install_cmakedir})
