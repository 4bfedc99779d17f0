// gpu-fused: the whole FFT convolution of the batch in one kernel launch (../shared/design/convolution.md).
//
// Per field block (N1×N2, harmonic m stored at j = m + M), per slice spectrum Ŝ (L1×L2):
//   1. row FFTs      X(j1, k2) = Σ_{j2<N2} x(j1, j2) W_{L2}^{j2 k2}            only the N1 non-zero rows
//   2. per column k2 Y(j1, k2) = [FFT⁻¹_{L1} (Ŝ(·, k2) · FFT_{L1} X(·, k2))](j1)  only j1 < N1 kept
//   3. row IFFTs     y(j1, j2) = Σ_{k2} Y(j1, k2) W_{L2}^{−j2 k2}               only j2 < N2 kept
// with W_L = e^{−2πi/L} and 1/(L1 L2) folded into Ŝ. The fields sit at j = m + M instead of m mod L:
// a shift of input and output by M, which the circular convolution commutes with, so the kernel χ
// keeps the usual placement n mod L, the kept outputs are j < N, and every transform has its
// non-zero input (or kept output) in the first half j < H = L/2 (N ≤ H because L ≥ 2N − 1).
//
// Pruned transforms. With x_j = 0 for j ≥ H the L-point transform splits by frequency parity ε:
//   X(2κ + ε) = Σ_{j<H} x_j W_L^{εj} W_H^{jκ},    y_j = Σ_ε W_L^{−εj} Σ_{κ<H} Y(2κ + ε) W_H^{−jκ}   (j < H),
// two half-length transforms per direction and nothing computed for the zero inputs or unkept outputs.
// Each half transform (H = Q·A) runs on a team of A threads holding Q values each:
//   j = j_a + A j_b,  κ = k_b + Q k_a,   thread j_a: Q-point DFT over j_b (the twist W_{2Q}^{ε j_b}
//   folded in), twiddle W_L^{j_a (2 k_b + ε)}, exchange through shared memory, then A-point DFTs over
//   j_a for the Q/A values k_b = t·Q/A + s that thread t owns. The inverse runs the same steps backwards.
// Where a whole half fits in registers (H ≤ 16) the team is one thread (A = 1, Q = H): no exchange at
// all, every twiddle a compile-time constant; for H = 16 the two parities of a line go to two lanes
// of a warp. L = 64 and 128 use teams of A = H/8 threads with Q = 8; their exchanges are what the
// shared memory bandwidth is spent on. The spectrum multiply happens in registers between the two
// directions, on the values a thread owns, so column FFT → multiply → column IFFT never leaves the chip.
//
// Shared memory per CTA (one slice; fields of the slice in rounds of F at a time):
//   spectrum   Ŝ of the slice, per column the L1 values in the order the threads own them (once per CTA);
//              read from global (L2 cache) instead where it does not fit (complex128 with L1·L2 > 8192)
//   buf        F × H1 rows × (L2 + 1): the row spectra X and then Y; the +1 skew and the assignment of
//              rows/columns to teams keep every access free of bank conflicts; the exchanges of a
//              column's (row's) transform go through that column's (row's) own storage
//   stage      the next round's input fields, copied with cp.async while the current round computes
//   twiddles   per axis: W_L^{j_a (2 k_b + ε)} for teams (a padded row per j_a), W_L^j for paired lines
// The column order of buf (and of Ŝ) is the order in which the row-FFT threads own the frequencies.
//
// Limits: L1, L2 powers of two ≤ 128 (templates), and the shared memory of one round of one field.
// execute() enqueues one launch on the caller's stream and allocates nothing; set_kernels() computes
// the spectra on the device in double precision (a separable DFT, exact up to rounding) and
// synchronises with the device.
#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>

#include "convolution/backends.hpp"
#include "convolution/cuda_check.hpp"
#include "convolution/device_buffer.hpp"

