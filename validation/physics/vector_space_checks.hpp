#pragma once
// Checks of a VectorSpace (vector_space.hpp) that host and device spaces share: the sparse upload
// (upload_strided) and the copy, against the layout's definition, on fresh random values over a poisoned vector.
#include <complex>
#include <limits>
#include <vector>

#include "physics/vector_space.hpp"
#include "validation/support/catch.hpp"
#include "validation/support/compare.hpp"
#include "validation/support/random.hpp"

namespace gratingsim::test {

/// upload_strided into vector 1 of `space` (at least 3 vectors), poisoned first: element offset + k·stride holds
/// values[k], every other element is zero (an exact 0, not a leftover); with no values, all zero. copy(1, 2)
/// then gives the same elements bit for bit.
template <class Real>
void check_upload_strided(physics::VectorSpace<Real>& space) {
  using Complex = std::complex<Real>;
  const physics::BatchLayout& l = space.layout();
  const std::size_t stride = l.block / 3, offset = stride / 2;  // one order of every component: the background's shape
  const std::vector<Complex> values = random_complex<Real>(l.slices * l.rhs * 3);
  for (const bool empty : {false, true}) {
    INFO((empty ? "no values" : "random values") << ", layout " << l.slices << " × " << l.rhs << " × " << l.block);
    const std::vector<Complex> poisoned(l.size(), poison<Real>());
    space.upload(poisoned, 1);
    space.upload(poisoned, 2);
    space.upload_strided(empty ? std::span<const Complex>() : std::span<const Complex>(values), offset, stride, 1);
    space.copy(1, 2);
    std::vector<Complex> expected(l.size(), Complex(0));
    if (!empty)
      for (std::size_t k = 0; k < values.size(); ++k) expected[offset + k * stride] = values[k];
    for (const int i : {1, 2}) {
      std::vector<Complex> got(l.size(), poison<Real>());
      space.download(i, got);
      std::size_t wrong = 0;
      for (std::size_t e = 0; e < l.size(); ++e) wrong += got[e] != expected[e];  // NaN never equals
      CHECK(wrong == 0);
    }
  }
  CHECK_THROWS(space.upload_strided(values, l.size() - 1, 2, 1));  // beyond the vector
}

}  // namespace gratingsim::test
