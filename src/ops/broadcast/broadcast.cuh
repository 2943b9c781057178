// broadcast/broadcast.cuh — device bodies shared by the broadcast rungs. Each rung file wraps
// them in its own greppable __global__ (outer_add_v02_kernel, ...); the bodies are templated on
// the kind so outer_add, outer_mul_relu and row_scale_relu share one tested loop per rung.
#pragma once

#include <cstdint>

#include "broadcast/broadcast_op.hpp"
#include "common/rows.cuh"
#include "common/tickets.cuh"
#include "common/vec.cuh"

namespace hk::bcast {

constexpr int kThreads = 256;
constexpr int kUnroll = 4;  // 16-byte vectors in flight per thread

// relu that keeps NaN, as torch.relu does (fmaxf(NaN, 0) would return 0).
__device__ __forceinline__ float relu_nan(float v) { return v > 0.f || v != v ? v : 0.f; }

// z element from a (x[i] for the outer ops, x[j,i] for row_scale_relu) and b = y[j].
template <BroadcastKind K>
__device__ __forceinline__ float combine(float a, float b) {
  if constexpr (K == BroadcastKind::kOuterAdd) return a + b;
  else return relu_nan(b * a);
}

// row_scale_relu's backward for one pair of 16-byte vectors of x and dz: returns dx =
// 1(x y > 0) y dz and adds this pair's share of dy[j] = sum 1(x y > 0) x dz to acc (zero-filled
// tail lanes are off).
template <class T, int kV>
__device__ __forceinline__ Vec<T, kV> relu_scale_grad(const Vec<T, kV>& xv, const Vec<T, kV>& gv, float yv,
                                                      float& acc) {
  Vec<T, kV> o;
#pragma unroll
  for (int k = 0; k < kV; ++k) {
    const float xf = to_f32(xv.v[k]), gf = to_f32(gv.v[k]);
    const bool on = xf * yv > 0.f;
    o.v[k] = from_f32<T>(on ? yv * gf : 0.f);
    acc += on ? xf * gf : 0.f;
  }
  return o;
}

// One thread per element of z [n1, n0]; 64-bit flat index split into (j, i).
template <class T, BroadcastKind K>
__device__ __forceinline__ void naive_rows(const T* x, const T* y, T* z, int64_t n1, int64_t n0, int64_t ldx,
                                           int64_t ldz) {
  const int64_t n = n1 * n0;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < n; e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t j = e / n0, i = e - j * n0;
    const T a = K == BroadcastKind::kRowScaleRelu ? x[j * ldx + i] : x[i];
    z[j * ldz + i] = from_f32<T>(combine<K>(to_f32(a), to_f32(y[j])));
  }
}

// Item: vectors [s * kChunk, (s + 1) * kChunk) (kChunk = kThr x kUnr) of one row (row_scale_relu:
// item (j, s), row-major) or of up to kOuterRows rows (the outer ops: item (s, row group),
// chunk-major), kUnr 16-byte vectors per thread all loaded before the first store.
// The outer ops load x's chunk once into registers and write it to every row of the group, so
// HBM and L2 see x once per kOuterRows rows. NOTE: one row per item with x shared through L2
// (chunk-major items, the previous form) measured 79% of copy at 4 x 2^26 on the H200 (row-major,
// before that: 58%, x re-read from HBM per row); 16384 x 8192 was 95.5%.
// A chunk wholly inside the row (every item at D % (kChunk * kV) == 0, e.g. 8192) takes the
// unguarded path: kUnr loads at fixed offsets from one pointer. The row's last, partial chunk
// takes a one-vector-at-a-time loop. NOTE: with the guarded element fallback inside the
// unrolled loop (the previous form) ptxas held the fallback's scalars for every u: 64 registers
// at bf16, 4 blocks per SM; the split form needs far fewer, so more blocks keep loads in flight.
constexpr int kOuterRows = 4;
// The outer ops hold two items' chunks of x (for_each_item_prefetched); without a bound ptxas
// gives the 16-bit kernels ~114 registers (2 blocks per SM). These keep the occupancy of the
// unprefetched loop (3 blocks at 16 bits, 4 at f32) with no spills.
template <class T>
constexpr int kOuterMinBlocks = sizeof(T) == 4 ? 4 : 3;
template <BroadcastKind K>
constexpr int64_t rows_per_item = K == BroadcastKind::kRowScaleRelu ? 1 : kOuterRows;

