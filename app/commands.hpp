#pragma once
// The user commands of `gratingsim`, one table entry each with its help and options (main.cpp groups them;
// the bench commands: benchmarks/benchmarks.hpp).
#include "app/cli.hpp"

namespace gratingsim::app {

extern const Command gratingsim_fit;          ///< gratingsim fit
extern const Command gratingsim_info;         ///< gratingsim info
extern const Command gratingsim_run;          ///< gratingsim run
extern const Command gratingsim_validate;     ///< gratingsim validate

}  // namespace gratingsim::app
