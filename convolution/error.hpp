#pragma once
// Typed errors for all of gratingsim. Host code throws; only main() turns an error into an exit code.
#include <sstream>
#include <stdexcept>
#include <string>

namespace gratingsim {

/// Base of every error gratingsim throws; what() starts with "file:line: ".
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
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
/// A CUDA runtime or cuFFT call failed.
class CudaError : public Error {
 public:
  using Error::Error;
};

namespace detail {
template <class E>
[[noreturn]] void throw_located(const char* file, int line, const std::string& message) {
  std::ostringstream os;
  os << file << ':' << line << ": " << message;
  throw E(os.str());
}
}  // namespace detail
}  // namespace gratingsim

/// EXPECTS(cond, msg): precondition check; throws gratingsim::InvalidArgument with file:line and msg.
#define EXPECTS(cond, msg)                                                                        \
  do {                                                                                            \
    if (!(cond))                                                                                  \
      ::gratingsim::detail::throw_located<::gratingsim::InvalidArgument>(__FILE__, __LINE__, (msg)); \
  } while (0)

/// SUPPORTS(cond, msg): like EXPECTS, but for limits of a backend; throws gratingsim::Unsupported.
#define SUPPORTS(cond, msg)                                                                       \
  do {                                                                                            \
    if (!(cond))                                                                                  \
      ::gratingsim::detail::throw_located<::gratingsim::Unsupported>(__FILE__, __LINE__, (msg));  \
  } while (0)
