// The z-operator (z_operator.hpp) on the device: the same equations as the host version, complex128
// arithmetic on Real storage. apply(): z_sweeps, one block per 32 (rhs, order) pairs whose warps take
// chunks of the slices and join their sweeps' linear recurrences through shared memory (the kernel's
// comment); far_field_sums(): one thread per (rhs, order).
//
// Memory traffic per apply: c and the per-slice tables step, weight, depth (four complex128 per
// incidence, slice and order, with self) read twice, x read once, y written by the upward sweep and
// read back and rewritten by the downward one within each chunk. Each sweep step issues the loads of
// the slice two steps ahead before computing the current one (up to three slices' loads in flight).
#include <complex>

#include "core/dependent_launch.cuh"
#include "core/device_buffer.hpp"
#include "core/device_complex.cuh"
#include "physics/device.hpp"

namespace gratingsim::physics {
namespace {

/// complex128 in registers.
struct Cx {
  double re = 0, im = 0;
};
__device__ inline Cx operator+(Cx a, Cx b) { return {a.re + b.re, a.im + b.im}; }
__device__ inline Cx operator-(Cx a, Cx b) { return {a.re - b.re, a.im - b.im}; }
__device__ inline Cx operator-(Cx a) { return {-a.re, -a.im}; }
__device__ inline Cx operator*(Cx a, Cx b) { return {a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re}; }
__device__ inline Cx operator*(double s, Cx a) { return {s * a.re, s * a.im}; }
__device__ inline Cx operator*(Cx a, double s) { return {s * a.re, s * a.im}; }
__device__ inline Cx operator/(Cx a, Cx b) {
  const double d = b.re * b.re + b.im * b.im;
  return {(a.re * b.re + a.im * b.im) / d, (a.im * b.re - a.re * b.im) / d};
}
__device__ inline Cx operator/(Cx a, double s) { return {a.re / s, a.im / s}; }
__device__ inline Cx& operator+=(Cx& a, Cx b) { return a = a + b; }

template <class V>
__device__ inline Cx widen(V v) {
  return {double(v.x), double(v.y)};
}

/// Device copies of GreenCoefficients. Per (incidence a, order m) at a·orders + m; per (a, slice p, m)
/// at (a·slices + p)·orders + m (transposed from the host's [(a·orders + m)·slices + p]).
struct Coefficients {
  const double *k1;  // per incidence
  const double2 *kz, *rs, *rp;
  const double *tx, *ty, *krho;
  const double2 *step, *weight, *self, *depth;
};

/// ê·s, t̂·s, ẑ·s of the source s = k1² c.
struct Projections {
  Cx e, t, z;
};

/// What z_sweeps and far_field_sums_kernel both derive for thread t = r·orders + m (right-hand side r,
/// order m): the order's coefficients and polarisation frame, and the indices of c and of the slice
/// tables (computed here once, so that both read the same numbers the same way).
struct OrderSetup {
  int r, m, a, nr, nm, nz, sc;  // a: r's incidence
  unsigned d_axes;              // D's components in c (z_operator.hpp's d_output)
  double k1sq;
  Cx kz, rs, rp;
  double tx, ty, kr;
  double ex, ey;  // ê = ẑ × t̂
  Cx pt;          // p̂± = (±pt t̂, pz ẑ): pt = kz/k1, pz = −kρ/k1
  double pz;
  /// Element (p, r, component, m) of the convolution output c: sc = 3 + |d_axes| components per block,
  /// 0..2 the source, then D's components in increasing axis order, added to y (z_operator.hpp).
  __device__ std::size_t c_at(int p, int comp) const {
    return (std::size_t(p) * nr + r) * sc * nm + std::size_t(comp) * nm + m;
  }
  /// The component of c holding D_axis, or −1 (z_operator.hpp's d_output).
  __device__ int d_at(int axis) const {
    return (d_axes >> axis & 1u) ? 3 + __popc(d_axes & ((1u << axis) - 1u)) : -1;
  }
  /// Slice p's entry of the per-slice tables, coefficient (a, p, m).
  __device__ std::size_t coef(int p) const { return (std::size_t(a) * nz + p) * nm + m; }
  /// The projections of a slice's source s = k1² c from its components c[0..2].
  template <class V>
  __device__ Projections project(const V c[3]) const {
    const Cx sx = k1sq * widen(c[0]), sy = k1sq * widen(c[1]), sz = k1sq * widen(c[2]);
    return {ex * sx + ey * sy, tx * sx + ty * sy, sz};
  }
  __device__ Cx plus(const Projections& s) const { return pt * s.t + pz * s.z; }      // p̂+·s
  __device__ Cx minus(const Projections& s) const { return -(pt * s.t) + pz * s.z; }  // p̂−·s
};

__device__ inline OrderSetup order_setup(const Coefficients& g, const int* rhs_incidence, int t, int nr, int nm, int nz,
                                         unsigned d_axes) {
  const int r = t / nm, m = t % nm, a = rhs_incidence[r];
  const double k1 = g.k1[a];
  const std::size_t io = std::size_t(a) * nm + m;
  const Cx kz = widen(g.kz[io]);
  const double tx = g.tx[io], ty = g.ty[io], kr = g.krho[io];
  return {.r = r, .m = m, .a = a, .nr = nr, .nm = nm, .nz = nz, .sc = 3 + __popc(d_axes), .d_axes = d_axes, .k1sq = k1 * k1, .kz = kz,
          .rs = widen(g.rs[io]), .rp = widen(g.rp[io]), .tx = tx, .ty = ty, .kr = kr, .ex = -ty, .ey = tx,
          .pt = kz / k1, .pz = -kr / k1};
}

/// Warps per block of z_sweeps: each takes one chunk of the slices for the block's 32 (rhs, order) pairs.
constexpr int sweep_warps = 8;

/// The slices per chunk of z_sweeps for nz slices: at least 2, at most sweep_warps chunks. A function of
/// nz alone, so that a (rhs, order)'s arithmetic, and so its result, does not depend on the batch.
inline int sweep_chunk(int nz) { return std::max(2, (nz + sweep_warps - 1) / sweep_warps); }

/// What a chunk of slices [lo, hi) contributes to the sweeps of one (rhs, order), as affine maps of the
/// value entering it (pass 1 of z_sweeps):
///   upward, ue_{lo−1} = a_up·ue_{hi−1} + ue (and up alike), from ue_{q−1} = e^{ikz(z_{q−1} − z_q)}
///     (ue_q + w_q ê·s_q): each step uses slice q's own data;
///   downward, f_{hi−1} = a_down·f_{lo−1} + fe (and fp), with f_q = de_q + w_q ê·s_q the sum over the
///     slices above q and q itself, f_q = e^{ikz(z_{q−1} − z_q)} f_{q−1} + w_q ê·s_q, and de_q =
///     e^{ikz(z_{q−1} − z_q)} f_{q−1};
///   the chunk's part of the reflected sums re, rpm.
struct ChunkMaps {
  Cx a_up, ue, up, a_down, fe, fp, re, rpm;
};

/// y ← x + D − K (k1² J) for every (rhs, order) (z_operator.hpp): the recurrences of the upward and
/// downward sweeps (docs/formulation.md §6) are linear, so a block takes 32 consecutive (rhs, order)
/// pairs (lane = pair: consecutive orders read consecutive addresses) and its warps take consecutive
/// chunks of the slices: pass 1, each warp composes its chunk's affine maps (ChunkMaps) from c and the
/// tables alone; the block exchanges them through shared memory, and each warp folds those of the chunks
/// below (upward) and above (downward) into its chunk's entering values, in a fixed order; pass 2, each
/// warp runs the two sweeps over its own chunk from those values, as a single thread once ran them over
/// all slices. Serial depth: 3·chunk slice steps instead of 2·nz (case 1's 32 slices: 12 instead of 64),
/// with sweep_warps times the threads; traffic: c and the tables read twice (as the two serial sweeps
/// did), x once, y written once and read back once within a chunk. Summation order differs from the
/// host's serial sweeps (rounding only).
template <class Real>
__global__ void __launch_bounds__(32 * sweep_warps) z_sweeps(const Complex2<Real>* x, const Complex2<Real>* __restrict__ c,
                                                           Complex2<Real>* y, Coefficients g,
                                                           const int* __restrict__ rhs_incidence, int nr, int nm,
                                                           int nz, unsigned d_axes, int chunk) {
  using V = Complex2<Real>;
  __shared__ ChunkMaps maps[sweep_warps][32];
  const int lane = int(threadIdx.x) % 32, warp = int(threadIdx.x) / 32;
  const int t = int(blockIdx.x) * 32 + lane;
  const int lo = warp * chunk, hi = min(nz, lo + chunk), chunks = (nz + chunk - 1) / chunk;
  const bool active = t < nr * nm && lo < hi;  // no early return: the block meets at a barrier
  OrderSetup o{};
  if (t < nr * nm) o = order_setup(g, rhs_incidence, t, nr, nm, nz, d_axes);  // the tables: written at set-up
  wait_for_previous_kernel();  // before x and c (launched by launch_after_previous)
  const auto project_slice = [&](int p) {
    V cs[3];
    for (int comp = 0; comp < 3; ++comp) cs[comp] = c[o.c_at(p, comp)];
    return o.project(cs);
  };

  // Pass 1: this chunk's maps, slices in increasing q.
  if (active) {
    ChunkMaps m{.a_up = {1, 0}, .a_down = {1, 0}};
    for (int q = lo; q < hi; ++q) {
      const std::size_t i = o.coef(q);
      const Cx step = widen(g.step[i]), w = widen(g.weight[i]), d = widen(g.depth[i]);
      const Projections sq = project_slice(q);
      const Cx e = sq.e, minus = o.minus(sq);
      // upward: (M_lo ∘ … ∘ M_{q−1}) ∘ M_q, M_q(u) = step_q (u + w_q v_q)
      const Cx a = m.a_up * step;
      m.ue += a * w * e;
      m.up += a * w * o.plus(sq);
      m.a_up = a;
      // downward: f ← step_q f + w_q v_q
      m.a_down = step * m.a_down;
      m.fe = step * m.fe + w * e;
      m.fp = step * m.fp + w * minus;
      m.re += d * w * o.rs * e;
      m.rpm += d * w * o.rp * minus;
    }
    maps[warp][lane] = m;
  }
  __syncthreads();
  if (!active) return;
  // The values entering this chunk: ue, up at slice hi − 1 (zero below the bottom slice), folded from
  // the bottom chunk up; f at slice lo − 1 (zero above the top), folded from the top chunk down; the
  // reflected sums over every chunk, in chunk order.
  Cx ue, up, fe, fp, re, rpm;
  for (int k = chunks - 1; k > warp; --k) {
    const ChunkMaps& m = maps[k][lane];
    ue = m.a_up * ue + m.ue;
    up = m.a_up * up + m.up;
  }
  for (int k = 0; k < warp; ++k) {
    const ChunkMaps& m = maps[k][lane];
    fe = m.a_down * fe + m.fe;
    fp = m.a_down * fp + m.fp;
  }
  for (int k = 0; k < chunks; ++k) {
    re += maps[k][lane].re;
    rpm += maps[k][lane].rpm;
  }

  // Pass 2: the two sweeps over this chunk, as the serial version ran them over all slices.
  const Cx pref = Cx{0, 1} / (2.0 * o.kz);
  const Cx kz2 = o.kz * o.kz;
  // Element (p, r, component, m) of the batched layout.
  const auto at = [&](int p, int comp) { return (std::size_t(p) * nr + o.r) * 3 * nm + std::size_t(comp) * nm + o.m; };
  struct Slice {  // what one step of a sweep reads
    V c[3], v[3];
    double2 step, weight, self, depth;
  };
  // v_p − (ae ê + at t̂ + az ẑ), rounded to Real.
  const auto subtract = [&](int p, const V v[3], Cx ae, Cx at_, Cx az) {
    const Cx vx = ae * o.ex + at_ * o.tx, vy = ae * o.ey + at_ * o.ty;
    const Cx out[3] = {widen(v[0]) - vx, widen(v[1]) - vy, widen(v[2]) - az};
    for (int comp = 0; comp < 3; ++comp) y[at(p, comp)] = V{Real(out[comp].re), Real(out[comp].im)};
  };
  // `from` is x in the upward sweep (which writes y = x + D − ..., so D is added to v there) and y
  // in the downward one, which needs neither D nor the self coefficient. Each step issues the loads of
  // the slice two ahead before computing the current one.
  const auto fetch = [&](int p, const V* from, bool with_self) {
    Slice s;
    for (int comp = 0; comp < 3; ++comp) {
      s.c[comp] = c[o.c_at(p, comp)];
      s.v[comp] = from[at(p, comp)];
      if (const int at_d = o.d_at(comp); with_self && at_d >= 0) {
        const V d = c[o.c_at(p, at_d)];
        s.v[comp] = V{Real(double(s.v[comp].x) + double(d.x)), Real(double(s.v[comp].y) + double(d.y))};
      }
    }
    const std::size_t i = o.coef(p);
    s.step = g.step[i];
    s.weight = g.weight[i];
    s.self = with_self ? g.self[i] : double2{0, 0};
    s.depth = g.depth[i];
    return s;
  };

  // Upward sweep (bottom to top): U = Σ_{p below q} e^{ikz(z_q − z_p)} w_p (ê·s_p, p̂+·s_p), and the
  // self term.
  Projections below{};
  Cx below_step, below_weight;  // e^{ikz(z_q − z_{q+1})}, w_{q+1}
  Slice current = fetch(hi - 1, x, true), next;
  if (hi - 1 > lo) next = fetch(hi - 2, x, true);
  for (int q = hi - 1; q >= lo; --q) {
    Slice after_next;
    if (q - 2 >= lo) after_next = fetch(q - 2, x, true);
    if (q < hi - 1) {
      ue = below_step * (ue + below_weight * below.e);
      up = below_step * (up + below_weight * o.plus(below));
    }
    const Projections sq = o.project(current.c);
    const Cx w = widen(current.weight), cq = widen(current.self);
    // pref (ê ue + p̂+ up) + c_q [ê(ê·s) + (kz² t̂(t̂·s) + kρ² ẑ(ẑ·s))/k1²] − ẑ(ẑ·s)/k1²
    subtract(q, current.v, pref * ue + cq * sq.e, pref * up * o.pt + cq * kz2 * sq.t / o.k1sq,
             pref * up * o.pz + cq * (o.kr * o.kr) * sq.z / o.k1sq - sq.z / o.k1sq);
    below = sq;
    below_step = widen(current.step);
    below_weight = w;
    current = next;
    next = after_next;
  }
  // Downward sweep (top to bottom): D = Σ_{p above q} e^{ikz(z_p − z_q)} w_p (ê·s_p, p̂−·s_p), plus the
  // reflected part e^{ikz z_q} (ê re + p̂+ rpm). Reads back this thread's own writes of y.
  Cx de, dp;
  Projections above{};
  Cx above_weight;  // w_{q−1}
  current = fetch(lo, y, false);
  if (lo + 1 < hi) next = fetch(lo + 1, y, false);
  for (int q = lo; q < hi; ++q) {
    Slice after_next;
    if (q + 2 < hi) after_next = fetch(q + 2, y, false);
    const Cx s = widen(current.step);  // e^{ikz(z_{q−1} − z_q)} (0 at q = 0)
    if (q > lo) {
      de = s * (de + above_weight * above.e);
      dp = s * (dp + above_weight * o.minus(above));
    } else {  // de_lo = step_lo f_{lo−1}
      de = s * fe;
      dp = s * fp;
    }
    const Cx dq = widen(current.depth);
    subtract(q, current.v, pref * (de + dq * re), pref * (-(o.pt * dp) + o.pt * dq * rpm),
             pref * (o.pz * dp + o.pz * dq * rpm));
    above = o.project(current.c);
    above_weight = widen(current.weight);
    current = next;
    next = after_next;
  }
}

/// The far-field sums of ZOperator::far_field_sums, one thread per (rhs, order): consecutive orders
/// read consecutive addresses of c and of the coefficients. sums: complex128, 4 per (rhs, order).
template <class Real>
__global__ void __launch_bounds__(64) far_field_sums_kernel(const Complex2<Real>* __restrict__ c, Coefficients g,
                                                            const int* __restrict__ rhs_incidence, int nr, int nm,
                                                            int nz, unsigned d_axes, double2* sums) {
  const int t = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (t >= nr * nm) return;
  const OrderSetup o = order_setup(g, rhs_incidence, t, nr, nm, nz, d_axes);
  const bool up = o.kz.im == 0 && o.kz.re > 0;  // Order::propagates_up
  Cx ue, upp, de, dp;
  for (int p = 0; p < nz; ++p) {
    const Complex2<Real> cp[3] = {c[o.c_at(p, 0)], c[o.c_at(p, 1)], c[o.c_at(p, 2)]};
    const Projections s = o.project(cp);
    const Cx s_plus = o.plus(s), s_minus = o.minus(s);
    const std::size_t i = o.coef(p);
    const Cx w = widen(g.weight[i]), d = widen(g.depth[i]);
    de += w * s.e * d;
    dp += w * s_minus * d;
    if (up) {  // e^{−ikz z_p} = conj(e^{ikz z_p}) for a real kz
      const Cx back{d.re, -d.im};
      ue += w * (s.e * back + o.rs * s.e * d);
      upp += w * (s_plus * back + o.rp * s_minus * d);
    }
  }
  double2* out = sums + std::size_t(t) * 4;
  out[0] = {ue.re, ue.im};
  out[1] = {upp.re, upp.im};
  out[2] = {de.re, de.im};
  out[3] = {dp.re, dp.im};
}

/// The per-slice tables of GreenCoefficients (z_operator.hpp), the same expressions as the host's,
/// one thread per (incidence a, slice p, order m), written at (a·slices + p)·orders + m, on the grid of
/// a's member (z and thickness per (member, slice), incidences_per_member incidences each):
///   step = e^{ikz(z_{p−1} − z_p)} (0 at p = 0), weight = Δ_p sinc(kzΔ_p/2), self = (e^{ikzΔ_p/2} − 1)/kz²,
///   depth = e^{ikz z_p}.
__device__ inline Cx exp_i(Cx u) {  // e^{iu}
  double s, c;
  sincos(u.re, &s, &c);
  const double scale = exp(-u.im);
  return {scale * c, scale * s};
}
__device__ inline Cx sinc(Cx u) {  // sin(u)/u, a series near 0 as on the host
  if (hypot(u.re, u.im) < 1e-4) return Cx{1, 0} - u * u / 6.0;
  double s, c;
  sincos(u.re, &s, &c);
  const Cx sin_u{s * cosh(u.im), c * sinh(u.im)};
  return sin_u / u;
}
__device__ inline Cx expm1_i(Cx v) {  // e^{iv} − 1 without cancellation near 0 (host: expm1 of u = iv)
  const double re = -v.im, im = v.re;  // u = iv
  const double s = sin(im / 2);
  return {expm1(re) * cos(im) - 2 * s * s, exp(re) * sin(im)};
}

__global__ void green_tables(const double2* __restrict__ kz_of, const double* __restrict__ member_z,
                             const double* __restrict__ member_thickness, int incidences, int incidences_per_member,
                             int nz, int nm, double2* step, double2* weight, double2* self, double2* depth) {
  const std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= std::size_t(incidences) * nz * nm) return;
  const int m = int(i % nm), p = int(i / nm % nz), a = int(i / (std::size_t(nm) * nz));
  const std::size_t grid = std::size_t(a / incidences_per_member) * nz;  // a's member's grid
  const double* z = member_z + grid;
  const double* thickness = member_thickness + grid;
  const Cx kz = widen(kz_of[std::size_t(a) * nm + m]);
  const double d = thickness[p];
  const Cx st = p == 0 ? Cx{} : exp_i(kz * (z[p - 1] - z[p]));
  const Cx w = d * sinc(kz * d / 2.0), c = expm1_i(kz * d / 2.0) / (kz * kz), dp = exp_i(kz * z[p]);
  step[i] = {st.re, st.im};
  weight[i] = {w.re, w.im};
  self[i] = {c.re, c.im};
  depth[i] = {dp.re, dp.im};
}

constexpr int sweep_threads = 64;  // small blocks: rhs·orders threads spread over every SM

template <class Real>
class DeviceZOperator final : public ZOperator<Real> {
 public:
  using typename ZOperator<Real>::Complex;
  using V = Complex2<Real>;

