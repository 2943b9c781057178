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

// A driver entry point (cuTensorMapEncodeTiled, cuTensorMapEncodeIm2col) from the driver the
// runtime already loaded (no -lcuda link).
template <class Fn>
Fn driver_entry_point(const char* name) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult status{};
  HK_CHECK_CUDA(cudaGetDriverEntryPointByVersion(name, &p, 12000, cudaEnableDefault, &status));
  if (status != cudaDriverEntryPointSuccess || !p)
    HK_THROW(kCuda, "tma: the driver has no ", name, " (status ", int(status), ")");
  return reinterpret_cast<Fn>(p);
}

// A tensor-map encoder called with the device's primary context current. The driver call needs a
// current context, and a thread whose first CUDA call this is has none: torch's autograd
// threads run a hopperkit backward as their first work, and the runtime makes the primary
// context current only on its own first call that needs one. On CUDA_ERROR_INVALID_CONTEXT the
// runtime binds it (cudaSetDevice initialises the primary context since CUDA 12) and the
// encoding is retried once.
template <class Fn, class... Args>
CUresult encode_in_context(Fn encoder, Args... args) {
  CUresult r = encoder(args...);
  if (r == CUDA_ERROR_INVALID_CONTEXT) {
    int dev = 0;
    HK_CHECK_CUDA(cudaGetDevice(&dev));
    HK_CHECK_CUDA(cudaSetDevice(dev));
    r = encoder(args...);
  }
  return r;
}

inline PFN_cuTensorMapEncodeTiled_v12000 tiled_encoder() {
  static const auto fn = driver_entry_point<PFN_cuTensorMapEncodeTiled_v12000>("cuTensorMapEncodeTiled");
  return fn;
}

// cuTensorMapEncodeTiled(args...).
template <class... Args>
CUresult encode_tiled(Args... args) {
  return encode_in_context(tiled_encoder(), args...);
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

// What one im2col-mode load of a rank-4 map over an NHWC tensor [n, h, w, c] reads (TMA's im2col
// mode, as implicit-GEMM convolution uses it): `pixels` consecutive output pixels of the
// convolution, `channels` channels each. The bounding box is the set of input positions a filter
// tap at offset 0 visits: along W, from `lower_w` (-pad_left) to W - 1 + `upper_w` (pad_right -
// dilation_w (kW - 1)), every `stride_w`-th; likewise along H. A load starts at the input position
// of its first output pixel and walks the box along W, then H, then N, reading each position
// shifted by the load's offsets (the tap, kx dilation_w and ky dilation_h); positions outside
// the tensor read zeros.
struct Im2colBox {
  int lower_w = 0, lower_h = 0;         // in [-128, 127] (rank 4)
  int upper_w = 0, upper_h = 0;         // in [-128, 127] (rank 4)
  uint32_t stride_w = 1, stride_h = 1;  // the convolution's strides, 1 to 8
  uint32_t channels = 64;               // per pixel, at most 256 (and 128 bytes with SWIZZLE_128B)
  uint32_t pixels = 128;                // per load, at most 1024
};

// A rank-4 im2col map: dims {c, w, h, n} (c contiguous); strides_bytes step w, h and n.
inline CUtensorMap make_tensor_map_im2col_4d(const void* base, CUtensorMapDataType type, const uint64_t dims[4],
                                             const uint64_t strides_bytes[3], const Im2colBox& box,
                                             CUtensorMapSwizzle swizzle) {
  static const auto fn = driver_entry_point<PFN_cuTensorMapEncodeIm2col_v12000>("cuTensorMapEncodeIm2col");
  CUtensorMap map{};
  // The corners list the spatial dims in the order of the map's dims (w, then h); the element
  // strides are per dim, c's ignored.
  const int lower[2] = {box.lower_w, box.lower_h}, upper[2] = {box.upper_w, box.upper_h};
  const cuuint32_t element_strides[4] = {1, box.stride_w, box.stride_h, 1};
  const CUresult r = encode_in_context(fn, &map, type, 4u, const_cast<void*>(base), dims, strides_bytes, lower, upper,
                                       box.channels, box.pixels, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
                                       swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    HK_THROW(kCuda, "tma: cuTensorMapEncodeIm2col failed (CUresult ", int(r), ") for dims [", dims[0], ", ", dims[1],
             ", ", dims[2], ", ", dims[3], "], strides [", strides_bytes[0], ", ", strides_bytes[1], ", ",
             strides_bytes[2], "] bytes, box corners w [", box.lower_w, ", ", box.upper_w, "] h [", box.lower_h, ", ",
             box.upper_h, "], strides ", box.stride_w, "x", box.stride_h, ", ", box.channels, " channels x ",
             box.pixels, " pixels");
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

// One im2col-mode load of a rank-4 map (make_tensor_map_im2col_4d) -> dst in this CTA: Im2colBox's
// `pixels` pixels from input position (w, h) of image n, each read at (w + off_w, h + off_h),
// channels c .. c + channels - 1; completes `bar`. (CCCL's cuda::ptx has no im2col form.)
__device__ __forceinline__ void tma_load_im2col_4d(void* dst, const CUtensorMap* map, int32_t c, int32_t w, int32_t h,
                                                   int32_t n, uint16_t off_w, uint16_t off_h, uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.im2col.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3, %4, %5}], [%6], {%7, %8};"
      :
      : "r"(static_cast<uint32_t>(__cvta_generic_to_shared(dst))), "l"(map), "r"(c), "r"(w), "r"(h), "r"(n),
        "r"(static_cast<uint32_t>(__cvta_generic_to_shared(bar))), "h"(off_w), "h"(off_h)
      : "memory");
}

