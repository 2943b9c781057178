// common/ptx/cp_async.cuh — Ampere-style asynchronous global->shared copies (sm_80+): cp.async
// of 16 bytes with zero fill, its commit/wait groups, and a tile copy built on them.
//
// A cp.async lands in shared memory without passing through registers; the issuing thread
// groups its copies (commit) and later waits until at most N groups are still in flight, so
// copies for tile k+1 run while the threads compute on tile k. The waiting thread sees only its
// own copies: a __syncthreads() after the wait publishes the whole tile to the block.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace hk::ptx {

// Copies `src_bytes` (0..16) from global `src` to shared `dst` and zero-fills the rest of the 16
// bytes. Both addresses 16-byte aligned; with src_bytes == 0 nothing is read (src must still be
// a valid address: callers pass the operand's base). .cg: cached in L2 only, as the data is
// reused from shared memory, not from L1.
__device__ __forceinline__ void cp_async_16(void* dst, const void* src, int src_bytes) {
  const uint32_t d = static_cast<uint32_t>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(src_bytes) : "memory");
}

// Closes the group of this thread's copies issued since the last commit (an empty group is fine:
// it keeps group counting uniform across a pipeline's tail).
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }

// Waits until at most N of this thread's committed groups are still in flight.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// The (kRows, kCols) tile at (row0, col0) of a matrix stored row by row (element (r, c) at
// src[r * ld + c], r < rows, c < cols), copied into shared memory with a row pitch of kPitch
// elements, one 16-byte cp.async per 8 (16-bit) elements, spread over kThreads threads.
// Elements outside the matrix are zero-filled, so a K tail multiplies as zeros; a row's partial
// last chunk goes through registers (nothing past the row is read). Needs: src
// 16-byte aligned, ld and col0 multiples of 16 bytes' worth of elements (the callers'
// supports() check ld), dst 16-byte aligned, kPitch * sizeof(T) a multiple of 16.
template <int kRows, int kCols, int kPitch, int kThreads, class T>
__device__ __forceinline__ void cp_async_tile(T* dst, const T* src, int64_t ld, int64_t row0, int64_t col0,
                                              int64_t rows, int64_t cols, int tid) {
  constexpr int kElems = 16 / static_cast<int>(sizeof(T));  // per cp.async
  constexpr int kChunksPerRow = kCols / kElems;
  constexpr int kChunks = kRows * kChunksPerRow;
  static_assert(kCols % kElems == 0 && (kPitch * sizeof(T)) % 16 == 0, "16-byte chunks and 16-byte aligned rows");
  static_assert(kChunks % kThreads == 0, "whole chunks per thread");
#pragma unroll
  for (int i = 0; i < kChunks / kThreads; ++i) {
    const int chunk = tid + i * kThreads;
    const int r = chunk / kChunksPerRow, c = (chunk % kChunksPerRow) * kElems;
    const int64_t gr = row0 + r, gc = col0 + c;
    const bool in = gr < rows && gc < cols;
    const int64_t left = cols - gc;
    if (in && left < kElems) {
      // The row's last, partial chunk: element loads and a plain shared store (published by the
      // same barrier as the copies). A short cp.async reads only src_bytes, but memcheck counts
      // all 16 and flags the matrix's last row (compute-sanitizer memcheck, 2026-11-29: gemm v05 at K = 127).
      alignas(16) T v[kElems];
#pragma unroll
      for (int e = 0; e < kElems; ++e) v[e] = e < left ? src[gr * ld + gc + e] : T(0.0f);
      *reinterpret_cast<uint4*>(dst + r * kPitch + c) = *reinterpret_cast<const uint4*>(v);
    } else {
      cp_async_16(dst + r * kPitch + c, in ? src + gr * ld + gc : src, in ? 16 : 0);
    }
  }
}

}  // namespace hk::ptx