  DeviceZOperator(const GreenCoefficients& g, std::vector<int> rhs_incidence, unsigned d_axes)
      : d_axes_(d_axes),
        nr_(int(rhs_incidence.size())),
        nm_(g.orders),
        nz_(g.slices),
        per_order_(std::size_t(g.incidences) * g.orders),
        per_slice_(per_order_ * g.slices),
        k1_(std::size_t(g.incidences)),
        kz_(per_order_), rs_(per_order_), rp_(per_order_),
        tx_(per_order_), ty_(per_order_), krho_(per_order_),
        step_(per_slice_), weight_(per_slice_), self_(per_slice_), depth_(per_slice_),
        rhs_incidence_(rhs_incidence.size()),
        far_field_sums_(rhs_incidence.size() * std::size_t(g.orders) * 4) {
    GS_EXPECTS(nr_ >= 1, "z-operator: no right-hand side");
    GS_EXPECTS(d_axes_ < 8, "z-operator: D's components are a mask of x, y, z");
    for (int a : rhs_incidence) GS_EXPECTS(a >= 0 && a < g.incidences, "z-operator: rhs names an unknown incidence");
    GS_EXPECTS(std::size_t(nr_) * std::size_t(nm_) < std::size_t(1) << 31, "z-operator: too many (rhs, order) pairs");
    const auto as_double2 = [](const std::vector<std::complex<double>>& v) {
      std::vector<double2> out(v.size());
      for (std::size_t i = 0; i < v.size(); ++i) out[i] = {v[i].real(), v[i].imag()};
      return out;
    };
    GS_EXPECTS(g.k1.size() == std::size_t(g.incidences), "z-operator: one k1 per incidence");
    k1_.upload(g.k1);
    kz_.upload(as_double2(g.kz));
    rs_.upload(as_double2(g.rs));
    rp_.upload(as_double2(g.rp));
    tx_.upload(g.tx);
    ty_.upload(g.ty);
    krho_.upload(g.krho);
    // The per-slice tables, computed here from kz and the members' grids (the host need not build,
    // transpose and upload 4 × incidences × orders × slices complex128: 63 MB for problem case 3).
    GS_EXPECTS(int(g.grids.size()) == g.members && g.incidences % g.members == 0,
               "z-operator: one grid per member, equally many incidences each");
    std::vector<double> member_z, member_thickness;  // [member·slices + p]
    for (const ZGrid& grid : g.grids) {
      GS_EXPECTS(int(grid.z.size()) == nz_ && int(grid.thickness.size()) == nz_,
                 "z-operator: the coefficients' grids do not match their slices");
      member_z.insert(member_z.end(), grid.z.begin(), grid.z.end());
      member_thickness.insert(member_thickness.end(), grid.thickness.begin(), grid.thickness.end());
    }
    DeviceBuffer<double> z(member_z.size()), thickness(member_thickness.size());
    z.upload(member_z);
    thickness.upload(member_thickness);
    constexpr int table_threads = 256;
    green_tables<<<unsigned((per_slice_ + table_threads - 1) / table_threads), table_threads, 0, cudaStreamPerThread>>>(
        kz_.data(), z.data(), thickness.data(), g.incidences, g.incidences / g.members, nz_, nm_, step_.data(),
        weight_.data(), self_.data(), depth_.data());
    GS_CUDA_CHECK_LAUNCH();
    rhs_incidence_.upload(rhs_incidence);
    // The tables' kernel runs on this thread's default stream, which the problem's (non-blocking)
    // stream does not wait for: wait here, once (for that stream alone, not for other workers').
    GS_CUDA_TRY(cudaStreamSynchronize(cudaStreamPerThread));
  }

