// common/tickets.cuh — dynamic item distribution for resident (persistent) grids.
//
// A resident grid that strides its items by gridDim.x gives every block the same count fixed
// in advance; blocks on SMs that run slower (farther from the memory partitions they hit, or
// sharing the SM with a slower block) then finish last while the rest idle. With tickets, a
// block takes its first item statically (blockIdx.x) and claims each next one from a counter,
// one item ahead, so the grid ends within about one item of even.
// NOTE: measured on the H200 (2026-11-28, ncu) for outer_add v02 at 4 x 2^26 bf16 with
// the static stride: SM active cycles 92% of the kernel's on average, the least active SM 26%
// below the average (88.8% of the copy bandwidth).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "core/scratch.hpp"

namespace hk {

// Host side: the two 64-bit counters (next ticket, blocks done) for a launch on `stream`, from
// the stream's zeroed scratch (core/scratch.hpp: no memset per launch, and a captured graph
// replays correctly), or nullptr (the kernel strides statically) when no block has more than
// one item. for_each_item's last block puts both back to zero.
inline unsigned long long* item_tickets(int64_t items, int64_t grid, cudaStream_t stream) {
  if (items <= grid) return nullptr;
  return static_cast<unsigned long long*>(
      detail::zeroed_stream_scratch(stream, "item_tickets", 2 * sizeof(unsigned long long)));
}

// Device side: calls body(item) for this block's items of [0, total): blockIdx.x first, then
// one claimed from tickets[0] (gridDim.x + ticket) while the current one runs, or blockIdx.x +
// k gridDim.x without tickets. Every thread of every block must call it, once per launch (one
// barrier per item with tickets). The claimed index lives in one of two shared slots, so
// thread 0 writes slot k & 1 only after every thread has read it at the end of item k - 2.
// Each block counts itself done in tickets[1] after its last claim; the last one zeroes both.
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
  if (tickets && threadIdx.x == 0) {
    __threadfence();  // this block's claims are ordered before its done count
    if (atomicAdd(tickets + 1, 1ull) == gridDim.x - 1) {
      tickets[0] = 0;  // every block has made its last claim
      tickets[1] = 0;
    }
  }
}

// for_each_item with the next item's loads issued before this item's stores: calls
// data = load(item) for the next item, then store(item, data) for the current one, so a block's
// reads for item k + 1 are in flight while it writes item k (load's result is held in registers
// across store). The claim is made one item further ahead: the index read after iteration k's
// barrier was claimed during iteration k - 1, so the atomic's round trip hides behind a whole
// store phase. Same contract as for_each_item (every thread, once per launch; the last block
// zeroes the counters); slot (k + 1) & 1 is rewritten by thread 0 only after barrier k, which
// every thread passes after reading it in iteration k - 1.
template <class Load, class Store>
__device__ __forceinline__ void for_each_item_prefetched(int64_t total, unsigned long long* tickets, Load&& load,
                                                         Store&& store) {
  __shared__ int64_t next[2];
  int64_t item = blockIdx.x;
  if (item < total) {
    if (tickets && threadIdx.x == 0) next[0] = int64_t(gridDim.x) + int64_t(atomicAdd(tickets, 1ull));
    auto data = load(item);
    for (int k = 0;; ++k) {
      int64_t following = item + gridDim.x;
      if (tickets) {
        __syncthreads();
        following = next[k & 1];
        if (threadIdx.x == 0 && following < total)
          next[(k + 1) & 1] = int64_t(gridDim.x) + int64_t(atomicAdd(tickets, 1ull));
      }
      if (following >= total) {
        store(item, data);
        break;
      }
      auto data_next = load(following);
      store(item, data);
      item = following;
      data = data_next;
    }
  }
  if (tickets && threadIdx.x == 0) {
    __threadfence();  // this block's claims are ordered before its done count
    if (atomicAdd(tickets + 1, 1ull) == gridDim.x - 1) {
      tickets[0] = 0;  // every block has made its last claim
      tickets[1] = 0;
    }
  }
}

}  // namespace hk
