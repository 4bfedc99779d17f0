// gratingsim: the command-line entry point. Commands come from tables (cli.hpp); only main() turns an
// error into an exit status: 2 for a wrong command line, 1 for a failure while running (a case-file
// error is printed as it is: "FILE:LINE:COLUMN: error: ..."). A command returns its own status. Of
// the ranks of an MPI run, rank 0 alone prints an error that all of them met.
#include <exception>
#include <iostream>
#include <string>

#include "app/commands.hpp"
#include "app/ranks.hpp"
#include "benchmarks/benchmarks.hpp"
#include "core/config.hpp"
#include "core/error.hpp"
#include "io/case.hpp"
#include "io/measured.hpp"

namespace gratingsim::app {
namespace {

constexpr const Command* bench_commands[] = {&gratingsim_bench_conv, &gratingsim_bench_solve, &gratingsim_bench_e2e};
constexpr Command bench{.name = "bench",
                        .summary = "benchmarks (bench conv, bench solve, bench e2e)",
                        .description = "Benchmarks; every timed output is verified.",
                        .commands = bench_commands};

constexpr const Command* commands[] = {&gratingsim_run, &gratingsim_fit, &gratingsim_validate, &gratingsim_info, &bench};
constexpr Command program{
    .name = "gratingsim",
    .description = "Electromagnetic diffraction by periodic gratings. 'gratingsim --version' prints the version.",
    .commands = commands};

}  // namespace
}  // namespace gratingsim::app

int main(int argc, char* argv[]) {
  try {
    return gratingsim::app::run_command_line(gratingsim::app::program, GRATINGSIM_VERSION, argc, argv);
  } catch (const gratingsim::app::ReportedElsewhere&) {
    return 1;  // one of several MPI ranks: rank 0 prints the error
  } catch (const gratingsim::app::UsageError& e) {
    std::cerr << e.what() << '\n';
    return 2;
  } catch (const gratingsim::io::CaseError& e) {
    std::cerr << e.what() << '\n';
    return 1;
  } catch (const gratingsim::io::MeasuredDataError& e) {  // located like a case error: "FILE:LINE:COLUMN: error: ..."
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
