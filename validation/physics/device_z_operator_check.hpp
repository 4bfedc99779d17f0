#pragma once
// The device z-operator (physics/device_z_operator.cu) against the host one on fresh random fields, for
// the GPU tests of one problem, of batched wavelengths (k1 per incidence) and of batched geometries
// (a grid per member): apply() out of place and in place (y = x), and far_field_sums(), for each set of
// D components (z_operator.hpp's d_axes mask: 0 Laurent; 0b001, 0b011, 0b101, 0b111 normal-vector 1D, 2D, 1D tilted, 2D tilted). Tolerances: relative l2 1e-6
// (complex64 storage) or 1e-13 (complex128): both sweep in complex128, in different summation orders.
#include <bit>
#include <complex>
#include <initializer_list>
#include <type_traits>
#include <vector>

#include "physics/device.hpp"
#include "physics/z_operator.hpp"
#include "validation/support/catch.hpp"
#include "validation/support/compare.hpp"
#include "validation/support/random.hpp"

namespace gratingsim::test {

template <class Real>
void check_device_z_operator(const physics::GreenCoefficients& g, const std::vector<int>& rhs_incidence,
                             const physics::BatchLayout& layout, std::initializer_list<unsigned> d_axes_list) {
  using Complex = std::complex<Real>;
  const double tol = std::is_same_v<Real, float> ? 1e-6 : 1e-13;
  for (unsigned d_axes : d_axes_list) {
    INFO("D components (mask) " << d_axes);
    const int sources = 3 + std::popcount(d_axes);
    auto host = physics::make_host_z_operator<Real>(g, rhs_incidence, d_axes);
    auto dev = physics::make_device_z_operator<Real>(g, rhs_incidence, d_axes);
    physics::DeviceStream stream;
    const physics::BatchLayout source_layout{layout.slices, layout.rhs, layout.block / 3 * sources};
    auto space = physics::make_device_vector_space<Real>(layout, 3, stream.get());
    auto source_space = physics::make_device_vector_space<Real>(source_layout, 1, stream.get());
    const auto x = random_complex<Real>(layout.size()), c = random_complex<Real>(source_layout.size());
    std::vector<Complex> expect(layout.size(), poison<Real>());
    host->apply(x.data(), c.data(), expect.data(), nullptr);
    REQUIRE(l2_norm<Real>(expect) > 0);
    for (bool in_place : {false, true}) {
      INFO((in_place ? "in place" : "out of place"));
      space->upload(x, 0);
      source_space->upload(c, 0);
      std::vector<Complex> got(layout.size(), poison<Real>());
      space->upload(got, 2);
      Complex* y = in_place ? space->data(0) : space->data(2);
      dev->apply(space->data(0), source_space->data(0), y, stream.get());
      space->download(in_place ? 0 : 2, got);
      CHECK(relative_l2<Real, Real>(got, expect) <= tol);
    }
    // The far-field sums of the same source: complex128 sums of the same Real source in both.
    const std::size_t sums = layout.rhs * (layout.block / 3) * 4;
    std::vector<std::complex<double>> sums_host(sums, poison<double>()), sums_dev(sums, poison<double>());
    host->far_field_sums(c.data(), sums_host.data(), nullptr);
    source_space->upload(c, 0);
    dev->far_field_sums(source_space->data(0), sums_dev.data(), stream.get());
    REQUIRE(l2_norm<double>(sums_host) > 0);
    CHECK(relative_l2<double, double>(sums_dev, sums_host) <= 1e-13);
  }
}

}  // namespace gratingsim::test
