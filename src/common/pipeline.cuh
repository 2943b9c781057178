// common/pipeline.cuh — a TMA/mbarrier ring of kStages shared-memory slots, handed back and
// forth between a producer (TMA loads) and consumers (MMAs, or any reader of the slots).
//
// Each slot s has two mbarriers:
//   full[s]  — completes when the producer has armed it (one arrival with expect_tx of the
//              slot's bytes) and the copy engine has delivered those bytes (complete_tx)
//   empty[s] — completes when every consumer that reads the slot has released it
// Producer and consumers each walk the ring with a PipelineState: a running count of slots
// used, from which the stage index (count % kStages) and the phase parity of that use
// ((count / kStages) & 1) follow. A producer's first pass waits on empty[] with the parity of
// the phase before the first, which counts as completed right after init (mbarrier.cuh), so
// it fills every slot once before it waits for a release.
//
// NOTE: the state keeps one counter and derives stage and phase from it, rather than keeping
// a stage index and a phase bit that flip together: with kStages a power of two both are a
// mask and a shift of the counter, and a consumer that hands a slot back one step late
// (state - 1) needs no second copy of the state. A parity wait cannot tell phase k from
// phase k - 2: a waiter must never fall a whole lap (kStages uses) behind its barrier.
//
// PipelineCursor is the same position as a stage index and a phase bit (below).
//
// Usage (one producer thread, consumer warps, a cluster of kC CTAs sharing the slots):
//   PipelineRing<kS> ring = PipelineRing<kS>::at(smem_barriers);   // or {full, empty} pointers
//   if (threadIdx.x == 0) ring.init(consumer_arrivals);   // then a CTA or cluster barrier
//   producer: for each load:  ring.producer_acquire(st); ring.producer_expect_tx(st, bytes);
//                             tma_load(..., ring.full_barrier(st)); ++st;
//   consumer: for each use:   ring.consumer_wait(st); read stage st.stage(); ring.consumer_release(st); ++st;
#pragma once

#include <cstdint>

#include "common/ptx/mbarrier.cuh"

namespace hk {

// A walker's position in a kStages-slot ring: `count` slots used so far. Count is the
// counter's type (int or uint32_t: a kernel keeps the one its arithmetic was written for; with
// uint32_t a wrap at 2^32 is harmless when kStages divides 2^32).
template <int kStages, class Count = uint32_t>
struct PipelineState {
  static constexpr int kRingStages = kStages;
  Count count = 0;

  // The slot this position uses.
  __device__ __forceinline__ int stage() const { return static_cast<int>(count % kStages); }
  // The parity of this use of the slot: 0 on the first lap, 1 on the second, ...
  __device__ __forceinline__ uint32_t phase() const { return static_cast<uint32_t>((count / kStages) & 1); }

  __device__ __forceinline__ PipelineState& operator++() {
    ++count;
    return *this;
  }
  __device__ __forceinline__ PipelineState operator+(Count d) const { return PipelineState{Count(count + d)}; }
  __device__ __forceinline__ PipelineState operator-(Count d) const { return PipelineState{Count(count - d)}; }
};

// The same position kept as a stage index and a phase bit that advance together: one compare
// and two selects per step instead of a division by kStages, for loops whose every instruction
// competes with the tensor cores' issue (kStages = 6 makes count % kStages a multiply-high and
// two more). Only steps forward; a consumer that releases a slot later keeps a copy of the
// position it used.
template <int kStages>
struct PipelineCursor {
  static constexpr int kRingStages = kStages;
  int index = 0;
  uint32_t parity = 0;

  __device__ __forceinline__ int stage() const { return index; }
  __device__ __forceinline__ uint32_t phase() const { return parity; }

  __device__ __forceinline__ PipelineCursor& operator++() {
    const bool wrap = index == kStages - 1;
    index = wrap ? 0 : index + 1;
    parity ^= wrap ? 1u : 0u;
    return *this;
  }
};

// The ring's barriers: kStages full and kStages empty mbarriers in shared memory.
template <int kStages>
struct PipelineRing {
  static_assert(kStages >= 1, "a ring has at least one slot");
  static constexpr int kBarrierBytes = 2 * kStages * 8;  // full[kStages], then empty[kStages]

