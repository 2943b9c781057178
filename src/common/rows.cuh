// common/rows.cuh — device side of the row module: how the memory-bound rungs (softmax,
// rmsnorm, row_sum, weighted_sum, row_scale_relu) read, reduce and write rows of a [..., D]
// operand described by a rows::Layout (common/rows.hpp, docs/design.md §9).
//
// A row is D contiguous elements starting `ld` elements after the previous one; it moves as
// 16-byte vectors (Vec<T, kVec16<T>>). Where a row starts decides how:
//   aligned starts (base and ld * sizeof(T) % 16 == 0): vector k of a row is elements
//     [k kV, (k + 1) kV); only the last may be partial (load_row_vec / store_row_vec read and
//     write it element by element; kAny reads another operand at the output's phase);
//   any start: RowSplit peels the row into scalar head | whole 16-byte vectors | scalar tail,
//     so the body always moves as LDG.128 (rows of odd length packed back to back, T = 4097,
//     and padded strided rows start at every 16-byte phase);
//   a row held in registers by a block (pipelined rows): thread t owns vectors t, t + kThreads,
//     ... of every row (load_slice), whole ones only;
//   rows of whole vectors as one flat array of vectors (flat_vec): one-shot elementwise blocks
//     over any row count, length and stride.
// Then the row-wise reductions (a warp, a row group, the block) and the second kernel that sums
// per-block f32 partials of split rows.
#pragma once

#include <cstdint>
#include <type_traits>

#include "common/launch.cuh"
#include "common/ptx/named_barrier.cuh"
#include "common/reduce.cuh"
#include "common/rows.hpp"
#include "common/stream_scratch.hpp"
#include "common/vec.cuh"

