#pragma once
// The `gratingsim bench` commands, one table entry each with its help and options (app/main.cpp groups
// them under `bench`). They share the command-line table of app/cli.hpp with the user commands.
#include "app/cli.hpp"

namespace gratingsim::app {

extern const Command gratingsim_bench_conv;   ///< gratingsim bench conv
extern const Command gratingsim_bench_solve;  ///< gratingsim bench solve
extern const Command gratingsim_bench_e2e;    ///< gratingsim bench e2e

}  // namespace gratingsim::app