// tickets: a resident grid's dynamic item counter (common/tickets.cuh), or nullptr to stride.
template <class T, BroadcastKind K, int kThr = kThreads, int kUnr = kUnroll>
__device__ __forceinline__ void vector_rows(const T* __restrict__ x, const T* __restrict__ y, T* __restrict__ z,
                                            int64_t n1, int64_t n0, int64_t ldx, int64_t ldz,
                                            unsigned long long* tickets = nullptr) {
  constexpr int kV = kVec16<T>;
  constexpr int64_t kChunk = int64_t(kThr) * kUnr;
  constexpr bool kRow = K == BroadcastKind::kRowScaleRelu;
  constexpr int64_t kG = rows_per_item<K>;
  using V = Vec<T, kV>;
  const int64_t nvec = (n0 + kV - 1) / kV;
  const int64_t S = (nvec + kChunk - 1) / kChunk;
  const int64_t groups = (n1 + kG - 1) / kG;
  // An item's registers: its chunk of x (a whole chunk only) and its rows' y values.
  struct Loaded {
    V av[kUnr];
    float b[kG];
  };
  auto coords = [&](int64_t item, int64_t& q, int64_t& s) {
    q = kRow ? item / S : item % groups;
    s = kRow ? item - q * S : item / groups;
  };
  auto whole = [&](int64_t s) { return (s + 1) * kChunk * kV <= n0; };
  // The group's y values are loaded with x's vectors, not at each row's first use (a round trip
  // before the row's stores).
  auto load = [&](int64_t item) {
    int64_t q, s;
    coords(item, q, s);
    const int64_t j0 = q * kG;
    Loaded l{};
#pragma unroll
    for (int i = 0; i < kG; ++i) l.b[i] = j0 + i < n1 ? to_f32(y[j0 + i]) : 0.f;
    if (whole(s)) {
      const T* xr = kRow ? x + j0 * ldx : x;
      const int64_t v0 = s * kChunk + threadIdx.x;
#pragma unroll
      for (int u = 0; u < kUnr; ++u) {
        const T* p = xr + (v0 + u * kThr) * kV;
        l.av[u] = kRow ? load_stream<T, kV>(p) : load_keep<T, kV>(p);
      }
    }
    return l;
  };
  auto store = [&](int64_t item, const Loaded& l) {
    int64_t q, s;
    coords(item, q, s);
    const int64_t j0 = q * kG;
    if (whole(s)) {
      const int64_t v0 = s * kChunk + threadIdx.x;
#pragma unroll
      for (int i = 0; i < kG; ++i) {
        if (j0 + i >= n1) break;
        T* zr = z + (j0 + i) * ldz;
#pragma unroll
        for (int u = 0; u < kUnr; ++u) {
          V o;
#pragma unroll
          for (int k = 0; k < kV; ++k) o.v[k] = from_f32<T>(combine<K>(to_f32(l.av[u].v[k]), l.b[i]));
          store_stream<T, kV>(zr + (v0 + u * kThr) * kV, o);
        }
      }
    } else {
      const T* xr = kRow ? x + j0 * ldx : x;
      const int64_t end = min(nvec, (s + 1) * kChunk);
      for (int64_t v = s * kChunk + threadIdx.x; v < end; v += kThr) {
        const V a = kRow ? load_row_vec<T, kV>(xr, v * kV, n0) : load_row_vec<T, kV, true>(xr, v * kV, n0);
#pragma unroll
        for (int i = 0; i < kG; ++i) {
          if (j0 + i >= n1) break;
          V o;
#pragma unroll
          for (int k = 0; k < kV; ++k) o.v[k] = from_f32<T>(combine<K>(to_f32(a.v[k]), l.b[i]));
          store_row_vec<T, kV>(z + (j0 + i) * ldz, v * kV, n0, o);
        }
      }
    }
  };
  // The outer ops read x's next chunk while writing this one's rows (4 row writes per read);
  // row_scale_relu reads as many bytes as it writes, so its loads already overlap its peers'.
  if constexpr (kRow) for_each_item(groups * S, tickets, [&](int64_t item) { store(item, load(item)); });
  else for_each_item_prefetched(groups * S, tickets, load, store);
}

