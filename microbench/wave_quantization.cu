// microbench/wave_quantization.cu — Experiment 5: wave quantization.
//
// Blocks fill the SMs in waves. A tile kernel whose block owns a whole SM (shared memory forces
// one block per SM, as a GEMM CTA does) and does a fixed amount of work takes
// ceil(tiles / SMs) tile-times: 132 tiles on 132 SMs is one wave, 133 is two. Sweep 0.25..3 x SM
// count tiles; the time climbs in steps (the staircase). The fix: a persistent grid (one block per
// SM) looping over the same work cut into 8x finer chunks, so the last wave is 1/8 as long.
//   one block per tile   time = ceil(tiles / SMs) x T
//   persistent, 8 chunks time = ceil(8 tiles / SMs) x T / 8   (expect ~tiles / SMs x T)
// Efficiency = the balanced ideal / the measured time, the ideal being F + T x tiles / SMs with the
// fixed cost F (launch, ramp, drain) and the per-wave time T fitted on the whole-wave points: a
// perfectly balanced grid pays F once, so no row can beat it by more than the fit's noise. (The
// first H200 run scaled the one-wave time, F included, by tiles / SMs, and read 105% at 3 waves.)
// Run: hk microbench wave_quantization
#include <cmath>

#include "hk/device.hpp"
#include "microbench/conclusions.hpp"
#include "microbench/ptx_local.cuh"

namespace hk::mb {
namespace {

constexpr int kThreads = 1024;
constexpr int kTileIters = 1024;  // 8 FMA chains x 1024 per thread: ~65k cycles per tile on one SM
constexpr int kSplit = 8;         // persistent chunks per tile

__device__ __forceinline__ float tile_work(int iters, float seed) {
  float v[8];
#pragma unroll
  for (int j = 0; j < 8; ++j) v[j] = seed + j;
  for (int i = 0; i < iters; ++i) {
#pragma unroll
    for (int j = 0; j < 8; ++j) v[j] = fmaf(v[j], 0.9999f, 1e-4f);
  }
  return v[0] + v[1] + v[2] + v[3] + v[4] + v[5] + v[6] + v[7];
}

// One block per tile.
__global__ void mb_wave_tile_kernel(int iters, float* sink) {
  float s = tile_work(iters, float(threadIdx.x));
  if (s == 1234.5f) *sink = s;
}

// One block per SM, walking `chunks` chunks of `iters` each.
__global__ void mb_wave_persistent_kernel(int chunks, int iters, float* sink) {
  float s = 0;
  for (int c = blockIdx.x; c < chunks; c += gridDim.x) s += tile_work(iters, float(threadIdx.x + c));
  if (s == 1234.5f) *sink = s;
}

Result run_wave_quantization(const Options& o) {
  const hk::DeviceInfo& d = hk::device_info();
  const int sms = d.sm_count;
  const int smem = int(d.smem_per_sm / 2 + 1024);  // one block per SM, like a GEMM CTA
  HK_CHECK_CUDA(cudaFuncSetAttribute(mb_wave_tile_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  HK_CHECK_CUDA(cudaFuncSetAttribute(mb_wave_persistent_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  DeviceArray<float> sink(1);

  std::vector<int> tiles;
  for (int q = 1; q <= 12; ++q) {
    tiles.push_back(int(std::lround(q * sms / 4.0)));
    if (q % 4 == 0 && q < 12) tiles.push_back(q / 4 * sms + 1);
  }
  std::vector<WavePoint> pts;
  for (int n : tiles) {
    auto tile = time_launch(
        [&](cudaStream_t s) {
          mb_wave_tile_kernel<<<n, kThreads, smem, s>>>(kTileIters, sink.get());
          HK_CHECK_LAUNCH("mb_wave_tile_kernel");
        },
        o, true);
    auto pers = time_launch(
        [&](cudaStream_t s) {
          mb_wave_persistent_kernel<<<sms, kThreads, smem, s>>>(n * kSplit, kTileIters / kSplit, sink.get());
          HK_CHECK_LAUNCH("mb_wave_persistent_kernel");
        },
        o, true);
    pts.push_back({n, tile.median_us, pers.median_us});
  }
  const WaveFit fit = wave_fit(pts, sms);
  Table t("fixed-work tiles (one 1024-thread block per SM each, ~65k cycles of FMA) vs a persistent grid; balanced "
          "ideal = " + num(fit.fixed_us) + " us fixed + " + num(fit.wave_us) + " us per wave x tiles / SMs",
          {"tiles", "tiles / SMs", "waves", "balanced ideal us", "one block per tile us", "tile % of balanced ideal",
           "persistent (8x finer) us", "persistent % of balanced ideal"});
  for (auto& p : pts) {
    const double ideal = fit.ideal_us(p.tiles, sms);
    t.add({p.tiles, double(p.tiles) / sms, (p.tiles + sms - 1) / sms, ideal, p.tile_grid_us, 100 * ideal / p.tile_grid_us,
           p.persistent_us, 100 * ideal / p.persistent_us});
  }
  t.conclusion = wave_conclusion(pts, sms);
  Result r;
  r.tables.push_back(std::move(t));
  return r;
}

}  // namespace

WaveFit wave_fit(const std::vector<WavePoint>& points, int sm_count) {
  // Least squares of t = F + T x waves over the one-block-per-tile points at whole waves.
  double n = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (auto& p : points)
    if (sm_count > 0 && p.tiles > 0 && p.tiles % sm_count == 0) {
      const double x = double(p.tiles) / sm_count, y = p.tile_grid_us;
      n += 1, sx += x, sy += y, sxx += x * x, sxy += x * y;
    }
  if (n == 0) return {};
  const double det = n * sxx - sx * sx;
  if (det <= 0) return {0, sy / sx};  // one whole-wave point: no fixed cost can be separated
  const double wave = (n * sxy - sx * sy) / det;
  return {(sy - wave * sx) / n, wave};
}

std::string wave_conclusion(const std::vector<WavePoint>& points, int sm_count) {
  const WavePoint *full = nullptr, *plus1 = nullptr;
  for (auto& p : points) {
    if (p.tiles == sm_count) full = &p;
    if (p.tiles == sm_count + 1) plus1 = &p;
  }
  if (!full || !plus1 || full->tile_grid_us <= 0) return "the sweep lacks the SM-count and SM-count + 1 points";
  const WaveFit fit = wave_fit(points, sm_count);
  double eff_tile = 0, eff_pers = 0;
  for (auto& p : points) {
    const double ideal = fit.ideal_us(p.tiles, sm_count);
    eff_tile += ideal / p.tile_grid_us / points.size();
    eff_pers += ideal / p.persistent_us / points.size();
  }
  return std::to_string(sm_count + 1) + " tiles take " + num(plus1->tile_grid_us / full->tile_grid_us) + "x as long as " +
         std::to_string(sm_count) + " (one tile opens a second wave); the persistent grid over 8x finer chunks takes " +
         num(plus1->persistent_us / full->persistent_us) + "x; over the sweep one block per tile averages " + num(100 * eff_tile) +
         "% of the balanced ideal (" + num(fit.fixed_us) + " us + " + num(fit.wave_us) +
         " us per wave x tiles / SMs), persistent " + num(100 * eff_pers) + "%";
}

HK_REGISTER_MICROBENCH(5, "wave_quantization", "fixed-work tiles at 0.25..3 x SM count: the staircase, and a "
                                              "persistent grid over finer chunks",
                       run_wave_quantization);

}  // namespace hk::mb