namespace gratingsim::conv::detail {
namespace {

constexpr int max_fft_length = 128;
constexpr int spectrum_shared_limit = 128 * 1024;  // bytes of Ŝ kept in shared memory, else read from L2

template <class Real>
struct alignas(2 * sizeof(Real)) Cx {
  Real re, im;
};

template <class Real>
__device__ __forceinline__ Cx<Real> operator+(Cx<Real> a, Cx<Real> b) { return {a.re + b.re, a.im + b.im}; }
template <class Real>
__device__ __forceinline__ Cx<Real> operator-(Cx<Real> a, Cx<Real> b) { return {a.re - b.re, a.im - b.im}; }
template <class Real>
__device__ __forceinline__ Cx<Real> operator*(Cx<Real> a, Cx<Real> b) {
  return {a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re};
}
/// a · conj(b)
template <class Real>
__device__ __forceinline__ Cx<Real> mul_conj(Cx<Real> a, Cx<Real> b) {
  return {a.re * b.re + a.im * b.im, a.im * b.re - a.re * b.im};
}

/// How one axis of length L is transformed (see the header comment). Host and device.
struct AxisShape {
  int e;   // frequency parities: 2, or 1 for L = 1
  int h;   // half length L / e: input support and half-spectrum size
  int q;   // values per thread
  int a;   // threads per team
  int kb;  // values k_b per thread in the A-point pass (q / a)
};
/// Values a thread can hold for a whole half transform (and its input, output and spectrum). Larger
/// halves (L ≥ 64) go to teams: one thread per 32-point half needed 116 registers and ran slower on
/// case 3 (67 µs against 63 µs with teams of 4, H100).
template <class Real>
constexpr int register_half() {
  return 16;
}
template <class Real>
constexpr AxisShape axis_shape(int l) {
  const int e = l >= 2 ? 2 : 1, h = l / e, q = h <= register_half<Real>() ? h : 8, a = h / q;
  return {e, h, q, a, q / a};
}
template <class Real, int L>
struct Axis {
  static_assert(L >= 1 && L <= max_fft_length && (L & (L - 1)) == 0);
  static constexpr AxisShape shape = axis_shape<Real>(L);
  static constexpr int E = shape.e, H = shape.h, Q = shape.q, A = shape.a, KB = shape.kb;
};

/// Lines of an axis whose whole half fits in registers (A = 1) are done by one thread, both parities
/// in turn; for H = 16 (L = 32) instead by two threads of a warp, one per frequency parity ε, each
/// holding one half: twice the threads for the latency-bound case 2 (14.4 µs against 17.1 µs, H100).
/// The two partial inverse transforms are then summed (shuffle for columns, buf for rows).
template <class Real, int L>
constexpr bool paired_parities() {
  return Axis<Real, L>::A == 1 && Axis<Real, L>::H == 16;
}

/// Threads per CTA: 256 where a thread needs more than 128 registers (complex128 with L ≥ 32, and
/// mixed shapes L1 ≠ L2, whose two axes' working sets the compiler allocates side by side), else 512.
template <class Real, int L1, int L2>
constexpr int block_threads() {
  return (sizeof(Real) == 8 && (L1 >= 32 || L2 >= 32)) || L1 != L2 ? 256 : 512;
}

/// Column of buf holding frequency parity ε, k_b, k_a of the row transform: bijective onto [0, L),
/// rotated by k_b / KB so the A threads of a team store to A different banks. Parity E − 1 sits in
/// columns [0, H), which double as the row's exchange slots: it is stored last and loaded first.
__host__ __device__ constexpr int buf_column(AxisShape s, int eps, int k_b, int k_a) {
  return (s.e - 1 - eps) * s.h + s.a * k_b + (k_a + k_b / s.kb) % s.a;
}
/// Exchange slot of (j_a, k_b) in a team's H slots; rotated likewise for both access directions.
__host__ __device__ constexpr int exchange_slot(AxisShape s, int j_a, int k_b) {
  return s.a * k_b + (j_a + k_b / s.kb) % s.a;
}

/// Spectrum layout per column: the L1 values in vectors of 16 bytes (vector_width complex), ordered
/// (vector, thread of the team), so a team reads consecutive vectors; +1 vector per column in shared
/// memory where several teams read in one bank phase.
template <class Real>
constexpr int vector_width(int per_thread) {
  const int width = int(16 / sizeof(Cx<Real>));
  return per_thread < width ? per_thread : width;
}
template <class Real>
constexpr int spectrum_width(int l1) {
  const AxisShape s = axis_shape<Real>(l1);
  return vector_width<Real>(s.e * s.q);
}
template <class Real>
constexpr int spectrum_column_pad(int l1) {
  return axis_shape<Real>(l1).a < 8 ? 1 : 0;
}
template <class Real>
constexpr bool spectrum_in_shared(int l1, int l2) {
  return std::size_t(l1) * l2 * sizeof(Cx<Real>) <= spectrum_shared_limit;
}
/// Twiddle table of an axis (teams only): per j_a a row of the E·Q values W_L^{j_a (E k_b + ε)}, index
/// ε·Q + k_b, padded by one vector so the rows of a team start in different banks.
template <class Real>
constexpr int twiddle_row(int l) {
  const AxisShape s = axis_shape<Real>(l);
  return s.e * s.q + vector_width<Real>(s.e * s.q);
}
/// Shared-memory table of an axis: the team twiddles, or for paired parities the twist W_L^j, j < H;
/// an even count, so that the next table stays aligned for 16-byte reads.
template <class Real>
constexpr int twiddle_table_size(int l) {
  const AxisShape s = axis_shape<Real>(l);
  const int size = s.a > 1 ? s.a * twiddle_row<Real>(l) : s.a == 1 && s.h == 16 ? s.h : 0;
  return (size + 1) / 2 * 2;
}

// ---- compile-time twiddles and small DFTs in registers -------------------------------------------

/// sin(x) and cos(x) for |x| ≤ π/4 by their Taylor series (converged to double precision).
constexpr double sin_small(double x) {
  double term = x, sum = x;
  for (int n = 1; n < 12; ++n) sum += (term *= -x * x / ((2 * n) * (2 * n + 1)));
  return sum;
}
constexpr double cos_small(double x) {
  double term = 1, sum = 1;
  for (int n = 1; n < 12; ++n) sum += (term *= -x * x / ((2 * n - 1) * (2 * n)));
  return sum;
}
/// cos and sin of 2π m / n at compile time, reduced exactly (integers) to an angle ≤ π/4.
struct CosSin {
  double c, s;
};
constexpr CosSin cos_sin_turns(long m, long n) {
  constexpr double two_pi = 6.283185307179586476925286766559;
  m = ((m % n) + n) % n;  // angle 2π m/n ∈ [0, 2π)
  if (2 * m > n) {        // θ = 2π − θ': cos same, sin negated
    const CosSin r = cos_sin_turns(n - m, n);
    return {r.c, -r.s};
  }
  if (4 * m > n) {  // θ = π − θ'
    const CosSin r = cos_sin_turns(n - 2 * m, 2 * n);
    return {-r.c, r.s};
  }
  if (8 * m > n) {  // θ = π/2 − θ'
    const CosSin r = cos_sin_turns(n - 4 * m, 4 * n);
    return {r.s, r.c};
  }
  const double x = two_pi * double(m) / double(n);
  return {cos_small(x), sin_small(x)};
}

/// z · W_N^K, W_N = e^{−2πi/N}, any integer K; trivial factors cost nothing, ±45° ones two multiplications.
template <int K, int N, class Real>
__device__ __forceinline__ Cx<Real> twiddle(Cx<Real> z) {
  constexpr int m = ((K % N) + N) % N;
  if constexpr (m == 0) return z;
  else if constexpr (4 * m == N) return {z.im, -z.re};
  else if constexpr (2 * m == N) return {-z.re, -z.im};
  else if constexpr (4 * m == 3 * N) return {-z.im, z.re};
  else {
    constexpr CosSin w = cos_sin_turns(m, N);  // W = c − i s
    if constexpr ((8 * m) % N == 0) {          // |c| = |s| = √½
      constexpr Real r = Real(0.70710678118654752440);
      constexpr Real sc = w.c > 0 ? 1 : -1, ss = w.s > 0 ? 1 : -1;
      return {r * (sc * z.re + ss * z.im), r * (sc * z.im - ss * z.re)};
    } else {
      return {z.re * Real(w.c) + z.im * Real(w.s), z.im * Real(w.c) - z.re * Real(w.s)};
    }
  }
}

template <int N, class F>
__device__ __forceinline__ void static_for(F&& f) {
  [&]<int... I>(std::integer_sequence<int, I...>) { (f(std::integral_constant<int, I>{}), ...); }(
      std::make_integer_sequence<int, N>{});
}

/// In-place DFT of v[0..N) in registers: X_k = Σ_j v_j W_N^{±jk} (+ for Inverse), natural order in and
/// out, radix-2 decimation in time.
template <int N, bool Inverse, class Real>
__device__ __forceinline__ void dft(Cx<Real>* v) {
  if constexpr (N > 1) {
    Cx<Real> even[N / 2], odd[N / 2];
    static_for<N / 2>([&](auto i) {
      even[i] = v[2 * i];
      odd[i] = v[2 * i + 1];
    });
    dft<N / 2, Inverse>(even);
    dft<N / 2, Inverse>(odd);
    static_for<N / 2>([&](auto k) {
      constexpr int K = decltype(k)::value;
      const Cx<Real> t = twiddle<Inverse ? -K : K, N>(odd[k]);
      v[k] = even[k] + t;
      v[k + N / 2] = even[k] - t;
    });
  }
}

// ---- team operations --------------------------------------------------------------------------------

/// Synchronises the threads of a team. Teams of one warp run in lockstep (warp-uniform item loops),
/// so the whole warp synchronises: cheaper than a partial mask.
template <int A>
__device__ __forceinline__ void team_sync() {
  if constexpr (A > 1) __syncwarp();
}

/// Loads the thread's twiddles of parity Eps, w[k_b] = W_L^{j_a (E k_b + Eps)}, from its table row.
template <class Real, int L, int Eps>
__device__ __forceinline__ void load_twiddles(Cx<Real>* w, const Cx<Real>* row) {
  using X = Axis<Real, L>;
  constexpr int width = vector_width<Real>(X::E * X::Q);
  struct alignas(16) Vector {
    Cx<Real> v[width];
  };
  static_for<X::Q / width>([&](auto i) {
    const Vector t = reinterpret_cast<const Vector*>(row + Eps * X::Q)[i];
    static_for<width>([&](auto e) { w[i * width + e] = t.v[e]; });
  });
}

/// Forward half transform of parity Eps: thread j_a = lane holds x_{j_a + A j_b} (j_b < Q); returns in
/// u[s·A + k_a] the frequency κ = k_b + Q k_a, k_b = lane·KB + s, i.e. X(E κ + Eps). slots: the team's
/// H exchange slots, Stride elements apart; w: the thread's twiddles of parity Eps (teams only).
template <class Real, int L, int Eps, int Stride>
__device__ __forceinline__ void forward_half(const Cx<Real>* x, Cx<Real>* u, Cx<Real>* slots, const Cx<Real>* w,
                                             int lane) {
  using X = Axis<Real, L>;
  constexpr AxisShape shape = X::shape;
  Cx<Real> v[X::Q];
  static_for<X::Q>([&](auto j) { v[j] = twiddle<Eps * decltype(j)::value, 2 * X::Q>(x[j]); });
  dft<X::Q, false>(v);
  if constexpr (X::A == 1) {
    static_for<X::Q>([&](auto k) { u[k] = v[k]; });
  } else {
    static_for<X::Q>([&](auto k) {
      if constexpr (Eps != 0 || decltype(k)::value != 0) v[k] = v[k] * w[k];
    });
    team_sync<X::A>();
    static_for<X::Q>([&](auto k) { slots[exchange_slot(shape, lane, k) * Stride] = v[k]; });
    team_sync<X::A>();
    static_for<X::KB>([&](auto s) {
      static_for<X::A>([&](auto a) { u[s * X::A + a] = slots[exchange_slot(shape, a, lane * X::KB + s) * Stride]; });
      dft<X::A, false>(u + s * X::A);
    });
  }
}

/// Inverse of forward_half (unnormalised) for parity Eps: y[j_b] = (or += with Accumulate) the output
/// at j = lane + A j_b. u is overwritten.
template <class Real, int L, int Eps, int Stride, bool Accumulate>
__device__ __forceinline__ void inverse_half(Cx<Real>* u, Cx<Real>* y, Cx<Real>* slots, const Cx<Real>* w, int lane) {
  using X = Axis<Real, L>;
  constexpr AxisShape shape = X::shape;
  Cx<Real> v[X::Q];
  if constexpr (X::A == 1) {
    static_for<X::Q>([&](auto k) { v[k] = u[k]; });
  } else {
    static_for<X::KB>([&](auto s) { dft<X::A, true>(u + s * X::A); });
    team_sync<X::A>();
    static_for<X::KB>([&](auto s) {
      static_for<X::A>([&](auto a) { slots[exchange_slot(shape, a, lane * X::KB + s) * Stride] = u[s * X::A + a]; });
    });
    team_sync<X::A>();
    static_for<X::Q>([&](auto k) {
      v[k] = slots[exchange_slot(shape, lane, k) * Stride];
      if constexpr (Eps != 0 || decltype(k)::value != 0) v[k] = mul_conj(v[k], w[k]);
    });
  }
  dft<X::Q, true>(v);
  static_for<X::Q>([&](auto j) {
    const Cx<Real> t = twiddle<-Eps * decltype(j)::value, 2 * X::Q>(v[j]);
    if constexpr (Accumulate) y[j] = y[j] + t;
    else y[j] = t;
  });
}

/// Maps team i of n to an item so that the teams of one shared-memory bank phase (Group elements of
/// 128 bytes) get rows/columns A apart: with the +1 skew of buf their accesses then never collide.
template <int A, int Group>
__device__ __forceinline__ int spread(int i, int n) {
  if (n % Group != 0) return i;
  constexpr int per_phase = Group / A;
  const int h = i / per_phase, t = i % per_phase;
  return Group * (h / A) + h % A + A * t;
}

/// Runs body(i, lane) for items i = team, team + teams, … < n, with teams of A threads. The loop is
/// uniform across each warp (a team past the end gets i ≥ n), so that team_sync may synchronise the
/// whole warp: a team without an item calls skip_item, which meets the warp's syncs of that item.
/// (On sm_70 and later, __syncwarp calls at different places pair up.)
template <int A, class Body>
__device__ __forceinline__ void for_each_item(int n, Body&& body) {
  constexpr int per_warp = 32 / A;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % A, teams = blockDim.x / A;
  const int in_warp = (threadIdx.x % 32) / A;
#pragma unroll 1
  for (int first = warp * per_warp; first < n; first += teams) body(first + in_warp, lane);
}

/// Runs body(line, parity) for lines line = 16·warp + lane mod 16, + 16·warps, … (possibly ≥ n), with
/// lanes 0–15 on parity 0 and lanes 16–31 on parity 1 of the same 16 lines: the two partial results
/// of a line meet by a shuffle within the warp. The parity is a run-time value, so that both share
/// one copy of the code (two compile-time copies made the compiler allocate registers for both).
template <class Body>
__device__ __forceinline__ void for_each_line(int n, Body&& body) {
  const int warp = threadIdx.x / 32, warps = blockDim.x / 32, lane = threadIdx.x % 32;
#pragma unroll 1
  for (int first = 16 * warp; first < n; first += 16 * warps) body(first + lane % 16, lane / 16);
}

/// A whole half transform in one thread (A = 1) for parity eps known at run time: u = DFT_H(x · W_L^{eps j}).
/// twist[j] = W_L^j (j < H) from shared memory.
template <class Real, int L>
__device__ __forceinline__ void forward_line(const Cx<Real>* x, Cx<Real>* u, int eps, const Cx<Real>* twist) {
  constexpr int Q = Axis<Real, L>::Q;
  static_for<Q>([&](auto j) { u[j] = x[j]; });
  if (eps) static_for<Q - 1>([&](auto j) { u[j + 1] = u[j + 1] * twist[j + 1]; });
  dft<Q, false>(u);
}
/// Its inverse (unnormalised): y_j = W_L^{−eps j} IDFT_H(u)_j; u is overwritten.
template <class Real, int L>
__device__ __forceinline__ void inverse_line(Cx<Real>* u, Cx<Real>* y, int eps, const Cx<Real>* twist) {
  constexpr int Q = Axis<Real, L>::Q;
  dft<Q, true>(u);
  static_for<Q>([&](auto j) { y[j] = u[j]; });
  if (eps) static_for<Q - 1>([&](auto j) { y[j + 1] = mul_conj(y[j + 1], twist[j + 1]); });
}
template <int A, int Syncs>
__device__ __forceinline__ void skip_item() {
  static_for<Syncs>([&](auto) { team_sync<A>(); });
}
/// team_sync calls per item of each phase (teams only): 2 per half transform, and one more before the
/// row FFTs store their last parity and before a column is written back.
template <class Real, int L>
constexpr int row_forward_syncs() {
  return Axis<Real, L>::A > 1 ? 2 * Axis<Real, L>::E + 1 : 0;
}
template <class Real, int L>
constexpr int column_syncs() {
  return Axis<Real, L>::A > 1 ? 4 * Axis<Real, L>::E + 1 : 0;
}
template <class Real, int L>
constexpr int row_inverse_syncs() {
  return Axis<Real, L>::A > 1 ? 2 * Axis<Real, L>::E : 0;
}

template <class Real, int L>
__device__ void fill_twiddles(Cx<Real>* table) {
  using X = Axis<Real, L>;
  constexpr int row = twiddle_row<Real>(L);
  for (int i = threadIdx.x; i < twiddle_table_size<Real>(L); i += blockDim.x) {
    const int j_a = i / row, index = i % row, eps = index / X::Q, k_b = index % X::Q;
    const int m = X::A > 1 ? (j_a * (X::E * k_b + eps)) % L : i;  // teams, or the twist W_L^i
    double s, c;
    sincospi(2.0 * m / L, &s, &c);
    table[i] = X::A == 1 || index < X::E * X::Q ? Cx<Real>{Real(c), Real(-s)} : Cx<Real>{0, 0};
  }
}

// ---- cp.async ---------------------------------------------------------------------------------------

template <int Bytes>
__device__ __forceinline__ void copy_async(void* shared, const void* global) {
  const auto address = static_cast<unsigned>(__cvta_generic_to_shared(shared));
  if constexpr (Bytes == 16)
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(address), "l"(global));
  else
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2;\n" ::"r"(address), "l"(global), "n"(Bytes));
}
__device__ __forceinline__ void copy_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int Pending>
__device__ __forceinline__ void copy_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(Pending));
}

