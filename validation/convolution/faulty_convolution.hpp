#pragma once
// A fault-injecting plan for the timing tests: executes the wrapped plan, and on one chosen call
// (counted from 1 over the wrapper's life, warm-up and graph capture included) either corrupts the
// output it just wrote or skips the execution altogether (the output keeps whatever was there).
#include <functional>
#include <memory>
#include <utility>

#include "convolution/convolution.hpp"

namespace gratingsim::test {

template <class Real>
class FaultyConvolution final : public conv::Convolution<Real> {
 public:
  using Complex = std::complex<Real>;
  /// `corrupt(out, stream)` damages an output in the plan's memory (enqueued on `stream` for GPU plans).
  using Corruption = std::function<void(Complex* out, Stream stream)>;
  enum class Fault { corrupt, skip };

  FaultyConvolution(std::unique_ptr<conv::Convolution<Real>> plan, long long faulty_call, Fault fault, Corruption corrupt)
      : conv::Convolution<Real>(plan->problem()),
        plan_(std::move(plan)),
        faulty_call_(faulty_call),
        fault_(fault),
        corrupt_(std::move(corrupt)) {}

  void set_kernels(std::span<const std::complex<double>> kernels) override { plan_->set_kernels(kernels); }
  void execute(const Complex* in, Complex* out, Stream stream = nullptr) override {
    const bool faulty = ++calls_ == faulty_call_;
    if (faulty && fault_ == Fault::skip) return;
    plan_->execute(in, out, stream);
    if (faulty) corrupt_(out, stream);
  }
  [[nodiscard]] conv::Backend backend() const override { return plan_->backend(); }
  [[nodiscard]] long long calls() const { return calls_; }

 private:
  std::unique_ptr<conv::Convolution<Real>> plan_;
  long long faulty_call_, calls_ = 0;
  Fault fault_;
  Corruption corrupt_;
};

}  // namespace gratingsim::test