namespace hk {

// ---- 16-byte loads with a cache policy --------------------------------------------------------

// 16-byte load through the read-only cache (ld.global.nc) for operands every row reuses (g, w),
// with the default cache policy, as load_stream (common/vec.cuh says why); the name keeps the
// intent, so a policy for reused operands can be set here alone.
template <class T, int N>
__device__ __forceinline__ Vec<T, N> load_keep(const T* p) {
  static_assert(sizeof(T) * N == 16, "load_keep moves exactly 16 bytes");
  uint4 raw = __ldg(reinterpret_cast<const uint4*>(p));
  return *reinterpret_cast<Vec<T, N>*>(&raw);
}

// load_keep of an operand read at its own 16-byte phase (kAny false) or at another operand's
// (kAny true: load_vec_any).
template <bool kAny, class T, int N>
__device__ __forceinline__ Vec<T, N> load_keep_at(const T* p) {
  if constexpr (kAny) return load_vec_any<T, N>(p);
  else return load_keep<T, N>(p);
}

// load_keep as a volatile asm: it stays in program order with the opaque() asms below, so
// ptxas cannot hoist every per-column load of an unrolled row loop to the top (4 registers per
// vector held until use).
template <class T, int N>
__device__ __forceinline__ Vec<T, N> load_keep_ordered(const T* p) {
  static_assert(sizeof(T) * N == 16, "load_keep_ordered moves exactly 16 bytes");
  uint4 r;
  asm volatile("ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p));
  return *reinterpret_cast<Vec<T, N>*>(&r);
}

// load_keep with an L1 evict-last hint (ld.global.nc.L1::evict_last), for a row-length operand
// (weighted_sum's w) that every short-lived block on an SM reads again: the streamed rows passing
// through L1 evict it first, so each block finds it in L1 instead of asking L2 again. The L2
// policy stays the default (vec.cuh says why streamed operands carry no hint). Used by
// weighted_sum v04 and v05, where it was not measured apart from the rest of the rung; on
// rmsnorm v06's g (H200, 2026-12-04, 16384x8192) the hint alone was level with load_keep
// (129.9 / 258.6 us against 129.6 / 259.2, bf16 / f32), so rmsnorm kept load_keep.
template <class T, int N>
__device__ __forceinline__ Vec<T, N> load_keep_last(const T* p) {
  static_assert(sizeof(T) * N == 16, "load_keep_last moves exactly 16 bytes");
  uint4 r;
  asm volatile("ld.global.nc.L1::evict_last.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
               : "l"(p));
  return *reinterpret_cast<Vec<T, N>*>(&r);
}

// A whole 16-byte vector at a 16-byte aligned `p`: streamed (kStream) or kept.
template <bool kStream, class T>
__device__ __forceinline__ Vec<T, kVec16<T>> load_vec16(const T* p) {
  if constexpr (kStream) return load_stream<T, kVec16<T>>(p);
  else return load_keep<T, kVec16<T>>(p);
}

// ---- rows with aligned starts: vector col / N, partial at the tail ------------------------------

// Vector `col / N` of a row: a 16-byte load when whole, element loads (zero-filled) at the tail.
// kKeep selects load_keep (reused operands) over load_stream (streamed once); kAny a row at any
// alignment (load_vec_any: the widest loads the address allows).
template <class T, int N, bool kKeep = false, bool kAny = false>
__device__ __forceinline__ Vec<T, N> load_row_vec(const T* row, int64_t col, int64_t dim) {
  if (col + N <= dim) return kKeep ? load_keep_at<kAny, T, N>(row + col) : load_stream_at<kAny, T, N>(row + col);
  Vec<T, N> v;
#pragma unroll
  for (int k = 0; k < N; ++k) v.v[k] = col + k < dim ? row[col + k] : from_f32<T>(0.f);
  return v;
}

template <class T, int N, bool kAny = false>
__device__ __forceinline__ void store_row_vec(T* row, int64_t col, int64_t dim, const Vec<T, N>& v) {
  if (col + N <= dim) {
    store_stream_at<kAny, T, N>(row + col, v);
    return;
  }
#pragma unroll
  for (int k = 0; k < N; ++k)
    if (col + k < dim) row[col + k] = v.v[k];
}

// ---- rows of whole vectors walked as one flat array (the one-shot elementwise blocks) ------------
//
// A [rows, D] operand whose rows are whole 16-byte vectors (D % kV == 0) with aligned starts, seen
// as rows * (D / kV) vectors: vector i is vector i % row_vecs of row i / row_vecs. One-shot
// blocks of a few vectors per thread walk it as gelu v03 walks a flat array (docs/decisions.md:
// one-shot 128 x 2 blocks), whatever the row count, length or stride. Indices are 32-bit (one
// 32-bit division per vector): the rungs that use it refuse 2^32 vectors or more in supports().
struct FlatVec {
  int64_t row;
  int64_t col;  // vector index in the row (elements col * kV ...)
};

__device__ __forceinline__ FlatVec flat_vec(uint32_t i, uint32_t row_vecs) {
  const uint32_t r = i / row_vecs;
  return {int64_t(r), int64_t(i - r * row_vecs)};
}

// ---- rows with any start: peeled head | 16-byte body | tail -------------------------------------

// The head and tail (at most 2 (kV - 1) elements) are owned by the first lanes of the group that
// works on the row.
struct RowSplit {
  int64_t head;  // scalars before the first 16-byte boundary
  int64_t nvec;  // whole 16-byte vectors after them
  int64_t tail;  // scalars after the last vector
  __device__ __forceinline__ int64_t edges() const { return head + tail; }
  // Element offset of the e-th head/tail scalar, e < head + tail.
  template <int kV>
  __device__ __forceinline__ int64_t edge(int64_t e) const { return e < head ? e : nvec * kV + e; }
};

// Needs `row` aligned to sizeof(T) (every typed pointer is).
template <class T>
__device__ __forceinline__ RowSplit row_split(const T* row, int64_t n) {
  constexpr int kV = kVec16<T>;
  const int mis = static_cast<int>((reinterpret_cast<uintptr_t>(row) & 15) / sizeof(T));
  const int64_t head = mis ? (n < kV - mis ? n : kV - mis) : 0;
  const int64_t nvec = (n - head) / kV;
  return {head, nvec, n - head - nvec * kV};
}

// ---- a row held in registers by a block (the pipelined row rungs) -------------------------------
//
// A block of kThreads owns whole rows of D elements; thread t owns the kPer 16-byte vectors
// t, t + kThreads, ... of every row, so a per-column operand (w) can stay in its registers and
// the next row's slice can be loaded while this row is reduced. Needs 16-byte aligned row
// starts and D a multiple of 16 bytes: every vector of a row is whole or wholly past D. The
// launch shape and limits (kThreads, kMaxPer, refusal, suits) are host-side, in common/rows.hpp.
// NOTE: a partial last vector read element by element cost 12 registers of tail state (this
// row's, the next row's and the per-column operand's) on every thread, enough to spill at 80.

namespace pipelined_rows {

// Blocks per SM the register budget is held to: kPer <= 4 in 64 registers (4 blocks, 1024
// threads); kPer 8 in 128 (2 blocks). NOTE: 3 blocks at kPer 8 (80 registers) spills for the
// 16-bit types.
template <int kPer>
constexpr int kMinBlocks = kPer <= 4 ? 4 : 2;

// Calls launch(std::integral_constant<int, kPer>{}) with the fewest vectors per thread that
// cover a row of `cols` elements of T: registers (and so occupancy) follow kPer.
template <class T, class F>
void dispatch_per(int64_t cols, F&& launch) {
  const int64_t per = (((cols + kVec16<T> - 1) / kVec16<T>) + kThreads - 1) / kThreads;
  if (per <= 1) launch(std::integral_constant<int, 1>{});
  else if (per <= 2) launch(std::integral_constant<int, 2>{});
  else if (per <= 4) launch(std::integral_constant<int, 4>{});
  else launch(std::integral_constant<int, kMaxPer>{});
}

}  // namespace pipelined_rows

// Bit k set: this thread's vector k (elements (tid + kThreads k) * kV ...) lies inside D.
template <class T, int kPer, int kThreads>
__device__ __forceinline__ unsigned whole_vectors(int64_t dim) {
  unsigned m = 0;
#pragma unroll
  for (int k = 0; k < kPer; ++k)
    if ((int64_t(threadIdx.x) + k * kThreads + 1) * kVec16<T> <= dim) m |= 1u << k;
  return m;
}

// (kPer) 16-byte vectors of `row` owned by this thread: the ones inside D as one load each at
// a fixed offset from one pointer (LDG.128 [R + imm]), zero past D.
// NOTE: no element-wise fallback inside this unrolled loop: one made ptxas keep kPer x kV
// scalar registers live (117 registers at bf16 kPer 4 instead of ~70).
template <class T, int kPer, int kThreads, bool kKeep>
__device__ __forceinline__ void load_slice(Vec<T, kVec16<T>> (&v)[kPer], const T* row, unsigned whole) {
  constexpr int kV = kVec16<T>;
  const T* p = row + threadIdx.x * kV;
#pragma unroll
  for (int k = 0; k < kPer; ++k) {
    const T* q = p + k * kThreads * kV;
    if ((whole >> k) & 1u) v[k] = kKeep ? load_keep<T, kV>(q) : load_stream<T, kV>(q);
    else
#pragma unroll
      for (int j = 0; j < kV; ++j) v[k].v[j] = from_f32<T>(0.f);
  }
}

// The N elements of `v` as f32. bf16 widens by bit position (a bf16 is the high half of an
// f32): a shift or a mask per element on the packed 32-bit words, which lets ptxas keep a bf16
// slice packed until each element is used (per-element cvt made it hold unpacked copies and
// spill at 80 registers).
template <class T, int N>
__device__ __forceinline__ void widen(const Vec<T, N>& v, float (&f)[N]) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    const uint32_t* p = reinterpret_cast<const uint32_t*>(&v);
#pragma unroll
    for (int i = 0; i < N / 2; ++i) {
      f[2 * i] = __uint_as_float(p[i] << 16);
      f[2 * i + 1] = __uint_as_float(p[i] & 0xFFFF0000u);
    }
  } else {
#pragma unroll
    for (int j = 0; j < N; ++j) f[j] = to_f32(v.v[j]);
  }
}

