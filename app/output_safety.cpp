#include "app/output_safety.hpp"

#include <sys/stat.h>

#include <filesystem>

#include "core/error.hpp"

namespace gratingsim::app {

void check_output_path(const std::string& output, const std::vector<std::string>& companions,
                       const std::vector<std::string>& inputs, bool overwrite, std::string_view inputs_are,
                       std::string_view overwrite_option) {
  namespace fs = std::filesystem;
  const auto refuse = [&](const std::string& why) { throw Error("refusing output " + output + ": " + why); };
  std::vector<std::string> written{output};
  written.insert(written.end(), companions.begin(), companions.end());
  for (const std::string& path : written) {
    struct stat target {};
    if (::stat(path.c_str(), &target) != 0) continue;  // absent: fine
    for (const std::string& input : inputs) {
      struct stat in {};
      if (::stat(input.c_str(), &in) == 0 && in.st_dev == target.st_dev && in.st_ino == target.st_ino)
        refuse(path + " is " + input + ", " + std::string(inputs_are) + "; choose another output");
    }
    if (S_ISDIR(target.st_mode)) refuse(path + " is a directory; give a file name, e.g. DIR/out.h5");
    if (!S_ISREG(target.st_mode))
      refuse(path + " is not a regular file (a device, FIFO or socket); it is left untouched");
  }
  if (fs::exists(output) && !overwrite)
    refuse(output + " already exists (a finished result is never replaced silently); " + std::string(overwrite_option) +
           " replaces it");
  const fs::path directory = fs::path(output).parent_path().empty() ? fs::path(".") : fs::path(output).parent_path();
  if (!fs::is_directory(directory)) refuse("the directory " + directory.string() + " does not exist");
}

}  // namespace gratingsim::app