  [[nodiscard]] Memory memory() const override { return Memory::device; }

  void apply(const Complex* x, const Complex* c, Complex* y, Stream stream) override {
    const int pairs = nr_ * nm_;
    launch_after_previous(z_sweeps<Real>, (pairs + 31) / 32, 32 * sweep_warps, 0, stream, reinterpret_cast<const V*>(x),
                          reinterpret_cast<const V*>(c), reinterpret_cast<V*>(y), coefficients(),
                          rhs_incidence_.data(), nr_, nm_, nz_, d_axes_, sweep_chunk(nz_));
  }

  void far_field_sums(const Complex* c, std::complex<double>* sums, Stream stream) override {
    const int pairs = nr_ * nm_;
    far_field_sums_kernel<Real><<<(pairs + sweep_threads - 1) / sweep_threads, sweep_threads, 0, stream>>>(
        reinterpret_cast<const V*>(c), coefficients(), rhs_incidence_.data(), nr_, nm_, nz_, d_axes_,
        far_field_sums_.data());
    GS_CUDA_CHECK_LAUNCH();
    GS_CUDA_TRY(cudaMemcpyAsync(sums, far_field_sums_.data(), far_field_sums_.bytes(), cudaMemcpyDeviceToHost, stream));
    GS_CUDA_TRY(cudaStreamSynchronize(stream));
  }

