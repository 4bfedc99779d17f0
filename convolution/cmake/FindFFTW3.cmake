# FindFFTW3: FFTW 3 in double and single precision with its OpenMP threading libraries.
# Debian ships no CMake package configuration for FFTW, hence this module.
# Defines FFTW3::fftw3 (double) and FFTW3::fftw3f (single), each linking its _omp library.
find_path(FFTW3_INCLUDE_DIR fftw3.h)
foreach(lib fftw3 fftw3f)
  string(TOUPPER ${lib} LIB)
  find_library(${LIB}_LIBRARY ${lib})
  find_library(${LIB}_OMP_LIBRARY ${lib}_omp)
  list(APPEND _fftw3_vars ${LIB}_LIBRARY ${LIB}_OMP_LIBRARY)
endforeach()

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(FFTW3 REQUIRED_VARS FFTW3_INCLUDE_DIR ${_fftw3_vars})

if(FFTW3_FOUND)
  foreach(lib fftw3 fftw3f)
    string(TOUPPER ${lib} LIB)
    if(NOT TARGET FFTW3::${lib})
      add_library(FFTW3::${lib} UNKNOWN IMPORTED)
      set_target_properties(FFTW3::${lib} PROPERTIES
        IMPORTED_LOCATION "${${LIB}_LIBRARY}"
        INTERFACE_INCLUDE_DIRECTORIES "${FFTW3_INCLUDE_DIR}"
        INTERFACE_LINK_LIBRARIES "${${LIB}_OMP_LIBRARY}")
    endif()
  endforeach()
endif()
mark_as_advanced(FFTW3_INCLUDE_DIR ${_fftw3_vars})
