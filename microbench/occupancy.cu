// microbench/occupancy.cu — Experiment 2: occupancy and latency hiding.
//
// Resident warps per SM hide latency: while one warp waits for memory, another issues. Two
// kernels, each run at a range of occupancies limited three ways:
//   registers      128-thread blocks; a ballast of live registers raises regs/thread (the
//                  calculator's register limit: 65536 per SM)
//   shared memory  128-thread blocks; dynamic shared memory sized so 1..16 blocks fit per SM
//   block size     one block per SM (shared memory forces it), 32..1024 threads
// The memory-bound kernel streams 512 MiB with 4 x 16-byte loads in flight per thread: by Little's
// law it saturates HBM once enough bytes are in flight (expect a plateau from ~16 warps/SM).
// The latency-bound kernel chases dependent pointers through 256 MiB: one load in flight per
// thread, so its rate grows with warps until the memory system saturates on scattered sectors.
// Each row gives the calculator's prediction (cudaOccupancyMaxActiveBlocksPerMultiprocessor) and
// the residency measured by a probe launch (blocks count themselves per SM while all are alive).
// Run: hk microbench occupancy
#include <algorithm>
#include <cmath>

#include "hk/device.hpp"
#include "microbench/conclusions.hpp"
#include "microbench/ptx_local.cuh"

