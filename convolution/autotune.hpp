#pragma once
// The `auto` backend: the fastest backend measured for a shape on this machine, remembered in a small
// text cache (as FFTW keeps wisdom) so that each shape is measured once per machine.
//
// Cache file: one choice per line, nine fields separated by blanks,
//     n1 n2 l1 l2 slices per_slice precision machine backend
// e.g. "7 7 16 16 33 24 single NVIDIA_H100_80GB_HBM3|AMD_EPYC_9654|16t gpu-fused"
// (l1, l2 resolved, never 0; machine as machine_key()). Lines starting with '#' are comments. The last
// line for a key wins. A line that does not parse is ignored with a warning on stderr.
#include <filesystem>
#include <string>
#include <string_view>

#include "convolution/convolution.hpp"

namespace gratingsim::conv {

/// GRATINGSIM_BACKEND_CACHE if set and not empty; else $XDG_CACHE_HOME/gratingsim/backends.txt;
/// else $HOME/.cache/gratingsim/backends.txt; else ./gratingsim-backends.txt.
std::filesystem::path default_backend_cache();

/// This machine as one blank-free cache-key field: the current CUDA device ("no-gpu" without one),
/// the host CPU model and the OpenMP thread count, '|'-separated, blanks replaced by '_'.
std::string machine_key();

/// The fastest backend for (geometry, precision) on this machine. A cache hit returns the cached
/// choice without measuring (unless that backend is no longer available). On a miss every available
/// backend that can plan the shape is timed on random data (cpu-direct only where its O(N1²N2²)
/// cost per block is small) and the fastest median wins; the choice is appended to the cache by
/// writing a temporary file and renaming it over the cache (concurrent writers may drop each other's
/// line, never corrupt the file). A cache that cannot be written costs only a warning.
Backend select_backend(const Problem& geometry, Precision precision, const std::filesystem::path& cache_file);

/// "auto" → select_backend(geometry, precision, default_backend_cache()); any other name →
/// parse_backend(name).
Backend backend_by_name(std::string_view name, const Problem& geometry, Precision precision);

}  // namespace gratingsim::conv
