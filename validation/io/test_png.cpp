// Raster masks from grayscale PNG images (io/png.hpp, io/SCHEMA.md §1.6): images written here with libpng
// (fresh random content, every bit depth, interlaced or not) read back sample for sample, and as the same
// raster as the .npy array of their fill fractions (the independent path: row order flipped, g/G);
// the orientation (the image's top row at y = +Λy/2) against a rectangle; damaged, truncated, colour
// and alpha images refused at the YAML node; a PNG case solving bit for bit as its .npy twin.
// Built without PNG support this executable reports every test skipped (validation/CMakeLists.txt).
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <csetjmp>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/config.hpp"
#include "io/case.hpp"
#include "io/png.hpp"
#include "io/problem.hpp"
#include "physics/solver.hpp"
#include "validation/io/raster_cases.hpp"
#include "validation/support/catch.hpp"
#include "validation/support/scratch_directory.hpp"
#if GRATINGSIM_HAVE_PNG
#include <png.h>
#endif

namespace fs = std::filesystem;
using namespace gratingsim;
using Complex = std::complex<double>;

namespace {

using test::case_with;
using test::rng;
using test::shape_line;

// PNG colour types (the PNG specification's numbers, as png.h defines them).
constexpr int gray = 0, rgb = 2, palette = 3, gray_alpha = 4;

struct PngSpec {
  int columns = 1, rows = 1;
  int bit_depth = 8;  ///< 1, 2, 4, 8 or 16
  int colour_type = gray;
  bool interlaced = false;    ///< Adam7
  bool transparency = false;  ///< a tRNS chunk (gray: sample 0 transparent)
};

/// Writes samples (row-major, row 0 the image's top row; channels per pixel: 1 gray or palette, 2 gray +
/// alpha, 3 RGB) as a PNG with libpng.
void write_png(const fs::path& path, const PngSpec& spec, const std::vector<std::uint16_t>& samples) {
#if GRATINGSIM_HAVE_PNG
  const int channels = spec.colour_type == rgb ? 3 : spec.colour_type == gray_alpha ? 2 : 1;
  const int bytes_per_sample = spec.bit_depth == 16 ? 2 : 1;  // below 8 bits: one byte each, packed by libpng
  REQUIRE(samples.size() == std::size_t(spec.rows) * spec.columns * channels);
  std::vector<unsigned char> bytes(samples.size() * bytes_per_sample);
  for (std::size_t i = 0; i < samples.size(); ++i)
    if (bytes_per_sample == 2) {
      bytes[2 * i] = static_cast<unsigned char>(samples[i] >> 8);  // most significant first
      bytes[2 * i + 1] = static_cast<unsigned char>(samples[i] & 0xff);
    } else {
      bytes[i] = static_cast<unsigned char>(samples[i]);
    }
  std::vector<png_bytep> rows(std::size_t(spec.rows));
  for (std::size_t r = 0; r < rows.size(); ++r)
    rows[r] = bytes.data() + r * std::size_t(spec.columns) * channels * bytes_per_sample;
  const png_color colours[2] = {{0, 0, 0}, {255, 255, 255}};
  const png_color_16 transparent{};
  FILE* file = std::fopen(path.c_str(), "wb");
  REQUIRE(file != nullptr);
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png_create_info_struct(png);
  volatile bool written = false;  // set after setjmp, read after a longjmp
  if (setjmp(png_jmpbuf(png)) == 0) {  // libpng's errors longjmp back here (no destructor in between)
    png_init_io(png, file);
    png_set_IHDR(png, info, png_uint_32(spec.columns), png_uint_32(spec.rows), spec.bit_depth, spec.colour_type,
                 spec.interlaced ? PNG_INTERLACE_ADAM7 : PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
                 PNG_FILTER_TYPE_DEFAULT);
    if (spec.colour_type == palette) png_set_PLTE(png, info, colours, 2);
    if (spec.transparency) png_set_tRNS(png, info, nullptr, 0, &transparent);
    png_write_info(png, info);
    if (spec.bit_depth < 8) png_set_packing(png);
    png_write_image(png, rows.data());
    png_write_end(png, nullptr);
    written = true;
  }
  png_destroy_write_struct(&png, &info);
  std::fclose(file);
  REQUIRE(written);
#else
  (void)path, (void)spec, (void)samples;
  throw std::logic_error("write_png: no PNG support (this executable skips every test)");
#endif
}


/// A .npy file (numpy.lib.format 1.0) of float64 values in C order, shape (rows, columns).
void write_npy(const fs::path& path, std::size_t rows, std::size_t columns, const std::vector<double>& values) {
  std::string dict = "{'descr': '<f8', 'fortran_order': False, 'shape': (" + std::to_string(rows) + ", " +
                     std::to_string(columns) + "), }";
  while ((10 + dict.size() + 1) % 64 != 0) dict += ' ';
  dict += '\n';
  std::string bytes = std::string("\x93NUMPY\x01\x00", 8) + char(dict.size() & 0xff) + char(dict.size() >> 8);
  std::ofstream out(path, std::ios::binary);
  out << bytes << dict;
  out.write(reinterpret_cast<const char*>(values.data()), std::streamsize(values.size() * sizeof(double)));
}

/// The .npy twin of a gray image: element [row, column] = g/G of image sample (rows − 1 − row, column).
std::vector<double> npy_twin(const PngSpec& spec, const std::vector<std::uint16_t>& samples) {
  const double white = double((1u << spec.bit_depth) - 1);
  std::vector<double> fractions(samples.size());
  for (int row = 0; row < spec.rows; ++row)
    for (int column = 0; column < spec.columns; ++column)
      fractions[std::size_t(row) * spec.columns + column] =
          samples[std::size_t(spec.rows - 1 - row) * spec.columns + column] / white;
  return fractions;
}

std::vector<std::uint16_t> random_samples(std::size_t count, int bit_depth) {
  std::uniform_int_distribution<std::uint32_t> level(0, (1u << bit_depth) - 1);
  std::vector<std::uint16_t> samples(count);
  for (auto& s : samples) s = std::uint16_t(level(rng()));
  return samples;
}


const physics::Raster& raster_of(const io::Case& c) {
  return std::get<physics::Raster>(c.structure.layers.at(0).shapes.at(0));
}

/// Two rasters are the same pixel map: equal sizes, and every pixel empty in both or filled in both
/// with materials of equal permittivity at 633 nm (bit for bit).
void check_same_raster(const physics::Raster& a, const physics::Raster& b) {
  REQUIRE(a.nx == b.nx);
  REQUIRE(a.ny == b.ny);
  REQUIRE(a.pixels.size() == b.pixels.size());
  REQUIRE(a.materials.size() == b.materials.size());
  for (std::size_t i = 0; i < a.pixels.size(); ++i) {
    REQUIRE((a.pixels[i] < 0) == (b.pixels[i] < 0));
    if (a.pixels[i] < 0) continue;
    REQUIRE(a.materials.at(std::size_t(a.pixels[i])).permittivity(633) ==
            b.materials.at(std::size_t(b.pixels[i])).permittivity(633));
  }
}

}  // namespace

