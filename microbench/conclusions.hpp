// microbench/conclusions.hpp — the one-line conclusions, as pure functions of measured numbers.
//
// Each experiment file implements its own; they live apart from the kernels so the CPU tests can
// feed them synthetic numbers and check that the sentence follows the numbers.
#pragma once

#include <string>
#include <vector>

namespace hk::mb {

// "halves", "quarters", "keeps", or "divides by 3.10": what a slowdown factor does to a rate.
std::string describe_slowdown(double factor);

// ---- coalescing ----
// Bytes the memory system moves per byte used for `stride_elems`-strided elements of
// `elem_bytes`: 32-byte sectors, so min(stride * elem, 32) / elem.
double sector_bytes_per_byte_used(int stride_elems, int elem_bytes);
struct StridePoint {
  int stride = 1;
  double copy_bytes_per_s = 0;   // useful bytes (read + written) per second
  double read_bytes_per_s = 0;   // the read half alone (0: not measured)
  double write_bytes_per_s = 0;  // the write half alone (0: not measured)
};
// Time ratios vs stride 1 (copy, and each half alone) beside the sector model's bytes ratio.
std::string coalescing_stride_conclusion(const std::vector<StridePoint>& points, int elem_bytes);
struct OffsetPoint {
  int offset = 0;  // bytes; the first point is the aligned start (offset 0)
  double copy_us = 0, read_us = 0, write_us = 0;  // read/write 0: not measured
};
std::string misaligned_conclusion(const std::vector<OffsetPoint>& points);
struct WidthPoint {
  int bytes = 4;
  double bytes_per_s = 0;
};
std::string coalescing_width_conclusion(const std::vector<WidthPoint>& points, double copy_ceiling);

// ---- occupancy ----
struct OccupancyPoint {
  double warps_per_sm = 0;  // measured resident warps per SM
  double rate = 0;          // bytes/s (memory-bound) or loads/s (latency-bound)
};
// Fewest warps per SM that reach `fraction` of the best rate, or -1.
double warps_to_reach(const std::vector<OccupancyPoint>& points, double fraction);
// "<what> reaches 90% of its best rate at 16 warps/SM; from 4 to 64 warps/SM (16x) it grows 3.1x"
std::string occupancy_conclusion(const std::vector<OccupancyPoint>& points, const std::string& what);

// ---- bank conflicts ----
struct BankPoint {
  std::string pattern;
  int ways = 1;                 // conflict degree the bank map predicts
  double cycles_per_access = 0; // per warp-wide 4-byte access, per SM
};
std::string bank_conflict_conclusion(const std::vector<BankPoint>& points);

// ---- SFU vs FMA ----
std::string sfu_conclusion(double fma_per_sm_cycle, double ex2_per_sm_cycle, double gelu_per_sm_cycle,
                           double hbm_needed_per_sm_cycle);

// ---- wave quantization ----
struct WavePoint {
  int tiles = 0;
  double tile_grid_us = 0;   // one block per tile
  double persistent_us = 0;  // persistent grid over 8x finer chunks
};
// t = fixed_us + wave_us x waves, fitted on the one-block-per-tile points at whole waves; the
// balanced ideal of `tiles` pays the fixed cost once and tiles / SMs of a wave.
struct WaveFit {
  double fixed_us = 0, wave_us = 0;
  double ideal_us(int tiles, int sm_count) const { return fixed_us + wave_us * tiles / sm_count; }
};
WaveFit wave_fit(const std::vector<WavePoint>& points, int sm_count);
std::string wave_conclusion(const std::vector<WavePoint>& points, int sm_count);

// ---- memory paths ----
std::string hbm_conclusion(double best_copy_bytes_per_s, double datasheet_bytes_per_s);
std::string latency_conclusion(double l1_cycles, double l2_cycles, double hbm_cycles);

// ---- clusters ----
std::string dsmem_conclusion(double local_cycles, double peer_cycles, double l2_cycles,
                             double peer_bytes_per_clk_sm, double local_bytes_per_clk_sm);

// ---- tensor cores ----
std::string tensor_conclusion(double mma_sync_flop_per_sm_clk, double wgmma_flop_per_sm_clk,
                              double datasheet_flop_per_sm_clk);
std::string launch_conclusion(double stream_us, double graph_us);

}  // namespace hk::mb
