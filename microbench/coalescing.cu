// microbench/coalescing.cu — Experiment 1: coalescing.
//
// A warp's 32 addresses are merged into 32-byte sectors of 128-byte lines; the memory system
// moves whole sectors. A copy whose elements lie `stride` apart therefore moves
// min(stride * 4, 32) / 4 bytes per byte it uses (4-byte floats): 2 at stride 2, 8 from stride 8
// on. Three sweeps over 64 MiB of useful data each way (cold L2, flushed before every sample):
//   stride 1..32 elements    out[i*s] = in[i*s]          expect time ~ min(s, 8) x stride 1
//   misaligned start 0..124 B out[i+o] = in[i+o]          expect ~ no loss: neighbours share sectors
//   access width 4/8/16 B     contiguous copy             expect 16 B best (fewest instructions)
// The stride and offset sweeps also time the read half and the write half alone (same addresses):
// the copy's time ratio says how much slower the pattern is, the halves say which side pays. The
// ratios are times, not measured traffic: no counter here reads the bytes DRAM moved.
// Run: hk microbench coalescing
#include <algorithm>

#include "common/launch.cuh"
#include "microbench/conclusions.hpp"
#include "microbench/microbench.hpp"

namespace hk::mb {
namespace {

constexpr int64_t kUseful = int64_t(16) << 20;  // useful elements per sweep point (64 MiB of f32)
constexpr int kUnroll = 4;                       // loads in flight per thread before the stores

enum class Mode { kCopy, kRead, kWrite };

// Grid-stride copy of n elements spaced `stride` apart; each thread issues kUnroll loads before
// its stores so enough bytes are in flight to keep HBM busy. kRead keeps only the loads (their sum
// guards a store that never happens), kWrite only the stores (of a value made from the index).
template <class T, Mode kMode>
__global__ void mb_coalescing_copy_kernel(const T* __restrict__ in, T* __restrict__ out, int64_t n,
                                          int64_t stride) {
  const int64_t step = int64_t(gridDim.x) * blockDim.x;
  float acc = 0;
  for (int64_t base = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; base < n; base += step * kUnroll) {
    T v[kUnroll] = {};
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      if (base + u * step >= n) continue;
      if constexpr (kMode == Mode::kWrite) reinterpret_cast<float*>(&v[u])[0] = float(base + u * step);
      else v[u] = in[(base + u * step) * stride];
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      if (base + u * step >= n) continue;
      if constexpr (kMode == Mode::kRead) acc += reinterpret_cast<const float*>(&v[u])[0];
      else out[(base + u * step) * stride] = v[u];
    }
  }
  if (kMode == Mode::kRead && acc == -1.0f) out[0] = T{};
}

template <class T, Mode kMode = Mode::kCopy>
hk::bench::Timing time_copy(const T* in, T* out, int64_t n, int64_t stride, const Options& o) {
  const int grid = hk::resident_grid(mb_coalescing_copy_kernel<T, kMode>, 256);
  return time_launch(
      [&](cudaStream_t s) {
        mb_coalescing_copy_kernel<T, kMode><<<grid, 256, 0, s>>>(in, out, n, stride);
        HK_CHECK_LAUNCH("mb_coalescing_copy_kernel");
      },
      o, /*warm=*/false);
}

// Copy, read-only and write-only timings of one f32 pattern (same addresses, cold L2 each).
struct Halves {
  hk::bench::Timing copy, read, write;
};
Halves time_halves(const float* in, float* out, int64_t stride, const Options& o) {
  return {time_copy<float, Mode::kCopy>(in, out, kUseful, stride, o), time_copy<float, Mode::kRead>(in, out, kUseful, stride, o),
          time_copy<float, Mode::kWrite>(in, out, kUseful, stride, o)};
}

Result run_coalescing(const Options& o) {
  Result r;
  // Both buffers hold the widest stride's footprint: 32 x 64 MiB.
  DeviceArray<float> in(kUseful * 32), out(kUseful * 32);
  // The L2's fetch granularity limit (bytes it may fetch per miss): one candidate for strided
  // reads moving more than a sector per element.
  size_t fetch = 0;
  HK_CHECK_CUDA(cudaDeviceGetLimit(&fetch, cudaLimitMaxL2FetchGranularity));

  Table& t1 = r.tables.emplace_back(
      "stride sweep: f32 copy out[i*s] = in[i*s], 64 MiB used each way; time ratios vs stride 1 "
      "(cudaLimitMaxL2FetchGranularity: " + std::to_string(fetch) + " B)",
      std::vector<std::string>{"stride (elems)", "copy us", "spread %", "copy effective GB/s", "copy time x",
                               "read-only time x", "write-only time x", "32-B sector model: bytes per byte used"});
  std::vector<StridePoint> pts;
  for (int s : {1, 2, 3, 4, 8, 16, 32}) {
    const Halves h = time_halves(in.get(), out.get(), s, o);
    const double bytes = kUseful * 4.0;
    pts.push_back({s, 2 * bytes / (h.copy.median_us * 1e-6), bytes / (h.read.median_us * 1e-6),
                   bytes / (h.write.median_us * 1e-6)});
    const StridePoint& p = pts.back();
    const StridePoint& one = pts.front();
    t1.add({s, h.copy.median_us, h.copy.spread_pct(), p.copy_bytes_per_s / 1e9, one.copy_bytes_per_s / p.copy_bytes_per_s,
            one.read_bytes_per_s / p.read_bytes_per_s, one.write_bytes_per_s / p.write_bytes_per_s,
            sector_bytes_per_byte_used(s, 4)});
  }
  t1.conclusion = coalescing_stride_conclusion(pts, 4);

  Table& t2 = r.tables.emplace_back(
      "misaligned start: contiguous f32 copy shifted by an offset, 64 MiB each way; bandwidth vs the aligned start",
      std::vector<std::string>{"offset (bytes)", "copy us", "spread %", "copy effective GB/s", "copy vs aligned",
                               "read-only vs aligned", "write-only vs aligned"});
  std::vector<OffsetPoint> offs;
  for (int off : {0, 4, 8, 16, 32, 64, 124}) {
    const Halves h = time_halves(in.get() + off / 4, out.get() + off / 4, 1, o);
    offs.push_back({off, h.copy.median_us, h.read.median_us, h.write.median_us});
    const OffsetPoint& a = offs.front();
    t2.add({off, h.copy.median_us, h.copy.spread_pct(), 2.0 * kUseful * 4 / (h.copy.median_us * 1e-6) / 1e9,
            a.copy_us / h.copy.median_us, a.read_us / h.read.median_us, a.write_us / h.write.median_us});
  }
  t2.conclusion = misaligned_conclusion(offs);

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
  if (!base || points.size() < 2 || base->copy_bytes_per_s <= 0) return "no stride-1 baseline measured";
  std::string s;
  for (auto& p : points) {
    if (p.stride != 2 && &p != &points.back()) continue;
    if (p.stride == 1 || p.copy_bytes_per_s <= 0) continue;
    const double slower = base->copy_bytes_per_s / p.copy_bytes_per_s;
    if (!s.empty()) s += "; ";
    s += "stride " + std::to_string(p.stride) + " " + describe_slowdown(slower) + " the copy's effective bandwidth (" +
         num(slower) + "x the stride-1 time";
    if (p.read_bytes_per_s > 0 && p.write_bytes_per_s > 0)
      s += "; reads alone " + num(base->read_bytes_per_s / p.read_bytes_per_s) + "x, writes alone " +
           num(base->write_bytes_per_s / p.write_bytes_per_s) + "x";
    s += "; 32-byte sectors predict " + num(sector_bytes_per_byte_used(p.stride, elem_bytes)) + "x the bytes)";
  }
  return s;
}

std::string misaligned_conclusion(const std::vector<OffsetPoint>& points) {
  if (points.empty() || points.front().offset != 0 || points.front().copy_us <= 0) return "no aligned baseline measured";
  const OffsetPoint& a = points.front();
  const OffsetPoint* worst = &a;
  for (auto& p : points)
    if (p.copy_us > worst->copy_us) worst = &p;
  const double keep = a.copy_us / worst->copy_us;
  std::string s = "the worst misaligned start (" + std::to_string(worst->offset) + " bytes) keeps " + num(100 * keep) +
                  "% of the aligned copy bandwidth";
  if (worst->read_us > 0 && worst->write_us > 0)
    s += " (reads alone " + num(100 * a.read_us / worst->read_us) + "%, writes alone " +
         num(100 * a.write_us / worst->write_us) + "%)";
  s += keep >= 0.95 ? ": a shifted warp touches 5 sectors instead of 4, but its neighbour needs the shared sector too, "
                      "so HBM moves the same bytes"
                    : ": a larger loss than the shared-sector model predicts (5 sectors instead of 4, HBM bytes unchanged)";
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

HK_REGISTER_MICROBENCH(1, "coalescing", "stride sweep, misaligned starts and 4/8/16-byte accesses: copy, read and write "
                                       "time vs the 32-byte sector model",
                       run_coalescing);

}  // namespace hk::mb
