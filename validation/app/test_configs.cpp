// Every example case under configs/ reads, checks and maps onto the solver (io::load_problem), and
// says what it models in a leading comment.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "convolution/problem_cases.hpp"
#include "io/problem.hpp"
#include "validation/support/catch.hpp"

namespace fs = std::filesystem;
using namespace gratingsim;

namespace {
const fs::path configs = fs::path(__FILE__).parent_path().parent_path().parent_path() / "configs";
}

TEST_CASE("every configs/*.yaml loads as a problem and starts with a comment", "[app][configs]") {
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(configs))
    if (entry.path().extension() == ".yaml") files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  REQUIRE(files.size() >= 11);
  for (const fs::path& file : files) {
    INFO(file.string());
    std::ifstream in(file);
    std::string first;
    std::getline(in, first);
    CHECK(first.rfind("# ", 0) == 0);
    const io::Problem problem = io::load_problem(file.string());
    CHECK(problem.layout.points() > 0);
    CHECK(!problem.layout.orders.empty());
    CHECK(!problem.source.description.empty());
    if (file.filename() == "si_lines_fit.yaml") {
      // The fitting demonstration keeps its coarse numerics (its measured table was computed with them, and its
      // header says so): the one warning is about its 3 slices.
      REQUIRE(problem.source.warnings.size() == 1);
      CHECK(problem.source.warnings[0].find("warning: layer 'lines': 3 slice(s)") != std::string::npos);
    } else {
      CHECK(problem.source.warnings.empty());
    }
  }
}

TEST_CASE("the problem cases have the sizes of the paper's Table 1", "[app][configs]") {
  for (const conv::ProblemCase& c : conv::problem_cases) {
    INFO("problem case " << c.number);
    const io::Problem p =
        io::load_problem((configs / ("problem_case_" + std::to_string(c.number) + ".yaml")).string());
    CHECK(p.solver.m1 == c.harmonics);
    CHECK(p.solver.m2 == c.harmonics);
    CHECK(p.source.total_slices() == c.layers);
    CHECK(p.layout.theta_deg.size() * p.layout.phi_deg.size() == 8);
    CHECK(p.layout.wavelength_nm.size() == 1);
  }
}