// The outer ops over a contiguous z whose rows are whole 16-byte vectors (ld_z = n0, n0 a
// multiple of the vector, 16-byte aligned operands): z as one flat array of vectors, one
// short-lived block per kFlatThreads x kFlatUnroll of them (vector u x kFlatThreads +
// threadIdx.x of the block's range), each vector's row by one 64-bit division, x's vector through
// the read-only cache (one row of x: L1/L2-resident) and y[j]. A standalone sweep of this loop
// shape (H200, 2026-12-03, 16384x8192, one process, default cache policy): 256 x 4 one-shot
// 4.47 TB/s f32 against 4.38 for a resident 256 x 4 grid-stride loop (4.32 with evict-first
// stores); bf16 2.93 against 2.76-2.86. vector_rows' items were not in that sweep: from Python
// they ran 3.88 TB/s f32 where torch.compile's flat kernel ran 4.53 (bench-torch-quick.json).
constexpr int kFlatThreads = 256;
constexpr int kFlatUnroll = 4;

template <class T, BroadcastKind K>
__device__ __forceinline__ void flat_outer(const T* __restrict__ x, const T* __restrict__ y, T* __restrict__ z,
                                           int64_t n1, int64_t n0) {
  constexpr int kV = kVec16<T>;
  using V = Vec<T, kV>;
  const int64_t row_vecs = n0 / kV, nvec = n1 * row_vecs;
  const int64_t base = int64_t(blockIdx.x) * kFlatThreads * kFlatUnroll + threadIdx.x;
#pragma unroll
  for (int u = 0; u < kFlatUnroll; ++u) {
    const int64_t i = base + u * kFlatThreads;
    if (i >= nvec) break;
    const int64_t j = i / row_vecs, c = i - j * row_vecs;
    const V a = load_keep<T, kV>(x + c * kV);
    const float b = to_f32(y[j]);
    V o;
#pragma unroll
    for (int k = 0; k < kV; ++k) o.v[k] = from_f32<T>(combine<K>(to_f32(a.v[k]), b));
    store_stream<T, kV>(z + i * kV, o);
  }
}

// flat_outer reads x once per row of z: from L2 while x fits there, from HBM when it does not
// (4 x 2^26 bf16: x is 128 MiB, and z's 4 rows read it 4 times, 1.6x the minimum traffic).
// Above this size, the chunk-major items (vector_rows: x's chunk once into registers, written to
// 4 rows) keep the traffic at its minimum. A quarter of the H200's 60 MiB L2 (50 MiB on an
// H100), so z's streaming stores do not evict it.
constexpr int64_t kFlatOuterMaxXBytes = int64_t(8) << 20;

// Whether flat_outer can run problem `a` (aligned rows checked by rows_aligned), and should: a
// single row, or a row of x that stays in L2.
template <class T>
bool flat_outer_fits(const BroadcastArgs& a) {
  const bool x_cached = a.n1 <= 1 || a.n0 * int64_t(sizeof(T)) <= kFlatOuterMaxXBytes;
  return a.n0 % kVec16<T> == 0 && (a.n1 <= 1 || a.ld_z == a.n0) && a.n0 > 0 && x_cached;
}

