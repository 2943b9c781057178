// common/rowwise.cuh — device pieces shared by the row-wise families (rmsnorm, weighted_sum,
// row_scale_relu): guarded 16-byte row access, a sum over a "row group" (a warp or the whole
// block), and the column sum of per-block f32 partials that finishes a cross-row reduction.
//
// Row operands are [rows, D] with a leading stride `ld` (elements) and a contiguous last dim.
// The vectorized rungs need every row start 16-byte aligned (base and ld * sizeof(T) % 16 == 0);
// a row's last vector may then be partial (D % kVec16 != 0) and is read element by element.
#pragma once

#include <cstdint>

#include "common/launch.cuh"
#include "common/reduce.cuh"
#include "common/vec.cuh"

namespace hk {

// 16-byte load through the read-only cache with the default (keep) policy: for operands every
// row reuses (g, w), unlike load_stream's evict-first hint for data touched once.
template <class T, int N>
__device__ __forceinline__ Vec<T, N> load_keep(const T* p) {
  static_assert(sizeof(T) * N == 16, "load_keep moves exactly 16 bytes");
  uint4 raw = __ldg(reinterpret_cast<const uint4*>(p));
  return *reinterpret_cast<Vec<T, N>*>(&raw);
}

// load_keep of an operand read at its own 16-byte phase (kAny false) or at another operand's
// (kAny true: load_vec_any with the keep policy).
template <bool kAny, class T, int N>
__device__ __forceinline__ Vec<T, N> load_keep_at(const T* p) {
  if constexpr (kAny) return load_vec_any<T, N, true>(p);
  else return load_keep<T, N>(p);
}

// load_keep as a volatile asm: it stays in program order with the opaque() asms of
// row_slice.cuh, so ptxas cannot hoist every per-column load of an unrolled row loop to the top
// (4 registers per vector held until use).
template <class T, int N>
__device__ __forceinline__ Vec<T, N> load_keep_ordered(const T* p) {
  static_assert(sizeof(T) * N == 16, "load_keep_ordered moves exactly 16 bytes");
  uint4 r;
  asm volatile("ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p));
  return *reinterpret_cast<Vec<T, N>*>(&r);
}

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

// Sum over a row group of kGroup threads: a warp (32) or the whole block (kGroup == kThreads).
// Every thread of the group receives the result. The block form must be reached by every
// thread of the block (the callers' row loops are block-uniform when kGroup == kThreads).
template <int kGroup, int kThreads>
__device__ __forceinline__ float group_sum(float v) {
  static_assert(kGroup == 32 || kGroup == kThreads, "a row group is a warp or the whole block");
  if constexpr (kGroup == 32) return warp_reduce(v, SumOp{});
  else return block_reduce<kThreads>(v, SumOp{});
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

// A stream-ordered scratch buffer (cudaMallocAsync / cudaFreeAsync on the op's stream): the
// partial buffers live only for one op and the pool recycles them between calls.
class StreamScratch {
 public:
  StreamScratch(int64_t bytes, cudaStream_t stream) : stream_(stream) {
    if (bytes > 0) HK_CHECK_CUDA(cudaMallocAsync(&ptr_, static_cast<size_t>(bytes), stream));
  }
  ~StreamScratch() {
    if (ptr_) (void)cudaFreeAsync(ptr_, stream_);
  }
  StreamScratch(const StreamScratch&) = delete;
  StreamScratch& operator=(const StreamScratch&) = delete;
  template <class U>
  U* as() const { return static_cast<U*>(ptr_); }

 private:
  void* ptr_ = nullptr;
  cudaStream_t stream_;
};

}  // namespace hk
