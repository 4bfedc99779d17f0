#pragma once
// Reading NumPy .npy array files (internal to io/): the format of numpy.lib.format, version 1.0, 2.0
// or 3.0 — the magic "\x93NUMPY", a major and minor version byte, the header length (2 bytes little
// endian in 1.0, 4 bytes in 2.0 and 3.0), then a Python dict literal {'descr': ..., 'fortran_order': ...,
// 'shape': (...)} padded with blanks to a newline, then the elements in the stated order.
#include <complex>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

namespace gratingsim::io {

/// A refusal by read_npy: the reason, without a location (the case reader locates it at the YAML node
/// that names the file).
class NpyError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A 2D array as read from a .npy file: element (row, column) is values[row·columns + column], C order.
struct NpyArray {
  std::string descr;  ///< the file's dtype: '<f8', '<c16', '|b1', '<i4', '<i8' or '|u1'
  std::size_t rows = 0, columns = 0;
  /// Every element as a complex double (booleans as 0 or 1, integers exactly up to 2^53, reals with
  /// imaginary part 0; '<f8' and '<c16' bit for bit).
  std::vector<std::complex<double>> values;
  [[nodiscard]] bool is_complex() const { return descr == "<c16"; }
  [[nodiscard]] bool is_real_float() const { return descr == "<f8"; }
};

/// Reads a C-order 2D array of dtype '<f8', '<c16', '|b1', '<i4', '<i8' or '|u1' (also written '<b1',
/// '<u1', '=...' on this little-endian reader). Refuses, by NpyError naming what it found: a file that
/// cannot be opened, a bad magic or version, a malformed header, another dtype, Fortran order, a rank
/// other than 2, an empty array, more than max_elements elements, or a file shorter or longer than the
/// header says.
NpyArray read_npy(const std::string& path, std::size_t max_elements);

}  // namespace gratingsim::io
