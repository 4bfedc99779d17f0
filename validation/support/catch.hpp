#pragma once
// Catch2 v2 (Debian 12) and v3 (Ubuntu 24.04) behind one include. Tests use the v2 spelling of the
// substring matcher, Catch::Contains (under v3 it forwards to Catch::Matchers::ContainsSubstring), and
// the global Approx.
#if __has_include(<catch2/catch_all.hpp>)
#include <catch2/catch_all.hpp>
#include <string>
namespace Catch {
inline Matchers::StringContainsMatcher Contains(const std::string& text,
                                                CaseSensitive sensitivity = CaseSensitive::Yes) {
  return Matchers::ContainsSubstring(text, sensitivity);
}
}  // namespace Catch
using Catch::Approx;  // v2 declares Approx at global scope
#else
#include <catch2/catch.hpp>
#endif