// widen() through different instructions (PRMT byte permutes instead of SHF/LOP3) for a second
// pass over a bf16 slice. NOTE: opaque() is an empty asm, so ptxas (after NVVM) still sees the
// same registers and shares the second pass's widening with the first, keeping the slice live
// as f32 across a reduction; different instructions cannot be shared, so the first pass's f32
// copies die after it (a sweep of row kernels, 2026-11-29: what kept the smem-dg backward in 64 registers).
template <class T, int N>
__device__ __forceinline__ void widen_alt(const Vec<T, N>& v, float (&f)[N]) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    const uint32_t* p = reinterpret_cast<const uint32_t*>(&v);
#pragma unroll
    for (int i = 0; i < N / 2; ++i) {
      f[2 * i] = __uint_as_float(__byte_perm(p[i], 0u, 0x1044));
      f[2 * i + 1] = __uint_as_float(__byte_perm(p[i], 0u, 0x3244));
    }
  } else {
#pragma unroll
    for (int j = 0; j < N; ++j) f[j] = to_f32(v.v[j]);
  }
}

// Makes `v`'s bits opaque to the compiler (an empty asm that "may change" them), so it cannot
// hoist or share an f32 conversion of a slice across a loop or a reduction: converted, the
// slice would take twice the registers (bf16: 32 instead of 16 at kPer 4), costing a block per
// SM. Converting again is one shift or mask per element, far below the issue rate a
// memory-bound row needs.
template <class T, int N>
__device__ __forceinline__ void opaque(Vec<T, N>& v) {
  uint4& u = *reinterpret_cast<uint4*>(&v);
  asm volatile("" : "+r"(u.x), "+r"(u.y), "+r"(u.z), "+r"(u.w));
}