/// Copies `count` complex values (8 or 16 bytes each) from global to shared memory, asynchronously.
template <class Real>
__device__ void stage_fields(Cx<Real>* stage, const Cx<Real>* in, std::size_t count) {
  for (std::size_t i = threadIdx.x; i < count; i += blockDim.x) copy_async<sizeof(Cx<Real>)>(stage + i, in + i);
}

// ---- the kernel ---------------------------------------------------------------------------------------

template <class Real>
struct FusedParams {
  const Cx<Real>* in;
  Cx<Real>* out;
  const Cx<Real>* spectra;  // slices × L2 columns × L1 values (layout above, no pad)
  int n1, n2, per_slice;
  int ctas_per_slice, fields_per_cta, fields_per_round;
  int stage;                // 1: inputs staged in shared memory with cp.async
  unsigned buf_offset, stage_offset, twiddle_offset;  // bytes into dynamic shared memory
};

template <class Real, int L1, int L2>
__global__ void __launch_bounds__(block_threads<Real, L1, L2>()) fused_convolution(FusedParams<Real> p) {
  using C = Cx<Real>;
  using X1 = Axis<Real, L1>;
  using X2 = Axis<Real, L2>;
  constexpr int S = L2 + 1;                                   // buf row stride (skew)
  constexpr int group = int(128 / sizeof(C));                 // elements per shared-memory bank phase
  constexpr int width = spectrum_width<Real>(L1);
  constexpr bool spectrum_shared = spectrum_in_shared<Real>(L1, L2);
  constexpr int column_stride = L1 + (spectrum_shared ? spectrum_column_pad<Real>(L1) * width : 0);
  constexpr std::size_t field_buf = std::size_t(X1::H) * S;

  extern __shared__ __align__(16) unsigned char shared[];
  C* const spectrum_smem = reinterpret_cast<C*>(shared);
  C* const buf = reinterpret_cast<C*>(shared + p.buf_offset);
  C* const stage = reinterpret_cast<C*>(shared + p.stage_offset);
  C* const twiddles1 = reinterpret_cast<C*>(shared + p.twiddle_offset);
  C* const twiddles2 = twiddles1 + twiddle_table_size<Real>(L1);

  const int slice = blockIdx.x / p.ctas_per_slice;
  const int first = (blockIdx.x % p.ctas_per_slice) * p.fields_per_cta;
  const int count = min(p.fields_per_cta, p.per_slice - first);
  const int n1 = p.n1, n2 = p.n2, F = p.fields_per_round;
  const std::size_t field_size = std::size_t(n1) * n2;
  const std::size_t base = (std::size_t(slice) * p.per_slice + first) * field_size;
  const C* const in = p.in + base;
  C* const out = p.out + base;
  const C* const spectrum_global = p.spectra + std::size_t(slice) * L1 * L2;

  fill_twiddles<Real, L1>(twiddles1);
  fill_twiddles<Real, L2>(twiddles2);
  if (p.stage) stage_fields(stage, in, min(F, count) * field_size);
  copy_async_commit();
  if constexpr (spectrum_shared) {
    constexpr int per_column = L1 / width, vector_bytes = width * sizeof(C);
    for (int i = threadIdx.x; i < L2 * per_column; i += blockDim.x)
      copy_async<vector_bytes>(spectrum_smem + (i / per_column) * column_stride + (i % per_column) * width,
                               spectrum_global + i * width);
  }
  copy_async_commit();

  for (int f0 = 0; f0 < count; f0 += F) {
    const int nf = min(F, count - f0);
    if (f0 == 0) copy_async_wait<1>();  // the staged inputs; the spectrum may still be in flight
    else copy_async_wait<0>();
    __syncthreads();

    // 1. Row FFTs of the N1 non-zero rows into buf. Called once per source so that the compiler knows
    // which memory the rows are read from.
    const auto row_ffts = [&](const C* src) {
      const int items = nf * X1::H;
      // One parity of row `item` (f, r), or both where Parities = E.
      const auto transform = [&]<int First, int Parities>(int item, int lane) {
        const int f = item / X1::H, r = item % X1::H;
        const C* const x_row = src + f * field_size + r * n2;
        C* const row = buf + f * field_buf + r * S;
        C x[X2::Q];
        static_for<X2::Q>([&](auto j) {
          const int col = lane + X2::A * j;
          x[j] = col < n2 ? x_row[col] : C{0, 0};
        });
        static_for<Parities>([&](auto e) {
          constexpr int eps = First + decltype(e)::value;
          C u[X2::Q], w[X2::A > 1 ? X2::Q : 1];
          if constexpr (X2::A > 1) load_twiddles<Real, L2, eps>(w, twiddles2 + lane * twiddle_row<Real>(L2));
          forward_half<Real, L2, eps, 1>(x, u, row, w, lane);
          if constexpr (eps == X2::E - 1) team_sync<X2::A>();  // its columns are the exchange slots
          static_for<X2::KB>([&](auto s) {
            static_for<X2::A>([&](auto a) { row[buf_column(X2::shape, eps, lane * X2::KB + s, a)] = u[s * X2::A + a]; });
          });
        });
      };
      if constexpr (paired_parities<Real, L2>()) {
        for_each_line(items, [&](int item, int eps) {
          const int f = item / X1::H, r = item % X1::H;
          if (item >= items || r >= n1) return;
          const C* const x_row = src + f * field_size + r * n2;
          C* const row = buf + f * field_buf + r * S + buf_column(X2::shape, eps, 0, 0);
          C x[X2::Q], u[X2::Q];
          static_for<X2::Q>([&](auto j) { x[j] = j < n2 ? x_row[j] : C{0, 0}; });
          forward_line<Real, L2>(x, u, eps, twiddles2);
          static_for<X2::Q>([&](auto k) { row[k] = u[k]; });
        });
      } else {
        for_each_item<X2::A>(items, [&](int i, int lane) {
          const int item = spread<X2::A, group>(i, items);
          if (i >= items || item % X1::H >= n1) return skip_item<X2::A, row_forward_syncs<Real, L2>()>();
          transform.template operator()<0, X2::E>(item, lane);
        });
      }
    };
    if (p.stage) row_ffts(stage);
    else row_ffts(in + f0 * field_size);
    __syncthreads();
    if (p.stage && f0 + F < count) stage_fields(stage, in + (f0 + F) * field_size, min(F, count - f0 - F) * field_size);
    copy_async_commit();
    if (f0 == 0) {
      copy_async_wait<1>();  // the spectrum
      __syncthreads();
    }

    // 2. Per column: FFT, multiply by Ŝ, IFFT, keep rows j1 < N1; in place in buf.
    {
      const int items = nf * L2;
      // Parities [First, First + Parities) of column `item` (f, col); their outputs in y (summed).
      const auto transform = [&]<int First, int Parities>(int item, int lane, C* y) {
        const int f = item / L2, col = item % L2;
        C* const column = buf + f * field_buf + col;
        const C* const s_col =
            (spectrum_shared ? spectrum_smem : spectrum_global) + col * column_stride + lane * width;
        C x[X1::Q];
        static_for<X1::Q>([&](auto j) {
          const int r = lane + X1::A * j;
          x[j] = r < n1 ? column[r * S] : C{0, 0};
        });
        static_for<Parities>([&](auto e) {
          constexpr int eps = First + decltype(e)::value;
          const auto factor = [&](auto v) {
            constexpr int value = eps * X1::Q + decltype(v)::value;
            return s_col[(value / width) * X1::A * width + value % width];
          };
          C u[X1::Q], w[X1::A > 1 ? X1::Q : 1];
          [[maybe_unused]] C f_global[spectrum_shared ? 1 : X1::Q];
          // From L2, the Ŝ values are loaded before the FFT so that the read overlaps it.
          if constexpr (!spectrum_shared) static_for<X1::Q>([&](auto v) { f_global[v] = factor(v); });
          if constexpr (X1::A > 1) load_twiddles<Real, L1, eps>(w, twiddles1 + lane * twiddle_row<Real>(L1));
          forward_half<Real, L1, eps, S>(x, u, column, w, lane);
          // Keeps the compiler from hoisting the Ŝ reads from shared memory above the FFT, which
          // would hold all of them in registers at once.
          if constexpr (spectrum_shared) asm volatile("" ::: "memory");
          static_for<X1::Q>([&](auto v) {
            if constexpr (spectrum_shared) u[v] = u[v] * factor(v);
            else u[v] = u[v] * f_global[v];
          });
          inverse_half<Real, L1, eps, S, (decltype(e)::value > 0)>(u, y, column, w, lane);
        });
        return column;
      };
      if constexpr (paired_parities<Real, L1>()) {
        for_each_line(items, [&](int item, int eps) {
          const bool valid = item < items;
          const int f = item / L2, col = item % L2;
          C* const column = buf + f * field_buf + col;
          // Ŝ at frequencies 2κ + eps: values eps·H + κ of the column (A = 1).
          const C* const s_col = (spectrum_shared ? spectrum_smem : spectrum_global) + col * column_stride + eps * X1::Q;
          C u[X1::Q], y[X1::Q] = {};
          if (valid) {
            static_for<X1::Q>([&](auto j) { y[j] = j < n1 ? column[j * S] : C{0, 0}; });
            forward_line<Real, L1>(y, u, eps, twiddles1);
            if constexpr (spectrum_shared) asm volatile("" ::: "memory");  // Ŝ reads stay after the FFT
            static_for<X1::Q>([&](auto v) { u[v] = u[v] * s_col[v]; });
            inverse_line<Real, L1>(u, y, eps, twiddles1);
          }
          // Parity 1 (lane + 16) hands its partial column to parity 0, which writes the sum.
          static_for<X1::Q>([&](auto j) {
            u[j] = {__shfl_down_sync(0xffffffffu, y[j].re, 16), __shfl_down_sync(0xffffffffu, y[j].im, 16)};
          });
          __syncwarp();  // both parities have read the column
          if (valid && eps == 0)
            static_for<X1::Q>([&](auto j) {
              if (j < n1) column[j * S] = y[j] + u[j];
            });
        });
      } else {
        for_each_item<X1::A>(items, [&](int i, int lane) {
          if (i >= items) return skip_item<X1::A, column_syncs<Real, L1>()>();
          C y[X1::Q];
          C* const column = transform.template operator()<0, X1::E>(spread<X1::A, group>(i, items), lane, y);
          team_sync<X1::A>();
          static_for<X1::Q>([&](auto j) {
            const int r = lane + X1::A * j;
            if (r < n1) column[r * S] = y[j];
          });
        });
      }
    }
    __syncthreads();

    // 3. Row IFFTs of the N1 kept rows, the N2 kept outputs to global memory: by teams A consecutive
    // elements at a time, by single threads each its row; paired parities leave their two partial
    // rows in buf, from where they are summed and copied out whole rows at a time (coalesced).
    {
      const int items = nf * X1::H;
      // Parities [First, First + Parities) of row `item` (f, r), the parity in the exchange slots
      // first; their outputs in y (summed).
      const auto transform = [&]<int First, int Parities>(int item, int lane, C* y) {
        const int f = item / X1::H, r = item % X1::H;
        C* const row = buf + f * field_buf + r * S;
        static_for<Parities>([&](auto e) {
          constexpr int eps = First + Parities - 1 - decltype(e)::value;
          C u[X2::Q], w[X2::A > 1 ? X2::Q : 1];
          static_for<X2::KB>([&](auto s) {
            static_for<X2::A>([&](auto a) { u[s * X2::A + a] = row[buf_column(X2::shape, eps, lane * X2::KB + s, a)]; });
          });
          if constexpr (X2::A > 1) load_twiddles<Real, L2, eps>(w, twiddles2 + lane * twiddle_row<Real>(L2));
          inverse_half<Real, L2, eps, 1, (decltype(e)::value > 0)>(u, y, row, w, lane);
        });
        return row;
      };
      if constexpr (paired_parities<Real, L2>()) {
        // Each parity's partial outputs go where its inputs were (half eps of the row), so the two
        // threads of a row need no synchronisation; the copy-out below sums them.
        for_each_line(items, [&](int item, int eps) {
          const int f = item / X1::H, r = item % X1::H;
          if (item >= items || r >= n1) return;
          C* const half = buf + f * field_buf + r * S + buf_column(X2::shape, eps, 0, 0);
          C u[X2::Q], y[X2::Q];
          static_for<X2::Q>([&](auto k) { u[k] = half[k]; });
          inverse_line<Real, L2>(u, y, eps, twiddles2);
          static_for<X2::Q>([&](auto j) {
            if (j < n2) half[j] = y[j];
          });
        });
      } else {
        for_each_item<X2::A>(items, [&](int i, int lane) {
          const int item = spread<X2::A, group>(i, items), f = item / X1::H, r = item % X1::H;
          if (i >= items || r >= n1) return skip_item<X2::A, row_inverse_syncs<Real, L2>()>();
          C y[X2::Q];
          transform.template operator()<0, X2::E>(item, lane, y);
          C* const y_row = out + (f0 + f) * field_size + r * n2;
          static_for<X2::Q>([&](auto j) {
            const int c = lane + X2::A * j;
            if (c < n2) y_row[c] = y[j];
          });
        });
      }
      if constexpr (paired_parities<Real, L2>()) {
        // Rows (f, r) of the round in order, several per warp where they are short.
        __syncthreads();
        constexpr int lanes_per_row = X2::H < 32 ? X2::H : 32, rows_per_pass = 32 / lanes_per_row;
        const int step = blockDim.x / 32 * rows_per_pass;
        const int first_row = threadIdx.x / 32 * rows_per_pass + threadIdx.x % 32 / lanes_per_row;
        int f = first_row / n1, r = first_row % n1;
        while (f < nf) {
          for (int c = threadIdx.x % lanes_per_row; c < n2; c += lanes_per_row)
            out[(f0 + f) * field_size + r * n2 + c] = buf[f * field_buf + r * S + c] + buf[f * field_buf + r * S + X2::H + c];
          for (r += step; r >= n1; r -= n1) ++f;
        }
      }
    }
  }
}

