#pragma once
// The example cases of configs/ at test size, and the comparison of two results of one point to a tolerance (the
// app tests that run every example: validation/app/test_run.cpp on the CPU, test_gpu_run.cpp on a GPU).
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include "io/results.hpp"
#include "validation/app/executable.hpp"
#include "validation/support/catch.hpp"

namespace gratingsim::test {

/// `text` with every match of `pattern` replaced by replace(match).
template <class Replace>
inline std::string replace_each(const std::string& text, const std::string& pattern, Replace replace) {
  const std::regex re(pattern);
  std::string out;
  auto begin = text.cbegin();
  for (std::sregex_iterator it(text.begin(), text.end(), re), end; it != end; ++it) {
    out.append(begin, (*it)[0].first);
    out += replace(*it);
    begin = (*it)[0].second;
  }
  return out.append(begin, text.cend());
}

/// An example case at test size: at most two values per sweep axis, harmonics ≤ 4 (≤ 2 on 2D
/// lattices), at most 3 slices per layer, field maps of 16 points. Comments and structure are kept.
inline std::string reduced(std::string yaml) {
  const int m = contains(yaml, "period_y") ? 2 : 4;
  const auto at_most = [](const std::ssub_match& value, int limit) {
    return std::to_string(std::min(std::stoi(value.str()), limit));
  };
  yaml = std::regex_replace(yaml, std::regex(R"(count: \d+)"), "count: 2");
  yaml = std::regex_replace(yaml, std::regex(R"((wavelength|theta_deg|phi_deg): \[([^,\]]+), ([^,\]]+)(, [^\]]*)?\])"),
                            "$1: [$2, $3]");
  yaml =
      replace_each(yaml, R"(harmonics: (\d+))", [&](const std::smatch& h) { return "harmonics: " + at_most(h[1], m); });
  yaml = replace_each(yaml, R"(harmonics: \[(\d+), (\d+)\])", [&](const std::smatch& h) {
    return "harmonics: [" + at_most(h[1], m) + ", " + at_most(h[2], m) + "]";
  });
  yaml = replace_each(yaml, R"(slices: (\d+))", [&](const std::smatch& s) { return "slices: " + at_most(s[1], 3); });
  yaml = replace_each(yaml, R"(points: (\d+))", [&](const std::smatch& p) { return "points: " + at_most(p[1], 16); });
  return yaml;
}

/// Values agree to `tolerance` relative to the largest magnitude (NaN where the other is NaN).
template <class T>
void check_close(const char* name, const std::vector<T>& file, const std::vector<T>& memory, double tolerance) {
  INFO(name);
  REQUIRE(file.size() == memory.size());
  double scale = 0;
  for (const T& x : memory)
    if (!std::isnan(std::abs(x))) scale = std::max(scale, double(std::abs(x)));
  for (std::size_t i = 0; i < file.size(); ++i) {
    INFO("element " << i);
    const bool file_nan = std::isnan(std::abs(file[i])), memory_nan = std::isnan(std::abs(memory[i]));
    CHECK(file_nan == memory_nan);
    if (!file_nan && !memory_nan) CHECK(double(std::abs(file[i] - memory[i])) <= tolerance * std::max(scale, 1e-300));
  }
}

inline void check_same_point(const io::PointResult& file, const io::PointResult& memory, double tolerance) {
  check_close("R", file.reflectance, memory.reflectance, tolerance);
  check_close("T", file.transmittance, memory.transmittance, tolerance);
  check_close("jones_r", file.jones_r, memory.jones_r, tolerance);
  check_close("jones_t", file.jones_t, memory.jones_t, tolerance);
  check_close("reflected_direction", file.reflected_direction, memory.reflected_direction, 1e-15);
  check_close("transmitted_direction", file.transmitted_direction, memory.transmitted_direction, 1e-15);
  check_close("psi/delta", std::vector{file.psi_deg, file.delta_deg}, std::vector{memory.psi_deg, memory.delta_deg},
              tolerance * 1e3);  // Δ is a phase: absolute degrees
  check_close("mueller", std::vector(file.mueller.begin(), file.mueller.end()),
              std::vector(memory.mueller.begin(), memory.mueller.end()), tolerance);
  check_close("absorption", file.absorption, memory.absorption, tolerance);
  CHECK(file.converged == memory.converged);
  CHECK(file.method == memory.method);
  CHECK(file.method != 0);
  check_close("field_harmonics", file.field_harmonics, memory.field_harmonics, tolerance);
  REQUIRE(file.field_maps.size() == memory.field_maps.size());
  for (std::size_t k = 0; k < file.field_maps.size(); ++k)
    check_close("field map", file.field_maps[k], memory.field_maps[k], tolerance);
}

inline std::vector<std::filesystem::path> example_cases() {
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(repository_root() / "configs"))
    if (entry.path().extension() == ".yaml") files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace gratingsim::test
