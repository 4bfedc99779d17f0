#pragma once
// Reading grayscale PNG images (internal to io/; only io/png.cpp includes libpng's png.h, and only in a
// build with PNG support, core/config.hpp's GRATINGSIM_HAVE_PNG).
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace gratingsim::io {

/// A refusal by read_png: the reason, without a location (the case reader locates it at the YAML node
/// that names the file).
class PngError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A grayscale image as stored in the file: sample (row, column) is samples[row·columns + column], row 0
/// the image's TOP row (the first stored, the top of the picture in any viewer), column 0 its left one.
/// Samples are the stored values, 0 (black) to max_sample() = 2^bit_depth − 1 (white): no gamma, colour
/// profile or significant-bits chunk is applied.
struct GrayImage {
  std::size_t rows = 0, columns = 0;
  int bit_depth = 0;  ///< 1, 2, 4, 8 or 16
  std::vector<std::uint16_t> samples;
  [[nodiscard]] std::uint32_t max_sample() const { return (std::uint32_t(1) << bit_depth) - 1; }
};

/// True when this build reads PNG files (libpng found at configuration).
bool png_supported();
/// The version of the libpng linked ("1.6.39"), or "none" without PNG support.
std::string png_version();

/// Reads a grayscale PNG (colour type 0, bit depth 1, 2, 4, 8 or 16, interlaced or not). Refuses, by
/// PngError naming what it found: a file that cannot be read, one that does not start with the PNG
/// signature, a colour, palette or alpha image, a transparency (tRNS) chunk, more than max_pixels
/// pixels, a damaged file (libpng's reason: bad CRC, bad compressed data, ...), a file that ends before
/// its IEND chunk, and bytes after it. Throws std::logic_error in a build without PNG support.
GrayImage read_png(const std::string& path, std::size_t max_pixels);

}  // namespace gratingsim::io
