// NumPy .npy reader (io/npy.hpp): the header is a Python dict literal; only the three keys numpy writes are
// read, each found by its quoted name, in any order.
#include "io/npy.hpp"

#include <bit>
#include <cctype>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <optional>

namespace gratingsim::io {
namespace {

static_assert(std::endian::native == std::endian::little, "the .npy reader assumes a little-endian host");

/// The text after `key:` in the header dict (blanks skipped), or NpyError.
std::size_t value_start(const std::string& header, const std::string& key) {
  const std::size_t k = header.find("'" + key + "'");
  if (k == std::string::npos) throw NpyError("the .npy header has no '" + key + "' (header: " + header + ")");
  std::size_t i = k + key.size() + 2;
  while (i < header.size() && std::isspace(static_cast<unsigned char>(header[i]))) ++i;
  if (i == header.size() || header[i] != ':') throw NpyError("malformed .npy header: " + header);
  ++i;
  while (i < header.size() && std::isspace(static_cast<unsigned char>(header[i]))) ++i;
  return i;
}

std::string read_descr(const std::string& header) {
  const std::size_t i = value_start(header, "descr");
  if (i == header.size() || (header[i] != '\'' && header[i] != '"'))
    throw NpyError("the .npy dtype is not a simple type (a record or sub-array dtype); header: " + header);
  const std::size_t end = header.find(header[i], i + 1);
  if (end == std::string::npos) throw NpyError("malformed .npy header: " + header);
  return header.substr(i + 1, end - i - 1);
}

bool read_fortran_order(const std::string& header) {
  const std::size_t i = value_start(header, "fortran_order");
  if (header.compare(i, 4, "True") == 0) return true;
  if (header.compare(i, 5, "False") == 0) return false;
  throw NpyError("malformed .npy header (fortran_order is neither True nor False): " + header);
}

std::vector<std::size_t> read_shape(const std::string& header) {
  std::size_t i = value_start(header, "shape");
  if (i == header.size() || header[i] != '(') throw NpyError("malformed .npy header (shape is not a tuple): " + header);
  const std::size_t end = header.find(')', i);
  if (end == std::string::npos) throw NpyError("malformed .npy header: " + header);
  std::vector<std::size_t> shape;
  for (++i; i < end;) {
    if (std::isspace(static_cast<unsigned char>(header[i])) || header[i] == ',') {
      ++i;
      continue;
    }
    if (!std::isdigit(static_cast<unsigned char>(header[i])))
      throw NpyError("malformed .npy header (shape holds a non-integer): " + header);
    std::size_t n = 0;
    for (; i < end && std::isdigit(static_cast<unsigned char>(header[i])); ++i) {
      if (n > (std::size_t(1) << 48)) throw NpyError("the .npy shape is too large: " + header);
      n = n * 10 + std::size_t(header[i] - '0');
    }
    shape.push_back(n);
  }
  return shape;
}

/// The byte size of one element, by the canonical dtype ('<' for '=' on this little-endian host, '|' for
/// one-byte types), or nullopt for a dtype outside the supported set.
std::optional<std::pair<std::string, std::size_t>> canonical(std::string descr) {
  if (descr.size() >= 2 && (descr[0] == '=' || descr[0] == '<' || descr[0] == '|')) {
    const std::string type = descr.substr(1);
    if (type == "b1" || type == "u1") return std::pair{"|" + type, std::size_t(1)};
    if (descr[0] == '|') return std::nullopt;
    if (type == "f8") return std::pair{std::string("<f8"), std::size_t(8)};
    if (type == "c16") return std::pair{std::string("<c16"), std::size_t(16)};
    if (type == "i4") return std::pair{std::string("<i4"), std::size_t(4)};
    if (type == "i8") return std::pair{std::string("<i8"), std::size_t(8)};
  }
  return std::nullopt;
}

template <class T>
T load(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

}  // namespace

NpyArray read_npy(const std::string& path, std::size_t max_elements) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw NpyError("cannot open '" + path + "'");
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  static const char magic[] = "\x93NUMPY";
  if (bytes.size() < 10 || bytes.compare(0, 6, magic, 6) != 0)
    throw NpyError("not a NumPy .npy file (it does not start with \\x93NUMPY)");
  const int major = static_cast<unsigned char>(bytes[6]);
  std::size_t header_length = 0, header_start = 0;
  if (major == 1) {
    header_length = std::size_t(static_cast<unsigned char>(bytes[8])) | std::size_t(static_cast<unsigned char>(bytes[9])) << 8;
    header_start = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) throw NpyError("the .npy file ends inside its header");
    for (int b = 0; b < 4; ++b) header_length |= std::size_t(static_cast<unsigned char>(bytes[8 + b])) << (8 * b);
    header_start = 12;
  } else {
    throw NpyError(".npy format version " + std::to_string(major) + "." +
                   std::to_string(static_cast<unsigned char>(bytes[7])) + " is not supported (1.0, 2.0 and 3.0 are)");
  }
  if (bytes.size() < header_start + header_length) throw NpyError("the .npy file ends inside its header");
  const std::string header = bytes.substr(header_start, header_length);

