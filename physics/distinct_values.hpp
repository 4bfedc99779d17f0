#pragma once
// Equal values of a list, grouped bit for bit: per-value tables (the z-operator's coefficients and
// the far field's exponentials per kz, issue #15) are computed once per distinct value and stay
// exactly what a per-entry evaluation gives, since an expression of equal bits gives equal bits.
#include <algorithm>
#include <bit>
#include <complex>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <span>
#include <utility>
#include <vector>

namespace gratingsim::physics {

struct DistinctValues {
  std::vector<std::size_t> first;     ///< per distinct value, the index of its first occurrence (ascending)
  std::vector<std::size_t> class_of;  ///< per entry, the number of its distinct value (index into first)
};

/// Classes of equal bit patterns (+0 and −0 are distinct values, and so are NaNs of other payloads),
/// numbered in the order of their first occurrence. O(n log n).
inline DistinctValues distinct_values(std::span<const std::complex<double>> values) {
  // Sorted by their bit patterns, equal values are neighbours; the numbering by first occurrence
  // makes the result independent of the sort.
  using Bits = std::pair<std::uint64_t, std::uint64_t>;
  const auto bits = [&](std::size_t i) {
    return Bits{std::bit_cast<std::uint64_t>(values[i].real()), std::bit_cast<std::uint64_t>(values[i].imag())};
  };
  std::vector<std::size_t> order(values.size());
  std::iota(order.begin(), order.end(), std::size_t(0));
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return bits(a) < bits(b); });
  std::vector<std::size_t> leader(values.size());  // per entry, the first entry of its bits (stable sort)
  for (std::size_t k = 0; k < order.size(); ++k)
    leader[order[k]] = k > 0 && bits(order[k]) == bits(order[k - 1]) ? leader[order[k - 1]] : order[k];
  DistinctValues d;
  d.class_of.resize(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (leader[i] == i) {
      d.class_of[i] = d.first.size();
      d.first.push_back(i);
    } else {
      d.class_of[i] = d.class_of[leader[i]];  // leader[i] < i: numbered already
    }
  }
  return d;
}

}  // namespace gratingsim::physics
