// common/sched/stream_k.hpp — the stream-K split of a persistent GEMM grid's last waves (gemm
// v18, hopper_gemm.cuh's kStreamK). Host and device: the schedule is unit-tested on the CPU.
//
// A persistent grid of G clusters over U tile units runs ceil(U / G) waves, the last one
// (U mod G) / G full: at 4096^3 (256 units, 66 clusters of 2 on the H200) every cluster but 8
// idles for a quarter of the run's last tile. With stream-K, the first (U / G - 1) G units run
// as whole tiles ("data-parallel", unit c + i G for cluster c) and the remaining G..2G-1 units'
// k-blocks are cut into G equal ranges, one per cluster, in unit order. A range covers the end
// of one tile, whole tiles, and the start of another. A cluster walks its range's pieces last
// to first: the start of a tile (a partial: stored to the workspace, flag raised) comes first,
// the end of a tile (which then needs the partials of the clusters below it) comes last, by
// which time those clusters have long stored them. Only a piece holding a tile's last k-block
// runs the epilogue. Cluster 0's range starts at a tile boundary, so waits only go from a
// cluster to lower ones, which launch first: no cycle.
#pragma once

#include <cstdint>

#include "common/host_device.hpp"

namespace hk::sched {

struct StreamKSplit {
  int64_t dp_units = 0;  // whole-tile units before the split ones
  int32_t iters = 0;     // k-blocks of the split units, over all of them (< 2^31, or no split)
  int32_t clusters = 1;
  int32_t k_blocks = 0;

  // A split costs each cluster about this many k-blocks' time (a partial tile stored and one
  // read back, an extra piece): it is made only where the last wave idles the clusters longer.
  // NOTE: measured on the H200 (2026-11-28), splitting every partial last wave: 4096^3
  // (8 k-blocks idle per cluster on average) ran 2% slower than whole tiles, 8192x8192x1024
  // (8) the same, 4096x14336x4096 (27) 1.7% faster, 8192^3 (62) and 16384^3 (240) 1-2%
  // faster: ~12 k-blocks of cost per cluster.
  static constexpr int kMinIdleKBlocks = 16;

  // few_units: a grid of more clusters than units (a launch that asks for it, as conv2d's weight
  // gradient does: 9 output tiles over thousands of k-blocks) splits every unit's k-blocks over
  // all clusters; otherwise a grid is at most one cluster per unit and a single partial wave
  // stays whole.
  HK_HOST_DEVICE static StreamKSplit make(int64_t units, int64_t clusters, int k_blocks, bool stream_k,
                                          bool few_units = false) {
    StreamKSplit p;
    p.clusters = static_cast<int32_t>(clusters);
    p.k_blocks = k_blocks;
    // Split only when the last wave is partial, a full one comes before it (or, few_units, it is
    // the only one), and the idle time it would recover, (ceil(U / G) G - U) k_blocks / G per
    // cluster, beats kMinIdleKBlocks (and the split k-blocks count in 32 bits: 32-bit range math
    // keeps the consumers' registers under 232).
    const bool first_wave = few_units && units < clusters;
    const int64_t dp = units > clusters ? (units / clusters - 1) * clusters : first_wave ? 0 : units;
    const int64_t idle = ((units + clusters - 1) / clusters * clusters - units) * k_blocks;
    // (A single wave splits only if every cluster's range holds a k-block: a finisher waits for a
    // partial from every cluster below it whose range reaches into its tile.)
    const bool split = stream_k && (units > clusters || (first_wave && units * k_blocks >= clusters)) &&
                       units % clusters != 0 && k_blocks > 1 && idle >= int64_t(kMinIdleKBlocks) * clusters &&
                       (units - dp) * k_blocks < (int64_t(1) << 31) / (clusters + 1);
    p.dp_units = split ? dp : units;
    p.iters = static_cast<int32_t>((units - p.dp_units) * k_blocks);
    return p;
  }
  // The first k-block (of the split ones) of cluster c's range; c = clusters is the end.
  HK_HOST_DEVICE int32_t range_begin(int32_t c) const { return iters * c / clusters; }
  // A range is shorter than 2 tiles' k-blocks (one, with few_units), so it has at most 3 pieces.
  static constexpr int kMaxPieces = 4;
  struct Pieces {
    int32_t count;
    int32_t su[kMaxPieces], kb0[kMaxPieces], kb1[kMaxPieces];
  };
  // Cluster c's range as pieces, last to first (each piece's k-blocks ascending): split unit
  // su (unit dp_units + su), k-blocks [kb0, kb1).
  HK_HOST_DEVICE void pieces(int32_t c, Pieces& out) const {
    const int32_t beg = range_begin(c);
    int32_t n = 0;
    for (int32_t hi = range_begin(c + 1); hi > beg && n < kMaxPieces; ++n) {
      const int32_t su = (hi - 1) / k_blocks, lo = beg > su * k_blocks ? beg : su * k_blocks;
      out.su[n] = su, out.kb0[n] = lo - su * k_blocks, out.kb1[n] = hi - su * k_blocks;
      hi = lo;
    }
    out.count = n;
  }
  // Calls fn(unit, kb0, kb1) for cluster c's work, in order: its whole tiles (c, c + G, ...),
  // then its range's pieces, read from `table` (this CTA's pieces(), in shared memory).
  // NOTE: the loop carries one counter and reads each piece from shared memory: carrying the
  // range's bounds across the body cost the consumers (232 registers) 16-32 bytes of spills in
  // the f32-output and run-time epilogues, and so did deriving them from the counter.
  template <class Fn>
  HK_HOST_DEVICE_INLINE void for_each_piece(int32_t c, const Pieces* table, Fn&& fn) const {
    const int32_t whole = dp_units > c ? static_cast<int32_t>((dp_units - c + clusters - 1) / clusters) : 0;
    const int32_t total = whole + (iters > 0 ? table->count : 0);
    for (int32_t p = 0; p < total; ++p) {
      if (p < whole) fn(c + int64_t(p) * clusters, 0, k_blocks);
      else fn(dp_units + table->su[p - whole], table->kb0[p - whole], table->kb1[p - whole]);
    }
  }
};

}  // namespace hk::sched