// ---- the spectra: Ŝ(k1, k2) = Σ_n χ(n) W_{L1}^{n1 k1} W_{L2}^{n2 k2} / (L1 L2), in double -------------

struct SpectraParams {
  int n1, n2, l1, l2;
  AxisShape axis1, axis2;
  int width;  // vector_width
};

/// One CTA per (slice, column of the layout): first the column's k2 transform of every kernel row,
/// then its L1 values, written in the layout the fused kernel reads.
template <class Real>
__global__ void spectra_kernel(const double2* __restrict__ chi, Cx<Real>* __restrict__ spectra, SpectraParams p) {
  __shared__ double2 w1[max_fft_length], w2[max_fft_length];
  __shared__ double2 partial[2 * max_fft_length];  // the K1 ≤ 255 row sums
  const int slice = blockIdx.x / p.l2, col = blockIdx.x % p.l2;
  const int k1_count = 2 * p.n1 - 1, k2_count = 2 * p.n2 - 1;
  for (int i = threadIdx.x; i < p.l1; i += blockDim.x) {
    double s, c;
    sincospi(2.0 * i / p.l1, &s, &c);
    w1[i] = {c, -s};
  }
  for (int i = threadIdx.x; i < p.l2; i += blockDim.x) {
    double s, c;
    sincospi(2.0 * i / p.l2, &s, &c);
    w2[i] = {c, -s};
  }
  // The frequency of this buf column: col = buf_column(eps, k_b, k_a) ↔ k2 = E (k_b + Q k_a) + eps.
  const AxisShape a2 = p.axis2;
  const int eps2 = a2.e - 1 - col / a2.h, rest2 = col % a2.h, k_b2 = rest2 / a2.a;
  const int k_a2 = ((rest2 % a2.a - k_b2 / a2.kb) % a2.a + a2.a) % a2.a;
  const int k2 = a2.e * (k_b2 + a2.q * k_a2) + eps2;
  __syncthreads();

  const double2* const kernel = chi + std::size_t(slice) * k1_count * k2_count;
  for (int r = threadIdx.x; r < k1_count; r += blockDim.x) {
    double2 sum{0, 0};
    for (int c = 0; c < k2_count; ++c) {
      const int n2 = c - (p.n2 - 1);
      const double2 w = w2[((n2 * k2) % p.l2 + p.l2) % p.l2], given = kernel[r * k2_count + c];
      const double2 z{double(Real(given.x)), double(Real(given.y))};  // χ rounded as every backend sees it
      sum.x += z.x * w.x - z.y * w.y;
      sum.y += z.x * w.y + z.y * w.x;
    }
    partial[r] = sum;
  }
  __syncthreads();

  const AxisShape a1 = p.axis1;
  const double scale = 1.0 / (double(p.l1) * p.l2);
  for (int i = threadIdx.x; i < p.l1; i += blockDim.x) {
    // Position i in the column = (vector · A + thread) · width + element; value = vector · width + element.
    const int element = i % p.width, thread = (i / p.width) % a1.a, vector = i / (p.width * a1.a);
    const int value = vector * p.width + element, eps = value / a1.q, s = (value % a1.q) / a1.a;
    const int k_a = value % a1.a, k_b = thread * a1.kb + s;
    const int k1 = a1.e * (k_b + a1.q * k_a) + eps;
    double2 sum{0, 0};
    for (int r = 0; r < k1_count; ++r) {
      const int n1 = r - (p.n1 - 1);
      const double2 w = w1[((n1 * k1) % p.l1 + p.l1) % p.l1], z = partial[r];
      sum.x += z.x * w.x - z.y * w.y;
      sum.y += z.x * w.y + z.y * w.x;
    }
    spectra[(std::size_t(slice) * p.l2 + col) * p.l1 + i] = {Real(sum.x * scale), Real(sum.y * scale)};
  }
}