TEST_CASE("grayscale PNGs of every bit depth read back sample for sample and as their .npy twin", "[io][png]") {
  const test::ScratchDirectory scratch("png_depths");
  const fs::path& dir = scratch.path();
  std::uniform_int_distribution<int> size(1, 24);
  for (const int bit_depth : {1, 2, 4, 8, 16})
    for (const bool interlaced : {false, true}) {
      const PngSpec spec{.columns = size(rng()), .rows = size(rng()), .bit_depth = bit_depth, .interlaced = interlaced};
      INFO(bit_depth << "-bit, " << spec.columns << " × " << spec.rows << (interlaced ? ", Adam7" : ""));
      const auto samples = random_samples(std::size_t(spec.rows) * spec.columns, bit_depth);
      write_png(dir / "image.png", spec, samples);
      const io::GrayImage image = io::read_png((dir / "image.png").string(), 1 << 24);
      CHECK(image.rows == std::size_t(spec.rows));
      CHECK(image.columns == std::size_t(spec.columns));
      CHECK(image.bit_depth == bit_depth);
      CHECK(image.samples == samples);

      write_npy(dir / "twin.npy", std::size_t(spec.rows), std::size_t(spec.columns), npy_twin(spec, samples));
      const io::Case from_png = io::parse_case(case_with("{type: raster, mask: image.png, material: high}"), "p.yaml", dir.string());
      const io::Case from_npy = io::parse_case(case_with("{type: raster, mask: twin.npy, material: high}"), "n.yaml", dir.string());
      check_same_raster(raster_of(from_png), raster_of(from_npy));
      CHECK(std::count(from_png.inputs.begin(), from_png.inputs.end(), (dir / "image.png").string()) == 1);
    }
  // An upper-case extension is a PNG too.
  const PngSpec spec{.columns = 3, .rows = 2};
  write_png(dir / "IMAGE.PNG", spec, random_samples(6, 8));
  CHECK_NOTHROW(io::parse_case(case_with("{type: raster, mask: IMAGE.PNG, material: high}"), "u.yaml", dir.string()));
  fs::remove_all(dir);
}

