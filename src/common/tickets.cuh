// common/tickets.cuh — dynamic item distribution for resident (persistent) grids.
//
// A resident grid that strides its items by gridDim.x gives every block the same count fixed
// in advance; blocks on SMs that run slower (farther from the memory partitions they hit, or
// sharing the SM with a slower block) then finish last while the rest idle. With tickets, a
// block takes its first item statically (blockIdx.x) and claims each next one from a counter,
// one item ahead, so the grid ends within about one item of even.
// NOTE: measured on the H200 (session 6, call 1, ncu) for outer_add v02 at 4 x 2^26 bf16 with
// the static stride: SM active cycles 92% of the kernel's on average, the least active SM 26%
// below the average (88.8% of the copy bandwidth).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "hk/error.hpp"

namespace hk {

// Host side: a zeroed 64-bit counter in the launch's stream order (cudaMallocAsync from the
// stream's pool, cudaMemsetAsync), or none (get() == nullptr: the kernel strides statically)
// when no block has more than one item. release() after the launch frees it in stream order.
class ItemTickets {
 public:
  ItemTickets(int64_t items, int64_t grid, cudaStream_t stream) : stream_(stream) {
    if (items <= grid) return;
    HK_CHECK_CUDA(cudaMallocAsync(reinterpret_cast<void**>(&p_), sizeof(unsigned long long), stream));
    HK_CHECK_CUDA(cudaMemsetAsync(p_, 0, sizeof(unsigned long long), stream));
  }
  ItemTickets(const ItemTickets&) = delete;
  ItemTickets& operator=(const ItemTickets&) = delete;
  ~ItemTickets() {
    if (p_) cudaFreeAsync(p_, stream_);  // only on an exception path: release() is the normal end
  }
  unsigned long long* get() const { return p_; }
  void release() {
    if (p_) HK_CHECK_CUDA(cudaFreeAsync(p_, stream_));
    p_ = nullptr;
  }

 private:
  unsigned long long* p_ = nullptr;
  cudaStream_t stream_;
};

// Device side: calls body(item) for this block's items of [0, total): blockIdx.x first, then
// one claimed from `tickets` (gridDim.x + ticket) while the current one runs, or blockIdx.x +
// k gridDim.x without tickets. Every thread of the block must call it (one barrier per item with
// tickets). The claimed index lives in one of two shared slots, so thread 0 writes slot k & 1
// only after every thread has read it at the end of item k - 2.
template <class Body>
__device__ __forceinline__ void for_each_item(int64_t total, unsigned long long* tickets, Body&& body) {
  __shared__ int64_t next[2];
  int k = 0;
  for (int64_t item = blockIdx.x; item < total; ++k) {
    if (tickets && threadIdx.x == 0) next[k & 1] = int64_t(gridDim.x) + int64_t(atomicAdd(tickets, 1ull));
    body(item);
    if (tickets) {
      __syncthreads();
      item = next[k & 1];
    } else {
      item += gridDim.x;
    }
  }
}

}  // namespace hk