// ---- the plan ------------------------------------------------------------------------------------------

template <class Real>
using FusedKernel = void (*)(FusedParams<Real>);

template <class Real>
struct KernelChoice {
  FusedKernel<Real> kernel = nullptr;
  int threads = 0;  // block_threads of the instantiation
};

template <class Real>
KernelChoice<Real> select_kernel(int l1, int l2) {
  KernelChoice<Real> choice;
  [&]<int... I>(std::integer_sequence<int, I...>) {
    ((l1 == (1 << (I / 8)) && l2 == (1 << (I % 8))
          ? void(choice = {&fused_convolution<Real, 1 << (I / 8), 1 << (I % 8)>,
                           block_threads<Real, 1 << (I / 8), 1 << (I % 8)>()})
          : void()),
     ...);
  }(std::make_integer_sequence<int, 64>{});
  return choice;
}

constexpr bool power_of_two(int l) { return l >= 1 && (l & (l - 1)) == 0; }
constexpr std::size_t round16(std::size_t bytes) { return (bytes + 15) / 16 * 16; }

template <class Real>
class GpuFused final : public Convolution<Real> {
 public:
  using typename Convolution<Real>::Complex;
  using C = Cx<Real>;

  GpuFused(const Problem& geometry, Kernels kernels) : Convolution<Real>(geometry) {
    const Problem& g = this->problem_;
    for (auto [l, axis] : {std::pair{g.l1, "L1"}, std::pair{g.l2, "L2"}}) {
      SUPPORTS(power_of_two(l) && l <= max_fft_length,
               std::string("gpu-fused needs FFT lengths that are powers of two up to ") +
                   std::to_string(max_fft_length) + ", got " + axis + " = " + std::to_string(l));
    }
    plan_launch(select_kernel<Real>(g.l1, g.l2));
    chi_ = DeviceBuffer<double2>(g.kernels_total());
    spectra_ = DeviceBuffer<C>(std::size_t(g.slices) * g.l1 * g.l2);
    set_kernels(kernels);
  }

