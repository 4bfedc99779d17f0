#pragma once
// The gpu-fused kernels (../gpu_fused.cu): the whole FFT convolution of a batch in one launch, built
// from the device building blocks of fft_primitives.cuh. Two kernels share the three phases:
//   fused_convolution          the scalar problem (K = P = Q = 1): one field per block, Ŝ in shared
//                              memory where it fits
//   fused_pattern_convolution  any pattern: per group, each of its Q input blocks forward-transformed
//                              once, the P output spectra Σ_terms Ŝ_k · X_q formed in registers, each
//                              output inverse-transformed once
//
// Per field block (N1×N2, harmonic m stored at j = m + M), per kernel spectrum Ŝ (L1×L2):
//   1. row FFTs      X(j1, k2) = Σ_{j2<N2} x(j1, j2) W_{L2}^{j2 k2}            only the N1 non-zero rows
//   2. per column k2 Y(j1, k2) = [FFT⁻¹_{L1} (Ŝ(·, k2) · FFT_{L1} X(·, k2))](j1)  only j1 < N1 kept
//   3. row IFFTs     y(j1, j2) = Σ_{k2} Y(j1, k2) W_{L2}^{−j2 k2}               only j2 < N2 kept
// with W_L = e^{−2πi/L} and 1/(L1 L2) folded into Ŝ. The fields sit at j = m + M instead of m mod L:
// a shift of input and output by M, which the circular convolution commutes with, so the kernel χ
// keeps the usual placement n mod L, the kept outputs are j < N, and every transform has its
// non-zero input (or kept output) in the first half j < H = L/2 (N ≤ H because L ≥ 2N − 1).
// With a pattern, step 2 of a column reads the column of each of the Q inputs, transforms each once
// (both parities, held in registers: U_q), and per output o forms Σ_{terms (o, q, k)} Ŝ_k · U_q and
// inverse-transforms it once: Q forward and P inverse column transforms per column of a group.
//
// Shared memory per CTA (one slice; fields, or groups, of the slice in rounds of F at a time):
//   spectrum   Ŝ of the slice, per column the L1 values in the order the threads own them (once per CTA);
//              read from global (L2 cache) instead where it does not fit (complex128 with L1·L2 > 8192).
//              Patterns: the spectra of the CTA's output set where they fit beside its buf, else all
//              read from global memory where used (every group reads them again, from L2)
//   buf        F × slots × H1 rows × (L2 + 1): the row spectra X and then Y; the +1 skew and the assignment
//              of rows/columns to teams keep every access free of bank conflicts; the exchanges of a
//              column's (row's) transform go through that column's (row's) own storage. A scalar field
//              has one slot; a pattern group max(P_s, Q_s) slots (its output set's outputs and inputs,
//              below): the Q_s inputs' row spectra, then in place the P_s outputs' column results
//   stage      the next round's input fields, copied with cp.async while the current round computes
//   twiddles   per axis: W_L^{j_a (2 k_b + ε)} for teams (a padded row per j_a), W_L^j for paired lines
// The column order of buf (and of Ŝ) is the order in which the row-FFT threads own the frequencies.
//
// Output sets (patterns). A CTA serves one output set s of its slice: P_s of the P outputs and the Q_s
// inputs their terms read (at most max_set_inputs, the U_q held in registers). The plan splits the
// outputs into sets where one group's max(P_s, Q_s) slots would not fit in shared memory (case 4 in
// complex64: 3 slots of 66 KB), grouping outputs that read the same inputs; an input read by two sets
// is read and transformed by both. Where no split fits, the plan refuses. Where the sets' spectra fit
// in shared memory beside their slots (the plan's choice, e.g. case 3 in complex64: {J_x, J_y},
// {D_x, D_y}, {J_z}, 3 spectra of 33 KB each at most), each is read once per CTA instead of once per
// group: the fields then cost 5 input reads instead of 3, the spectra 1/16 of what L2 would serve.
#include <cstddef>
#include <utility>

#include "convolution/gpu_fused/fft_primitives.cuh"
#include "core/dependent_launch.cuh"

