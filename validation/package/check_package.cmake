# cmake -DBUILD_DIR=... -DPREFIX=... -DCONSUMER_SOURCE=... -DCONSUMER_BUILD=... -DGENERATOR=...
#       -DMAKE_PROGRAM=... -DCXX_COMPILER=... -DBUILD_TYPE=... [-DLAUNCHER=...] -P check_package.cmake
# The CMake package end to end (cmake/package.cmake): installs the build into PREFIX, checks that no
# installed header includes a vendor header, configures and builds the consumer project of
# validation/package/consumer against the installed tree alone, and runs its programs.
foreach(variable IN ITEMS BUILD_DIR PREFIX CONSUMER_SOURCE CONSUMER_BUILD GENERATOR CXX_COMPILER BUILD_TYPE)
  if(NOT DEFINED ${variable})
    message(FATAL_ERROR "check_package.cmake: -D${variable}=... missing")
  endif()
endforeach()

function(run step)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE status OUTPUT_VARIABLE output ERROR_VARIABLE output)
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "${step} failed (${status}):\n${output}")
  endif()
  set(output "${output}" PARENT_SCOPE)
endfunction()

file(REMOVE_RECURSE ${PREFIX} ${CONSUMER_BUILD})
run("cmake --install" ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${PREFIX})

# Public headers name no vendor header: the vendors stay private to the libraries that use them.
file(GLOB_RECURSE headers ${PREFIX}/include/gratingsim/*)
set(leaks "")
foreach(header IN LISTS headers)
  file(STRINGS ${header} lines REGEX "^[ \t]*#[ \t]*include[ \t]*[<\"](hdf5|H5[A-Za-z]*\\.h|fftw3|yaml-cpp/|mpi\\.h|CLI/|cuda|cufft|cublas|nvJitLink|Eigen/|omp\\.h)")
  if(lines)
    list(APPEND leaks "${header}: ${lines}")
  endif()
endforeach()
if(leaks)
  list(JOIN leaks "\n" leaks)
  message(FATAL_ERROR "installed headers include vendor headers:\n${leaks}")
endif()
foreach(file IN ITEMS bin/gratingsim include/gratingsim/core/config.hpp include/gratingsim/physics/solver.hpp
                      lib/cmake/gratingsim/gratingsimConfig.cmake lib/cmake/gratingsim/gratingsimConfigVersion.cmake)
  if(NOT EXISTS ${PREFIX}/${file})
    message(FATAL_ERROR "not installed: ${PREFIX}/${file}")
  endif()
endforeach()

set(configure ${CMAKE_COMMAND} -S ${CONSUMER_SOURCE} -B ${CONSUMER_BUILD} -G ${GENERATOR}
    -DCMAKE_PREFIX_PATH=${PREFIX} -DCMAKE_BUILD_TYPE=${BUILD_TYPE} -DCMAKE_CXX_COMPILER=${CXX_COMPILER})
if(MAKE_PROGRAM)
  list(APPEND configure -DCMAKE_MAKE_PROGRAM=${MAKE_PROGRAM})
endif()
if(LAUNCHER)
  list(APPEND configure -DCMAKE_CXX_COMPILER_LAUNCHER=${LAUNCHER})
endif()
run("configuring the consumer" ${configure})
run("building the consumer" ${CMAKE_COMMAND} --build ${CONSUMER_BUILD})
run("the consumer's slab" ${CONSUMER_BUILD}/slab)
message(STATUS "${output}")
if(NOT output MATCHES "slab: ok")
  message(FATAL_ERROR "slab printed no verdict")
endif()
run("the consumer's every_header" ${CONSUMER_BUILD}/every_header)
message(STATUS "${output}")
if(NOT output MATCHES "^out\\.h5\\.partial ")
  message(FATAL_ERROR "every_header printed something unexpected")
endif()
