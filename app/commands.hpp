#pragma once
// The commands of `gratingsim`, one table entry each with its help and options (main.cpp groups them).
#include "app/cli.hpp"

namespace gratingsim::app {

extern const Command gratingsim_info;         ///< gratingsim info
extern const Command gratingsim_bench_conv;   ///< gratingsim bench conv
extern const Command gratingsim_bench_solve;  ///< gratingsim bench solve
extern const Command gratingsim_bench_e2e;    ///< gratingsim bench e2e
extern const Command gratingsim_run;          ///< gratingsim run
extern const Command gratingsim_validate;     ///< gratingsim validate

}  // namespace gratingsim::app
