// gemm/hopper_gemm_pingpong.cuh — the Hopper GEMM with ping-pong consumer warpgroups (kPingpong).
//
// hopper_gemm.cuh's consumers cooperate: both warpgroups compute 64-row halves of one 128 x 256
// tile, finish its MMAs together and then both run the epilogue while the tensor cores idle.
// Here (CUTLASS's KernelTmaWarpSpecializedPingpong) each consumer warpgroup owns whole 64 x 256
// tiles and the two alternate the CTA's tiles of the persistent schedule: the CTA's i-th tile
// (units blockIdx / 2, + grid / 2, ...) belongs to warpgroup i % 2. An ordering barrier makes
// their MMA phases alternate, so while one warpgroup converts and stores its tile, the other's
// MMAs keep the tensor cores busy:
//
//   producer  | A0 B0 (tile 0 k-blocks) | A1 B1 (tile 1) | A2 B2 (tile 2) | A3 B3 ...  one ring, in order
//   WG0 (i=0) | MMA tile 0 |->arrive(4) epilogue 0 | sync(3)->| MMA tile 2 |->arrive(4) epilogue 2
//   WG1 (i=1) | sync(4)---------------->| MMA tile 1 |->arrive(3) epilogue 1 | sync(4)->| MMA tile 3
//
// Tile shape 64 x 256 per warpgroup (one wgmma m64n256k16 per 16 K, 128 f32 accumulators per
// thread) rather than 128 x 128 (two m64n128k16): each 64 x 256 x 16 step reads 10 KB of shared
// memory (A 2 KB + B 8 KB) against 12 KB for 128 x 128's two steps (B read twice), the accumulator
// fragment is hopper_gemm.cuh's 64-row half, so the epilogues (epilogue_tma_store_fused / _tile)
// and TileBias are reused unchanged, and with the 2-CTA cluster sharing B the L2->SM traffic per
// MMA is the same for both shapes (A 8 KB + half of B 16 KB per 64 x 256 x 64 k-block).
// The cluster: the two CTAs of a cluster stack along M and run the same unit sequence, so at ring
// position p both hold k-block p of vertically adjacent tiles with one N block: B (256 x 64,
// the larger operand of a 64 x 256 tile) is shared, each CTA loading half and multicasting it.
//
// One ring, filled in consumption order (all k-blocks of tile 0, then of tile 1, ...), rather
// than a ring per warpgroup: the MMA phases are serial anyway (the ordering barrier), so one
// ring gives each warpgroup all kStages slots of lookahead while it computes, the producer's
// loop stays the cooperative body's, and the next tile's loads start as soon as the current
// tile's slots free up.
//
// Invariants (p = ring position = i * k_blocks + kb, slot p % kStages, phase p / kStages):
//  I1. The producer fills positions in order; it fills p after empty[slot] completed the phase
//      of p - kStages (parity ((p / kS) & 1) ^ 1; the phase before the first counts as done).
//  I2. Position p is read by exactly one warpgroup of each CTA of the cluster (the one that owns
//      tile i: the same in both CTAs, which walk the same units), so empty[s] expects
//      4 warps x kCluster arrivals per phase. Each consumer warp releases p once, to every CTA's
//      producer, after wgmma.wait_group has retired the reads of p (one k-block later; the
//      tile's last k-block after wait_group 0), with a CTA-scope release (kCtaRelease).
//  I3. A parity wait cannot tell phase k from k - 2: waiting on full[s] for position p is only
//      sound if full[s] already completed the phase of p - kStages. Within a tile the waiting
//      warpgroup waited for it itself; across tiles the ordering barrier guarantees it: a
//      warpgroup starts tile i >= 1 only after the other warpgroup has waited on every position
//      of tile i - 1 (and so, inductively, on every position < i * k_blocks). The ordering
//      barrier is therefore needed for correctness, not only for speed.
//  I4. Ordering barrier ids 3 + w ("warpgroup w may start its next mainloop"; the epilogue uses
//      1 + w with 128 threads): warpgroup w syncs on 3 + w before tile i iff i > 0; after issuing
//      tile i's MMAs it arrives on 3 + (1 - w) iff tile i + 1 exists. So every sync has exactly
//      one matching arrive (from tile i - 1's owner), an odd tile count (WG0 gets one tile more)
//      or a single tile leaves no arrive unmatched, and arrivals alternate strictly (the next
//      arrive on a barrier needs the sync on the other one), so a barrier never sees two
//      generations of arrivals at once. The arrive comes after the tile's last MMAs are issued
//      and before this warpgroup waits for them: the other warpgroup's MMAs queue right behind.
//  I5. No cycle: a warpgroup's releases of tile i depend only on full[] of tile i's positions,
//      which depend only on releases of earlier positions; the ordering arrive is unconditional
//      once the MMAs are issued. Cluster partners progress position by position as in the
//      cooperative body.
//  I6. A cluster partner whose tile lies past the last M block loads the last real block's A
//      (clamped coordinate) and computes normally; its TMA stores are skipped (m_tile >= M).
//  I7. Teardown: each consumer warpgroup's storing thread waits for all its bulk stores before
//      the final cluster barrier, which also keeps every CTA's shared memory alive until its
//      partner has stopped multicasting into it and arriving on its barriers.
#pragma once

