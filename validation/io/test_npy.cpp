// The .npy reader (io/npy.hpp) and raster shapes read from .npy files (io/SCHEMA.md §1.6): files written
// here by hand (the format of numpy.lib.format) and by NumPy itself where /usr/bin/python3 has it, read
// back bit for bit; a raster case solved against the same structure given as a rectangle; every refusal
// located at its YAML node.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/config.hpp"
#include "io/case.hpp"
#include "io/npy.hpp"
#include "physics/solver.hpp"
#include "validation/io/raster_cases.hpp"
#include "validation/support/catch.hpp"
#include "validation/support/scratch_directory.hpp"

namespace fs = std::filesystem;
using namespace gratingsim;
using Complex = std::complex<double>;

namespace {

using test::case_with;
using test::rng;
using test::shape_line;

/// A .npy file as numpy.lib.format writes it: magic, version, header length, the dict padded with
/// blanks and a newline to a multiple of 64 bytes, then `data`.
void write_npy(const fs::path& path, const std::string& descr, const std::string& shape, const std::string& data,
               int major = 1, bool fortran_order = false) {
  std::string dict = "{'descr': '" + descr + "', 'fortran_order': " + (fortran_order ? "True" : "False") +
                     ", 'shape': " + shape + ", }";
  const std::size_t prefix = major == 1 ? 10 : 12;
  while ((prefix + dict.size() + 1) % 64 != 0) dict += ' ';
  dict += '\n';
  std::string bytes = std::string("\x93NUMPY", 6) + char(major) + char(0);
  for (std::size_t b = 0; b < (major == 1 ? 2u : 4u); ++b) bytes += char((dict.size() >> (8 * b)) & 0xff);
  std::ofstream(path, std::ios::binary) << bytes << dict << data;
}

template <class T>
std::string raw(const std::vector<T>& values) {
  std::string s(values.size() * sizeof(T), '\0');
  std::memcpy(s.data(), values.data(), s.size());
  return s;
}

std::string shape_text(std::size_t rows, std::size_t columns) {
  return "(" + std::to_string(rows) + ", " + std::to_string(columns) + ")";
}

std::uint64_t draw() { return rng()(); }

/// The error's location and message from loading `yaml` (in `dir`).
io::CaseError error_of(const std::string& yaml, const fs::path& dir) {
  try {
    (void)io::parse_case(yaml, "raster.yaml", dir.string());
  } catch (const io::CaseError& e) {
    return e;
  }
  FAIL("the case was accepted:\n" << yaml);
  throw;
}


}  // namespace

TEST_CASE("read_npy reads every supported dtype bit for bit, header versions 1.0 and 2.0", "[io][npy]") {
  const test::ScratchDirectory scratch("npy_dtypes");
  const fs::path& dir = scratch.path();
  std::uniform_int_distribution<std::size_t> size(1, 9);
  std::normal_distribution<double> normal(0.0, 1e3);
  for (const int major : {1, 2}) {
    const std::size_t rows = size(rng()), columns = size(rng()), n = rows * columns;
    std::vector<double> f8(n);
    std::vector<Complex> c16(n);
    std::vector<std::int32_t> i4(n);
    std::vector<std::int64_t> i8(n);
    std::vector<std::uint8_t> u1(n), b1(n);
    for (std::size_t i = 0; i < n; ++i) {
      f8[i] = normal(rng());
      c16[i] = {normal(rng()), normal(rng())};
      i4[i] = std::int32_t(draw());
      i8[i] = std::int64_t(draw() >> 12) - (std::int64_t(1) << 51);  // |value| < 2^53: exact as a double
      u1[i] = std::uint8_t(draw());
      b1[i] = std::uint8_t(draw() & 1);
    }
    const std::string shape = shape_text(rows, columns);
    write_npy(dir / "f8.npy", "<f8", shape, raw(f8), major);
    write_npy(dir / "c16.npy", "<c16", shape, raw(c16), major);
    write_npy(dir / "i4.npy", "<i4", shape, raw(i4), major);
    write_npy(dir / "i8.npy", "<i8", shape, raw(i8), major);
    write_npy(dir / "u1.npy", "|u1", shape, raw(u1), major);
    write_npy(dir / "b1.npy", "|b1", shape, raw(b1), major);
    const auto check = [&](const char* file, const std::string& descr, auto expected) {
      const io::NpyArray a = io::read_npy((dir / file).string(), 1 << 20);
      CHECK(a.descr == descr);
      REQUIRE(a.rows == rows);
      REQUIRE(a.columns == columns);
      REQUIRE(a.values.size() == n);
      for (std::size_t i = 0; i < n; ++i) CHECK(a.values[i] == expected(i));
    };
    check("f8.npy", "<f8", [&](std::size_t i) { return Complex(f8[i]); });
    check("c16.npy", "<c16", [&](std::size_t i) { return c16[i]; });
    check("i4.npy", "<i4", [&](std::size_t i) { return Complex(double(i4[i])); });
    check("i8.npy", "<i8", [&](std::size_t i) { return Complex(double(i8[i])); });
    check("u1.npy", "|u1", [&](std::size_t i) { return Complex(double(u1[i])); });
    check("b1.npy", "|b1", [&](std::size_t i) { return Complex(double(b1[i])); });
  }
  fs::remove_all(dir);
}

