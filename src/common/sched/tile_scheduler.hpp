// common/sched/tile_scheduler.hpp — which output tile a CTA computes, for one-tile-per-CTA and
// persistent grids alike. Host and device: the order is unit-tested on the CPU.
//
// The output of each batch is cut into (m_blocks x n_blocks) tiles. A cluster of `cluster`
// CTAs stacked along M computes `cluster` vertically adjacent tiles that share one N block (so
// they can share B through multicast): a *unit*. Units are numbered batch by batch; inside a
// batch they are walked in groups of `group` unit-rows: down a column of the group, then to the
// next column (N block). Consecutive units — the ones running at the same time — then reuse
// `group` row-panels of A and a few column-panels of B from L2 instead of streaming all of B
// per row. group = 1 is plain row-major order (N fastest).
#pragma once

#include <cstdint>

#include "common/host_device.hpp"

namespace hk::sched {

struct TileCoord {
  int64_t batch, m_block, n_block;
};

struct TileScheduler {
  int64_t m_units = 0;   // ceil(m_blocks / cluster)
  int64_t n_blocks = 0;
  int64_t batch = 1;
  int64_t group = 1;     // unit-rows per group
  int cluster = 1;

  HK_HOST_DEVICE static TileScheduler make(int64_t m_blocks, int64_t n_blocks, int64_t batch, int cluster,
                                                int64_t group) {
    TileScheduler s;
    s.m_units = (m_blocks + cluster - 1) / cluster;
    s.n_blocks = n_blocks;
    s.batch = batch;
    s.group = group < 1 ? 1 : group;
    s.cluster = cluster;
    return s;
  }
  HK_HOST_DEVICE int64_t units() const { return m_units * n_blocks * batch; }

  // The tile CTA `rank` of the cluster computes for unit `u` (its m_block may lie past the
  // last real block when m_blocks is not a multiple of the cluster size).
  HK_HOST_DEVICE TileCoord tile(int64_t u, int rank) const {
    const int64_t per_batch = m_units * n_blocks;
    const int64_t b = u / per_batch, r = u % per_batch;
    const int64_t per_group = group * n_blocks;
    const int64_t first = (r / per_group) * group;
    const int64_t rows = (m_units - first) < group ? (m_units - first) : group;
    const int64_t in_group = r % per_group;
    const int64_t um = first + in_group % rows, n = in_group / rows;
    return TileCoord{b, um * cluster + rank, n};
  }
};

}  // namespace hk::sched