// Launches a flat_outer kernel(x, y, z, n1, n0): one block per kFlatThreads x kFlatUnroll vectors.
template <class T, class Kernel>
void launch_flat_outer(Kernel kernel, const BroadcastArgs& a, cudaStream_t s, const char* name) {
  const int64_t nvec = a.n1 * (a.n0 / kVec16<T>);
  const int64_t blocks = std::max<int64_t>(1, (nvec + kFlatThreads * kFlatUnroll - 1) / (kFlatThreads * kFlatUnroll));
  if (blocks > 0x7FFFFFFF) HK_THROW(kNotSupported, name, ": ", nvec, " vectors need more than 2^31 - 1 blocks");
  kernel<<<static_cast<unsigned>(blocks), kFlatThreads, 0, s>>>(static_cast<const T*>(a.x), static_cast<const T*>(a.y),
                                                               static_cast<T*>(a.z), a.n1, a.n0);
  HK_CHECK_LAUNCH(name);
}

// Chunks of kChunk 16-byte vectors per row in peeled_rows: from the most whole vectors a row of
// n0 elements can hold at any phase (n0 / vec), at least one (the row's edges).
inline __host__ __device__ int64_t peeled_chunks(int64_t n0, int vec, int64_t chunk) {
  const int64_t c = (n0 / vec + chunk - 1) / chunk;
  return c > 0 ? c : 1;
}

// The rows of z [n1, n0] at any alignment: the vectorized rungs' path for operands or row
// strides that are not 16-byte aligned (launch_rows picks it at launch; aligned operands keep
// vector_rows). Item (j, s) = chunk s (kThr x kUnr 16-byte vectors) of row j's body; a row of z
// is peeled at its own phase: its scalar head up to the first 16-byte boundary and its scalar
// tail (at most 2 (kV - 1) elements) go to the first threads of the row's chunk-0 item, the body
// to 16-byte stores. x's row (x itself for the outer ops) is read at z's row phase: 16-byte loads
// where it shares that phase, else load_vec_any (8-, 4- or 2-byte loads), a choice per item.
// Costs against vector_rows: the outer ops read x once per row (through L2, keep policy) instead
// of once per 4 rows, and an x at another phase takes 2-8 loads per vector.
// peeled_rows' launch shape: one-shot 128-thread blocks, 8 vectors in flight per thread (the
// row_scale_relu v03 design: an SM refills as each block retires).
constexpr int kPeelThreads = 128;
constexpr int kPeelUnroll = 8;

template <class T, BroadcastKind K, int kThr = kPeelThreads, int kUnr = kPeelUnroll>
__device__ __forceinline__ void peeled_rows(const T* __restrict__ x, const T* __restrict__ y, T* __restrict__ z,
                                            int64_t n1, int64_t n0, int64_t ldx, int64_t ldz) {
  constexpr int kV = kVec16<T>;
  constexpr int64_t kChunk = int64_t(kThr) * kUnr;
  constexpr bool kRow = K == BroadcastKind::kRowScaleRelu;
  using V = Vec<T, kV>;
  const int64_t S = peeled_chunks(n0, kV, kChunk);
  for (int64_t item = blockIdx.x; item < n1 * S; item += gridDim.x) {
    const int64_t j = item / S, s = item - j * S;
    T* zr = z + j * ldz;
    const T* xr = kRow ? x + j * ldx : x;
    const float b = to_f32(y[j]);
    const int64_t head = head_to_16(zr, n0), nvec = (n0 - head) / kV, tail = n0 - head - nvec * kV;
    if (s == 0 && threadIdx.x < head + tail) {
      const int64_t e = threadIdx.x < head ? threadIdx.x : nvec * kV + threadIdx.x;
      zr[e] = from_f32<T>(combine<K>(to_f32(xr[e]), b));
    }
    const T* xb = xr + head;
    T* zb = zr + head;
    const int64_t v0 = s * kChunk + threadIdx.x;
    V av[kUnr];
    if (aligned16(xb)) {
#pragma unroll
      for (int u = 0; u < kUnr; ++u) {
        const int64_t v = v0 + u * kThr;
        if (v < nvec) av[u] = kRow ? load_stream<T, kV>(xb + v * kV) : load_keep<T, kV>(xb + v * kV);
      }
    } else {
#pragma unroll
      for (int u = 0; u < kUnr; ++u) {
        const int64_t v = v0 + u * kThr;
        if (v < nvec) av[u] = load_vec_any<T, kV>(xb + v * kV);
      }
    }
#pragma unroll
    for (int u = 0; u < kUnr; ++u) {
      const int64_t v = v0 + u * kThr;
      if (v >= nvec) continue;
      V o;
#pragma unroll
      for (int k = 0; k < kV; ++k) o.v[k] = from_f32<T>(combine<K>(to_f32(av[u].v[k]), b));
      store_stream<T, kV>(zb + v * kV, o);
    }
  }
}