  uint64_t* full;
  uint64_t* empty;

  // The ring whose barriers occupy kBarrierBytes of shared memory at `mem` (8-byte aligned).
  static __device__ __forceinline__ PipelineRing at(void* mem) {
    uint64_t* bars = static_cast<uint64_t*>(mem);
    return PipelineRing{bars, bars + kStages};
  }
  // The first byte after the barriers.
  __device__ __forceinline__ void* end() const { return empty + kStages; }

  // One thread: full[s] expects the producer's one arrival, empty[s] `consumer_arrivals`
  // releases per phase (every consumer of every CTA that reads the slot). Fenced for the
  // cluster; the caller's CTA or cluster barrier then publishes the inits.
  __device__ __forceinline__ void init(uint32_t consumer_arrivals) const {
    for (int s = 0; s < kStages; ++s) {
      ptx::mbar_init(&full[s], 1);
      ptx::mbar_init(&empty[s], consumer_arrivals);
    }
    ptx::mbar_fence_init();
  }

  // ---- producer ----
  // The methods take a walker's position: a PipelineState or a PipelineCursor of kStages.

  // Waits until the consumers have released the slot of `st` from its previous use.
  template <class St>
  __device__ __forceinline__ void producer_acquire(St st) const {
    static_assert(St::kRingStages == kStages, "a position in a ring of this size");
    ptx::mbar_wait(&empty[st.stage()], st.phase() ^ 1);
  }
  // Arms full[] of `st`: the producer's arrival plus the bytes the loads into the slot will
  // deliver (all of them, multicast from cluster peers included).
  template <class St>
  __device__ __forceinline__ void producer_expect_tx(St st, uint32_t bytes) const {
    static_assert(St::kRingStages == kStages, "a position in a ring of this size");
    ptx::mbar_arrive_expect_tx(&full[st.stage()], bytes);
  }
  // The barrier the slot's TMA loads complete on.
  template <class St>
  __device__ __forceinline__ uint64_t* full_barrier(St st) const {
    static_assert(St::kRingStages == kStages, "a position in a ring of this size");
    return &full[st.stage()];
  }

  // ---- consumer ----
  // Waits until the slot of `st` holds its data.
  template <class St>
  __device__ __forceinline__ void consumer_wait(St st) const {
    static_assert(St::kRingStages == kStages, "a position in a ring of this size");
    ptx::mbar_wait(&full[st.stage()], st.phase());
  }
  // Releases the slot of `st` to this CTA's producer (release at CTA scope).
  template <class St>
  __device__ __forceinline__ void consumer_release(St st) const {
    static_assert(St::kRingStages == kStages, "a position in a ring of this size");
    ptx::mbar_arrive(&empty[st.stage()]);
  }
  // Releases the slot of `st` to the producer of CTA `cta_rank` of the cluster, with the
  // arrive's default CTA-scope release: enough when the reads handed over are known complete
  // (wgmma.wait_group has retired them), and a bare SYNCS.ARRIVE (ptx/mbarrier.cuh).
  template <class St>
  __device__ __forceinline__ void consumer_release_peer(St st, uint32_t cta_rank) const {
    static_assert(St::kRingStages == kStages, "a position in a ring of this size");
    ptx::mbar_arrive_cluster_cta(&empty[st.stage()], cta_rank);
  }
  // The same with a cluster-scope release, which orders every earlier access of this thread
  // before the arrival (ptxas precedes it with MEMBAR.ALL.GPU).
  template <class St>
  __device__ __forceinline__ void consumer_release_peer_cluster_scope(St st, uint32_t cta_rank) const {
    static_assert(St::kRingStages == kStages, "a position in a ring of this size");
    ptx::mbar_arrive_cluster(&empty[st.stage()], cta_rank);
  }
};

}  // namespace hk