// tma_load_im2col_4d into dst at the same shared-memory offset in every CTA of `cta_mask`; each
// destination CTA's barrier at `bar`'s offset receives the bytes it got.
__device__ __forceinline__ void tma_load_im2col_4d_multicast(void* dst, const CUtensorMap* map, int32_t c, int32_t w,
                                                             int32_t h, int32_t n, uint16_t off_w, uint16_t off_h,
                                                             uint64_t* bar, uint16_t cta_mask) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.im2col.mbarrier::complete_tx::bytes.multicast::cluster"
      " [%0], [%1, {%2, %3, %4, %5}], [%6], {%7, %8}, %9;"
      :
      : "r"(static_cast<uint32_t>(__cvta_generic_to_shared(dst))), "l"(map), "r"(c), "r"(w), "r"(h), "r"(n),
        "r"(static_cast<uint32_t>(__cvta_generic_to_shared(bar))), "h"(off_w), "h"(off_h), "h"(cta_mask)
      : "memory");
}

// src (this CTA's shared memory) -> box at (c0, c1, c2); joins the thread's open bulk group.
__device__ __forceinline__ void tma_store_3d(const CUtensorMap* map, const void* src, int32_t c0, int32_t c1,
                                             int32_t c2) {
  const int32_t coords[3] = {c0, c1, c2};
  cuda::ptx::cp_async_bulk_tensor(cuda::ptx::space_global, cuda::ptx::space_shared, map, coords, src);
}

// The same store issued only where `issue` holds, as a predicated instruction rather than a
// branch: every thread of the warp runs the same code, so a loop around it keeps the values that
// are uniform across the warp in uniform registers (a branch on the thread index makes ptxas
// move them to vector registers and back with R2UR before each wgmma).
__device__ __forceinline__ void tma_store_3d_if(bool issue, const CUtensorMap* map, const void* src, int32_t c0,
                                                int32_t c1, int32_t c2) {
  asm volatile(
      "{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %0, 0;\n\t"
      "@p cp.async.bulk.tensor.3d.global.shared::cta.tile.bulk_group [%1, {%2, %3, %4}], [%5];\n}"
      :
      : "r"(static_cast<uint32_t>(issue)), "l"(map), "r"(c0), "r"(c1), "r"(c2),
        "r"(static_cast<uint32_t>(__cvta_generic_to_shared(src)))
      : "memory");
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