namespace hk::mb {
namespace {

constexpr int64_t kStreamBytes = int64_t(512) << 20;
constexpr uint32_t kChaseSlots = 1u << 26;  // 256 MiB of uint32 links
constexpr int kChaseSteps = 64;
constexpr int kMaxSmIds = 1024;

// Probe mode: each block counts itself into live[sm] and records the peak while every block
// stays alive for 20 us, so blocks that can be co-resident are seen together.
__device__ void probe_residency(int* live, int* peak) {
  if (threadIdx.x == 0) {
    uint32_t sm = sm_id() % kMaxSmIds;
    atomicMax(&peak[sm], atomicAdd(&live[sm], 1) + 1);
    uint64_t t0 = globaltimer_ns();
    while (globaltimer_ns() - t0 < 20000) {
    }
    atomicSub(&live[sm], 1);
  }
  __syncthreads();
}

// kBallast + 1 floats held in registers for the whole loop raise the kernel's register count
// without adding work to the loop. Two things must hold, and the SASS of the first GPU run broke
// both with an empty `asm volatile("" : "+f"(x))` per iteration (it vanishes in PTX): the values
// must exist before the loop (ptxas sank up to 88 of 161 loads past it) and must stay in registers
// through it. Here every iteration may rewrite every ballast value, under a condition that never
// holds for the data but that ptxas cannot decide: so each value is needed at the loop's entry
// (loaded before it), is loop-carried (held through it) and meets the result after it. The loads
// are volatile so that ptxas cannot re-issue them instead of holding the values.
template <int kBallast>
__device__ __forceinline__ void load_ballast(float (&ballast)[kBallast + 1], const void* src) {
#pragma unroll
  for (int k = 0; k <= kBallast; ++k)
    ballast[k] = reinterpret_cast<const volatile float*>(src)[k * blockDim.x + threadIdx.x];
}
template <int kBallast>
__device__ __forceinline__ void touch_ballast(bool never, float x, float (&ballast)[kBallast + 1]) {
  if (never) {
#pragma unroll
    for (int k = 0; k <= kBallast; ++k) ballast[k] = fmaf(ballast[k], x, 1.0f);
  }
}
template <int kBallast>
__device__ __forceinline__ float fold_ballast(float acc, const float (&ballast)[kBallast + 1]) {
#pragma unroll
  for (int k = 0; k <= kBallast; ++k) acc = fmaf(acc, ballast[k], ballast[k]);
  return acc;
}
__device__ __forceinline__ float sum4(float4 v) { return v.x + v.y + v.z + v.w; }

// The main loop runs only while all four loads are in bounds, so they are unconditional; the tail
// takes the last < 4 steps one at a time. NOTE: the four loads are one asm statement because with
// four __ldcs ptxas interleaved loads and adds and gave the loads of the 40- and 80-float kernels
// one register quad (one load in flight per thread, not four); as one block they issue back to back
// into four distinct quads at every ballast size (checked in the SASS).
template <int kBallast>
__global__ void mb_occupancy_stream_kernel(const float4* __restrict__ in, int64_t n, float* sink, int* live,
                                           int* peak, int probe) {
  if (probe) return probe_residency(live, peak);
  float ballast[kBallast + 1];
  load_ballast<kBallast>(ballast, in);
  float acc = 0;
  const int64_t step = int64_t(gridDim.x) * blockDim.x;
  int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  for (; i + 3 * step < n; i += 4 * step) {
    float4 v[4];
    asm volatile("ld.global.cs.v4.f32 {%0, %1, %2, %3}, [%16];\n\t"
                 "ld.global.cs.v4.f32 {%4, %5, %6, %7}, [%17];\n\t"
                 "ld.global.cs.v4.f32 {%8, %9, %10, %11}, [%18];\n\t"
                 "ld.global.cs.v4.f32 {%12, %13, %14, %15}, [%19];"
                 : "=f"(v[0].x), "=f"(v[0].y), "=f"(v[0].z), "=f"(v[0].w), "=f"(v[1].x), "=f"(v[1].y), "=f"(v[1].z),
                   "=f"(v[1].w), "=f"(v[2].x), "=f"(v[2].y), "=f"(v[2].z), "=f"(v[2].w), "=f"(v[3].x), "=f"(v[3].y),
                   "=f"(v[3].z), "=f"(v[3].w)
                 : "l"(in + i), "l"(in + i + step), "l"(in + i + 2 * step), "l"(in + i + 3 * step));
#pragma unroll
    for (int u = 0; u < 4; ++u) acc += sum4(v[u]);
    touch_ballast<kBallast>(acc < 0, acc, ballast);  // the data are positive: never taken
  }
  for (; i < n; i += step) acc += sum4(__ldcs(in + i));
  acc = fold_ballast<kBallast>(acc, ballast);
  if (acc == 1234.5f) *sink = acc;  // never true for the data; keeps the loads alive
}

template <int kBallast>
__global__ void mb_occupancy_chase_kernel(const uint32_t* __restrict__ next, float* sink, int* live, int* peak,
                                          int probe) {
  if (probe) return probe_residency(live, peak);
  float ballast[kBallast + 1];
  load_ballast<kBallast>(ballast, next);
  uint32_t j = (blockIdx.x * blockDim.x + threadIdx.x) * 7919u % kChaseSlots;
  for (int s = 0; s < kChaseSteps; ++s) {
    j = next[j];
    touch_ballast<kBallast>(j >= kChaseSlots, float(j), ballast);  // links stay below kChaseSlots
  }
  float acc = fold_ballast<kBallast>(__uint_as_float(j), ballast);
  if (acc == 1234.5f) *sink = acc;
}

// Full-period linear congruential links (a = 1 mod 4, c odd, power-of-two size): one cycle
// through every slot, each hop far from the last.
__global__ void mb_occupancy_fill_links_kernel(uint32_t* next, uint32_t n) {
  for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    next[i] = (i * 2654435761u + 12345u) & (n - 1);
}

struct Config {
  std::string limiter, setting;
  int threads = 128;
  size_t smem = 0;
};

struct Kernel {
  const void* fn;
  std::function<void(int grid, const Config& c, cudaStream_t s, int probe)> launch;
};

struct Measured {
  int regs = 0, blocks_predicted = 0;
  double warps_measured = 0;
  hk::bench::Timing t;
};

Measured measure(const Kernel& k, const Config& c, int* live, int* peak, const Options& o) {
  const int sms = hk::device_info().sm_count;
  Measured m;
  cudaFuncAttributes attr{};
  HK_CHECK_CUDA(cudaFuncGetAttributes(&attr, k.fn));
  m.regs = attr.numRegs;
  HK_CHECK_CUDA(cudaFuncSetAttribute(k.fn, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     int(hk::device_info().smem_per_block_optin)));
  HK_CHECK_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&m.blocks_predicted, k.fn, c.threads, c.smem));
  const int grid = sms * std::max(m.blocks_predicted, 1);
  HK_CHECK_CUDA(cudaMemset(live, 0, kMaxSmIds * sizeof(int)));
  HK_CHECK_CUDA(cudaMemset(peak, 0, kMaxSmIds * sizeof(int)));
  k.launch(grid, c, nullptr, 1);
  HK_CHECK_CUDA(cudaDeviceSynchronize());
  std::vector<int> host(kMaxSmIds);
  HK_CHECK_CUDA(cudaMemcpy(host.data(), peak, kMaxSmIds * sizeof(int), cudaMemcpyDeviceToHost));
  std::vector<double> per_sm;
  for (int p : host)
    if (p > 0) per_sm.push_back(p * c.threads / 32.0);
  m.warps_measured = median(per_sm);
  m.t = time_launch([&](cudaStream_t s) { k.launch(grid, c, s, 0); }, o, /*warm=*/false);
  return m;
}