TEST_CASE("an image's top row is the cell's top edge and its left column the left edge", "[io][png]") {
  const test::ScratchDirectory scratch("png_orientation");
  const fs::path& dir = scratch.path();
  // 6 rows × 8 columns of 50 nm over the 400 × 300 nm cell. White in image rows 1..2 (counted from the
  // top, whose row 0 spans y ∈ [100, 150]) and columns 1..5: y ∈ [0, 100], x ∈ [−150, 100] — the
  // rectangle centred at (−25, 50), 250 × 100 nm. Off-centre along both axes, so flipping rows or
  // columns moves it.
  const PngSpec spec{.columns = 8, .rows = 6};
  std::vector<std::uint16_t> samples(48, 0);
  for (int row = 1; row <= 2; ++row)
    for (int column = 1; column <= 5; ++column) samples[std::size_t(row) * 8 + column] = 255;
  write_png(dir / "block.png", spec, samples);
  const io::Case image = io::parse_case(case_with("{type: raster, mask: block.png, material: high}"), "i.yaml", dir.string());
  const physics::Raster& r = raster_of(image);
  REQUIRE(r.nx == 8);
  REQUIRE(r.ny == 6);
  // physics::Raster's pixel (ix, iy) = pixels[iy·nx + ix], iy = 0 at y = −Λy/2: filled rows iy 3..4.
  for (int iy = 0; iy < 6; ++iy)
    for (int ix = 0; ix < 8; ++ix) {
      INFO("ix " << ix << ", iy " << iy);
      CHECK((r.pixels[std::size_t(iy) * 8 + ix] >= 0) == (iy >= 3 && iy <= 4 && ix >= 1 && ix <= 5));
    }
  const io::Case rectangle = io::parse_case(
      case_with("{type: rectangle, material: high, center: [-25, 50], width_x: 250, width_y: 100}"), "b.yaml", dir.string());
  physics::SolverOptions o;
  o.m1 = o.m2 = 3;
  o.formulation = physics::Formulation::laurent;
  o.method = physics::Method::dense_lu;
  const std::vector<physics::Incidence> incidence{{250, 23, 31}};  // many propagating orders
  const auto a = physics::solve(image.structure, incidence, o), b = physics::solve(rectangle.structure, incidence, o);
  const auto& oa = a.incidences.at(0).orders;
  const auto& ob = b.incidences.at(0).orders;
  REQUIRE(oa.size() == ob.size());
  REQUIRE(oa.size() > 1);
  double largest = 0;
  for (std::size_t k = 0; k < oa.size(); ++k)
    for (const auto& [x, y] : {std::pair{oa[k].reflection.s_from_s, ob[k].reflection.s_from_s},
                               std::pair{oa[k].reflection.p_from_p, ob[k].reflection.p_from_p},
                               std::pair{oa[k].transmission.s_from_p, ob[k].transmission.s_from_p},
                               std::pair{oa[k].transmission.p_from_s, ob[k].transmission.p_from_s}})
      largest = std::max(largest, std::abs(x - y));
  // Both transforms are exact (a sinc per pixel, a sinc per rectangle): equal to rounding.
  std::printf("image vs rectangle: largest amplitude difference %.3g over %zu orders\n", largest, oa.size());
  CHECK(largest < 1e-11);
  // The block mirrored to y < 0 (the image read bottom row first) is told apart by far more than that.
  const io::Case mirrored = io::parse_case(
      case_with("{type: rectangle, material: high, center: [-25, -50], width_x: 250, width_y: 100}"), "m.yaml", dir.string());
  const physics::SolveResult m = physics::solve(mirrored.structure, incidence, o);
  const auto& om = m.incidences.at(0).orders;
  double mirrored_largest = 0;
  for (std::size_t k = 0; k < oa.size(); ++k)
    mirrored_largest = std::max(mirrored_largest, std::abs(oa[k].reflection.s_from_s - om.at(k).reflection.s_from_s));
  std::printf("image vs its mirror image: largest r_ss difference %.3g\n", mirrored_largest);
  CHECK(mirrored_largest > 1e-4);
  fs::remove_all(dir);
}

