// common/ptx/tma.cuh — the Tensor Memory Accelerator: host-side tensor maps, device-side bulk
// tensor copies (global -> shared with mbarrier completion, optionally multicast to a cluster;
// shared -> global through bulk groups), and plain bulk copies of a contiguous byte range.
//
// TMA's rules, checked by the callers' supports(): global base 16-byte aligned; every stride
// but the innermost a multiple of 16 bytes (below 2^40); box extents at most 256; with
// SWIZZLE_128B the box's inner extent at most 128 bytes. Out-of-bounds elements of a box are
// zero-filled on loads and dropped on stores, and a load always completes the full box's bytes.
#pragma once

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <cudaTypedefs.h>

#include <cuda/ptx>

#include <cstdint>

#include "hk/error.hpp"

namespace hk::ptx {

// --- host -----------------------------------------------------------------------------------

// cuTensorMapEncodeTiled from the driver the runtime already loaded (no -lcuda link).
inline PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
  static PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult status{};
    HK_CHECK_CUDA(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &status));
    if (status != cudaDriverEntryPointSuccess || !p)
      HK_THROW(kCuda, "tma: the driver has no cuTensorMapEncodeTiled (status ", int(status), ")");
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(p);
  }();
  return fn;
}

// cuTensorMapEncodeTiled with the device's primary context current. The driver call needs a
// current context, and a thread whose first CUDA call this is has none: torch's autograd
// threads run a hopperkit backward as their first work, and the runtime makes the primary
// context current only on its own first call that needs one. On CUDA_ERROR_INVALID_CONTEXT the
// runtime binds it (cudaSetDevice initialises the primary context since CUDA 12) and the
// encoding is retried once.
template <class... Args>
CUresult encode_tiled(Args... args) {
  CUresult r = tensor_map_encoder()(args...);
  if (r == CUDA_ERROR_INVALID_CONTEXT) {
    int dev = 0;
    HK_CHECK_CUDA(cudaGetDevice(&dev));
    HK_CHECK_CUDA(cudaSetDevice(dev));
    r = tensor_map_encoder()(args...);
  }
  return r;
}

// A rank-3 tiled map: dims[0] is the contiguous extent; strides_bytes[i] steps dims[i + 1].
inline CUtensorMap make_tensor_map_3d(const void* base, CUtensorMapDataType type, const uint64_t dims[3],
                                      const uint64_t strides_bytes[2], const uint32_t box[3],
                                      CUtensorMapSwizzle swizzle) {
  CUtensorMap map{};
  const cuuint32_t unit_strides[3] = {1, 1, 1};
  CUresult r = encode_tiled(&map, type, 3u, const_cast<void*>(base), dims, strides_bytes, box, unit_strides,
                            CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                            CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    HK_THROW(kCuda, "tma: cuTensorMapEncodeTiled failed (CUresult ", int(r), ") for dims [", dims[0], ", ", dims[1],
             ", ", dims[2], "], strides [", strides_bytes[0], ", ", strides_bytes[1], "] bytes, box [", box[0], ", ",
             box[1], ", ", box[2], "]");
  return map;
}

// --- device ---------------------------------------------------------------------------------

__device__ __forceinline__ void prefetch_tensor_map(const CUtensorMap* map) {
  asm volatile("prefetch.tensormap [%0];" : : "l"(map) : "memory");
}

// Box at (c0, c1, c2) -> dst in this CTA; completes `bar` (bytes counted as transactions).
__device__ __forceinline__ void tma_load_3d(void* dst, const CUtensorMap* map, int32_t c0, int32_t c1, int32_t c2,
                                            uint64_t* bar) {
  const int32_t coords[3] = {c0, c1, c2};
  cuda::ptx::cp_async_bulk_tensor(cuda::ptx::space_cluster, cuda::ptx::space_global, dst, map, coords, bar);
}

// Box at (c0, c1, c2) -> dst at the same shared-memory offset in every CTA of `cta_mask`; each
// destination CTA's barrier at `bar`'s offset receives the bytes it got.
__device__ __forceinline__ void tma_load_3d_multicast(void* dst, const CUtensorMap* map, int32_t c0, int32_t c1,
                                                      int32_t c2, uint64_t* bar, uint16_t cta_mask) {
  const int32_t coords[3] = {c0, c1, c2};
  cuda::ptx::cp_async_bulk_tensor(cuda::ptx::space_cluster, cuda::ptx::space_global, dst, map, coords, bar, cta_mask);
}

// src (this CTA's shared memory) -> box at (c0, c1, c2); joins the thread's open bulk group.
__device__ __forceinline__ void tma_store_3d(const CUtensorMap* map, const void* src, int32_t c0, int32_t c1,
                                             int32_t c2) {
  const int32_t coords[3] = {c0, c1, c2};
  cuda::ptx::cp_async_bulk_tensor(cuda::ptx::space_global, cuda::ptx::space_shared, map, coords, src);
}

// `bytes` from global `src` to this CTA's shared `dst` as one bulk copy (no tensor map):
// both addresses 16-byte aligned, bytes a multiple of 16; completes `bar` with `bytes`
// transactions (the caller's expect_tx announces them; a phase counts at most 2^20 - 1).
__device__ __forceinline__ void bulk_load(void* dst, const void* src, uint32_t bytes, uint64_t* bar) {
  cuda::ptx::cp_async_bulk(cuda::ptx::space_cluster, cuda::ptx::space_global, dst, src, bytes, bar);
}

// Adds `bytes` of f32 from this CTA's shared `src` into global `dst` element-wise (one bulk
// reduction, atomic per element; no tensor map): both 16-byte aligned, bytes a multiple of 16.
// Completes with the thread's next bulk group (bulk_commit_group, then bulk_wait_group_*).
__device__ __forceinline__ void bulk_reduce_add_f32(float* dst, const float* src, uint32_t bytes) {
  cuda::ptx::cp_reduce_async_bulk(cuda::ptx::space_global, cuda::ptx::space_shared, cuda::ptx::op_add, dst, src, bytes);
}

__device__ __forceinline__ void bulk_commit_group() { cuda::ptx::cp_async_bulk_commit_group(); }

// Waits until at most N of this thread's bulk groups still read their shared-memory source.
template <int N>
__device__ __forceinline__ void bulk_wait_group_read() {
  cuda::ptx::cp_async_bulk_wait_group_read(cuda::ptx::n32_t<N>{});
}

// Waits until all of this thread's bulk groups have completed (their global writes done).
__device__ __forceinline__ void bulk_wait_group_all() { cuda::ptx::cp_async_bulk_wait_group(cuda::ptx::n32_t<0>{}); }

// Orders this thread's ordinary shared-memory writes before later async-proxy (TMA, WGMMA)
// reads of them; needed in each writing thread before the barrier that hands the data over.
__device__ __forceinline__ void fence_proxy_async_smem() { cuda::ptx::fence_proxy_async(cuda::ptx::space_shared); }

}  // namespace hk::ptx
