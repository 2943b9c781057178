// microbench/ptx_local.cuh — the few PTX wrappers the experiments share: clock stamps, SM id,
// mbarrier and the 1-D bulk copy (TMA without a tensor map), and 16-byte cp.async.
//
// Kept minimal and local to microbench/ while src/common/ptx/ is being written for GEMM; the
// lead unifies them later. Shared-memory operands are 32-bit shared-window addresses.
#pragma once

#include <cstdint>

#include "microbench/microbench.hpp"

namespace hk::mb {

// Both clock reads carry a memory clobber so the compiler keeps them where they are written
// relative to the loads and stores being timed.
__device__ __forceinline__ uint64_t globaltimer_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)::"memory");
  return t;
}
__device__ __forceinline__ long long clock_cycles() {
  long long c;
  asm volatile("mov.u64 %0, %%clock64;" : "=l"(c)::"memory");
  return c;
}

__device__ __forceinline__ uint32_t sm_id() {
  uint32_t id;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
  return id;
}

// clock64 and %globaltimer read back to back: a span between two stamps gives cycles and
// nanoseconds of the same interval.
struct Stamp {
  long long clk;
  uint64_t ns;
};
__device__ __forceinline__ Stamp stamp() { return {clock_cycles(), globaltimer_ns()}; }
__device__ __forceinline__ void store_span(ClockSpan* out, const Stamp& a, const Stamp& b) {
  out->cycles = b.clk - a.clk;
  out->ns = static_cast<long long>(b.ns - a.ns);
}

// Called by one thread per block after a __syncthreads, so the block's whole work lies in [a, b].
__device__ __forceinline__ void store_block_span(BlockSpan* out, const Stamp& a, const Stamp& b) {
  out->clk0 = a.clk;
  out->clk1 = b.clk;
  out->ns0 = static_cast<long long>(a.ns);
  out->ns1 = static_cast<long long>(b.ns);
  out->sm = static_cast<int>(sm_id());
}

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// ---- mbarrier (transaction-counted) ------------------------------------------------------------
__device__ __forceinline__ void mbarrier_init(uint64_t* bar, uint32_t arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_addr(bar)), "r"(arrivals) : "memory");
}
// Makes the initialized barriers visible to the async proxy (the copy engine) and the cluster.
__device__ __forceinline__ void fence_mbarrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}
// One arrival that also announces `bytes` of incoming transactions for the current phase.
__device__ __forceinline__ void mbarrier_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(bar)), "r"(bytes)
               : "memory");
}
// Spins until the phase with parity `parity` has completed.
__device__ __forceinline__ void mbarrier_wait(uint64_t* bar, uint32_t parity) {
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "WAIT:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT;\n"
      "}\n" ::"r"(smem_addr(bar)),
      "r"(parity)
      : "memory");
}

// ---- bulk copies ---------------------------------------------------------------------------------
// TMA 1-D bulk copy global -> shared, completing `bytes` (multiple of 16, both addresses 16-byte
// aligned) as transactions on `bar`. One thread issues it; no tensor map is involved.
__device__ __forceinline__ void bulk_copy_g2s(void* dst, const void* src, uint32_t bytes, uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
          smem_addr(dst)),
      "l"(src), "r"(bytes), "r"(smem_addr(bar))
      : "memory");
}

// Ampere-style asynchronous 16-byte copy global -> shared (bypassing L1: .cg), grouped by commit.
__device__ __forceinline__ void cp_async_16(void* dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(smem_addr(dst)), "l"(src) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(kPending) : "memory");
}

}  // namespace hk::mb
