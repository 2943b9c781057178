// microbench/coalescing.cu — Experiment 1: coalescing.
//
// A warp's 32 addresses are merged into 32-byte sectors of 128-byte lines; the memory system
// moves whole sectors. A copy whose elements lie `stride` apart therefore moves
// min(stride * 4, 32) / 4 bytes per byte it uses (4-byte floats): 2 at stride 2, 8 from stride 8
// on. Three sweeps over 64 MiB of useful data each way (cold L2, flushed before every sample):
//   stride 1..32 elements    out[i*s] = in[i*s]          expect bandwidth ~ 1 / min(s, 8)
//   misaligned start 0..124 B out[i+o] = in[i+o]          expect ~ no loss: neighbours share sectors
//   access width 4/8/16 B     contiguous copy             expect 16 B best (fewest instructions)
// Run: hk microbench coalescing
#include <algorithm>

#include "common/launch.cuh"
#include "microbench/conclusions.hpp"
#include "microbench/microbench.hpp"

namespace hk::mb {
namespace {

constexpr int64_t kUseful = int64_t(16) << 20;  // useful elements per sweep point (64 MiB of f32)
constexpr int kUnroll = 4;                       // loads in flight per thread before the stores

// Grid-stride copy of n elements spaced `stride` apart; each thread issues kUnroll loads before
// its stores so enough bytes are in flight to keep HBM busy.
template <class T>
__global__ void mb_coalescing_copy_kernel(const T* __restrict__ in, T* __restrict__ out, int64_t n,
                                          int64_t stride) {
  const int64_t step = int64_t(gridDim.x) * blockDim.x;
  for (int64_t base = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; base < n; base += step * kUnroll) {
    T v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      if (base + u * step < n) v[u] = in[(base + u * step) * stride];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      if (base + u * step < n) out[(base + u * step) * stride] = v[u];
  }
}

template <class T>
hk::bench::Timing time_copy(const T* in, T* out, int64_t n, int64_t stride, const Options& o) {
  const int grid = hk::resident_grid(mb_coalescing_copy_kernel<T>, 256);
  return time_launch(
      [&](cudaStream_t s) {
        mb_coalescing_copy_kernel<T><<<grid, 256, 0, s>>>(in, out, n, stride);
        HK_CHECK_LAUNCH("mb_coalescing_copy_kernel");
      },
      o, /*warm=*/false);
}

Result run_coalescing(const Options& o) {
  Result r;
  // Both buffers hold the widest stride's footprint: 32 x 64 MiB.
  DeviceArray<float> in(kUseful * 32), out(kUseful * 32);

  Table& t1 = r.tables.emplace_back(
      "stride sweep: f32 copy out[i*s] = in[i*s], 64 MiB used each way",
      std::vector<std::string>{"stride (elems)", "median us", "spread %", "effective GB/s", "vs stride 1",
                               "bytes moved per byte used", "32-B sector model"});
  std::vector<StridePoint> pts;
  for (int s : {1, 2, 3, 4, 8, 16, 32}) {
    auto t = time_copy(in.get(), out.get(), kUseful, s, o);
    double bw = 2.0 * kUseful * 4 / (t.median_us * 1e-6);
    pts.push_back({s, bw});
    t1.add({s, t.median_us, t.spread_pct(), bw / 1e9, bw / pts.front().bytes_per_s,
            pts.front().bytes_per_s / bw, sector_bytes_per_byte_used(s, 4)});
  }
  t1.conclusion = coalescing_stride_conclusion(pts, 4);

  Table& t2 = r.tables.emplace_back(
      "misaligned start: contiguous f32 copy shifted by an offset, 64 MiB each way",
      std::vector<std::string>{"offset (bytes)", "median us", "spread %", "effective GB/s", "vs aligned"});
  double aligned = 0, worst = 1;
  int worst_offset = 0;
  for (int off : {0, 4, 8, 16, 32, 64, 124}) {
    auto t = time_copy(in.get() + off / 4, out.get() + off / 4, kUseful, 1, o);
    double bw = 2.0 * kUseful * 4 / (t.median_us * 1e-6);
    if (off == 0) aligned = bw;
    if (bw / aligned < worst) worst = bw / aligned, worst_offset = off;
    t2.add({off, t.median_us, t.spread_pct(), bw / 1e9, bw / aligned});
  }
  t2.conclusion = "the worst misaligned start (" + std::to_string(worst_offset) + " bytes) keeps " +
                  num(100 * worst) + "% of the aligned bandwidth" +
                  (worst >= 0.95 ? ": a shifted warp touches 5 sectors instead of 4, but its neighbour needs "
                                   "the shared sector too, so HBM moves the same bytes"
                                 : ", a larger loss than the shared-sector model predicts (5 sectors instead of 4, "
                                   "HBM bytes unchanged)");

  Table& t3 = r.tables.emplace_back(
      "access width: contiguous copy of 256 MiB each way, 4 loads in flight per thread",
      std::vector<std::string>{"bytes per thread access", "median us", "spread %", "GB/s", "% of cudaMemcpy"});
  const double ceiling = hk::measured_ceilings().copy_bytes_per_s;
  const int64_t bytes = int64_t(256) << 20;
  std::vector<WidthPoint> widths;
  auto width_row = [&](int w, const hk::bench::Timing& t) {
    double bw = 2.0 * bytes / (t.median_us * 1e-6);
    widths.push_back({w, bw});
    t3.add({w, t.median_us, t.spread_pct(), bw / 1e9, 100 * bw / ceiling});
  };
  width_row(4, time_copy(in.get(), out.get(), bytes / 4, 1, o));
  width_row(8, time_copy(reinterpret_cast<const float2*>(in.get()), reinterpret_cast<float2*>(out.get()), bytes / 8, 1, o));
  width_row(16, time_copy(reinterpret_cast<const float4*>(in.get()), reinterpret_cast<float4*>(out.get()), bytes / 16, 1, o));
  t3.conclusion = coalescing_width_conclusion(widths, ceiling);
  return r;
}

}  // namespace

double sector_bytes_per_byte_used(int stride_elems, int elem_bytes) {
  return std::min(stride_elems * elem_bytes, 32) / double(elem_bytes);
}

std::string coalescing_stride_conclusion(const std::vector<StridePoint>& points, int elem_bytes) {
  const StridePoint* base = nullptr;
  for (auto& p : points)
    if (p.stride == 1) base = &p;
  if (!base || points.size() < 2 || base->bytes_per_s <= 0) return "no stride-1 baseline measured";
  std::string s;
  for (auto& p : points) {
    if (p.stride != 2 && &p != &points.back()) continue;
    if (p.stride == 1 || p.bytes_per_s <= 0) continue;
    double moved = base->bytes_per_s / p.bytes_per_s;
    if (!s.empty()) s += "; ";
    s += "stride " + std::to_string(p.stride) + " " + describe_slowdown(moved) + " the effective bandwidth: " +
         num(moved) + " bytes moved per byte used (32-byte sectors predict " +
         num(sector_bytes_per_byte_used(p.stride, elem_bytes)) + ")";
  }
  return s;
}

std::string coalescing_width_conclusion(const std::vector<WidthPoint>& points, double copy_ceiling) {
  if (points.empty()) return "no widths measured";
  auto best = std::max_element(points.begin(), points.end(),
                               [](const WidthPoint& a, const WidthPoint& b) { return a.bytes_per_s < b.bytes_per_s; });
  auto narrow = std::min_element(points.begin(), points.end(),
                                 [](const WidthPoint& a, const WidthPoint& b) { return a.bytes < b.bytes; });
  return std::to_string(best->bytes) + "-byte accesses are fastest at " + num(best->bytes_per_s / 1e12) +
         " TB/s (" + num(100 * best->bytes_per_s / copy_ceiling) + "% of cudaMemcpy), " +
         num(best->bytes_per_s / narrow->bytes_per_s) + "x the " + std::to_string(narrow->bytes) +
         "-byte copy";
}

HK_REGISTER_MICROBENCH(1, "coalescing", "stride sweep, misaligned starts and 4/8/16-byte accesses: bytes moved per byte used",
                       run_coalescing);

}  // namespace hk::mb
