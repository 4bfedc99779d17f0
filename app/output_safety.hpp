#pragma once
// The output checks `run` and `fit` make before anything is solved or written, so that no output ever
// destroys a file.
#include <string>
#include <string_view>
#include <vector>

namespace gratingsim::app {

/// Refuses (Error "refusing output OUTPUT: ...") an output that would destroy a file: `output` or one
/// of `companions` (files written beside it, e.g. OUT.h5.partial and OUT.h5.lock) being a file the
/// command reads (`inputs`: the case file, a material table, a measured table; compared by device and
/// inode, so any spelling or link is caught), a directory, or anything not a regular file (device,
/// FIFO, socket; `inputs_are` says what the inputs are); an existing `output` without `overwrite`; a missing output directory.
/// `overwrite_option` names how the caller asks to replace a finished output (the CLI's --overwrite; the Python
/// module's overwrite=True).
void check_output_path(const std::string& output, const std::vector<std::string>& companions,
                       const std::vector<std::string>& inputs, bool overwrite,
                       std::string_view inputs_are = "a file the case reads",
                       std::string_view overwrite_option = "--overwrite");

}  // namespace gratingsim::app
