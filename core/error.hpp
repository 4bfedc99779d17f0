#pragma once
// Typed errors for all of gratingsim. Host code throws through the GS_ check macros below; only
// main() turns an error into an exit code. An error keeps the message a user reads (what()) and,
// beside it, where it was raised (where(): the source location of the check, or an empty location
// for errors raised without a check macro), so no caller ever strips a prefix from a message.
//
// The location is passed explicitly by the macros (std::source_location::current() at the check),
// never as a default constructor argument: nvcc 13's front end crashes on inherited constructors
// whose default argument is std::source_location::current().
#include <source_location>
#include <stdexcept>
#include <string>

namespace gratingsim {

/// Base of every error gratingsim throws.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
  Error(const std::string& message, const std::source_location& where)
      : std::runtime_error(message), where_(where) {}
  /// Where the check that raised this sits (line 0 when raised without a check macro).
  [[nodiscard]] const std::source_location& where() const noexcept { return where_; }

 private:
  std::source_location where_{};
};
/// A caller broke a documented precondition (bad size, bad name, null buffer).
class InvalidArgument : public Error {
 public:
  using Error::Error;
};
/// A valid request that this build or backend cannot serve (shape beyond a kernel's limit, no GPU).
class Unsupported : public Error {
 public:
  using Error::Error;
};
/// A CUDA runtime, cuFFT or cuBLAS call failed.
class CudaError : public Error {
 public:
  using Error::Error;
};
/// A file could not be written, synced or renamed (core/atomic_file.hpp).
class FileError : public Error {
 public:
  using Error::Error;
};

/// "file:line" of an error's location relative to the source tree ("" when it has none): for
/// messages that report an internal failure to a developer.
std::string source_position(const Error& error);

/// e.what() without the "file:line: " prefix of located errors: what a user reads (the command line's
/// messages and the Python module's).
std::string user_message(const std::exception& e);

}  // namespace gratingsim

/// GS_EXPECTS(cond, msg): precondition check; throws gratingsim::InvalidArgument(msg) located here.
#define GS_EXPECTS(cond, msg)                                                               \
  do {                                                                                      \
    if (!(cond)) throw ::gratingsim::InvalidArgument((msg), std::source_location::current()); \
  } while (0)

/// GS_SUPPORTS(cond, msg): like GS_EXPECTS, for limits of a backend; throws gratingsim::Unsupported.
#define GS_SUPPORTS(cond, msg)                                                           \
  do {                                                                                   \
    if (!(cond)) throw ::gratingsim::Unsupported((msg), std::source_location::current()); \
  } while (0)