#include "gemm/hopper_gemm.cuh"

namespace hk::gemm_impl {

// The ping-pong body's fixed choices; its policy (HopperConfig<P>) sets the rest.
constexpr int kPingpongOrderBarrier = 3;  // named barriers 3, 4; epilogue_tma_store* use 1, 2

// Epi: RuntimeEpilogue (problems with C_in) or the FusedEpilogue the host picked.
template <class T, bool kAMn, bool kBMn, class Cfg, class Epi>
__device__ __forceinline__ void hopper_gemm_pingpong_body(const CUtensorMap* tma_a, const CUtensorMap* tma_b,
                                                          const CUtensorMap* tma_c, const GemmArgs& g) {
  constexpr int kBN = Cfg::kBlockN, kS = Cfg::kStages, kC = Cfg::kCluster;
  // The policy's fixed parts (the body hard-codes them): 64-row warpgroup tiles of 256 columns,
  // 2-CTA clusters sharing B, a persistent grid, TMA stores, one wgmma group in flight, slots
  // released with the CTA-scope arrive, producer and consumer register budgets.
  static_assert(Cfg::kBlockM == 64 && kBN == 256 && kC == 2, "64 x 256 warpgroup tiles, 2-CTA clusters");
  static_assert(Cfg::kPersistent && Cfg::kTmaStore && Cfg::kMmaInFlight == 1 && Cfg::kCtaRelease && Cfg::kSetMaxNReg,
                "the ping-pong body is persistent, stores with TMA, keeps one wgmma group in flight");
  static_assert(!Cfg::kStreamK && !Cfg::kPlainEpilogue, "no stream-K; plain problems take a FusedEpilogue");
  extern __shared__ uint8_t hk_gemm_smem[];
  // NOTE: 128B-swizzled atoms must start 1024-byte aligned (descriptor base offset 0, and the
  // swizzle phase TMA and wgmma agree on is taken from address bits 7-9).
  const uint32_t raw = static_cast<uint32_t>(__cvta_generic_to_shared(hk_gemm_smem));
  uint8_t* smem = hk_gemm_smem + ((1024 - (raw & 1023)) & 1023);
  uint8_t* sa = smem;                    // (kS, 64 x 64) A slots
  uint8_t* sb = sa + kS * Cfg::kABytes;  // (kS, 256 x 64) B slots
  uint8_t* sc = sb + kS * Cfg::kBBytes;  // (2 consumers, 2 buffers) C chunks
  const PipelineRing<kS> ring = PipelineRing<kS>::at(sc + Cfg::kCBytes);  // full[kS], empty[kS]
  using RingPos = PipelineState<kS, uint32_t>;  // ring position p (wraps mod 2^32: kS divides 2^32)

  const int wg = threadIdx.x / 128, t = threadIdx.x % 128;
  const uint32_t rank = ptx::cluster_ctarank();
  const int64_t m_blocks = (g.m + Cfg::kBlockM - 1) / Cfg::kBlockM;
  const auto sched = sched::TileScheduler::make(m_blocks, (g.n + kBN - 1) / kBN, g.batch, kC, Cfg::kGroup);
  const int64_t units = sched.units();
  const int64_t unit_step = gridDim.x / kC;  // the grid's clusters; launch_hopper gives each >= 1 unit
  // supports() requires K >= 1, so every tile has at least one k-block.
  const int k_blocks = static_cast<int>((g.k + Cfg::kBlockK - 1) / Cfg::kBlockK);

  if (threadIdx.x == 0) {
    ring.init(4 * kC);  // I2: the owning warpgroup's 4 warps, in every CTA
    ptx::prefetch_tensor_map(tma_a);
    ptx::prefetch_tensor_map(tma_b);
    ptx::prefetch_tensor_map(tma_c);
  }
  ptx::cluster_sync();  // peers may arrive on our barriers and multicast into us from now on

  if (wg == 0) {
    // ---- producer: one thread issues every TMA load, tile after tile (I1) ----
    ptx::setmaxnreg_dec<40>();
    if (t == 0) {
      RingPos it;  // ring position
      for (int64_t u = blockIdx.x / kC; u < units; u += unit_step) {
        const sched::TileCoord tc = sched.tile(u, static_cast<int>(rank));
        const int32_t m0 = static_cast<int32_t>(std::min<int64_t>(tc.m_block, m_blocks - 1) * Cfg::kBlockM);  // I6
        const int32_t n0 = static_cast<int32_t>(tc.n_block * kBN), bz = static_cast<int32_t>(tc.batch);
        for (int kb = 0; kb < k_blocks; ++kb, ++it) {
          const int s = it.stage();
          ring.producer_acquire(it);
          ring.producer_expect_tx(it, Cfg::kStageBytes);  // A + both halves of B
          uint64_t* full = ring.full_barrier(it);
          const int32_t k0 = kb * Cfg::kBlockK;
          // A: K-major is one box (64 K, 64 M); MN-major one box (64 M, 64 K).
          if constexpr (!kAMn) ptx::tma_load_3d(sa + s * Cfg::kABytes, tma_a, k0, m0, bz, full);
          else ptx::tma_load_3d(sa + s * Cfg::kABytes, tma_a, m0, k0, bz, full);
          tma_load_b_share<kBMn, Cfg>(sb + s * Cfg::kBBytes, tma_b, n0, k0, bz, full, rank, g.n);
        }
      }
    }
  } else {
    // ---- consumers: warpgroup cw owns the CTA's tiles i = cw, cw + 2, ... ----
    ptx::setmaxnreg_inc<232>();
    const int cw = wg - 1;
    float acc[kBN / 2];  // (64, kBN) f32 accumulators, fragment layout in wgmma.cuh
    // This warp is done reading position p's slot: lane r tells CTA r's producer (I2).
    auto release = [&](RingPos p) {
      if (t % 32 < kC) ring.consumer_release_peer(p, t % 32);
    };
    int64_t i = cw;  // the CTA-local index of tile u
    for (int64_t u = blockIdx.x / kC + cw * unit_step; u < units; u += 2 * unit_step, i += 2) {
      const sched::TileCoord tc = sched.tile(u, static_cast<int>(rank));
      const RingPos p0{static_cast<uint32_t>(i) * static_cast<uint32_t>(k_blocks)};  // first ring position
      if (i > 0) named_barrier_sync(kPingpongOrderBarrier + cw, 256);  // I3, I4: tile i - 1's MMAs are issued
      for (int kb = 0; kb < k_blocks; ++kb) {
        const RingPos p = p0 + kb;
        const int s = p.stage();
        ring.consumer_wait(p);
        const uint32_t a_base = static_cast<uint32_t>(__cvta_generic_to_shared(sa + s * Cfg::kABytes));
        const uint32_t b_base = static_cast<uint32_t>(__cvta_generic_to_shared(sb + s * Cfg::kBBytes));
        ptx::wgmma_fence();
        wgmma_k_block<kBN, T, kAMn, kBMn>(acc, a_base, b_base, kb == 0);
        ptx::wgmma_commit_group();
        // k-block kb's group stays in flight; kb - 1's has finished reading its slot.
        ptx::wgmma_wait_group<1>();
        ptx::wgmma_fence_operands(acc);
        if (kb > 0) release(p - 1);
      }
      // I4: the next tile's owner may issue its MMAs behind ours while we finish and store.
      if (u + unit_step < units) named_barrier_arrive(kPingpongOrderBarrier + (1 - cw), 256);
      // A compile-time bias loads while the tile's last wgmma group still runs (else nothing).
      TileBias<Epi, kBN> tile_bias;
      tile_bias.load(g.bias, g.n, tc.n_block * kBN, t);
      ptx::wgmma_wait_group<0>();  // the accumulators are complete before the epilogue reads them
      ptx::wgmma_fence_operands(acc);
      release(p0 + k_blocks - 1);
      epilogue_tma_store_tile<Epi, Cfg>(g, tile_bias, acc, sc + cw * 2 * Cfg::kCChunkBytes, tma_c, tc.batch,
                                        tc.m_block * Cfg::kBlockM, tc.n_block * kBN, cw, t);
    }
    if (t == 0) ptx::bulk_wait_group_all();  // I7: shared memory must outlive the stores
  }
  __syncwarp();
  ptx::cluster_sync();  // I7: no CTA leaves while a peer may still multicast into it or arrive on it
}

}  // namespace hk::gemm_impl