  /// Synchronises with the device before (no execute in flight still reads the old spectra) and after
  /// (the new spectra are complete on return). Runs on the legacy default stream.
  void set_kernels(Kernels kernels) override {
    const Problem& g = this->problem_;
    check_kernels(g, kernels);
    CUDA_TRY(cudaDeviceSynchronize());
    static_assert(sizeof(double2) == sizeof(std::complex<double>));
    CUDA_TRY(cudaMemcpy(chi_.data(), kernels.data(), chi_.bytes(), cudaMemcpyHostToDevice));
    const SpectraParams p{g.n1,  g.n2, g.l1, g.l2, axis_shape<Real>(g.l1), axis_shape<Real>(g.l2),
                          spectrum_width<Real>(g.l1)};
    spectra_kernel<Real><<<g.slices * g.l2, 128>>>(chi_.data(), spectra_.data(), p);
    CUDA_CHECK_LAUNCH();
    CUDA_TRY(cudaDeviceSynchronize());
  }

  void execute(const Complex* in, Complex* out, Stream stream) override {
    const Problem& g = this->problem_;
    EXPECTS(in != nullptr && out != nullptr, "gpu-fused execute: null buffer");
    const auto bytes = g.input_size() * sizeof(Complex);
    const auto in_address = reinterpret_cast<std::uintptr_t>(in), out_address = reinterpret_cast<std::uintptr_t>(out);
    EXPECTS(in_address + bytes <= out_address || out_address + bytes <= in_address,
            "gpu-fused execute: input and output buffers overlap");
    FusedParams<Real> p = params_;
    p.in = reinterpret_cast<const C*>(in);
    p.out = reinterpret_cast<C*>(out);
    p.spectra = spectra_.data();
    kernel_<<<grid_, threads_, shared_bytes_, stream>>>(p);
    CUDA_CHECK_LAUNCH();
  }

