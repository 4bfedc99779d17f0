#pragma once
// The commands of `gratingsim`, one function each (see the dispatch tables in main.cpp).
#include "app/cli.hpp"

namespace gratingsim::app {

int run_info(Args args);        ///< gratingsim info
int run_bench_conv(Args args);  ///< gratingsim bench conv
int run_bench_solve(Args args);  ///< gratingsim bench solve
int run_bench_e2e(Args args);    ///< gratingsim bench e2e
int run_run(Args args);         ///< gratingsim run
int run_validate(Args args);    ///< gratingsim validate

}  // namespace gratingsim::app