namespace gratingsim::conv::detail::fused {

constexpr int spectrum_shared_limit = 128 * 1024;  // bytes of Ŝ kept in shared memory, else read from L2

/// Threads per CTA: 256 where a thread needs more than 128 registers (complex128 with L ≥ 32, and
/// mixed shapes L1 ≠ L2, whose two axes' working sets the compiler allocates side by side), else 512.
template <class Real, int L1, int L2>
constexpr int block_threads() {
  return (sizeof(Real) == 8 && (L1 >= 32 || L2 >= 32)) || L1 != L2 ? 256 : 512;
}
/// The pattern kernel holds up to max_set_inputs column spectra per thread: 256 threads, so that up to
/// 255 registers are allowed with one CTA per SM (CtasPerSm = 1: 8 warps per SM, latency-bound). Its
/// CtasPerSm = 2 instantiation caps a thread at 128 registers (the compiler spills part of the U_q to
/// L1: about 480 bytes per thread at L = 64) for twice the warps, where the plan fits in half an SM's
/// shared memory (gpu_fused.cu: plan_pattern says when it is taken).
constexpr int pattern_block_threads = 256;

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

// ---- the three phases ------------------------------------------------------------------------------------

/// 1. Row FFTs of the N1 non-zero rows of `blocks` field blocks: block b is read from src(b) (N1×N2
/// row-major, global or staged), its row spectra go to the buf block dst(b) (H1 rows of stride L2 + 1,
/// columns in buf_column order). Called once per kind of source, so that the compiler knows which
/// memory the rows are read from.
template <class Real, int L1, int L2, class Src, class Dst>
__device__ __forceinline__ void row_ffts(int blocks, int n1, int n2, Src src, Dst dst, const Cx<Real>* twiddles2) {
  using C = Cx<Real>;
  using X1 = Axis<Real, L1>;
  using X2 = Axis<Real, L2>;
  constexpr int S = L2 + 1;                    // buf row stride (skew)
  constexpr int group = int(128 / sizeof(C));  // elements per shared-memory bank phase
  const int items = blocks * X1::H;
  // One parity of row `item` (f, r), or both where Parities = E.
  const auto transform = [&]<int First, int Parities>(int item, int lane) {
    const int f = item / X1::H, r = item % X1::H;
    const C* const x_row = src(f) + r * n2;
    C* const row = dst(f) + r * S;
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
      const C* const x_row = src(f) + r * n2;
      C* const row = dst(f) + r * S + buf_column(X2::shape, eps, 0, 0);
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
}

/// 2 (scalar). Per column of `fields` buf blocks (one slot each, field_buf apart): FFT, multiply by Ŝ
/// (`spectrum`: shared memory, padded columns, where SpectrumShared; else global), IFFT, keep rows
/// j1 < N1; in place in buf.
template <class Real, int L1, int L2, bool SpectrumShared>
__device__ __forceinline__ void scalar_columns(int fields, int n1, Cx<Real>* buf, const Cx<Real>* spectrum,
                                               const Cx<Real>* twiddles1) {
  using C = Cx<Real>;
  using X1 = Axis<Real, L1>;
  constexpr int S = L2 + 1;
  constexpr int group = int(128 / sizeof(C));
  constexpr int width = spectrum_width<Real>(L1);
  constexpr int column_stride = L1 + (SpectrumShared ? spectrum_column_pad<Real>(L1) * width : 0);
  constexpr std::size_t field_buf = std::size_t(X1::H) * S;
  const int items = fields * L2;
  // Parities [First, First + Parities) of column `item` (f, col); their outputs in y (summed).
  const auto transform = [&]<int First, int Parities>(int item, int lane, C* y) {
    const int f = item / L2, col = item % L2;
    C* const column = buf + f * field_buf + col;
    const C* const s_col = spectrum + col * column_stride + lane * width;
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
      [[maybe_unused]] C f_global[SpectrumShared ? 1 : X1::Q];
      // From L2, the Ŝ values are loaded before the FFT so that the read overlaps it.
      if constexpr (!SpectrumShared) static_for<X1::Q>([&](auto v) { f_global[v] = factor(v); });
      if constexpr (X1::A > 1) load_twiddles<Real, L1, eps>(w, twiddles1 + lane * twiddle_row<Real>(L1));
      forward_half<Real, L1, eps, S>(x, u, column, w, lane);
      // Keeps the compiler from hoisting the Ŝ reads from shared memory above the FFT, which
      // would hold all of them in registers at once.
      if constexpr (SpectrumShared) asm volatile("" ::: "memory");
      static_for<X1::Q>([&](auto v) {
        if constexpr (SpectrumShared) u[v] = u[v] * factor(v);
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
      const C* const s_col = spectrum + col * column_stride + eps * X1::Q;
      C u[X1::Q], y[X1::Q] = {};
      if (valid) {
        static_for<X1::Q>([&](auto j) { y[j] = j < n1 ? column[j * S] : C{0, 0}; });
        forward_line<Real, L1>(y, u, eps, twiddles1);
        if constexpr (SpectrumShared) asm volatile("" ::: "memory");  // Ŝ reads stay after the FFT
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

/// The outputs of one CTA's output set: P_s outputs and the Q_s inputs they read; kernel[o][q] the
/// kernel of the term (output position o, input position q) within the slice, −1 where there is none.
constexpr int max_set_inputs = 4;    // U_q held in registers: 4 · L1/A values per thread
constexpr int max_set_outputs = 16;  // outputs are transformed one at a time: a table size only
constexpr int max_set_spectra = 16;  // spectra of a set staged in shared memory
constexpr int max_sets = 8;
struct OutputSet {
  int inputs, outputs;            // Q_s, P_s
  int spectra;                    // spectra staged in shared memory (0: read from global memory)
  int input[max_set_inputs];      // problem input index of position q
  int output[max_set_outputs];    // problem output index of position o
  int spectrum[max_set_spectra];  // kernel (within the slice) of staged spectrum i
  int kernel[max_set_outputs][max_set_inputs];  // staged spectrum index, or the kernel where none are staged
};

/// 2 (pattern). Per column of the `groups` groups of buf (slots buf blocks each, group_buf apart): the
/// forward transforms U_q of the set's Q_s input columns (slot q) into registers, then per output o
/// Σ_q Ŝ_{kernel[o][q]} · U_q, its inverse transform, rows j1 < N1 written to slot o. Slot o's column
/// is free by then: its input (o < Q_s) is in registers, and a team owns its column in every slot.
/// Spectrum k (kernel[o][q]) starts at spectra + k·spectrum_stride, its columns column_stride apart:
/// the set's staged spectra in shared memory, or the slice's K in global memory (unpadded).
template <class Real, int L1, int L2>
__device__ __forceinline__ void pattern_columns(int groups, int n1, Cx<Real>* buf, std::size_t group_buf,
                                                const OutputSet& set, const Cx<Real>* spectra, int column_stride,
                                                std::size_t spectrum_stride, const Cx<Real>* twiddles1) {
  using C = Cx<Real>;
  using X1 = Axis<Real, L1>;
  constexpr int S = L2 + 1;
  constexpr int group = int(128 / sizeof(C));
  constexpr int width = spectrum_width<Real>(L1);
  constexpr std::size_t field_buf = std::size_t(X1::H) * S;
  const int items = groups * L2, inputs = set.inputs, outputs = set.outputs;
  if constexpr (paired_parities<Real, L1>()) {
    // Two lanes per column, one per parity (A = 1, Q = H = 16): U_q of the lane's parity.
    for_each_line(items, [&](int item, int eps) {
      const bool valid = item < items;
      const int f = item / L2, col = item % L2;
      C* const columns = buf + f * group_buf + col;
      C U[max_set_inputs][X1::Q];
      static_for<max_set_inputs>([&](auto q) {
        if (q < inputs && valid) {
          C x[X1::Q];
          static_for<X1::Q>([&](auto j) { x[j] = j < n1 ? columns[q * field_buf + j * S] : C{0, 0}; });
          forward_line<Real, L1>(x, U[q], eps, twiddles1);
        }
      });
      __syncwarp();  // both parities of the warp's columns have read every input before outputs are written
#pragma unroll 1
      for (int o = 0; o < outputs; ++o) {
        C u[X1::Q] = {}, t[X1::Q];
        if (valid) {
          static_for<max_set_inputs>([&](auto q) {
            const int k = set.kernel[o][q];
            if (q < inputs && k >= 0) {
              // Ŝ at frequencies 2κ + eps: values eps·H + κ of the column (A = 1).
              const C* const s_col = spectra + k * spectrum_stride + col * column_stride + eps * X1::Q;
              static_for<X1::Q>([&](auto v) { u[v] = u[v] + U[q][v] * s_col[v]; });
            }
          });
          inverse_line<Real, L1>(u, u, eps, twiddles1);
        }
        // Parity 1 (lane + 16) hands its partial column to parity 0, which writes the sum.
        static_for<X1::Q>([&](auto j) {
          t[j] = {__shfl_down_sync(0xffffffffu, u[j].re, 16), __shfl_down_sync(0xffffffffu, u[j].im, 16)};
        });
        if (valid && eps == 0)
          static_for<X1::Q>([&](auto j) {
            if (j < n1) columns[o * field_buf + j * S] = u[j] + t[j];
          });
      }
    });
  } else {
    // team_sync calls of one item (teams only): 2 per half transform, one before each write-back.
    const int syncs = X1::A > 1 ? inputs * X1::E * 2 + outputs * (X1::E * 2 + 1) : 0;
    for_each_item<X1::A>(items, [&](int i, int lane) {
      if (i >= items) {
#pragma unroll 1
        for (int s = 0; s < syncs; ++s) team_sync<X1::A>();
        return;
      }
      const int item = spread<X1::A, group>(i, items), f = item / L2, col = item % L2;
      C* const columns = buf + f * group_buf + col;
      C U[max_set_inputs][X1::E][X1::Q];
      static_for<max_set_inputs>([&](auto q) {
        if (q < inputs) {
          C* const column = columns + q * field_buf;
          C x[X1::Q];
          static_for<X1::Q>([&](auto j) {
            const int r = lane + X1::A * j;
            x[j] = r < n1 ? column[r * S] : C{0, 0};
          });
          static_for<X1::E>([&](auto e) {
            constexpr int eps = decltype(e)::value;
            C w[X1::A > 1 ? X1::Q : 1];
            if constexpr (X1::A > 1) load_twiddles<Real, L1, eps>(w, twiddles1 + lane * twiddle_row<Real>(L1));
            forward_half<Real, L1, eps, S>(x, U[q][eps], column, w, lane);
          });
        }
      });
      const C* const s_lane = spectra + col * column_stride + lane * width;
#pragma unroll 1
      for (int o = 0; o < outputs; ++o) {
        C* const column = columns + o * field_buf;
        C y[X1::Q];
        static_for<X1::E>([&](auto e) {
          constexpr int eps = decltype(e)::value;
          C u[X1::Q] = {}, w[X1::A > 1 ? X1::Q : 1];
          static_for<max_set_inputs>([&](auto q) {
            const int k = set.kernel[o][q];
            if (q < inputs && k >= 0) {
              const C* const s_col = s_lane + k * spectrum_stride;
              static_for<X1::Q>([&](auto v) {
                constexpr int value = eps * X1::Q + decltype(v)::value;
                u[v] = u[v] + U[q][eps][v] * s_col[(value / width) * X1::A * width + value % width];
              });
            }
          });
          if constexpr (X1::A > 1) load_twiddles<Real, L1, eps>(w, twiddles1 + lane * twiddle_row<Real>(L1));
          inverse_half<Real, L1, eps, S, (eps > 0)>(u, y, column, w, lane);
        });
        team_sync<X1::A>();  // the exchange slots are the column's rows
        static_for<X1::Q>([&](auto j) {
          const int r = lane + X1::A * j;
          if (r < n1) column[r * S] = y[j];
        });
      }
    });
  }
}

/// 3. Row IFFTs of the N1 kept rows of `blocks` buf blocks (src(b)), the N2 kept outputs of row r to
/// out(b) + r·N2 in global memory: by teams A consecutive elements at a time, by single threads each
/// its row; paired parities leave their two partial rows in buf, from where they are summed and
/// copied out whole rows at a time (coalesced).
template <class Real, int L1, int L2, class Src, class Out>
__device__ __forceinline__ void row_iffts(int blocks, int n1, int n2, Src src, Out out, const Cx<Real>* twiddles2) {
  using C = Cx<Real>;
  using X1 = Axis<Real, L1>;
  using X2 = Axis<Real, L2>;
  constexpr int S = L2 + 1;
  constexpr int group = int(128 / sizeof(C));
  const int items = blocks * X1::H;
  // Parities [First, First + Parities) of row `item` (f, r), the parity in the exchange slots
  // first; their outputs in y (summed).
  const auto transform = [&]<int First, int Parities>(int item, int lane, C* y) {
    const int f = item / X1::H, r = item % X1::H;
    C* const row = src(f) + r * S;
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
      C* const half = src(f) + r * S + buf_column(X2::shape, eps, 0, 0);
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
      C* const y_row = out(f) + r * n2;
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
    while (f < blocks) {
      const C* const row = src(f) + r * S;
      for (int c = threadIdx.x % lanes_per_row; c < n2; c += lanes_per_row) out(f)[r * n2 + c] = row[c] + row[X2::H + c];
      for (r += step; r >= n1; r -= n1) ++f;
    }
  }
}

// ---- the kernels -----------------------------------------------------------------------------------------

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
  constexpr int S = L2 + 1;  // buf row stride (skew)
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
  wait_for_previous_kernel();  // before the fields (launch_after_previous: the twiddles overlap its end)
  if (p.stage) stage_fields(stage, in, min(F, count) * field_size);
  copy_async_commit();
  if constexpr (spectrum_shared) {
    constexpr int per_column = L1 / width, vector_bytes = width * sizeof(C);
    for (int i = threadIdx.x; i < L2 * per_column; i += blockDim.x)
      copy_async<vector_bytes>(spectrum_smem + (i / per_column) * column_stride + (i % per_column) * width,
                               spectrum_global + i * width);
  }
  copy_async_commit();

  const auto buf_block = [&](int f) { return buf + f * field_buf; };
  for (int f0 = 0; f0 < count; f0 += F) {
    const int nf = min(F, count - f0);
    if (f0 == 0) copy_async_wait<1>();  // the staged inputs; the spectrum may still be in flight
    else copy_async_wait<0>();
    __syncthreads();

    if (p.stage) row_ffts<Real, L1, L2>(nf, n1, n2, [&](int f) { return stage + f * field_size; }, buf_block, twiddles2);
    else row_ffts<Real, L1, L2>(nf, n1, n2, [&](int f) { return in + (f0 + f) * field_size; }, buf_block, twiddles2);
    __syncthreads();
    if (p.stage && f0 + F < count) stage_fields(stage, in + (f0 + F) * field_size, min(F, count - f0 - F) * field_size);
    copy_async_commit();
    if (f0 == 0) {
      copy_async_wait<1>();  // the spectrum
      __syncthreads();
    }

    scalar_columns<Real, L1, L2, spectrum_shared>(nf, n1, buf, spectrum_shared ? spectrum_smem : spectrum_global,
                                                  twiddles1);
    __syncthreads();

    row_iffts<Real, L1, L2>(nf, n1, n2, buf_block, [&](int f) { return out + (f0 + f) * field_size; }, twiddles2);
  }
}

template <class Real>
struct PatternParams {
  const Cx<Real>* in;
  Cx<Real>* out;
  const Cx<Real>* spectra;  // slices·K × L2 columns × L1 values (layout above, no pad)
  int n1, n2, per_slice;
  int kernels, inputs, outputs;  // K, Q, P of the problem
  int sets;                      // output sets; CTAs of a slice: sets × ctas_per_set, set-major
  int ctas_per_set, groups_per_cta, groups_per_round;
  int slots;                     // buf blocks per group
  int stage;                     // 1: the set's inputs staged in shared memory with cp.async
  int spectra_shared;            // 1: every set's spectra staged in shared memory (columns padded)
  // Bytes into dynamic shared memory (the set at 0).
  unsigned spectra_offset, buf_offset, stage_offset, twiddle_offset;
  OutputSet set[max_sets];
};

template <class Real, int L1, int L2, int CtasPerSm>
__global__ void __launch_bounds__(pattern_block_threads, CtasPerSm)
    fused_pattern_convolution(const __grid_constant__ PatternParams<Real> p) {
  using C = Cx<Real>;
  using X1 = Axis<Real, L1>;
  constexpr int S = L2 + 1;
  constexpr std::size_t field_buf = std::size_t(X1::H) * S;

  extern __shared__ __align__(16) unsigned char shared[];
  OutputSet& set = *reinterpret_cast<OutputSet*>(shared);
  C* const buf = reinterpret_cast<C*>(shared + p.buf_offset);
  C* const stage = reinterpret_cast<C*>(shared + p.stage_offset);
  C* const twiddles1 = reinterpret_cast<C*>(shared + p.twiddle_offset);
  C* const twiddles2 = twiddles1 + twiddle_table_size<Real>(L1);

  const int ctas_per_slice = p.sets * p.ctas_per_set;
  const int slice = blockIdx.x / ctas_per_slice, set_index = blockIdx.x % ctas_per_slice / p.ctas_per_set;
  const int first = (blockIdx.x % p.ctas_per_set) * p.groups_per_cta;
  const int count = min(p.groups_per_cta, p.per_slice - first);
  const int n1 = p.n1, n2 = p.n2, F = p.groups_per_round;
  const std::size_t field_size = std::size_t(n1) * n2, group_buf = std::size_t(p.slots) * field_buf;
  const std::size_t group0 = std::size_t(slice) * p.per_slice + first;  // the CTA's first group
  const C* const spectra_global = p.spectra + std::size_t(slice) * p.kernels * L1 * L2;
  C* const spectra_smem = reinterpret_cast<C*>(shared + p.spectra_offset);
  constexpr int width = spectrum_width<Real>(L1), column_pad = spectrum_column_pad<Real>(L1) * width;
  const int column_stride = p.spectra_shared ? L1 + column_pad : L1;
  const std::size_t spectrum_stride = std::size_t(L2) * column_stride;
  const C* const spectra = p.spectra_shared ? spectra_smem : spectra_global;

  {  // this CTA's output set, to shared memory (read with compile-time positions in the column phase)
    const int* const from = reinterpret_cast<const int*>(&p.set[set_index]);
    int* const to = reinterpret_cast<int*>(shared);
    for (int i = threadIdx.x; i < int(sizeof(OutputSet) / sizeof(int)); i += blockDim.x) to[i] = from[i];
  }
  fill_twiddles<Real, L1>(twiddles1);
  fill_twiddles<Real, L2>(twiddles2);
  __syncthreads();
  const int inputs = set.inputs, outputs = set.outputs;
  // Input position q of group g of the CTA, output position o of group g.
  const auto input_block = [&](int g, int q) { return p.in + ((group0 + g) * p.inputs + set.input[q]) * field_size; };
  const auto output_block = [&](int g, int o) {
    return p.out + ((group0 + g) * p.outputs + set.output[o]) * field_size;
  };
  // The set's input blocks of groups [g, g + n), to stage in (group, position) order.
  const auto stage_inputs = [&](int g, int n) {
    const std::size_t total = std::size_t(n) * inputs * field_size;
    for (std::size_t i = threadIdx.x; i < total; i += blockDim.x) {
      const int b = int(i / field_size);
      copy_async<sizeof(C)>(stage + i, input_block(g + b / inputs, b % inputs) + (i - b * field_size));
    }
  };
  if (p.spectra_shared) {  // the set's spectra, once per CTA, in padded columns (as the scalar kernel's)
    constexpr int per_column = L1 / width, vector_bytes = width * sizeof(C);
    const int per_spectrum = L2 * per_column;
    for (int i = threadIdx.x; i < set.spectra * per_spectrum; i += blockDim.x) {
      const int s = i / per_spectrum, v = i % per_spectrum;
      copy_async<vector_bytes>(
          spectra_smem + s * spectrum_stride + (v / per_column) * column_stride + (v % per_column) * width,
          spectra_global + std::size_t(set.spectrum[s]) * L1 * L2 + std::size_t(v) * width);
    }
  }
  // The set, the twiddles and the spectra (made and synchronised at plan time) overlap the end of the previous
  // kernel of the stream (launch_after_previous); the fields and the outputs wait for it.
  wait_for_previous_kernel();
  if (p.stage) stage_inputs(0, min(F, count));
  copy_async_commit();

  for (int g0 = 0; g0 < count; g0 += F) {
    const int ng = min(F, count - g0);
    copy_async_wait<0>();
    __syncthreads();

    const auto input_buf = [&](int b) { return buf + (b / inputs) * group_buf + (b % inputs) * field_buf; };
    if (p.stage)
      row_ffts<Real, L1, L2>(ng * inputs, n1, n2, [&](int b) { return stage + b * field_size; }, input_buf, twiddles2);
    else
      row_ffts<Real, L1, L2>(ng * inputs, n1, n2, [&](int b) { return input_block(g0 + b / inputs, b % inputs); },
                             input_buf, twiddles2);
    __syncthreads();
    if (p.stage && g0 + F < count) stage_inputs(g0 + F, min(F, count - g0 - F));
    copy_async_commit();

    pattern_columns<Real, L1, L2>(ng, n1, buf, group_buf, set, spectra, column_stride, spectrum_stride, twiddles1);
    __syncthreads();

    row_iffts<Real, L1, L2>(
        ng * outputs, n1, n2, [&](int b) { return buf + (b / outputs) * group_buf + (b % outputs) * field_buf; },
        [&](int b) { return output_block(g0 + b / outputs, b % outputs); }, twiddles2);
  }
}

// ---- the instantiations, by FFT lengths -------------------------------------------------------------------
// Each kernel, precision and CTAs per SM is instantiated in its own translation unit
// (gpu_fused/*_kernels_*.cu), so that the five compile in parallel; the plan only looks them up.

template <class Real>
using ScalarKernel = void (*)(FusedParams<Real>);
template <class Real>
using PatternKernel = void (*)(PatternParams<Real>);

template <class Real>
struct KernelChoice {
  ScalarKernel<Real> kernel = nullptr;
  int threads = 0;  // block_threads of the instantiation
};

/// The instantiation of the scalar kernel for (L1, L2), powers of two ≤ 128.
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

/// The instantiation of the pattern kernel for (L1, L2) and CTAs per SM (1, or 2 in complex64).
template <class Real, int CtasPerSm>
PatternKernel<Real> select_pattern_kernel(int l1, int l2) {
  PatternKernel<Real> kernel = nullptr;
  [&]<int... I>(std::integer_sequence<int, I...>) {
    ((l1 == (1 << (I / 8)) && l2 == (1 << (I % 8))
          ? void(kernel = &fused_pattern_convolution<Real, 1 << (I / 8), 1 << (I % 8), CtasPerSm>)
          : void()),
     ...);
  }(std::make_integer_sequence<int, 64>{});
  return kernel;
}

extern template KernelChoice<float> select_kernel<float>(int, int);
extern template KernelChoice<double> select_kernel<double>(int, int);
extern template PatternKernel<float> select_pattern_kernel<float, 1>(int, int);
extern template PatternKernel<float> select_pattern_kernel<float, 2>(int, int);
extern template PatternKernel<double> select_pattern_kernel<double, 1>(int, int);

// ---- the spectra: Ŝ(k1, k2) = Σ_n χ(n) W_{L1}^{n1 k1} W_{L2}^{n2 k2} / (L1 L2), in double -------------

struct SpectraParams {
  int n1, n2, l1, l2;
  AxisShape axis1, axis2;
  int width;  // vector_width
};

/// One CTA per (kernel block b = slice·K + k, column of the layout): first the column's k2 transform of
/// every kernel row, then its L1 values, written in the layout the fused kernels read.
template <class Real>
__global__ void spectra_kernel(const double2* __restrict__ chi, Cx<Real>* __restrict__ spectra, SpectraParams p) {
  __shared__ double2 w1[max_fft_length], w2[max_fft_length];
  __shared__ double2 partial[2 * max_fft_length];  // the K1 ≤ 255 row sums
  const int block = blockIdx.x / p.l2, col = blockIdx.x % p.l2;
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

  const double2* const kernel = chi + std::size_t(block) * k1_count * k2_count;
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
    spectra[(std::size_t(block) * p.l2 + col) * p.l1 + i] = {Real(sum.x * scale), Real(sum.y * scale)};
  }
}

}  // namespace gratingsim::conv::detail::fused