TEST_CASE("read_npy reads NumPy's own files bit for bit", "[io][npy][python]") {
  if (std::system("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1") != 0) {
    std::printf("SKIPPED: /usr/bin/python3 lacks NumPy (install python3-numpy)\n");
    std::exit(77);  // CTest reports SKIP_RETURN_CODE 77 as skipped, never as passed
  }
  const test::ScratchDirectory scratch("npy_numpy");
  const fs::path& dir = scratch.path();
  const unsigned seed = unsigned(draw() & 0x7fffffff);
  // NumPy writes each array with np.save and the same values as raw complex128 (np.ndarray.tofile).
  const std::string script =
      "import numpy as np, sys\n"
      "g = np.random.default_rng(" + std::to_string(seed) + ")\n"
      "d = sys.argv[1]\n"
      "arrays = {'f8': g.normal(size=(5, 7)), 'c16': g.normal(size=(3, 4)) + 1j * g.normal(size=(3, 4)),\n"
      "          'b1': g.random((4, 6)) < 0.5, 'i4': g.integers(-2**31, 2**31, (2, 3)).astype('<i4'),\n"
      "          'i8': g.integers(-2**52, 2**52, (6, 1)), 'u1': g.integers(0, 256, (1, 9)).astype('u1')}\n"
      "for k, a in arrays.items():\n"
      "    np.save(d + '/' + k + '.npy', a)\n"
      "    np.asarray(a, dtype='<c16').tofile(d + '/' + k + '.raw')\n";
  std::ofstream(dir / "write.py") << script;
  REQUIRE(std::system(("/usr/bin/python3 " + (dir / "write.py").string() + " " + dir.string()).c_str()) == 0);
  for (const std::string name : {"f8", "c16", "b1", "i4", "i8", "u1"}) {
    INFO(name);
    const io::NpyArray a = io::read_npy((dir / (name + ".npy")).string(), 1 << 20);
    std::ifstream in(dir / (name + ".raw"), std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    REQUIRE(bytes.size() == a.values.size() * sizeof(Complex));
    std::vector<Complex> expected(a.values.size());
    std::memcpy(expected.data(), bytes.data(), bytes.size());
    CHECK(a.descr.substr(1) == name);
    CHECK(a.values == expected);
  }
  fs::remove_all(dir);
}

TEST_CASE("read_npy refuses what it does not read, naming what it found", "[io][npy]") {
  const test::ScratchDirectory scratch("npy_refusals");
  const fs::path& dir = scratch.path();
  const std::string eight(8, '\0');
  write_npy(dir / "f4.npy", "<f4", "(1, 2)", eight);
  write_npy(dir / "big_endian.npy", ">f8", "(1, 1)", eight);
  write_npy(dir / "fortran.npy", "<f8", "(1, 1)", eight, 1, true);
  write_npy(dir / "rank1.npy", "<f8", "(1,)", eight);
  write_npy(dir / "rank3.npy", "<f8", "(1, 1, 1)", eight);
  write_npy(dir / "empty.npy", "<f8", "(0, 3)", "");
  write_npy(dir / "short.npy", "<f8", "(2, 1)", eight);
  write_npy(dir / "large.npy", "|u1", "(4, 4)", std::string(16, '\0'));
  std::ofstream(dir / "text.npy") << "not an array\n";
  const std::vector<std::pair<std::string, std::string>> expected{
      {"f4.npy", "dtype '<f4' is not supported"},
      {"big_endian.npy", "dtype '>f8' is not supported"},
      {"fortran.npy", "Fortran order"},
      {"rank1.npy", "rank 1 (shape (1,))"},
      {"rank3.npy", "rank 3 (shape (1, 1, 1))"},
      {"empty.npy", "the array is empty"},
      {"short.npy", "holds 8 data bytes, the header's shape and dtype need 16"},
      {"large.npy", "more than the limit of 15"},
      {"text.npy", "does not start with \\x93NUMPY"},
      {"absent.npy", "cannot open"}};
  for (const auto& [file, fragment] : expected) {
    INFO(file);
    try {
      (void)io::read_npy((dir / file).string(), 15);
      FAIL("accepted");
    } catch (const io::NpyError& e) {
      CHECK_THAT(e.what(), Catch::Contains(fragment));
    }
  }
  fs::remove_all(dir);
}

TEST_CASE("a raster mask and an epsilon map from .npy files are the structure's raster bit for bit", "[io][npy][case]") {
  const test::ScratchDirectory scratch("npy_raster");
  const fs::path& dir = scratch.path();
  std::uniform_int_distribution<int> size(1, 12);
  const int rows = size(rng()), columns = size(rng());
  const std::size_t n = std::size_t(rows) * columns;
  // Mask: int64 0/1; ε map: complex128 drawn from 3 values (so pixels share materials) plus random ones.
  std::vector<std::int64_t> mask(n);
  std::vector<Complex> eps(n);
  std::uniform_real_distribution<double> uniform(0.5, 12);
  const std::vector<Complex> shared{{uniform(rng()), 0}, {-uniform(rng()), uniform(rng())}, {uniform(rng()), 0.25}};
  for (std::size_t i = 0; i < n; ++i) {
    mask[i] = std::int64_t(draw() & 1);
    eps[i] = draw() % 2 ? shared[draw() % 3] : Complex(uniform(rng()), uniform(rng()) / 10);
  }
  write_npy(dir / "mask.npy", "<i8", shape_text(rows, columns), raw(mask));
  write_npy(dir / "eps.npy", "<c16", shape_text(rows, columns), raw(eps));

  const io::Case masked = io::parse_case(case_with("{type: raster, mask: mask.npy, material: high}"), "m.yaml", dir.string());
  const auto& r = std::get<physics::Raster>(masked.structure.layers.at(0).shapes.at(0));
  REQUIRE(r.nx == columns);  // columns run along x, rows along y (row = iy, column = ix)
  REQUIRE(r.ny == rows);
  REQUIRE(r.materials.size() == 1);
  CHECK(r.materials[0].permittivity(633) == Complex(2.5, 0.1) * Complex(2.5, 0.1));
  for (std::size_t i = 0; i < n; ++i) CHECK(r.pixels[i] == (mask[i] == 1 ? 0 : -1));
  CHECK(std::count(masked.inputs.begin(), masked.inputs.end(), (dir / "mask.npy").string()) == 1);

  // A float mask with fill fractions: 0 the background (glass), 1 the material, f between their mixture.
  std::vector<double> fill(n);
  const std::vector<double> shared_fill{0.0, 1.0, uniform(rng()) / 12};
  for (std::size_t i = 0; i < n; ++i) fill[i] = draw() % 2 ? shared_fill[draw() % 3] : uniform(rng()) / 12;
  write_npy(dir / "fill.npy", "<f8", shape_text(rows, columns), raw(fill));
  const io::Case filled = io::parse_case(case_with("{type: raster, mask: fill.npy, material: high}"), "f.yaml", dir.string());
  const auto& fr = std::get<physics::Raster>(filled.structure.layers.at(0).shapes.at(0));
  REQUIRE(fr.pixels.size() == n);
  const Complex glass = 1.5 * 1.5, high = Complex(2.5, 0.1) * Complex(2.5, 0.1);
  for (std::size_t i = 0; i < n; ++i) {
    INFO("f = " << fill[i]);
    if (fill[i] == 0) {
      CHECK(fr.pixels[i] == -1);
      continue;
    }
    REQUIRE(fr.pixels[i] >= 0);
    CHECK(fr.materials.at(std::size_t(fr.pixels[i])).permittivity(633) == (1 - fill[i]) * glass + fill[i] * high);
  }

  const io::Case mapped = io::parse_case(case_with("{type: raster, epsilon: eps.npy}"), "e.yaml", dir.string());
  const auto& e = std::get<physics::Raster>(mapped.structure.layers.at(0).shapes.at(0));
  REQUIRE(e.nx == columns);
  REQUIRE(e.ny == rows);
  REQUIRE(e.pixels.size() == n);
  for (std::size_t i = 0; i < n; ++i) {
    REQUIRE(e.pixels[i] >= 0);
    CHECK(e.materials.at(std::size_t(e.pixels[i])).permittivity(633) == eps[i]);
  }
  CHECK(e.materials.size() <= n);
  CHECK(std::count(mapped.inputs.begin(), mapped.inputs.end(), (dir / "eps.npy").string()) == 1);
  fs::remove_all(dir);
}

TEST_CASE("a raster mask solves like the rectangle covering the same pixels", "[io][npy][case]") {
  const test::ScratchDirectory scratch("npy_solve");
  const fs::path& dir = scratch.path();
  // 400 × 300 nm cell in 8 × 6 pixels of 50 nm: columns 1..5 (x ∈ [−150, 100]) and rows 3..4
  // (y ∈ [0, 100]) are the rectangle centred at (−25, 50), 250 × 100 nm — off-centre and longer along x,
  // so swapping the axes or flipping a row order would change the orders' efficiencies.
  std::vector<std::uint8_t> mask(6 * 8, 0);
  for (int row = 3; row <= 4; ++row)
    for (int column = 1; column <= 5; ++column) mask[std::size_t(row) * 8 + column] = 1;
  write_npy(dir / "mask.npy", "|b1", "(6, 8)", raw(mask));
  const io::Case raster = io::parse_case(case_with("{type: raster, mask: mask.npy, material: high}"), "r.yaml", dir.string());
  const io::Case rectangle = io::parse_case(
      case_with("{type: rectangle, material: high, center: [-25, 50], width_x: 250, width_y: 100}"), "b.yaml", dir.string());
  // 1D: one row of 8 pixels of 50 nm, columns 2..4 (x ∈ [−100, 50]): the line centred at x = −25, 150 nm wide.
  std::vector<double> row(8, 0.0);
  for (int column = 2; column <= 4; ++column) row[std::size_t(column)] = 1.0;
  write_npy(dir / "row.npy", "<f8", "(1, 8)", raw(row));
  const io::Case raster_1d =
      io::parse_case(case_with("{type: raster, mask: row.npy, material: high}", true), "r1.yaml", dir.string());
  const io::Case line_1d =
      io::parse_case(case_with("{type: line, material: high, center: -25, width: 150}", true), "l1.yaml", dir.string());

  const std::vector<physics::Incidence> incidence{{250, 23, 31}};  // many propagating orders
  const auto compare = [&](const physics::Structure& a, const physics::Structure& b, physics::SolverOptions o) {
    o.method = physics::Method::dense_lu;
    const physics::SolveResult ra = physics::solve(a, incidence, o), rb = physics::solve(b, incidence, o);
    const auto& oa = ra.incidences.at(0).orders;
    const auto& ob = rb.incidences.at(0).orders;
    REQUIRE(oa.size() == ob.size());
    REQUIRE(oa.size() > 1);  // diffraction orders besides the specular one: the pattern matters
    double largest = 0;
    for (std::size_t k = 0; k < oa.size(); ++k) {
      REQUIRE(oa[k].m1 == ob[k].m1);
      REQUIRE(oa[k].m2 == ob[k].m2);
      for (int p = 0; p < 2; ++p) {
        largest = std::max({largest, std::abs(oa[k].R[p] - ob[k].R[p]), std::abs(oa[k].T[p] - ob[k].T[p])});
        // Both transforms are exact (sinc per pixel, sinc per rectangle): equal to rounding.
        CHECK(std::abs(oa[k].R[p] - ob[k].R[p]) < 1e-11);
        CHECK(std::abs(oa[k].T[p] - ob[k].T[p]) < 1e-11);
      }
      // The amplitudes too: a shifted pattern has the same efficiencies, but order m's phase turns by G_m·shift.
      for (const auto& [ja, jb] : {std::pair{oa[k].reflection, ob[k].reflection}, std::pair{oa[k].transmission, ob[k].transmission}})
        for (const auto& [x, y] : {std::pair{ja.s_from_s, jb.s_from_s}, std::pair{ja.s_from_p, jb.s_from_p},
                                   std::pair{ja.p_from_s, jb.p_from_s}, std::pair{ja.p_from_p, jb.p_from_p}}) {
          largest = std::max(largest, std::abs(x - y));
          CHECK(std::abs(x - y) < 1e-11);
        }
    }
    std::printf("raster vs shape: largest efficiency or amplitude difference %.3g over %zu orders\n", largest, oa.size());
  };
  physics::SolverOptions crossed;
  crossed.m1 = crossed.m2 = 3;
  crossed.formulation = physics::Formulation::laurent;
  compare(raster.structure, rectangle.structure, crossed);
  physics::SolverOptions lines;
  lines.m1 = 6;
  compare(raster_1d.structure, line_1d.structure, lines);
  fs::remove_all(dir);
}

TEST_CASE("every raster refusal is located at its YAML node", "[io][npy][case]") {
  const test::ScratchDirectory scratch("npy_located");
  const fs::path& dir = scratch.path();
  write_npy(dir / "good.npy", "|b1", "(2, 3)", std::string("\1\0\1\0\1\0", 6));
  std::ofstream(dir / "text.npy") << "not an array\n";
  write_npy(dir / "f4.npy", "<f4", "(1, 2)", std::string(8, '\0'));
  write_npy(dir / "rank3.npy", "<f8", "(1, 1, 1)", std::string(8, '\0'));
  write_npy(dir / "nan.npy", "<f8", "(1, 2)", raw(std::vector<double>{1, std::nan("")}));
  write_npy(dir / "inf.npy", "<c16", "(1, 1)", raw(std::vector<Complex>{{2, std::numeric_limits<double>::infinity()}}));
  write_npy(dir / "two.npy", "<i4", "(1, 2)", raw(std::vector<std::int32_t>{0, 2}));
  write_npy(dir / "negative.npy", "<f8", "(2, 1)", raw(std::vector<double>{0, -0.5}));
  write_npy(dir / "gain.npy", "<c16", "(1, 1)", raw(std::vector<Complex>{{2, -0.1}}));
  write_npy(dir / "zero.npy", "<f8", "(1, 1)", raw(std::vector<double>{0}));
  struct Refusal {
    std::string shape;
    bool one_dimensional;
    std::string at;  ///< the text the error points at, searched in the shape's line (empty: the shape's start)
    std::string fragment;
  };
  const std::vector<Refusal> refusals{
      {"{type: raster, mask: absent.npy, material: high}", false, "absent.npy", "not found"},
      {"{type: raster, mask: ., material: high}", false, ".,", "not a regular file"},
      {"{type: raster, mask: text.npy, material: high}", false, "text.npy", "does not start with \\x93NUMPY"},
      {"{type: raster, mask: f4.npy, material: high}", false, "f4.npy", "dtype '<f4' is not supported"},
      {"{type: raster, epsilon: rank3.npy}", false, "rank3.npy", "rank 3 (shape (1, 1, 1))"},
      {"{type: raster, epsilon: nan.npy}", false, "nan.npy", "element [0, 1]"},
      {"{type: raster, epsilon: inf.npy}", false, "inf.npy", "every element must be finite"},
      {"{type: raster, mask: two.npy, material: high}", false, "two.npy", "element [0, 1] is 2, outside [0, 1]"},
      {"{type: raster, mask: negative.npy, material: high}", false, "negative.npy", "element [1, 0] is -0.5, outside"},
      {"{type: raster, mask: inf.npy, material: high}", false, "inf.npy", "every element must be finite"},
      {"{type: raster, epsilon: gain.npy}", false, "gain.npy", "Im ε must be ≥ 0"},
      {"{type: raster, epsilon: zero.npy}", false, "zero.npy", "is 0, which is not a material"},
      {"{type: raster, epsilon: good.npy}", false, "good.npy", "holds '|b1'"},
      {"{type: raster, mask: good.npy, material: high}", true, "good.npy", "a 1D lattice (no period_y) takes one row"},
      {"{type: raster, mask: good.npy}", false, "", "needs 'material'"},
      {"{type: raster, epsilon: good.npy, material: high}", false, "high", "material belongs with mask"},
      {"{type: raster, mask: good.npy, epsilon: good.npy, material: high}", false, "", "exactly one of"},
      {"{type: raster, material: high}", false, "", "exactly one of"},
  };
  for (const auto& refusal : refusals) {
    const std::string yaml = case_with(refusal.shape, refusal.one_dimensional);
    INFO(refusal.shape);
    const io::CaseError e = error_of(yaml, dir);
    const std::size_t at = refusal.at.empty() ? 0 : refusal.shape.find(refusal.at);
    CHECK(e.line() == shape_line);
    CHECK(e.column() == int(std::string("      - ").size() + at + 1));
    CHECK_THAT(e.message(), Catch::Contains(refusal.fragment));
  }
  // A raster and another shape in one layer: refused at the raster.
  std::string two = case_with("{type: rectangle, material: high, width_x: 10, width_y: 10}");
  two.insert(two.find("numerics"), "      - {type: raster, mask: good.npy, material: high}\n");
  const io::CaseError e = error_of(two, dir);
  CHECK(e.line() == shape_line + 1);
  CHECK(e.column() == 9);
  CHECK_THAT(e.message(), Catch::Contains("must be the only shape of its layer"));
  fs::remove_all(dir);
}

TEST_CASE("a .png raster needs a build with PNG support, and is refused at its node without it", "[io][npy][case]") {
  // The file's content is no image: with PNG support the reader says so; without it the build's lack is
  // the reason, before the file is read (validation/io/test_png.cpp reads real images).
  const test::ScratchDirectory scratch("npy_png_support");
  const fs::path& dir = scratch.path();
  std::ofstream(dir / "mask.png") << "not an image\n";
  const std::string shape = "{type: raster, mask: mask.png, material: high}";
  const io::CaseError e = error_of(case_with(shape), dir);
  CHECK(e.line() == shape_line);
  CHECK(e.column() == int(std::string("      - ").size() + shape.find("mask.png") + 1));
#if GRATINGSIM_HAVE_PNG
  CHECK_THAT(e.message(), Catch::Contains("not a PNG file"));
#else
  CHECK_THAT(e.message(), Catch::Contains("this build of gratingsim has no PNG support"));
  CHECK_THAT(e.message(), Catch::Contains("-DGRATINGSIM_PNG=ON"));
#endif
  fs::remove_all(dir);
}