// ---- row-wise reductions ------------------------------------------------------------------------

// Sum of row[0, n) over the `lane`-th of `nlanes` cooperating threads (this thread's share
// only; the caller reduces across lanes), any row start (RowSplit). kUnroll 16-byte loads are
// issued before any is used.
template <int kUnroll, bool kStream, class T>
__device__ __forceinline__ float row_partial_sum(const T* __restrict__ row, int64_t n, int lane, int nlanes) {
  constexpr int kV = kVec16<T>;
  using V = Vec<T, kV>;
  const RowSplit s = row_split(row, n);
  float acc = 0.f;
  if (lane < s.edges()) acc = to_f32(row[s.edge<kV>(lane)]);
  const T* body = row + s.head;
  int64_t i = lane;
  for (; i + int64_t(kUnroll - 1) * nlanes < s.nvec; i += int64_t(kUnroll) * nlanes) {
    V v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) v[u] = load_vec16<kStream>(body + (i + int64_t(u) * nlanes) * kV);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      float part = 0.f;  // pairwise within the vector: shorter dependency chains than acc += ...
#pragma unroll
      for (int k = 0; k < kV; ++k) part += to_f32(v[u].v[k]);
      acc += part;
    }
  }
  for (; i < s.nvec; i += nlanes) {
    V v = load_vec16<kStream>(body + i * kV);
#pragma unroll
    for (int k = 0; k < kV; ++k) acc += to_f32(v.v[k]);
  }
  return acc;
}

// y[r] = the sum of row r for every row, a warp per row, the warps of kThreads-thread blocks
// striding over the grid: short rows (a few vectors per lane), any row start.
template <int kThreads, int kUnroll, class T>
__device__ __forceinline__ void warp_row_sums(const T* __restrict__ x, T* __restrict__ y, int64_t rows, int64_t cols,
                                              int64_t ldx) {
  constexpr int kWarps = kThreads / 32;
  const int lane = threadIdx.x & 31;
  for (int64_t r = int64_t(blockIdx.x) * kWarps + threadIdx.x / 32; r < rows; r += int64_t(gridDim.x) * kWarps) {
    float acc = warp_reduce(row_partial_sum<kUnroll, true>(x + r * ldx, cols, lane, 32), SumOp{});
    if (lane == 0) y[r] = from_f32<T>(acc);
  }
}

// Sum over a row group of kGroup threads: a warp (32) or the whole block (kGroup == kThreads).
// Every thread of the group receives the result. The block form must be reached by every
// thread of the block (the callers' row loops are block-uniform when kGroup == kThreads).
template <int kGroup, int kThreads>
__device__ __forceinline__ float group_sum(float v) {
  static_assert(kGroup == 32 || kGroup == kThreads, "a row group is a warp or the whole block");
  if constexpr (kGroup == 32) return warp_reduce(v, SumOp{});
  else return block_reduce<kThreads>(v, SumOp{});
}

// Reduction over a block of any multiple of 32 threads (blockDim chosen at launch); every
// thread receives the result. Safe to call repeatedly: the leading barrier keeps a fast warp
// from overwriting partials a slow warp is still reading from the previous call.
template <class Op>
__device__ __forceinline__ float block_reduce_any(float v, Op op) {
  __shared__ float warp_part[32];
  v = warp_reduce(v, op);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nwarps = blockDim.x >> 5;
  __syncthreads();
  if (lane == 0) warp_part[warp] = v;
  __syncthreads();
  v = lane < nwarps ? warp_part[lane] : Op::kIdentity;
  return warp_reduce(v, op);
}

// Block-wide reduction through one barrier; every thread receives the result. `slot` is
// [kThreads / 32] shared floats that no thread may write again before the block's next barrier:
// callers alternate two slots by row parity, so a fast warp's next-row partials never overwrite
// ones a slow warp is still reading (v02-style reductions pay a second barrier for that).
template <int kThreads, class Op>
__device__ __forceinline__ float block_reduce_slot(float v, Op op, float* slot) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  v = warp_reduce(v, op);
  if (lane == 0) slot[warp] = v;
  __syncthreads();
  return warp_reduce(lane < kThreads / 32 ? slot[lane] : Op::kIdentity, op);
}

