#include "physics/problem.hpp"

#include <cmath>
#include <exception>
#include <limits>

#include "core/error.hpp"
#include "core/config.hpp"

namespace gratingsim::physics {
namespace {
constexpr std::complex<double> I{0.0, 1.0};
}

namespace {

/// The members of one structure's incidences: runs of one wavelength, each as long as the first
/// (problem.hpp; InvalidArgument otherwise).
std::vector<ProblemMember> wavelength_runs(const Structure& structure, std::span<const Incidence> incidences,
                                           std::vector<std::string>& warnings) {
  GS_EXPECTS(!incidences.empty(), "no incidence to solve");
  std::size_t per_member = 1;
  while (per_member < incidences.size() && incidences[per_member].wavelength == incidences[0].wavelength) ++per_member;
  const std::string runs = "the incidences of one problem must come in runs of one wavelength, equally many per wavelength";
  GS_EXPECTS(incidences.size() % per_member == 0, runs);
  std::vector<ProblemMember> members;
  for (std::size_t first = 0; first < incidences.size(); first += per_member)
    members.push_back({structure, incidences.subspan(first, per_member), warnings});
  return members;
}

}  // namespace

template <class Real>
DiscreteProblem<Real>::DiscreteProblem(const Structure& structure, std::span<const Incidence> incidences,
                                       const ProblemSettings& settings, int slice_factor,
                                       std::vector<std::string>& warnings)
    : DiscreteProblem(wavelength_runs(structure, incidences, warnings), settings, slice_factor) {}

template <class Real>
DiscreteProblem<Real>::DiscreteProblem(std::span<const ProblemMember> members, const ProblemSettings& settings,
                                       int slice_factor)
    : formulation_(settings.formulation) {
  using C = std::complex<double>;
  const auto lap = [&](Phase phase) {
    if (settings.timer) settings.timer->lap(phase);
  };
  GS_EXPECTS(!members.empty() && !members[0].incidences.empty(), "no incidence to solve");
  const Lattice& lattice = members[0].structure.lattice;
  const std::size_t per_member = members[0].incidences.size();
  members_ = int(members.size());
  std::vector<Incidence> incidences;  // every member's, member-contiguous
  std::vector<double> wavelengths;    // per member
  std::vector<C> eps1, eps2;          // per member
  for (std::size_t w = 0; w < members.size(); ++w) {
    const ProblemMember& member = members[w];
    const Structure& structure = member.structure;
    GS_EXPECTS(!structure.layers.empty(), "the structure has no layer: a bare interface needs no solve");
    GS_EXPECTS(member.incidences.size() == per_member,
               "the members of one problem must have equally many incidences, got " +
                   std::to_string(member.incidences.size()) + " and " + std::to_string(per_member));
    GS_EXPECTS(structure.lattice.period_x == lattice.period_x && structure.lattice.period_y == lattice.period_y &&
                   structure.lattice.rotation_deg == lattice.rotation_deg,
               "the members of one problem must share the lattice");
    const double wavelength = member.incidences[0].wavelength;
    for (const Incidence& incidence : member.incidences)
      GS_EXPECTS(incidence.wavelength == wavelength,
                 "the incidences of one problem must come in runs of one wavelength, equally many per wavelength");
    // Members of one structure (the same object) share its slices.
    std::size_t same = 0;
    while (same < w && &members[same].structure != &structure) ++same;
    if (same < w) {
      discretisation_of_.push_back(discretisation_of_[same]);
    } else {
      discretisation_of_.push_back(int(discretisations_.size()));
      discretisations_.push_back(discretise(structure, slice_factor));
      GS_EXPECTS(discretisations_.back().grid.slices() == discretisations_.front().grid.slices(),
                 "the members of one problem must have equally many slices, got " +
                     std::to_string(discretisations_.back().grid.slices()) + " and " +
                     std::to_string(discretisations_.front().grid.slices()));
    }
    wavelengths.push_back(wavelength);
    eps1.push_back(structure.superstrate.permittivity(wavelength));
    eps2.push_back(structure.substrate.permittivity(wavelength));
    for (const Incidence& incidence : member.incidences) {
      incidences.push_back(incidence);
      orders_.push_back(floquet_orders(lattice, incidence, eps1.back(), eps2.back(), settings.m1, settings.m2,
                                       settings.rayleigh_tolerance, member.warnings));
    }
  }

  const int nz = discretisations_[0].grid.slices(), nw = members_;
  const std::size_t nm = orders_[0].orders.size(), nr = 2 * incidences.size();
  layout_ = {std::size_t(nz), nr, 3 * nm};

  // The convolution problem: Laurent's scalar one (3 components per rhs, kernel χ), or the
  // normal-vector pattern (one group of F_x, F_y, F_z per rhs; normal_field.hpp).
  const bool normal_vector = formulation_ == Formulation::normal_vector;
  bool tilted = false;  // some member's slices have sloped walls: the tilted field (normal_field.hpp)
  for (const ProblemMember& member : members) tilted = tilted || sloped_walls(member.structure);
  const conv::Problem geometry =
      convolution_problem(formulation_, lattice, settings.m1, settings.m2, nz, per_member, nw, tilted);
  const int n1 = geometry.n1, n2 = geometry.n2;
  sources_per_block_ = normal_vector ? geometry.outputs : 3;
  d_axes_ = d_axes(geometry);
  if (normal_vector) {
    const Precision precision = precision_of<Real>();
    const conv::BackendTraits& traits = conv::traits(settings.backend);
    const conv::Problem resolved = conv::resolve(geometry);
    const conv::Support pattern = traits.can_implement(resolved, precision);
    const conv::Support scalar =
        traits.can_implement(conv::resolve(conv::scalar_problem(n1, n2, nz * nw, int(3 * 2 * per_member))), precision);
    std::string serving;  // the backends that can, here, for this size and precision
    if (!pattern.ok && scalar.ok)
      for (const conv::BackendTraits& t : conv::backend_table())
        if (t.can_implement(resolved, precision))
          serving += (serving.empty() ? "" : ", ") + std::string(t.name);
    GS_SUPPORTS(pattern.ok || !scalar.ok,
             "backend " + std::string(traits.name) + " cannot serve the normal-vector formulation's convolution (" +
                 std::to_string(geometry.kernels) + " kernels, 3 inputs → " + std::to_string(geometry.outputs) +
                 " outputs per right-hand side): " + pattern.reason + "; choose numerics.formulation: laurent" +
                 (serving.empty() ? std::string() : ", or a backend that serves it (" + serving + ")"));
  }

  // Kernels per engine slice s = p·members + w (χ̂, or the normal-vector kernels: they depend on the
  // wavelength through ε(λ) and on the member's geometry), computed once per (member, distinct slice
  // geometry of its structure).
  const std::size_t kernel_size = std::size_t(2 * n1 - 1) * (2 * n2 - 1);
  const std::size_t slice_kernels = std::size_t(geometry.kernels) * kernel_size;
  // In parallel over the (member, content) pairs of 2D lattices (the normal fields' rasters dominate
  // the set-up on the host, issue #15); each pair's kernels are computed by one thread exactly as
  // serially and copied by it to every slice that holds its content (so the pages of kernels_, about 90 MB
  // for problem_case_3, are first touched and filled in parallel, and each pair's own copy is freed at once).
  // The error of the first failing pair is rethrown after the loop, as serially (exceptions must not
  // leave an OpenMP region).
  std::vector<std::pair<int, const SliceContent*>> pair_content;  // (member, content) per pair
  std::vector<std::vector<int>> pair_slices;                     // the slices p holding the pair's content
  for (int w = 0; w < nw; ++w) {
    const Discretisation& d = discretisation(w);
    const std::size_t first = pair_content.size();
    for (const SliceContent& c : d.contents) pair_content.emplace_back(w, &c);
    pair_slices.resize(pair_content.size());
    for (int p = 0; p < nz; ++p) pair_slices[first + std::size_t(d.content_of_slice[p])].push_back(p);
  }
  const std::size_t pairs = pair_content.size();
  std::vector<std::exception_ptr> failures(pairs);
  kernels_.resize(std::size_t(nz) * nw * slice_kernels);
  // 1D kernels are closed forms of microseconds: there a thread team costs more than it saves.
  const bool parallel = !lattice.one_dimensional() && pairs > 1;
#pragma omp parallel for schedule(dynamic, 1) if (parallel)
  for (std::size_t i = 0; i < pairs; ++i) {
    try {
      const auto [w, c] = pair_content[i];
      const std::vector<C> k =
          normal_vector ? normal_vector_kernels(lattice, *c, wavelengths[w], eps1[w], settings.m1, settings.m2,
                                                settings.normal_field_resolution, tilted)
                        : contrast_harmonics(lattice, *c, wavelengths[w], eps1[w], settings.m1, settings.m2);
      GS_EXPECTS(k.size() == slice_kernels, "kernel count of a slice does not match the convolution problem");
      for (const int p : pair_slices[i])
        std::copy(k.begin(), k.end(), kernels_.begin() + std::ptrdiff_t((std::size_t(p) * nw + w) * slice_kernels));
    } catch (...) {
      failures[i] = std::current_exception();
    }
  }
  for (const std::exception_ptr& failure : failures)
    if (failure) std::rethrow_exception(failure);
  lap(Phase::structure);
  convolution_ = conv::make_convolution<Real>(settings.backend, geometry, kernels_);
#if GRATINGSIM_HAVE_CUDA
  if (convolution_->memory() == Memory::device) {
    device_stream_ = std::make_unique<DeviceStream>();
    stream_ = device_stream_->get();
  }
#endif
  lap(Phase::spectra_plans);

  std::vector<int> rhs_incidence;
  for (std::size_t a = 0; a < incidences.size(); ++a) rhs_incidence.insert(rhs_incidence.end(), {int(a), int(a)});
  // A device z-operator computes its per-slice tables itself.
  GreenCoefficients green = green_coefficients(
      grids(), orders_, convolution_->memory() == Memory::device ? SliceTables::none : SliceTables::host);

  // e_b(z) = a_s ê (e^{−ikz z} + r_s e^{ikz z}) + a_p (p̂− e^{−ikz z} + r_p p̂+ e^{ikz z}), order 0 only.
  background_.resize(std::size_t(nz) * nr * 3);
  for (std::size_t a = 0; a < incidences.size(); ++a) {
    const FloquetOrders& f = orders_[a];
    GS_EXPECTS(f.zeroth() == orders_[0].zeroth(), "every incidence of a problem has its order 0 at one index");
    const Order& o = f.orders[f.zeroth()];
    const C kz = o.kz1;
    const C pt = kz / f.k1;
    const double pz = -o.krho / f.k1, ex = -o.ty, ey = o.tx;
    const ZGrid& grid = discretisation(int(a / per_member)).grid;
    for (int p = 0; p < nz; ++p) {
      const C down = std::exp(-I * kz * grid.z[p]), up = std::exp(I * kz * grid.z[p]);
      // s: ê (down + r_s up);  p: t̂ pt (−down + r_p up) + ẑ pz (down + r_p up)
      const C s_amp = down + o.rs * up, p_t = pt * (-down + o.rp * up), p_z = pz * (down + o.rp * up);
      const C field[2][3] = {{s_amp * ex, s_amp * ey, 0.0}, {p_t * o.tx, p_t * o.ty, p_z}};
      for (int pol = 0; pol < 2; ++pol)
        for (int comp = 0; comp < 3; ++comp)
          background_[(std::size_t(p) * nr + 2 * a + pol) * 3 + comp] = Complex(field[pol][comp]);
    }
  }
  lap(Phase::z_operator);
  if (convolution_->memory() == Memory::device) {
#if GRATINGSIM_HAVE_CUDA
    z_operator_ = make_device_z_operator<Real>(std::move(green), std::move(rhs_incidence), d_axes_);
#else
    GS_SUPPORTS(false, "backend " + std::string(conv::to_string(settings.backend)) +
                        " keeps its buffers on the device, and this build has no CUDA");
#endif
  } else {
    z_operator_ = make_host_z_operator<Real>(std::move(green), std::move(rhs_incidence), d_axes_);
  }
  work_ = make_output_space(1);
  lap(Phase::uploads);
}

template <class Real>
std::vector<ZGrid> DiscreteProblem<Real>::grids() const {
  std::vector<ZGrid> out;
  for (int w = 0; w < members_; ++w) out.push_back(discretisation(w).grid);
  return out;
}

template <class Real>
std::unique_ptr<VectorSpace<Real>> DiscreteProblem<Real>::make_space(int count) const {
#if GRATINGSIM_HAVE_CUDA
  if (convolution_->memory() == Memory::device) return make_device_vector_space<Real>(layout_, count, stream_);
#endif
  return make_host_vector_space<Real>(layout_, count);
}

template <class Real>
std::unique_ptr<VectorSpace<Real>> DiscreteProblem<Real>::make_output_space(int count) const {
  const BatchLayout output{layout_.slices, layout_.rhs, layout_.block / 3 * std::size_t(sources_per_block_)};
#if GRATINGSIM_HAVE_CUDA
  if (convolution_->memory() == Memory::device) return make_device_vector_space<Real>(output, count, stream_);
#endif
  return make_host_vector_space<Real>(output, count);
}

template <class Real>
void DiscreteProblem<Real>::apply(const Complex* x, Complex* y) {
  apply_convolution(x);
  apply_z_operator(x, y);
}

template <class Real>
void DiscreteProblem<Real>::apply_convolution(const Complex* x) {
  convolution_->execute(x, work_->data(0), stream_);
}

template <class Real>
void DiscreteProblem<Real>::apply_z_operator(const Complex* x, Complex* y) {
  z_operator_->apply(x, work_->data(0), y, stream_);
}

namespace {

/// Right-hand side r is incidence r / 2 (s, p).
std::vector<int> rhs_incidences(std::size_t rhs) {
  std::vector<int> incidence;
  for (std::size_t r = 0; r < rhs; ++r) incidence.push_back(int(r / 2));
  return incidence;
}

/// P = L⁻¹ L̄ Ā⁻¹ (Ā⁻¹ alone when `local` holds no matrices) in the problem's memory.
template <class Real>
std::unique_ptr<Preconditioner<Real>> averaged_preconditioner(AveragedSweep averaged, LocalMatrices local,
                                                              std::vector<int> rhs_incidence, [[maybe_unused]] bool on_device) {
#if GRATINGSIM_HAVE_CUDA
  if (on_device) return make_device_preconditioner<Real>(averaged, local, std::move(rhs_incidence));
#endif
  return make_host_preconditioner<Real>(std::move(averaged), std::move(local), std::move(rhs_incidence));
}

}  // namespace

template <class Real>
std::unique_ptr<Preconditioner<Real>> DiscreteProblem<Real>::make_preconditioner() const {
  const conv::Problem& pattern = convolution_->problem();
  const std::vector<MeanTensors> tensors = slice_mean_tensors(pattern, kernels_);
  const GreenCoefficients g = green_coefficients(grids(), orders_);
  AveragedSweep averaged = averaged_sweep(g, tensors);
#if GRATINGSIM_HAVE_CUDA
  if (convolution_->memory() == Memory::device)  // L_p assembled on the device
    return make_device_preconditioner<Real>(averaged, local_parts(g, pattern, kernels_, tensors), rhs_incidences(layout_.rhs));
#endif
  LocalMatrices local = local_matrices(g, pattern, kernels_, tensors);
  return averaged_preconditioner<Real>(std::move(averaged), std::move(local), rhs_incidences(layout_.rhs),
                                       convolution_->memory() == Memory::device);
}

template <class Real>
std::unique_ptr<Preconditioner<Real>> DiscreteProblem<Real>::make_coarse_preconditioner(int mc) const {
  const conv::Problem& pattern = convolution_->problem();
  AveragedSweep averaged = averaged_sweep(green_coefficients(grids(), orders_),
                                          slice_mean_tensors(pattern, kernels_));
  LocalMatrices no_local{averaged.incidences, averaged.orders, averaged.slices, {}, {}};  // Ā⁻¹ alone
  std::vector<int> rhs_incidence = rhs_incidences(layout_.rhs);
  const bool on_device = convolution_->memory() == Memory::device;
  std::unique_ptr<Preconditioner<Real>> outer =
      averaged_preconditioner<Real>(std::move(averaged), std::move(no_local), rhs_incidence, on_device);
  if (mc == 0) return outer;
  CoarseMatrices coarse = coarse_matrices(grids(), orders_, pattern, kernels_, mc);
  const int nm = int(layout_.block / 3);
#if GRATINGSIM_HAVE_CUDA
  if (on_device) return make_device_coarse_preconditioner<Real>(std::move(outer), coarse, std::move(rhs_incidence), nm);
#endif
  return make_host_coarse_preconditioner<Real>(std::move(outer), std::move(coarse), std::move(rhs_incidence), nm);
}

template <class Real>
SweepInputs DiscreteProblem<Real>::sweep_inputs(bool dense) const {
  return physics::sweep_inputs(green_coefficients(grids(), orders_), convolution_->problem(), kernels_, dense);
}

template <class Real>
std::unique_ptr<Preconditioner<Real>> DiscreteProblem<Real>::make_sweep_preconditioner() const {
  std::vector<int> rhs_incidence = rhs_incidences(layout_.rhs);
#if GRATINGSIM_HAVE_CUDA
  if (convolution_->memory() == Memory::device)
    return make_device_sweep_preconditioner<Real>(sweep_inputs(false), std::move(rhs_incidence));
#endif
  return make_host_sweep_preconditioner<Real>(sweep_matrices(sweep_inputs()), std::move(rhs_incidence));
}

template <class Real>
DiscreteProblem<Real>::~DiscreteProblem() {
  try {
    synchronize();
  } catch (...) {  // no throw from a destructor; a failure here means a dead context
  }
}

template <class Real>
void DiscreteProblem<Real>::synchronize() const {
#if GRATINGSIM_HAVE_CUDA
  if (device_stream_) device_stream_->synchronize();
#endif
}

template <class Real>
void DiscreteProblem<Real>::load_background(VectorSpace<Real>& v, int i) const {
  GS_EXPECTS(v.layout().size() == layout_.size() && v.layout().rhs == layout_.rhs,
             "load_background: the space is not of this problem's layout");
  // Element (p, r, comp, m) at ((p·rhs + r)·3 + comp)·orders + m: order 0's are `orders` apart.
  const std::size_t nm = layout_.block / 3;
  v.upload_strided(background_, orders_[0].zeroth(), nm, i);
}

template <class Real>
void DiscreteProblem<Real>::convolve_into_work(const Complex* solution) {
  convolution_->execute(solution, work_->data(0), stream_);  // stream_: nullptr on the host
}

template <class Real>
std::vector<std::complex<Real>> DiscreteProblem<Real>::physical_field(VectorSpace<Real>& space, int i) {
  GS_EXPECTS(space.layout().size() == layout_.size(), "physical_field: the space is not of this problem's layout");
  std::vector<Complex> e(layout_.size());
  space.download(i, e);
  if (formulation_ == Formulation::laurent) return e;
  convolve_into_work(space.data(i));
  std::vector<Complex> c(layout_.size() / 3 * std::size_t(sources_per_block_));
  work_->download(0, c);  // waits for the stream; E = F + D (d_axes_: D's components)
  const std::size_t blocks = layout_.slices * layout_.rhs, nm = layout_.block / 3, sc = std::size_t(sources_per_block_);
  for (std::size_t b = 0; b < blocks; ++b)
    for (int comp = 0; comp < 3; ++comp)
      if (const int o = d_output(d_axes_, comp); o >= 0)
        for (std::size_t m = 0; m < nm; ++m) e[b * 3 * nm + comp * nm + m] += c[b * sc * nm + std::size_t(o) * nm + m];
  return e;
}

template <class Real>
std::vector<FarField> DiscreteProblem<Real>::far_field(VectorSpace<Real>& space, int i) {
  GS_EXPECTS(space.layout().size() == layout_.size(), "far_field: the space is not of this problem's layout");
  using C = std::complex<double>;
  const std::size_t nr = layout_.rhs, nm = layout_.block / 3;
  // The source's sums over the slices, where the convolution output is (device problems download
  // only these 4 numbers per (rhs, order), not the output).
  std::vector<C> sums(nr * nm * 4);
  convolve_into_work(space.data(i));
  z_operator_->far_field_sums(work_->data(0), sums.data(), stream_);
  std::vector<FarField> out(nr);
  for (std::size_t r = 0; r < nr; ++r) {
    const FloquetOrders& f = orders_[r / 2];
    const std::size_t pol = r % 2;
    FarField& ff = out[r];
    ff.up_s.assign(nm, 0.0);
    ff.up_p.assign(nm, 0.0);
    ff.down_s.assign(nm, 0.0);
    ff.down_p.assign(nm, 0.0);
    for (std::size_t m = 0; m < nm; ++m) {
      const Order& o = f.orders[m];
      const C* s = &sums[(r * nm + m) * 4];  // ue, up, de, dp
      const C pref = I / (2.0 * o.kz1);
      const bool zeroth = m == f.zeroth();
      const C as = zeroth && pol == 0 ? 1.0 : 0.0, ap = zeroth && pol == 1 ? 1.0 : 0.0;
      if (o.propagates_up()) {
        ff.up_s[m] = as * o.rs + pref * s[0];
        ff.up_p[m] = ap * o.rp + pref * s[1];
      }
      ff.down_s[m] = o.ts * (as + pref * s[2]);
      ff.down_p[m] = o.tp * (ap + pref * s[3]);
    }
  }
  return out;
}

conv::Problem convolution_problem(Formulation formulation, const Lattice& lattice, int m1, int m2, int slices,
                                  std::size_t incidences, int members, bool sloped_walls) {
  const bool normal_vector = formulation == Formulation::normal_vector;
  const int rhs = int(2 * incidences);  // s and p per incidence
  conv::Problem g = normal_vector ? normal_vector_problem(lattice.one_dimensional(), sloped_walls) : conv::Problem{};
  g.n1 = 2 * m1 + 1;
  g.n2 = 2 * m2 + 1;
  g.slices = slices * members;  // engine slice p·members + w
  g.per_slice = normal_vector ? rhs : 3 * rhs;
  return g;
}

std::size_t estimate_bytes(std::size_t slices, std::size_t orders, std::size_t incidences, int m1, int m2,
                           std::size_t real_bytes, int krylov_vectors, bool dense, Formulation formulation,
                           std::size_t members) {
  // In double: the counts come from user input and their products (the dense n² above all) can pass
  // 2⁶⁴; a double is exact to 1 part in 10¹⁶ here and saturates instead of wrapping.
  const bool normal_vector = formulation == Formulation::normal_vector;
  const double rhs = 2 * double(incidences), nz = double(slices), nm = double(orders), real = double(real_bytes);
  const double field = nz * rhs * 3 * nm * 2 * real;               // one batched vector
  // Normal-vector: the largest pattern (2D tilted: 6 outputs, 12 kernels), an upper bound for the others.
  const double output = field / 3 * (normal_vector ? 6 : 3);         // the convolution output c
  const double per_slice = normal_vector ? 12 : 1;                   // kernels per slice
  const double l1 = double(conv::minimal_fft_length(2 * m1 + 1)), l2 = double(conv::minimal_fft_length(2 * m2 + 1));
  const double kernels = nz * double(members) * per_slice * ((4 * double(m1) + 1) * (4 * double(m2) + 1) * 16 + l1 * l2 * 2 * real);
  const double green = double(incidences) * nm * nz * 4 * 16;
  double total = field * double(krylov_vectors) + output + kernels + green;
  if (dense) {
    const double n = nz * 3 * nm;
    total += rhs * n * n * 16;
  }
  constexpr double most = double(std::numeric_limits<std::size_t>::max());
  return total >= most ? std::numeric_limits<std::size_t>::max() : std::size_t(total);
}

template class DiscreteProblem<float>;
template class DiscreteProblem<double>;

}  // namespace gratingsim::physics
