#pragma once
// Isotropic, non-magnetic materials: the relative permittivity ε(λ) = (n + iκ)², Im ε ≥ 0 for loss
// (time dependence exp(−iωt), docs/formulation.md §1). Wavelengths are in the model's length unit, the
// same unit as every length of the structure (the library converts its data with `unit_nm`).
#include <complex>
#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace gratingsim::physics {

using Complex = std::complex<double>;

class Material {
 public:
  /// A default material is vacuum/air: ε = 1 at every wavelength.
  Material() = default;

  /// ε = n² for a wavelength-independent index n + iκ (κ ≥ 0).
  static Material constant_index(Complex index, std::string name = "");
  /// A wavelength-independent permittivity ε (Im ε ≥ 0).
  static Material constant_permittivity(Complex permittivity, std::string name = "");
  /// n(λ), κ(λ) at strictly increasing wavelengths, linearly interpolated in λ; a wavelength outside
  /// [first, last] is an error (never extrapolated).
  static Material tabulated(std::string name, std::vector<double> wavelengths, std::vector<double> n,
                            std::vector<double> kappa);
  /// Sellmeier: n² = 1 + Σ_i B_i λ²/(λ² − λ_i²) (lossless), valid on [min_wavelength, max_wavelength].
  static Material sellmeier(std::string name, std::vector<double> b, std::vector<double> resonance_wavelengths,
                            double min_wavelength, double max_wavelength);
  /// Lorentz–Drude (Rakić 1998 form), photon energy ħω = hc/λ in eV:
  /// ε = 1 − f0 ωp²/(ω(ω + iΓ0)) + Σ_j f_j ωp²/((ω_j² − ω²) − iωΓ_j); energies in eV.
  /// `nm_per_unit` converts a model wavelength to nanometres. Valid on [min, max] in model units.
  static Material lorentz_drude(std::string name, double plasma_ev, double f0, double gamma0_ev,
                                std::vector<double> f, std::vector<double> omega_ev, std::vector<double> gamma_ev,
                                double nm_per_unit, double min_wavelength, double max_wavelength);

  /// The area-weighted mean of two materials, ε = (1 − f)·ε_a + f·ε_b with 0 ≤ f ≤ 1 (a pixel filled to the
  /// fraction f by b: its mean permittivity, the zeroth Fourier coefficient). Valid where both are.
  static Material mixture(const Material& a, const Material& b, double fraction_b, std::string name = "");

  /// ε at `wavelength` (model units, > 0). Throws InvalidArgument outside the material's data range.
  [[nodiscard]] Complex permittivity(double wavelength) const;
  /// n + iκ = sqrt(ε) on the branch Im ≥ 0.
  [[nodiscard]] Complex index(double wavelength) const;
  [[nodiscard]] const std::string& name() const { return name_; }

 private:
  struct Constant {
    Complex permittivity{1.0, 0.0};
  };
  struct Table {
    std::vector<double> wavelength, n, kappa;
  };
  struct SellmeierTerms {
    std::vector<double> b, resonance;
    double min, max;
  };
  struct LorentzDrude {
    double plasma, f0, gamma0;
    std::vector<double> f, omega, gamma;
    double nm_per_unit, min, max;
  };
  struct Mixture {
    std::shared_ptr<const Material> a, b;  // shared: a raster's many fractions hold the same two
    double fraction_b;
  };
  std::string name_ = "air";
  std::variant<Constant, Table, SellmeierTerms, LorentzDrude, Mixture> model_ = Constant{};
};

/// The built-in library (names are case-sensitive): "air", "SiO2", "Si", "Si3N4", "Al", "Au", "PMMA"
/// (an e-beam/deep-UV resist). Sources and ranges are cited in materials.cpp. `nm_per_unit` is the
/// length of one model unit in nanometres (1 when lengths are in nm, 1000 when in µm).
Material library_material(std::string_view name, double nm_per_unit);
std::vector<std::string> library_names();

}  // namespace gratingsim::physics
