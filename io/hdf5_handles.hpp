#pragma once
// RAII over HDF5 C API identifiers (internal to io/; built with H5_USE_110_API so the same calls work
// on HDF5 1.10 and later). Every failing call becomes an io::OutputError naming the call's purpose and
// HDF5's own innermost message; HDF5's automatic error printing is switched off.
#include <hdf5.h>

#include <string>
#include <utility>

#include "io/results.hpp"

namespace gratingsim::io::h5 {

/// The innermost message on HDF5's error stack (then cleared), or "".
std::string last_error();
/// Switches off HDF5's printing of error stacks to stderr (errors become exceptions instead) and,
/// when it comes before any other HDF5 call, HDF5's closing of open files at exit: a file left open
/// after a failed write (ResultWriter) must not be flushed again by the library's exit handler.
void silence_errors();

[[noreturn]] inline void fail(const std::string& what) {
  std::string message = "HDF5: " + what;
  if (const std::string detail = last_error(); !detail.empty()) message += " (" + detail + ")";
  throw OutputError(message);
}

/// Throws unless an herr_t / htri_t call succeeded.
inline void check(herr_t status, const std::string& what) {
  if (status < 0) fail(what);
}

/// One owned hid_t, closed with the function it was made for.
class Handle {
 public:
  using Closer = herr_t (*)(hid_t);
  Handle() = default;
  Handle(hid_t id, Closer close, const std::string& what) : id_(id), close_(close) {
    if (id < 0) fail(what);
  }
  Handle(Handle&& other) noexcept : id_(std::exchange(other.id_, H5I_INVALID_HID)), close_(other.close_) {}
  Handle& operator=(Handle&& other) noexcept {
    if (this != &other) {
      reset();
      id_ = std::exchange(other.id_, H5I_INVALID_HID);
      close_ = other.close_;
    }
    return *this;
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  ~Handle() { reset(); }

  [[nodiscard]] hid_t get() const { return id_; }
  operator hid_t() const { return id_; }  // NOLINT: passes straight into C calls
  [[nodiscard]] bool valid() const { return id_ >= 0; }
  /// Gives the identifier up without closing it (for a file HDF5 must not touch again).
  void release() { id_ = H5I_INVALID_HID; }
  /// Closes now; a failing close is reported (destructors ignore it: nothing left to do then).
  void close(const std::string& what) {
    if (id_ < 0) return;
    const herr_t status = close_(std::exchange(id_, H5I_INVALID_HID));
    check(status, what);
  }

 private:
  void reset() noexcept {
    if (id_ >= 0) close_(std::exchange(id_, H5I_INVALID_HID));
  }
  hid_t id_ = H5I_INVALID_HID;
  Closer close_ = nullptr;
};

inline Handle file(hid_t id, const std::string& what) { return {id, H5Fclose, what}; }
inline Handle group(hid_t id, const std::string& what) { return {id, H5Gclose, what}; }
inline Handle dataset(hid_t id, const std::string& what) { return {id, H5Dclose, what}; }
inline Handle dataspace(hid_t id, const std::string& what) { return {id, H5Sclose, what}; }
inline Handle datatype(hid_t id, const std::string& what) { return {id, H5Tclose, what}; }
inline Handle attribute(hid_t id, const std::string& what) { return {id, H5Aclose, what}; }
inline Handle plist(hid_t id, const std::string& what) { return {id, H5Pclose, what}; }

/// The file's string type: variable-length UTF-8.
inline Handle string_type() {
  Handle t = datatype(H5Tcopy(H5T_C_S1), "copy the string type");
  check(H5Tset_size(t, H5T_VARIABLE), "make a variable-length string type");
  check(H5Tset_cset(t, H5T_CSET_UTF8), "set UTF-8 strings");
  return t;
}

}  // namespace gratingsim::io::h5