template <int kBallast>
std::pair<Kernel, Kernel> kernels(const float4* data, const uint32_t* next, float* sink, int* live, int* peak) {
  Kernel stream{reinterpret_cast<const void*>(mb_occupancy_stream_kernel<kBallast>),
                [=](int grid, const Config& c, cudaStream_t s, int probe) {
                  mb_occupancy_stream_kernel<kBallast><<<grid, c.threads, c.smem, s>>>(data, kStreamBytes / 16, sink,
                                                                                     live, peak, probe);
                  HK_CHECK_LAUNCH("mb_occupancy_stream_kernel");
                }};
  Kernel chase{reinterpret_cast<const void*>(mb_occupancy_chase_kernel<kBallast>),
               [=](int grid, const Config& c, cudaStream_t s, int probe) {
                 mb_occupancy_chase_kernel<kBallast><<<grid, c.threads, c.smem, s>>>(next, sink, live, peak, probe);
                 HK_CHECK_LAUNCH("mb_occupancy_chase_kernel");
               }};
  return {stream, chase};
}

Result run_occupancy(const Options& o) {
  const hk::DeviceInfo& d = hk::device_info();
  DeviceArray<float4> data(kStreamBytes / 16);
  DeviceArray<uint32_t> next(kChaseSlots);
  DeviceArray<float> sink(1);
  DeviceArray<int> live(kMaxSmIds), peak(kMaxSmIds);
  HK_CHECK_CUDA(cudaMemset(data.get(), 0x3C, data.bytes()));
  mb_occupancy_fill_links_kernel<<<1024, 256>>>(next.get(), kChaseSlots);
  HK_CHECK_LAUNCH("mb_occupancy_fill_links_kernel");

  // (limiter config, kernel pair) in row order.
  std::vector<std::pair<Config, std::pair<Kernel, Kernel>>> plan;
  auto args = std::make_tuple(data.get(), next.get(), sink.get(), live.get(), peak.get());
  auto with = [&](auto fn) { return std::apply(fn, args); };
  auto k0 = with(kernels<0>);
  plan.push_back({{"registers", "no ballast"}, k0});
  plan.push_back({{"registers", "40-float ballast"}, with(kernels<40>)});
  plan.push_back({{"registers", "80-float ballast"}, with(kernels<80>)});
  plan.push_back({{"registers", "120-float ballast"}, with(kernels<120>)});
  plan.push_back({{"registers", "160-float ballast"}, with(kernels<160>)});
  for (int blocks : {1, 2, 4, 8, 16}) {
    size_t smem = std::min<size_t>(d.smem_per_block_optin - 1024, d.smem_per_sm / blocks - 1024);
    plan.push_back({{"shared memory", std::to_string(smem / 1024) + " KiB/block", 128, smem}, k0});
  }
  for (int threads : {32, 64, 128, 256, 512, 1024})
    plan.push_back({{"block size", std::to_string(threads) + " threads, 1 block/SM", threads,
                     size_t(d.smem_per_sm / 2 + 1024)},
                    k0});

  Result r;
  const std::vector<std::string> cols{"limiter", "setting", "regs/thread", "blocks/SM (calculator)",
                                      "warps/SM (calculator)", "warps/SM (measured)", "median us", "rate", "% of best"};
  Table& ts = r.tables.emplace_back("memory-bound: stream 512 MiB, 4 x 16-byte loads in flight per thread; rate in GB/s", cols);
  Table& tc = r.tables.emplace_back("latency-bound: 64 dependent loads per thread through 256 MiB; rate in G loads/s", cols);
  for (int which = 0; which < 2; ++which) {
    Table& t = which == 0 ? ts : tc;
    std::vector<OccupancyPoint> pts;
    std::vector<Measured> ms;
    int agree = 0;
    for (auto& [c, pair] : plan) {
      Measured m = measure(which == 0 ? pair.first : pair.second, c, live.get(), peak.get(), o);
      double work = which == 0 ? double(kStreamBytes) : double(d.sm_count) * m.blocks_predicted * c.threads * kChaseSteps;
      pts.push_back({m.warps_measured, work / (m.t.median_us * 1e-6)});
      agree += std::fabs(m.warps_measured - m.blocks_predicted * c.threads / 32.0) < 0.5;
      ms.push_back(m);
    }
    double best = 0;
    for (auto& p : pts) best = std::max(best, p.rate);
    for (size_t i = 0; i < plan.size(); ++i) {
      const Config& c = plan[i].first;
      t.add({c.limiter, c.setting, ms[i].regs, ms[i].blocks_predicted, ms[i].blocks_predicted * c.threads / 32,
             pts[i].warps_per_sm, ms[i].t.median_us, pts[i].rate / 1e9, 100 * pts[i].rate / best});
    }
    t.conclusion = occupancy_conclusion(pts, which == 0 ? "the memory-bound stream" : "the latency-bound chase") +
                   "; the calculator matched the measured residency in " + std::to_string(agree) + " of " +
                   std::to_string(plan.size()) + " configurations";
  }
  return r;
}

}  // namespace

