// gratingsim: the command-line entry point. Commands come from dispatch tables; only main() turns an
// error into an exit status: 2 for a wrong command line, 1 for a failure while running (a case-file
// error is printed as it is: "FILE:LINE:COLUMN: error: ..."). A command returns its own status. Of
// the ranks of an MPI run, rank 0 alone prints an error that all of them met.
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "app/commands.hpp"
#include "app/ranks.hpp"
#include "io/case.hpp"
#include "core/config.hpp"

namespace gratingsim::app {
namespace {

constexpr Command bench_commands[] = {
    {"conv", "time the convolution backends on the four problem cases, verify every output", run_bench_conv},
    {"solve", "time the solver's Krylov iteration (split, floor, GPU vs cpu-fftw) on the four cases", run_bench_solve},
    {"e2e", "a case's whole sweep end to end: time per phase (set-up, iterations, output) per wavelength batch",
     run_bench_e2e},
};

int run_bench(Args args) {
  return dispatch("gratingsim bench", "Benchmarks; every timed output is verified.", bench_commands, args);
}

constexpr Command commands[] = {
    {"run", "solve a YAML case file, write its HDF5 result file (exit 3: some solve did not converge)", run_run},
    {"validate", "compare every backend and precision with a reference on a built-in set or given cases",
     run_validate},
    {"info", "version, build, CUDA devices, available backends, library versions", run_info},
    {"bench", "benchmarks (bench conv, bench solve, bench e2e)", run_bench},
};

int run(Args args) {
  if (!args.empty() && args[0] == "--version") {
    if (args.size() > 1) throw UsageError("gratingsim: --version takes no arguments");
    std::cout << "gratingsim " GRATINGSIM_VERSION "\n";
    return 0;
  }
  return dispatch("gratingsim",
                  "Electromagnetic diffraction by periodic gratings. 'gratingsim --version' prints the version.",
                  commands, args);
}

}  // namespace
}  // namespace gratingsim::app

int main(int argc, char* argv[]) {
  const std::vector<std::string_view> args(argv + 1, argv + argc);
  try {
    return gratingsim::app::run(args);
  } catch (const gratingsim::app::ReportedElsewhere&) {
    return 1;  // one of several MPI ranks: rank 0 prints the error
  } catch (const gratingsim::app::UsageError& e) {
    std::cerr << e.what() << '\n';
    return 2;
  } catch (const gratingsim::io::CaseError& e) {
    std::cerr << e.what() << '\n';
    return 1;
  } catch (const gratingsim::Error& e) {
    // The message is the user's; the check's position helps a bug report.
    const std::string at = gratingsim::source_position(e);
    std::cerr << "gratingsim: error: " << e.what() << (at.empty() ? "" : " [" + at + "]") << '\n';
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "gratingsim: error: " << e.what() << '\n';
    return 1;
  }
}
