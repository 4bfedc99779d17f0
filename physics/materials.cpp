#include "physics/materials.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <iomanip>
#include <sstream>

#include "core/error.hpp"

namespace gratingsim::physics {
namespace {

std::string describe(const std::string& name) { return name.empty() ? "material" : "material '" + name + "'"; }

/// A number with enough digits that a value just outside a range does not print as its end.
std::string format_number(double x) {
  std::ostringstream os;
  os << std::setprecision(12) << x;
  return os.str();
}

void check_in_range(const std::string& name, double wavelength, double lo, double hi) {
  GS_EXPECTS(wavelength >= lo && wavelength <= hi,
          describe(name) + ": wavelength " + format_number(wavelength) + " is outside its data range [" +
              format_number(lo) + ", " + format_number(hi) + "] (model length units; data are never extrapolated)");
}

void check_permittivity(Complex eps, const std::string& name) {
  GS_EXPECTS(std::isfinite(eps.real()) && std::isfinite(eps.imag()), describe(name) + ": permittivity is not finite");
  GS_EXPECTS(eps.imag() >= 0, describe(name) + ": Im ε must be ≥ 0 (loss, exp(−iωt) convention), got " +
                               format_number(eps.imag()));
}

// Photon energy in eV of a vacuum wavelength in nm: E = hc/λ, hc = 1239.841984 eV·nm.
constexpr double hc_ev_nm = 1239.841984;

// --- Built-in data --------------------------------------------------------------------------
// Si, crystalline, 300 K: M. A. Green, "Self-consistent optical parameters of intrinsic silicon at
// 300 K including temperature coefficients", Sol. Energ. Mat. Sol. Cells 92, 1305–1310 (2008),
// doi:10.1016/j.solmat.2008.06.009 (values as tabulated in the refractiveindex.info database,
// Si/Green-2008), every 10 nm from 250 to 1000 nm, then every 50 nm to 1200 nm. Columns: λ (nm), n, κ.
constexpr std::array<std::array<double, 3>, 80> silicon_green_2008{{
    {250, 1.665, 3.665},   {260, 1.757, 4.084},   {270, 2.068, 4.68},     {280, 2.959, 5.287},
    {290, 4.356, 5.286},   {300, 4.976, 4.234},   {310, 5.121, 3.598},    {320, 5.112, 3.303},
    {330, 5.195, 3.1},     {340, 5.301, 2.977},   {350, 5.494, 2.938},    {360, 6.026, 2.966},
    {370, 6.891, 2.171},   {380, 6.616, 0.946},   {390, 6.039, 0.445},    {400, 5.613, 0.296},
    {410, 5.33, 0.227},    {420, 5.119, 0.176},   {430, 4.949, 0.138},    {440, 4.812, 0.107},
    {450, 4.691, 0.086302}, {460, 4.587, 0.071381}, {470, 4.497, 0.062086}, {480, 4.419, 0.055004},
    {490, 4.35, 0.049131}, {500, 4.294, 0.044165}, {510, 4.241, 0.039367}, {520, 4.193, 0.036415},
    {530, 4.151, 0.033108}, {540, 4.112, 0.030295}, {550, 4.077, 0.027968}, {560, 4.045, 0.025758},
    {570, 4.015, 0.024131}, {580, 3.988, 0.022524}, {590, 3.963, 0.021081}, {600, 3.94, 0.019934},
    {610, 3.918, 0.018446}, {620, 3.898, 0.017367}, {630, 3.879, 0.016444}, {640, 3.861, 0.015432},
    {650, 3.844, 0.014431}, {660, 3.828, 0.013498}, {670, 3.813, 0.012743}, {680, 3.798, 0.011905},
    {690, 3.784, 0.011201}, {700, 3.772, 0.010528}, {710, 3.759, 0.010057}, {720, 3.748, 0.0096257},
    {730, 3.737, 0.0089461}, {740, 3.727, 0.008362}, {750, 3.717, 0.0078185}, {760, 3.708, 0.007197},
    {770, 3.699, 0.0067402}, {780, 3.691, 0.0063933}, {790, 3.683, 0.005834}, {800, 3.675, 0.0054113},
    {810, 3.668, 0.0049955}, {820, 3.661, 0.0046134}, {830, 3.654, 0.0042734}, {840, 3.647, 0.0039439},
    {850, 3.641, 0.003612}, {860, 3.635, 0.0032781}, {870, 3.63, 0.0029839}, {880, 3.624, 0.0026821},
    {890, 3.619, 0.0024293}, {900, 3.614, 0.0021701}, {910, 3.609, 0.0019625}, {920, 3.604, 0.0017571},
    {930, 3.6, 0.0015467}, {940, 3.595, 0.0013689}, {950, 3.591, 0.0011793}, {960, 3.587, 0.0010237},
    {970, 3.583, 0.00087225}, {980, 3.579, 0.00074866}, {990, 3.575, 0.00062238}, {1000, 3.572, 0.0005093},
    {1050, 3.556, 0.0001362}, {1100, 3.542, 3.0637e-05}, {1150, 3.53, 6.223e-06}, {1200, 3.52, 2.1008e-07},
}};

Material silicon(double nm_per_unit) {
  std::vector<double> wl, n, k;
  for (const auto& row : silicon_green_2008) {
    wl.push_back(row[0] / nm_per_unit);
    n.push_back(row[1]);
    k.push_back(row[2]);
  }
  return Material::tabulated("Si", std::move(wl), std::move(n), std::move(k));
}

}  // namespace

Material Material::constant_index(Complex index, std::string name) {
  GS_EXPECTS(index.imag() >= 0, describe(name) + ": κ must be ≥ 0 (loss, exp(−iωt) convention), got " +
                                 std::to_string(index.imag()));
  return constant_permittivity(index * index, std::move(name));
}

Material Material::constant_permittivity(Complex permittivity, std::string name) {
  check_permittivity(permittivity, name);
  // The normal-vector formulation divides by ε (an ε = 0 substrate ended in a 'singular slice matrix', an audit).
  GS_EXPECTS(permittivity != Complex(0), describe(name) + ": ε = 0 is not a material");
  Material m;
  m.name_ = std::move(name);
  m.model_ = Constant{permittivity};
  return m;
}

Material Material::mixture(const Material& a, const Material& b, double fraction_b, std::string name) {
  GS_EXPECTS(fraction_b >= 0 && fraction_b <= 1,
             describe(name) + ": a mixture's fraction must lie in [0, 1], got " + std::to_string(fraction_b));
  Material m;
  m.name_ = std::move(name);
  m.model_ = Mixture{std::make_shared<const Material>(a), std::make_shared<const Material>(b), fraction_b};
  return m;
}

Material Material::tabulated(std::string name, std::vector<double> wavelengths, std::vector<double> n,
                             std::vector<double> kappa) {
  GS_EXPECTS(wavelengths.size() >= 2, describe(name) + ": a table needs at least two wavelengths");
  GS_EXPECTS(n.size() == wavelengths.size() && kappa.size() == wavelengths.size(),
          describe(name) + ": table columns differ in length");
  for (std::size_t i = 0; i < wavelengths.size(); ++i) {
    GS_EXPECTS(wavelengths[i] > 0 && (i == 0 || wavelengths[i] > wavelengths[i - 1]),
            describe(name) + ": table wavelengths must be positive and strictly increasing (row " +
                std::to_string(i) + ")");
    GS_EXPECTS(kappa[i] >= 0, describe(name) + ": κ must be ≥ 0 (row " + std::to_string(i) + ")");
  }
  Material m;
  m.name_ = std::move(name);
  m.model_ = Table{std::move(wavelengths), std::move(n), std::move(kappa)};
  return m;
}

Material Material::sellmeier(std::string name, std::vector<double> b, std::vector<double> resonance_wavelengths,
                             double min_wavelength, double max_wavelength) {
  GS_EXPECTS(!b.empty() && b.size() == resonance_wavelengths.size(),
          describe(name) + ": Sellmeier needs as many B_i as resonance wavelengths (and at least one)");
  GS_EXPECTS(min_wavelength > 0 && max_wavelength > min_wavelength,
          describe(name) + ": Sellmeier validity range must satisfy 0 < min < max");
  Material m;
  m.name_ = std::move(name);
  m.model_ = SellmeierTerms{std::move(b), std::move(resonance_wavelengths), min_wavelength, max_wavelength};
  return m;
}

Material Material::lorentz_drude(std::string name, double plasma_ev, double f0, double gamma0_ev,
                                 std::vector<double> f, std::vector<double> omega_ev, std::vector<double> gamma_ev,
                                 double nm_per_unit, double min_wavelength, double max_wavelength) {
  GS_EXPECTS(f.size() == omega_ev.size() && f.size() == gamma_ev.size(),
          describe(name) + ": Lorentz–Drude oscillator lists differ in length");
  GS_EXPECTS(nm_per_unit > 0 && min_wavelength > 0 && max_wavelength > min_wavelength,
          describe(name) + ": Lorentz–Drude needs nm_per_unit > 0 and 0 < min < max");
  Material m;
  m.name_ = std::move(name);
  m.model_ = LorentzDrude{plasma_ev, f0, gamma0_ev, std::move(f), std::move(omega_ev), std::move(gamma_ev),
                          nm_per_unit, min_wavelength, max_wavelength};
  return m;
}

Complex Material::permittivity(double wavelength) const {
  GS_EXPECTS(wavelength > 0 && std::isfinite(wavelength),
          describe(name_) + ": wavelength must be positive, got " + std::to_string(wavelength));
  struct Visitor {
    const std::string& name;
    double wl;
    Complex operator()(const Constant& c) const { return c.permittivity; }
    Complex operator()(const Table& t) const {
      check_in_range(name, wl, t.wavelength.front(), t.wavelength.back());
      const auto hi = std::upper_bound(t.wavelength.begin(), t.wavelength.end(), wl);
      const std::size_t j = std::min<std::size_t>(std::max<std::ptrdiff_t>(hi - t.wavelength.begin(), 1),
                                                  t.wavelength.size() - 1);
      const double u = (wl - t.wavelength[j - 1]) / (t.wavelength[j] - t.wavelength[j - 1]);
      const Complex index((1 - u) * t.n[j - 1] + u * t.n[j], (1 - u) * t.kappa[j - 1] + u * t.kappa[j]);
      return index * index;
    }
    Complex operator()(const SellmeierTerms& s) const {
      check_in_range(name, wl, s.min, s.max);
      double n2 = 1;
      for (std::size_t i = 0; i < s.b.size(); ++i) n2 += s.b[i] * wl * wl / (wl * wl - s.resonance[i] * s.resonance[i]);
      // A Sellmeier model describes a transparent dielectric: n² ≤ 0 is outside what its coefficients can mean.
      GS_EXPECTS(n2 > 0, describe(name) + ": the Sellmeier model gives n² = " + format_number(n2) + " ≤ 0 at wavelength " +
                             format_number(wl) + "; check its B and resonances");
      return n2;
    }
    Complex operator()(const Mixture& m) const {
      return (1 - m.fraction_b) * m.a->permittivity(wl) + m.fraction_b * m.b->permittivity(wl);
    }
    Complex operator()(const LorentzDrude& d) const {
      check_in_range(name, wl, d.min, d.max);
      const double w = hc_ev_nm / (wl * d.nm_per_unit);
      const double wp2 = d.plasma * d.plasma;
      Complex eps = 1.0 - d.f0 * wp2 / (w * Complex(w, d.gamma0));
      for (std::size_t j = 0; j < d.f.size(); ++j)
        eps += d.f[j] * wp2 / Complex(d.omega[j] * d.omega[j] - w * w, -w * d.gamma[j]);
      return eps;
    }
  };
  const Complex eps = std::visit(Visitor{name_, wavelength}, model_);
  check_permittivity(eps, name_);
  return eps;
}

Complex Material::index(double wavelength) const {
  Complex n = std::sqrt(permittivity(wavelength));
  return n.imag() < 0 ? -n : n;
}

std::vector<std::string> library_names() { return {"air", "SiO2", "Si", "Si3N4", "Al", "Au", "PMMA"}; }

Material library_material(std::string_view name, double nm_per_unit) {
  GS_EXPECTS(nm_per_unit > 0, "library_material: nm_per_unit must be positive");
  const double um = 1000.0 / nm_per_unit;  // one micrometre in model units
  // Air: n = 1 exactly (real air's n − 1 ≈ 2.7e-4 is left out, as is usual for grating metrology).
  if (name == "air") return Material::constant_index(1.0, "air");
  // Fused silica, 20 °C: I. H. Malitson, "Interspecimen comparison of the refractive index of fused
  // silica", J. Opt. Soc. Am. 55, 1205–1208 (1965), Sellmeier fit valid 0.21–3.71 µm (used here to
  // 0.21–6.7 µm, verified by C. Z. Tan, J. Non-Cryst. Solids 223, 158 (1998)).
  if (name == "SiO2")
    return Material::sellmeier("SiO2", {0.6961663, 0.4079426, 0.8974794},
                               {0.0684043 * um, 0.1162414 * um, 9.896161 * um}, 0.21 * um, 6.7 * um);
  if (name == "Si") return silicon(nm_per_unit);
  // Stoichiometric LPCVD Si3N4: K. Luke, Y. Okawachi, M. R. E. Lamont, A. L. Gaeta, M. Lipson,
  // "Broadband mid-infrared frequency comb generation in a Si3N4 microresonator", Opt. Lett. 40,
  // 4823–4826 (2015), Sellmeier valid 0.31–5.504 µm.
  if (name == "Si3N4")
    return Material::sellmeier("Si3N4", {3.0249, 40314}, {0.1353406 * um, 1239.842 * um}, 0.31 * um, 5.504 * um);
  // Metals: Lorentz–Drude fits of A. D. Rakić, A. B. Djurišić, J. M. Elazar, M. L. Majewski, "Optical
  // properties of metallic films for vertical-cavity optoelectronic devices", Appl. Opt. 37,
  // 5271–5283 (1998), Table 1 (LD model); energies in eV. Ranges: those of the fitted data.
  if (name == "Al")
    return Material::lorentz_drude("Al", 14.98, 0.523, 0.047, {0.227, 0.050, 0.166, 0.030},
                                   {0.162, 1.544, 1.808, 3.473}, {0.333, 0.312, 1.351, 3.382}, nm_per_unit,
                                   hc_ev_nm / 20.0 / nm_per_unit, hc_ev_nm / 0.005 / nm_per_unit);
  if (name == "Au")
    return Material::lorentz_drude("Au", 9.03, 0.760, 0.053, {0.024, 0.010, 0.071, 0.601, 4.384},
                                   {0.415, 0.830, 2.969, 4.304, 13.32}, {0.241, 0.345, 0.870, 2.494, 2.214},
                                   nm_per_unit, hc_ev_nm / 5.0 / nm_per_unit, hc_ev_nm / 0.2 / nm_per_unit);
  // PMMA (an e-beam and deep-UV resist), 20 °C: N. Sultanova, S. Kasarova, I. Nikolov, "Dispersion
  // properties of optical polymers", Acta Physica Polonica A 116, 585–587 (2009); Sellmeier fit
  // n² − 1 = 1.1819 λ²/(λ² − 0.011313 µm²), valid 0.4368–1.052 µm.
  if (name == "PMMA")
    return Material::sellmeier("PMMA", {1.1819}, {std::sqrt(0.011313) * um}, 0.4368 * um, 1.052 * um);
  std::string known;
  for (const auto& n : library_names()) known += (known.empty() ? "" : ", ") + n;
  GS_EXPECTS(false, "unknown library material '" + std::string(name) + "' (known: " + known + ")");
}

}  // namespace gratingsim::physics