double warps_to_reach(const std::vector<OccupancyPoint>& points, double fraction) {
  double best = 0, warps = -1;
  for (auto& p : points) best = std::max(best, p.rate);
  for (auto& p : points)
    if (best > 0 && p.rate >= fraction * best && (warps < 0 || p.warps_per_sm < warps)) warps = p.warps_per_sm;
  return warps;
}

std::string occupancy_conclusion(const std::vector<OccupancyPoint>& points, const std::string& what) {
  if (points.empty()) return what + ": nothing measured";
  double lo = points[0].warps_per_sm, hi = lo;
  for (auto& p : points) lo = std::min(lo, p.warps_per_sm), hi = std::max(hi, p.warps_per_sm);
  double rate_lo = 0, rate_hi = 0;  // best rate seen at the fewest and at the most warps
  for (auto& p : points) {
    if (p.warps_per_sm == lo) rate_lo = std::max(rate_lo, p.rate);
    if (p.warps_per_sm == hi) rate_hi = std::max(rate_hi, p.rate);
  }
  std::string s = what + " reaches 90% of its best rate at " + num(warps_to_reach(points, 0.9)) + " warps/SM";
  if (lo > 0 && rate_lo > 0 && hi > lo)
    s += "; from " + num(lo) + " to " + num(hi) + " warps/SM (" + num(hi / lo) + "x) it grows " + num(rate_hi / rate_lo) + "x";
  return s;
}

HK_REGISTER_MICROBENCH(2, "occupancy", "a memory-bound and a latency-bound kernel as resident warps/SM vary "
                                      "(registers, shared memory, block size), beside the occupancy calculator",
                       run_occupancy);

}  // namespace hk::mb