// Whether every row of the [n1, n0] operands starts 16-byte aligned (bases and row strides):
// the vectorized bodies' requirement. y and dy are read and written one element per row.
template <class T>
bool rows_aligned(const BroadcastArgs& a, bool row_op) {
  auto ld_ok = [&](int64_t ld) { return a.n1 <= 1 || (ld * int64_t(sizeof(T))) % 16 == 0; };
  bool ok = aligned16(static_cast<const T*>(a.x)) && aligned16(static_cast<const T*>(a.z)) && ld_ok(a.ld_z);
  if (row_op) ok = ok && ld_ok(a.ld_x);
  if (row_op && a.backward) ok = ok && aligned16(static_cast<const T*>(a.dz)) && ld_ok(a.ld_dz);
  return ok;
}

// Launches a peeled_rows kernel(x, y, z, n1, n0, ldx, ldz): one block per item up to the grid
// limit (the body's loop strides past it).
template <class T, class Kernel>
void launch_peeled_rows(Kernel kernel, int threads, int64_t chunk, const BroadcastArgs& a, int64_t ldx,
                        cudaStream_t s, const char* name) {
  const int64_t items = a.n1 * peeled_chunks(a.n0, kVec16<T>, chunk);
  const int grid = static_cast<int>(std::min<int64_t>(items, 0x7FFFFFFF));
  kernel<<<grid, threads, 0, s>>>(static_cast<const T*>(a.x), static_cast<const T*>(a.y), static_cast<T*>(a.z),
                                  a.n1, a.n0, ldx, a.ld_z);
  HK_CHECK_LAUNCH(name);
}

// Items of vector_rows over z [n1, n0] with vec-element vectors.
template <BroadcastKind K>
inline int64_t vector_rows_items(int64_t n1, int64_t n0, int vec) {
  const int64_t nvec = (n0 + vec - 1) / vec, chunk = int64_t(kThreads) * kUnroll;
  return (n1 + rows_per_item<K> - 1) / rows_per_item<K> * ((nvec + chunk - 1) / chunk);
}

// Launches kernel(x, y, z, n1, n0, ldx, ldz, tickets), a vector_rows kernel, from a resident
// grid: one block per item up to `resident` (resident_grid of the kernel), the rest claimed
// from item_tickets. A resident grid, not one short-lived block per item: 16384 one-shot blocks
// each with 16 KiB in flight only between their start and their stores kept an SM well under
// the bytes in flight that the copy rate needs (81.6-88% of copy).
template <BroadcastKind K, class T, class Kernel>
void launch_vector_rows(Kernel kernel, int resident, const BroadcastArgs& a, int64_t ldx, cudaStream_t s,
                        const char* name) {
  const int64_t items = vector_rows_items<K>(a.n1, a.n0, kVec16<T>);
  const int grid = static_cast<int>(std::min<int64_t>(items, resident));
  kernel<<<grid, kThreads, 0, s>>>(static_cast<const T*>(a.x), static_cast<const T*>(a.y), static_cast<T*>(a.z),
                                   a.n1, a.n0, ldx, a.ld_z, item_tickets(items, grid, s));
  HK_CHECK_LAUNCH(name);
}

inline int naive_grid(int64_t n) {
  return static_cast<int>(std::min<int64_t>((n + kThreads - 1) / kThreads, int64_t(1) << 30));
}

// Ladder rungs without a peeled path need 16-byte aligned row starts.
inline std::string vector_supports(const BroadcastProblem& p) {
  if (p.row_align() < 16)
    return "needs 16-byte aligned operands (and row strides) for 16-byte access, got " +
           std::to_string(p.row_align()) + "-byte alignment";
  return "";
}

}  // namespace hk::bcast
