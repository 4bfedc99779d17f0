#pragma once
// Device building blocks of gpu-fused (../gpu_fused.cu, docs/convolution.md §2, §4): the complex
// type, how one axis of an FFT length L is split between threads (AxisShape), compile-time twiddles,
// register DFTs, the team half-length transforms and their exchanges, item loops, cp.async.
//
// Transforms. W_L = e^{−2πi/L}; forward X(k) = Σ_j x_j W_L^{jk}, inverse unnormalised. The callers keep
// the non-zero inputs (and the kept outputs) of every transform in the first half j < H = L/2.
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
#include <cstddef>
#include <utility>

namespace gratingsim::conv::detail::fused {

constexpr int max_fft_length = 128;

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
}  // namespace gratingsim::conv::detail::fused