TEST_CASE("a case with a PNG mask solves bit for bit as the same case with its .npy twin", "[io][png][case]") {
  const test::ScratchDirectory scratch("png_solve");
  const fs::path& dir = scratch.path();
  // 4-bit gray: up to 16 fill fractions, each a mixture of glass and high; a 1-row image on a 1D lattice too.
  for (const bool one_dimensional : {false, true}) {
    const PngSpec spec{.columns = 10, .rows = one_dimensional ? 1 : 7, .bit_depth = 4};
    const auto samples = random_samples(std::size_t(spec.rows) * spec.columns, spec.bit_depth);
    write_png(dir / "mask.png", spec, samples);
    write_npy(dir / "mask.npy", std::size_t(spec.rows), std::size_t(spec.columns), npy_twin(spec, samples));
    const io::Problem png = io::make_problem(
        io::parse_case(case_with("{type: raster, mask: mask.png, material: high}", one_dimensional), "p.yaml", dir.string()));
    const io::Problem npy = io::make_problem(
        io::parse_case(case_with("{type: raster, mask: mask.npy, material: high}", one_dimensional), "n.yaml", dir.string()));
    const std::vector<physics::Incidence> incidence{{633, 20, 10}};
    const auto a = physics::solve(png.structure(), incidence, png.solver);
    const auto b = physics::solve(npy.structure(), incidence, npy.solver);
    const auto& oa = a.incidences.at(0).orders;
    const auto& ob = b.incidences.at(0).orders;
    REQUIRE(oa.size() == ob.size());
    for (std::size_t k = 0; k < oa.size(); ++k) {
      INFO("order (" << oa[k].m1 << ", " << oa[k].m2 << ")");
      for (int p = 0; p < 2; ++p) {
        CHECK(oa[k].R[p] == ob[k].R[p]);
        CHECK(oa[k].T[p] == ob[k].T[p]);
      }
      CHECK(oa[k].reflection.s_from_s == ob[k].reflection.s_from_s);
      CHECK(oa[k].reflection.p_from_s == ob[k].reflection.p_from_s);
      CHECK(oa[k].transmission.s_from_p == ob[k].transmission.s_from_p);
      CHECK(oa[k].transmission.p_from_p == ob[k].transmission.p_from_p);
    }
  }
  fs::remove_all(dir);
}

