#include "core/vocabulary.hpp"

#include <string>

#include "core/error.hpp"

namespace gratingsim {

std::string_view to_string(Precision precision) { return precision == Precision::single ? "single" : "double"; }

Precision parse_precision(std::string_view name) {
  if (name == "single") return Precision::single;
  if (name == "double") return Precision::double_;
  GS_EXPECTS(false, "unknown precision '" + std::string(name) + "' (expected single or double)");
}

}  // namespace gratingsim
