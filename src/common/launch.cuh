// common/launch.cuh — grid sizing and dtype dispatch shared by the launchers.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "hk/device.hpp"
#include "hk/error.hpp"
#include "hk/tensor.hpp"

namespace hk {

// Blocks for a grid-stride kernel that should fill the device exactly once: SM count times the
// blocks of `kernel` that fit on one SM at `threads` threads and `smem` dynamic shared memory.
template <class Kernel>
int resident_grid(Kernel kernel, int threads, size_t smem = 0) {
  int per_sm = 0;
  HK_CHECK_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, smem));
  return device_info().sm_count * (per_sm > 0 ? per_sm : 1);
}

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Blocks for a grid-stride kernel over `items` work items: one per item, capped at 2^30 (the
// kernel's loop covers the rest; gridDim.x allows 2^31 - 1).
inline int grid_for(int64_t items) {
  return static_cast<int>(items < (int64_t(1) << 30) ? items : int64_t(1) << 30);
}

// Calls fn(T{}) with T the storage type of a floating dtype the elementwise families take.
template <class Fn>
void dispatch_float(DType dtype, const char* op, Fn&& fn) {
  switch (dtype) {
    case DType::kF32: fn(float{}); return;
    case DType::kF16: fn(__half{}); return;
    case DType::kBF16: fn(__nv_bfloat16{}); return;
    default: HK_THROW(kType, op, ": dtype ", to_string(dtype), " is not f32, f16 or bf16");
  }
}

}  // namespace hk
