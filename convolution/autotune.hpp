#pragma once
// The `auto` backend: the fastest backend measured for a shape on this machine, remembered in a small
// text cache (as FFTW keeps wisdom) so that each shape is measured once per machine.
//
// Cache file, version 2: one choice per line, ten fields separated by blanks,
//     n1 n2 l1 l2 slices per_slice pattern precision machine backend
// e.g. "7 7 16 16 33 24 K1P1Q1:0.0.0 single NVIDIA_H100_80GB_HBM3|AMD_EPYC_9654|16t gpu-fused"
// (l1, l2 resolved, never 0; pattern as pattern_signature(); machine as machine_key()). Version 1 lines
// (nine fields, no pattern: written before problems had patterns) are still read, as scalar problems
// (K1P1Q1:0.0.0); new lines are always version 2, appended to either. A new file starts with the
// comment "# gratingsim backend cache v2: ...". Lines starting with '#' are comments. The last line for a
// key wins. A line that does not parse is ignored with a warning on stderr.
#include <filesystem>
#include <functional>
#include <optional>
#include <span>
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

/// A problem's pattern as one blank-free cache-key field: "K<K>P<P>Q<Q>:" and the terms as
/// output.input.kernel, comma-separated, sorted by (output, input) so that the order the caller listed
/// them in does not matter; e.g. the scalar problem "K1P1Q1:0.0.0", the 1D normal-vector pattern
/// "K3P4Q3:0.0.1,1.1.0,2.2.0,3.0.2".
std::string pattern_signature(const Problem& problem);

/// The fastest backend for (geometry, precision) on this machine. A cache hit returns the cached
/// choice without measuring, unless that backend cannot serve the problem here (can_implement), which
/// is measured again. On a miss only the backends whose can_implement accepts the problem are timed on
/// random data (cpu-direct only where its O(N1²N2²) cost per term and group is small), and the fastest
/// median wins; the choice is appended to the cache by writing a temporary file and renaming it over
/// the cache (concurrent writers may drop each other's line, never corrupt the file). A cache that
/// cannot be written costs only a warning.
///
/// `note` (when given) is set to a sentence the caller may print, empty when there is nothing to say.
/// It speaks when the choice is a fallback: a backend of the same kind (GPU or CPU) that ranks above the
/// choice by design (gpu-fused, then gpu-cufft-callbacks, gpu-cufft, gpu-direct; cpu-fftw, then
/// cpu-direct) refused the problem (e.g. gpu-fused with L > 128: the choice falls back to another GPU backend), naming each with
/// its reason; when a cached choice could not serve and was measured again; when no backend could be
/// timed and the choice is the first that can serve it. Throws Unsupported only when no backend can
/// serve the problem.
Backend select_backend(const Problem& geometry, Precision precision, const std::filesystem::path& cache_file,
                       std::string* note = nullptr);

/// "auto" → select_backend(geometry, precision, default_backend_cache(), note); any other name →
/// parse_backend(name).
Backend backend_by_name(std::string_view name, const Problem& geometry, Precision precision,
                        std::string* note = nullptr);

namespace detail {
/// Median microseconds of one execution of a backend's plan of the problem; nullopt where it cannot be
/// timed (planning declined, or too slow to be worth timing).
using BackendTimer = std::function<std::optional<double>(Backend)>;

/// select_backend with the backend table and the timing as parameters, so that tests can pass a table
/// whose backends refuse or accept what they choose and a timer that says which one is fastest.
Backend select_backend(const Problem& geometry, Precision precision, const std::filesystem::path& cache_file,
                       std::span<const BackendTraits> table, const BackendTimer& time, std::string* note);
}  // namespace detail

}  // namespace gratingsim::conv