  [[nodiscard]] Backend backend() const override { return Backend::gpu_fused; }

 private:
  /// Shared memory of a CTA running `fields` fields per round, with or without input staging.
  [[nodiscard]] FusedParams<Real> layout(int fields, bool stage) const {
    const Problem& g = this->problem_;
    const AxisShape a1 = axis_shape<Real>(g.l1);
    const int width = spectrum_width<Real>(g.l1);
    const std::size_t spectrum =
        spectrum_in_shared<Real>(g.l1, g.l2)
            ? round16(std::size_t(g.l2) * (g.l1 + spectrum_column_pad<Real>(g.l1) * width) * sizeof(C))
            : 0;
    const std::size_t buf = round16(std::size_t(fields) * a1.h * (g.l2 + 1) * sizeof(C));
    const std::size_t staged = stage ? round16(std::size_t(fields) * g.field_size() * sizeof(C)) : 0;
    FusedParams<Real> p{};
    p.buf_offset = unsigned(spectrum);
    p.stage_offset = unsigned(spectrum + buf);
    p.twiddle_offset = unsigned(spectrum + buf + staged);
    p.stage = stage ? 1 : 0;
    p.fields_per_round = fields;
    return p;
  }
  static std::size_t layout_bytes(const FusedParams<Real>& p, int l1, int l2) {
    return p.twiddle_offset + std::size_t(twiddle_table_size<Real>(l1) + twiddle_table_size<Real>(l2)) * sizeof(C);
  }

