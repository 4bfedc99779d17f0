#pragma once
// Versions of the libraries io reads and writes with (io/ is the only code that includes their
// headers), for `gratingsim info`.
#include <string>

namespace gratingsim::io {

struct LibraryVersions {
  std::string hdf5;      ///< of the HDF5 library linked, e.g. "1.10.8" (H5get_libversion)
  std::string yaml_cpp;  ///< of the yaml-cpp found at configuration, e.g. "0.7.0" (it has no version call)
  std::string libpng;    ///< of the libpng linked, e.g. "1.6.39", or "none" in a build without PNG support
};
LibraryVersions library_versions();

}  // namespace gratingsim::io
