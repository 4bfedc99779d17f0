#include "io/versions.hpp"

#include <hdf5.h>

#include "io/png.hpp"

namespace gratingsim::io {

LibraryVersions library_versions() {
  LibraryVersions v;
  unsigned major = 0, minor = 0, release = 0;
  v.hdf5 = H5get_libversion(&major, &minor, &release) >= 0
               ? std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(release)
               : "unknown";
  v.yaml_cpp = GRATINGSIM_YAML_CPP_VERSION;
  v.libpng = png_version();
  return v;
}

}  // namespace gratingsim::io