  /// Fields per round, threads, fields per CTA and grid; the shared-memory attribute of the kernel.
  void plan_launch(KernelChoice<Real> choice) {
    const Problem& g = this->problem_;
    const AxisShape a1 = axis_shape<Real>(g.l1);
    kernel_ = choice.kernel;
    int device = 0, sms = 0, shared_max = 0;
    CUDA_TRY(cudaGetDevice(&device));
    CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    CUDA_TRY(cudaDeviceGetAttribute(&shared_max, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));

    // Fields per round: two columns per team (then the N1 ≈ L1/2 rows give one row per team), within
    // the shared memory.
    // Threads on one column: a team, or two (one per parity).
    const bool paired = a1.a == 1 && a1.h == 16;
    const int column_threads = g.l2 * (paired ? 2 : a1.a);
    int fields = std::clamp(2 * choice.threads / column_threads, 1, g.per_slice);
    FusedParams<Real> p = layout(fields, true);
    while (fields > 1 && layout_bytes(p, g.l1, g.l2) > std::size_t(shared_max)) p = layout(--fields, true);
    if (layout_bytes(p, g.l1, g.l2) > std::size_t(shared_max)) p = layout(fields, false);
    const std::size_t bytes = layout_bytes(p, g.l1, g.l2);
    SUPPORTS(bytes <= std::size_t(shared_max),
             "gpu-fused needs " + std::to_string(bytes) + " bytes of shared memory per block for L1 = " +
                 std::to_string(g.l1) + ", L2 = " + std::to_string(g.l2) + " in " +
                 (sizeof(Real) == 4 ? "single" : "double") + " precision; the device allows " +
                 std::to_string(shared_max));
    // Half a column's threads per field, in whole warps: at least one warp (a lone 1x1 field too).
    threads_ = std::min(choice.threads, std::max(32, (fields * column_threads / 2 + 31) / 32 * 32));
    shared_bytes_ = bytes;
    CUDA_TRY(cudaFuncSetAttribute(kernel_, cudaFuncAttributeMaxDynamicSharedMemorySize, shared_max));
    int per_sm = 0;
    CUDA_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel_, threads_, shared_bytes_));
    SUPPORTS(per_sm > 0, "gpu-fused: no CTA of " + std::to_string(threads_) + " threads and " +
                             std::to_string(shared_bytes_) + " bytes of shared memory fits on this device");

    // Rounds per CTA: fewest waves × rounds, each CTA costing about half a round to load its spectrum.
    // A spectrum read from L2 is shared by at least 4 CTAs of its slice running side by side, so that
    // the slices in flight keep their spectra in the L2 cache (one per CTA would not fit).
    const int rounds_total = (g.per_slice + fields - 1) / fields;
    const long slots = long(sms) * per_sm;
    const int max_rounds = spectrum_in_shared<Real>(g.l1, g.l2) ? rounds_total : std::max(1, rounds_total / 4);
    int best_rounds = max_rounds;
    double best_cost = 1e300;
    for (int rounds = max_rounds; rounds >= 1; --rounds) {
      const long ctas = long(g.slices) * ((rounds_total + rounds - 1) / rounds);
      const double cost = double((ctas + slots - 1) / slots) * (rounds + 0.5);
      if (cost < best_cost) best_cost = cost, best_rounds = rounds;
    }
    p.n1 = g.n1;
    p.n2 = g.n2;
    p.per_slice = g.per_slice;
    p.fields_per_cta = best_rounds * fields;
    p.ctas_per_slice = (g.per_slice + p.fields_per_cta - 1) / p.fields_per_cta;
    const long ctas = long(g.slices) * p.ctas_per_slice;
    SUPPORTS(ctas <= 0x7fffffffL, "gpu-fused: too many slices for one launch");
    grid_ = unsigned(ctas);
    params_ = p;
  }

  FusedKernel<Real> kernel_ = nullptr;
  FusedParams<Real> params_{};
  unsigned grid_ = 0;
  int threads_ = 0;
  std::size_t shared_bytes_ = 0;
  DeviceBuffer<double2> chi_;  // slices × K1×K2, the kernels as given (complex128), input of the spectra
  DeviceBuffer<C> spectra_;    // slices × L1·L2, Ŝ_p in the fused kernel's layout, 1/(L1 L2) folded in
};

}  // namespace

// Until gpu-fused serves a whole pattern in one kernel, it serves scalar problems only.
Support can_implement_gpu_fused(const Problem& g, Precision) {
  if (!cuda_device_present()) return unsupported("needs a CUDA device, and none is present");
  if (!g.scalar()) return unsupported("serves scalar problems only (K = P = Q = 1)");
  for (int l : {g.l1, g.l2})
    if (!power_of_two(l) || l > max_fft_length)
      return unsupported("needs FFT lengths that are powers of two up to " + std::to_string(max_fft_length) +
                         ", got L1 = " + std::to_string(g.l1) + ", L2 = " + std::to_string(g.l2));
  return {};
}
std::size_t workspace_gpu_fused(const Problem& g, Precision precision) {
  const std::size_t c = precision == Precision::single ? 8 : 16;
  return g.kernels_total() * 16 + g.slices * g.kernels * std::size_t(g.l1) * g.l2 * c;
}

template <class Real>
Plan<Real> make_gpu_fused(const Problem& g, Kernels kernels) {
  return std::make_unique<GpuFused<Real>>(g, kernels);
}
template Plan<float> make_gpu_fused<float>(const Problem&, Kernels);
template Plan<double> make_gpu_fused<double>(const Problem&, Kernels);
}  // namespace gratingsim::conv::detail
