// common/launch.cuh — grid sizing, the shared-memory opt-in and dtype dispatch shared by the
// launchers.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <utility>

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

namespace detail {
// allow_dynamic_smem for any kernel: one map for every instantiation and translation unit.
inline void allow_dynamic_smem(const void* kernel, size_t bytes) {
  static std::mutex mu;
  static std::map<std::pair<const void*, int>, int> limit;  // the dynamic bytes a launch may use
  int dev = 0;
  HK_CHECK_CUDA(cudaGetDevice(&dev));
  std::lock_guard<std::mutex> lock(mu);
  auto it = limit.find({kernel, dev});
  if (it == limit.end()) {
    // The default is 48 KiB less the kernel's static shared memory, so a size below 48 KiB
    // may still need the opt-in.
    cudaFuncAttributes attr{};
    HK_CHECK_CUDA(cudaFuncGetAttributes(&attr, kernel));
    it = limit.emplace(std::make_pair(kernel, dev), attr.maxDynamicSharedSizeBytes).first;
  }
  if (bytes <= static_cast<size_t>(it->second)) return;
  HK_CHECK_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
  it->second = static_cast<int>(bytes);
}
}  // namespace detail

// Lets `kernel` launch with up to `bytes` of dynamic shared memory on the current device. The
// attribute is per (function, device) and only ever raised, to the largest size asked for, so
// concurrent launches with different sizes cannot race; a call that changes nothing costs a
// lock and a lookup instead of a driver call.
template <class Kernel>
void allow_dynamic_smem(Kernel kernel, size_t bytes) {
  detail::allow_dynamic_smem(reinterpret_cast<const void*>(kernel), bytes);
}

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Blocks for a grid-stride loop over `items` equal items (rows) with at most `resident` blocks:
// the fewest that still finish in ceil(items / resident) rounds, so that all but fewer than
// `rounds` blocks run the last round. 16384 rows on 528 resident blocks: 512 blocks of 32 rows,
// not 528 of which 16 run a 32nd round alone.
inline int64_t balanced_grid(int64_t items, int64_t resident) {
  if (items <= resident) return items;
  return ceil_div(items, ceil_div(items, resident));
}

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
