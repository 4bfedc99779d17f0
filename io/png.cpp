#include "io/png.hpp"

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>

#include "core/config.hpp"
#if GRATINGSIM_HAVE_PNG
#include <png.h>
#endif

namespace gratingsim::io {

#if GRATINGSIM_HAVE_PNG

namespace {

/// The file's bytes as libpng reads them, and the reason of a refusal (libpng's or ours).
struct Source {
  const unsigned char* data = nullptr;
  std::size_t size = 0, offset = 0;
  char reason[512] = {};
};

void read_bytes(png_structp png, png_bytep out, std::size_t count) {
  auto* source = static_cast<Source*>(png_get_io_ptr(png));
  if (count > source->size - source->offset) png_error(png, "the file ends before its IEND chunk (truncated)");
  std::memcpy(out, source->data + source->offset, count);
  source->offset += count;
}

[[noreturn]] void on_error(png_structp png, png_const_charp message) {
  auto* source = static_cast<Source*>(png_get_error_ptr(png));
  std::snprintf(source->reason, sizeof source->reason, "%s", message);
  png_longjmp(png, 1);
}

/// Warnings concern ancillary chunks (an unknown colour profile, a bad gAMA), which change no sample.
void on_warning(png_structp, png_const_charp) {}

const char* colour_type_name(int type) {
  switch (type) {
    case PNG_COLOR_TYPE_GRAY_ALPHA: return "grayscale with alpha";
    case PNG_COLOR_TYPE_RGB: return "RGB colour";
    case PNG_COLOR_TYPE_RGB_ALPHA: return "RGBA colour (with alpha)";
    case PNG_COLOR_TYPE_PALETTE: return "palette (indexed colour)";
    default: return "an unknown colour type";
  }
}

/// Decodes source into image; returns false with source.reason set on a refusal. libpng reports errors
/// by longjmp to the setjmp below: between them this frame creates no object with a destructor
/// (setjmp's rule), and the image's storage belongs to the caller.
bool decode(Source& source, std::size_t max_pixels, GrayImage& image, std::vector<png_bytep>& row_pointers,
            std::vector<unsigned char>& bytes) {
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &source, on_error, on_warning);
  if (png == nullptr) {
    std::snprintf(source.reason, sizeof source.reason, "libpng could not start (out of memory)");
    return false;
  }
  png_infop info = png_create_info_struct(png);
  if (info == nullptr) {
    png_destroy_read_struct(&png, nullptr, nullptr);
    std::snprintf(source.reason, sizeof source.reason, "libpng could not start (out of memory)");
    return false;
  }
  if (setjmp(png_jmpbuf(png))) {  // a refusal: on_error wrote the reason
    png_destroy_read_struct(&png, &info, nullptr);
    return false;
  }
  png_set_read_fn(png, &source, read_bytes);
  png_set_user_limits(png, 0x7fffffff, 0x7fffffff);  // the pixel count below decides
  png_read_info(png, info);
  png_uint_32 width = 0, height = 0;
  int bit_depth = 0, colour_type = 0;
  png_get_IHDR(png, info, &width, &height, &bit_depth, &colour_type, nullptr, nullptr, nullptr);
  char reason[256];
  if (colour_type != PNG_COLOR_TYPE_GRAY) {
    std::snprintf(reason, sizeof reason,
                  "it is a %s image; a raster image is grayscale without alpha (PNG colour type 0), "
                  "bit depth 1, 2, 4, 8 or 16",
                  colour_type_name(colour_type));
    png_error(png, reason);
  }
  if (png_get_valid(png, info, PNG_INFO_tRNS) != 0)
    png_error(png, "it has a transparency (tRNS) chunk; a raster image has no transparency");
  if (std::size_t(width) * height > max_pixels) {
    std::snprintf(reason, sizeof reason, "%lu × %lu pixels is more than the %zu a raster may have",
                  static_cast<unsigned long>(width), static_cast<unsigned long>(height), max_pixels);
    png_error(png, reason);
  }
  png_set_packing(png);  // 1, 2 and 4 bits: one byte per sample, the value kept (0 to 2^bits − 1)
  (void)png_set_interlace_handling(png);  // Adam7: png_read_image assembles the passes
  png_read_update_info(png, info);
  const std::size_t row_bytes = png_get_rowbytes(png, info);
  bytes.resize(row_bytes * height);
  row_pointers.resize(height);
  for (std::size_t r = 0; r < height; ++r) row_pointers[r] = bytes.data() + r * row_bytes;
  png_read_image(png, row_pointers.data());
  png_read_end(png, nullptr);  // the chunks after the image up to IEND, their CRCs checked
  png_destroy_read_struct(&png, &info, nullptr);
  image.rows = height;
  image.columns = width;
  image.bit_depth = bit_depth;
  return true;
}

}  // namespace

bool png_supported() { return true; }

std::string png_version() { return png_get_libpng_ver(nullptr); }

GrayImage read_png(const std::string& path, std::size_t max_pixels) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw PngError("cannot open the file");
  const std::vector<unsigned char> file{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  if (in.bad()) throw PngError("cannot read the file");
  constexpr std::size_t signature_size = 8;  // \x89 P N G \r \n \x1a \n
  if (file.size() < signature_size || png_sig_cmp(file.data(), 0, signature_size) != 0)
    throw PngError("not a PNG file (it does not start with the PNG signature \\x89PNG\\r\\n\\x1a\\n)");
  Source source;
  source.data = file.data();
  source.size = file.size();
  GrayImage image;
  std::vector<png_bytep> row_pointers;
  std::vector<unsigned char> bytes;
  if (!decode(source, max_pixels, image, row_pointers, bytes)) throw PngError(source.reason);
  if (source.offset != source.size)
    throw PngError(std::to_string(source.size - source.offset) + " bytes follow the IEND chunk, which ends a PNG file");
  // 16 bits: two bytes per sample, most significant first (PNG's network byte order); fewer: one byte.
  const std::size_t n = image.rows * image.columns;
  image.samples.resize(n);
  for (std::size_t i = 0; i < n; ++i)
    image.samples[i] = image.bit_depth == 16 ? std::uint16_t((bytes[2 * i] << 8) | bytes[2 * i + 1]) : bytes[i];
  return image;
}

#else

bool png_supported() { return false; }

std::string png_version() { return "none"; }

GrayImage read_png(const std::string&, std::size_t) {
  throw std::logic_error("read_png: this build has no PNG support (GRATINGSIM_HAVE_PNG is 0)");
}

#endif

}  // namespace gratingsim::io