TEST_CASE("damaged, truncated, colour and alpha images are refused at the YAML node that names them", "[io][png][case]") {
  const test::ScratchDirectory scratch("png_refusals");
  const fs::path& dir = scratch.path();
  const PngSpec good{.columns = 5, .rows = 4};
  write_png(dir / "good.png", good, random_samples(20, 8));
  std::ifstream in(dir / "good.png", std::ios::binary);
  const std::string bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  const auto save = [&](const std::string& name, const std::string& content) {
    std::ofstream(dir / name, std::ios::binary) << content;
  };
  // Cut anywhere after the signature, or just before the last byte of IEND's CRC: the file ends early.
  std::uniform_int_distribution<std::size_t> cut(8, bytes.size() - 1);
  save("cut.png", bytes.substr(0, cut(rng())));
  save("cut_end.png", bytes.substr(0, bytes.size() - 1));
  save("cut_signature.png", bytes.substr(0, 5));
  // A byte of IHDR's CRC changed (bytes 29..32: signature 8, length 4, type 4, data 13); the second byte
  // of IDAT's data (its zlib header) changed: libpng's reasons.
  std::string bad_crc = bytes, bad_data = bytes;
  bad_crc[30] = char(bad_crc[30] ^ 0x5a);
  save("bad_crc.png", bad_crc);
  const std::size_t idat = bad_data.find("IDAT");
  REQUIRE(idat != std::string::npos);
  bad_data[idat + 5] = char(bad_data[idat + 5] ^ 0x5a);
  save("bad_data.png", bad_data);
  save("trailing.png", bytes + "extra");
  save("text.png", "not an image\n");
  write_png(dir / "rgb.png", {.columns = 2, .rows = 2, .colour_type = rgb}, random_samples(12, 8));
  write_png(dir / "alpha.png", {.columns = 2, .rows = 2, .colour_type = gray_alpha}, random_samples(8, 8));
  write_png(dir / "palette.png", {.columns = 2, .rows = 2, .colour_type = palette}, random_samples(4, 1));
  write_png(dir / "transparent.png", {.columns = 2, .rows = 2, .transparency = true}, random_samples(4, 8));

  struct Refusal {
    std::string shape;
    bool one_dimensional;
    std::string at;  ///< the text the error points at in the shape's line
    std::string fragment;
  };
  const std::vector<Refusal> refusals{
      {"{type: raster, mask: cut.png, material: high}", false, "cut.png", "ends before its IEND chunk (truncated)"},
      {"{type: raster, mask: cut_end.png, material: high}", false, "cut_end.png", "(truncated)"},
      {"{type: raster, mask: cut_signature.png, material: high}", false, "cut_signature.png", "not a PNG file"},
      {"{type: raster, mask: bad_crc.png, material: high}", false, "bad_crc.png", "IHDR: CRC error"},
      {"{type: raster, mask: bad_data.png, material: high}", false, "bad_data.png", "IDAT: incorrect header check"},
      {"{type: raster, mask: trailing.png, material: high}", false, "trailing.png", "5 bytes follow the IEND chunk"},
      {"{type: raster, mask: text.png, material: high}", false, "text.png", "not a PNG file"},
      {"{type: raster, mask: rgb.png, material: high}", false, "rgb.png", "it is a RGB colour image; a raster image is grayscale"},
      {"{type: raster, mask: alpha.png, material: high}", false, "alpha.png", "grayscale with alpha"},
      {"{type: raster, mask: palette.png, material: high}", false, "palette.png", "palette (indexed colour)"},
      {"{type: raster, mask: transparent.png, material: high}", false, "transparent.png", "transparency (tRNS)"},
      {"{type: raster, mask: absent.png, material: high}", false, "absent.png", "not found"},
      {"{type: raster, epsilon: good.png}", false, "good.png", "an image gives a mask, not an epsilon map"},
      {"{type: raster, mask: good.png, material: high}", true, "good.png", "the image has 4 rows; a 1D lattice"},
  };
  for (const auto& refusal : refusals) {
    INFO(refusal.shape);
    try {
      (void)io::parse_case(case_with(refusal.shape, refusal.one_dimensional), "r.yaml", dir.string());
      FAIL("accepted");
    } catch (const io::CaseError& e) {
      CHECK(e.line() == shape_line);
      CHECK(e.column() == int(std::string("      - ").size() + refusal.shape.find(refusal.at) + 1));
      CHECK_THAT(e.message(), Catch::Contains(refusal.fragment));
    }
  }
  // read_png itself: more pixels than allowed.
  CHECK_THROWS_WITH(io::read_png((dir / "good.png").string(), 19),
                    Catch::Contains("5 × 4 pixels is more than the 19 a raster may have"));
  fs::remove_all(dir);
}