 private:
  /// The kernels' view of the tables.
  [[nodiscard]] Coefficients coefficients() const {
    return {k1_.data(),   kz_.data(),   rs_.data(),     rp_.data(),   tx_.data(),   ty_.data(),
            krho_.data(), step_.data(), weight_.data(), self_.data(), depth_.data()};
  }

  unsigned d_axes_;
  int nr_, nm_, nz_;
  std::size_t per_order_, per_slice_;
  DeviceBuffer<double> k1_;  // per incidence
  DeviceBuffer<double2> kz_, rs_, rp_;
  DeviceBuffer<double> tx_, ty_, krho_;
  DeviceBuffer<double2> step_, weight_, self_, depth_;
  DeviceBuffer<int> rhs_incidence_;
  DeviceBuffer<double2> far_field_sums_;  // far_field_sums' output, 4 per (rhs, order)
};

}  // namespace

template <class Real>
std::unique_ptr<ZOperator<Real>> make_device_z_operator(const GreenCoefficients& coefficients,
                                                        std::vector<int> rhs_incidence, unsigned d_axes) {
  return std::make_unique<DeviceZOperator<Real>>(coefficients, std::move(rhs_incidence), d_axes);
}
template std::unique_ptr<ZOperator<float>> make_device_z_operator<float>(const GreenCoefficients&, std::vector<int>,
                                                                         unsigned);
template std::unique_ptr<ZOperator<double>> make_device_z_operator<double>(const GreenCoefficients&, std::vector<int>,
                                                                           unsigned);

}  // namespace gratingsim::physics