// Sum over a row group of kGroup threads (a multiple of 32) of a block of kGroups such groups
// (group g: threads g * kGroup ...), through one barrier: __syncthreads() for one group, else
// named barrier g + 1 of kGroup threads, so groups walk their rows independently. Every thread
// of the group receives the result. `slot` is this group's [kGroup / 32] floats, alternated by
// the caller between two per row parity as in block_reduce_slot.
template <int kGroup, int kGroups>
__device__ __forceinline__ float group_reduce_slot(float v, float* slot) {
  static_assert(kGroup % 32 == 0 && kGroups >= 1 && kGroups <= 15, "warp-multiple groups; barriers 1..15");
  const int warp = (threadIdx.x % kGroup) / 32, lane = threadIdx.x % 32;
  v = warp_reduce(v, SumOp{});
  if (lane == 0) slot[warp] = v;
  if constexpr (kGroups == 1) __syncthreads();
  else ptx::named_barrier_sync(int(threadIdx.x / kGroup) + 1, kGroup);
  return warp_reduce(lane < kGroup / 32 ? slot[lane] : 0.f, SumOp{});
}

// Column sums `acc` of elements [col, col + kV) taken over row group q of R: stored as the
// result when one group covers every row (R == 1), else as group q's f32 partial (part is
// [R, dim]) for sum_partials.
template <class T, int kV>
__device__ __forceinline__ void store_column_sums(const float (&acc)[kV], int64_t col, int64_t dim, int64_t q,
                                                  int64_t R, T* __restrict__ out, float* __restrict__ part) {
#pragma unroll
  for (int k = 0; k < kV; ++k)
    if (col + k < dim) {
      if (R == 1) out[col + k] = from_f32<T>(acc[k]);
      else part[q * dim + col + k] = acc[k];
    }
}

// out[d] = sum_p part[p * dim + d] in a fixed order (deterministic), in f32, stored as T.
// The second, tiny kernel of the partial-buffer schemes: it reads nparts * dim floats.
// A block is 32 columns x G part groups (blockDim (32, G)): group g sums parts g, g + G, ...
// of its column, then the G group sums are added in group order. NOTE: one thread per column
// summing all nparts (the previous form) is a chain of nparts L2 round trips (~4 in flight by
// unrolling) when the columns are few: 4 outputs x ~400 parts (weighted_sum v02 forward at
// 4 x 2^26) or 8192 x 132 (rmsnorm v03 backward) — an estimated 5-20 us next to kernels of
// 150-200 us; G groups cut the chain G-fold (not yet measured).
template <class T>
__global__ void __launch_bounds__(1024) rowwise_sum_partials_kernel(const float* __restrict__ part, int64_t nparts,
                                                                    int64_t dim, T* __restrict__ out) {
  __shared__ float sums[32][33];  // (G <= 32 groups, 32 columns), padded against bank conflicts
  for (int64_t d0 = int64_t(blockIdx.x) * 32; d0 < dim; d0 += int64_t(gridDim.x) * 32) {
    const int64_t d = d0 + threadIdx.x;
    float acc = 0.f;
    if (d < dim)
      for (int64_t p = threadIdx.y; p < nparts; p += blockDim.y) acc += part[p * dim + d];
    sums[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y == 0 && d < dim) {
      float total = 0.f;
      for (unsigned g = 0; g < blockDim.y; ++g) total += sums[g][threadIdx.x];
      out[d] = from_f32<T>(total);
    }
    __syncthreads();  // `sums` is rewritten by the next column block
  }
}

template <class T>
void sum_partials(const float* part, int64_t nparts, int64_t dim, T* out, cudaStream_t stream) {
  // Fewer column blocks than SMs: 32 groups (1024 threads) per block, the GPU cannot be filled
  // by blocks; otherwise 8 groups.
  const unsigned groups = ceil_div(dim, 32) < device_info().sm_count ? 32 : 8;
  const int blocks = static_cast<int>(std::min<int64_t>(ceil_div(dim, 32), int64_t(1) << 20));
  rowwise_sum_partials_kernel<T><<<blocks, dim3(32, groups), 0, stream>>>(part, nparts, dim, out);
  HK_CHECK_LAUNCH("rowwise_sum_partials_kernel");
}

}  // namespace hk