  NpyArray a;
  const std::string descr = read_descr(header);
  const auto type = canonical(descr);
  if (!type)
    throw NpyError("dtype '" + descr +
                   "' is not supported (supported: '<f8' float64, '<c16' complex128, '|b1' bool, '<i4' int32, "
                   "'<i8' int64, '|u1' uint8)");
  a.descr = type->first;
  const std::size_t element_size = type->second;
  if (read_fortran_order(header))
    throw NpyError("the array is in Fortran order; save a C-order array (numpy.ascontiguousarray)");
  const std::vector<std::size_t> shape = read_shape(header);
  if (shape.size() != 2) {
    std::string s = "(";
    for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
    throw NpyError("the array has rank " + std::to_string(shape.size()) + " (shape " + s +
                   (shape.size() == 1 ? ",)" : ")") + "); a 2D array (rows, columns) is needed");
  }
  a.rows = shape[0];
  a.columns = shape[1];
  if (a.rows == 0 || a.columns == 0)
    throw NpyError("the array is empty (shape (" + std::to_string(a.rows) + ", " + std::to_string(a.columns) + "))");
  if (a.rows > max_elements || a.columns > max_elements || a.rows * a.columns > max_elements)
    throw NpyError("the array has " + std::to_string(a.rows) + " × " + std::to_string(a.columns) +
                   " elements, more than the limit of " + std::to_string(max_elements));
  const std::size_t count = a.rows * a.columns;
  const std::size_t data_bytes = bytes.size() - header_start - header_length;
  if (data_bytes != count * element_size)
    throw NpyError("the file holds " + std::to_string(data_bytes) + " data bytes, the header's shape and dtype need " +
                   std::to_string(count * element_size));
  const char* p = bytes.data() + header_start + header_length;
  a.values.resize(count);
  for (std::size_t i = 0; i < count; ++i, p += element_size) {
    if (a.descr == "<f8") {
      a.values[i] = load<double>(p);
    } else if (a.descr == "<c16") {
      a.values[i] = {load<double>(p), load<double>(p + 8)};
    } else if (a.descr == "<i4") {
      a.values[i] = double(load<std::int32_t>(p));
    } else if (a.descr == "<i8") {
      a.values[i] = double(load<std::int64_t>(p));
    } else if (a.descr == "|b1") {
      const auto b = static_cast<unsigned char>(*p);
      if (b > 1) throw NpyError("a bool element holds the byte " + std::to_string(b) + " (0 or 1 expected)");
      a.values[i] = double(b);
    } else {  // |u1
      a.values[i] = double(static_cast<unsigned char>(*p));
    }
  }
  return a;
}

}  // namespace gratingsim::io
